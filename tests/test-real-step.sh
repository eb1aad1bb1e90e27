#!/bin/sh
# The communication of a training step under mpirun (spsim-run --step --dry-compute,
# MPI host transport; the step with compute is tests/test-real-step-compute.sh) on the test model models/tiny.json (4 layers, h 256, 4 heads, SwiGLU
# ffn 1024, vocab 1024), --seq 256 --global-batch 8. Each layout's step graph is
# reduced as the what-if's --verify reduces it (one layer per model chunk, pp
# micro-batches; 2 without pipelining) and must PASS with the calls counted by hand
# from Megatron-LM's layer:
#   tp=2 (SP), 1 layer, 2 micro-batches: per layer and micro-batch 4 TP collectives
#     forward (all-gather before QKV and the MLP, reduce-scatter after the projection
#     and the MLP), 6 backward (2 all-gathers of the row-parallel GEMMs' output
#     gradient, 2 re-gathers of the column-parallel GEMMs' input, 2 reduce-scatters
#     of their data gradient); the output layer 3 (all-gather forward, re-gather and
#     reduce-scatter backward, a column-parallel GEMM) and the embedding 2
#     (VocabParallelEmbedding's reduce-scatter forward, all-gather backward):
#     2 x (4 + 6 + 3 + 2) = 30, no sends.
#   tp=2,tpsp=0: the all-reduces after the projection and the MLP forward and of the
#     column-parallel GEMMs' input gradient backward, the embedding's all-reduce and
#     the output layer's input-gradient all-reduce: 2 x (2 + 2 + 1 + 1) = 12.
#   tp=2,pp=2 (SP) on 4: 2 layers (one per stage), 2 micro-batches: 2 x (10 + 2 + 10
#     + 3) = 50 collectives; activations forward and gradients backward per
#     micro-batch: 4 sends.
#   tp=2,pp=2,tpsp=0 on 4: 2 micro-batches x (4 + 1 + 4 + 1) = 20, and 4 sends.
#   pp=2: no collectives, 2 micro-batches x 2 directions = 4 sends; pp=4: 3 stage
#     boundaries x 4 micro-batches x 2 = 24 sends.
#   dp=2,zero=1 (and dp=4): ZeRO-1 over the reduced model's 1.6M parameters (one
#     bucket): the gradients' reduce-scatter and the parameters' all-gather: 2.
#   sp=2 (Ulysses): the all-to-alls of Q, K, V and the attention output forward and
#     their 4 transposes backward per micro-batch, and the gradient all-reduce over
#     the sp group (its ranks hold replicas of the weights): 2 x 8 + 1 = 17.
# The checksum lines of --checksum are those of the same replay run in process over
# the loopback transport and on SimGrid as the what-if's --verify runs it
# (tests/test-real-step-ref); the counts are those the what-if's --verify
# reports for the same layout on a 4-GPU platform (when spsim is built). Refusals: a -np other than the replay's rank
# count (naming both and the layout's GPUs), ranks launched with different flags,
# flags that do not apply to --step; a corrupted output on one rank is a FAIL
# naming it.
. "$(dirname "$0")/real-env.sh"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

A="--step --model tiny --seq 256 --global-batch 8 --dry-compute"
# mpi NP ARGS...: under timeout 120 (a hang guard); sets rc; output in $tmp/out, $tmp/err
mpi() {
  np=$1; shift
  timeout 120 "$MPIRUN" -np "$np" "$run" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# pass NP LAYOUT COLLS SENDS: PASS with these counts on NP ranks
pass() {
  mpi "$1" $A --layout "$2"
  if [ "$rc" -ne 0 ]; then nok "np=$1 $2: exit $rc: $(head -c 600 "$tmp/err")"
  elif ! grep -Eq "^PASS step tiny .* ranks=$1 collectives=$3 sends=$4 transport=mpi time=[0-9.]+ s " "$tmp/out"; then
    nok "np=$1 $2: want PASS with collectives=$3 sends=$4: $(cat "$tmp/out")"
  elif ! grep -q "communication of the step, compute not executed" "$tmp/out"; then
    nok "np=$1 $2: the output does not say compute is not executed"
  else ok "np=$1 $2: PASS, $3 collectives and $4 sends"; fi
}
# expect DESC RC PATTERN: exit status RC, stderr matching PATTERN (grep -E)
expect() {
  if [ "$rc" -ne "$2" ]; then nok "$1: exit $rc, want $2: $(head -c 600 "$tmp/err")"
  elif ! grep -Eq -- "$3" "$tmp/err"; then nok "$1: stderr lacks /$3/: $(head -c 600 "$tmp/err")"
  else ok "$1"; fi
}

echo "1..28"

# 1-12: layouts on 2 and 4 ranks, counts by hand
pass 2 tp=2 30 0
pass 2 tp=2,tpsp=0 12 0
# tpoverlap=1: per layer the forward's 2 ring exchanges of tp - 1 = 1 step and 2 reduce-scatters
# in 4 chunks, the backward's 2 ring exchanges and the column-parallel re-gathers and
# reduce-scatters (2 x 2): 10 + 6, with the output layer's 3 and the embedding's 2
pass 2 tp=2,tpoverlap=1 $((2 * (2 + 8 + 2 + 4 + 3 + 2))) 0
pass 4 tp=2,pp=2 50 4
pass 2 pp=2 0 4
pass 4 pp=4 0 24
pass 2 dp=2,zero=1 2 0
pass 4 dp=4,zero=1 2 0
pass 2 sp=2 17 0
pass 4 tp=4 30 0
pass 4 tp=2,pp=2,tpsp=0 20 4
pass 4 sp=4 17 0

have_sim=no
if [ -x "$build/spsim" ] && "$build/spsim" platform dgx --nodes 1 --gpus-per-node 4 -o "$tmp/p4.xml" 2>/dev/null; then
  have_sim=yes
fi

# 13-14: --checksum: the lines of the loopback replay, and on every rank with outputs
ref() { # LAYOUT WORLD GPN [PLATFORM]
  "$build/tests/test-real-step-ref" "$src/models/tiny.json" "$1" "$2" "$3" 256 8 $4
}
mpi 4 $A --layout tp=2,pp=2 --checksum
grep '^checksum ' "$tmp/out" >"$tmp/got"
if ! ref tp=2,pp=2 4 4 >"$tmp/want" 2>"$tmp/referr"; then nok "checksums: reference failed: $(cat "$tmp/referr")"
elif [ "$rc" -ne 0 ] || [ ! -s "$tmp/want" ] || ! cmp -s "$tmp/want" "$tmp/got"; then
  nok "tp=2,pp=2 --checksum: exit $rc, lines differ from the loopback replay's"
  sed 's/^/#   want /' "$tmp/want"; sed 's/^/#   got  /' "$tmp/got"
else ok "tp=2,pp=2 --checksum: the loopback replay's lines"; fi
if [ "$(grep -c '^checksum rank=' "$tmp/got")" = 4 ]; then ok "tp=2,pp=2 --checksum: a line per rank (all 4 receive)"
else nok "tp=2,pp=2 --checksum: want 4 rank lines: $(cat "$tmp/got")"; fi
# 15-16: ... and those of SimGrid's data-mode replay of the same step (--verify's engine)
for lay in tp=2,pp=2 sp=4; do
  if [ $have_sim = no ]; then n=$((n + 1)); echo "ok $n # SKIP $lay: spsim (SimGrid) not built"; continue; fi
  mpi 4 $A --layout $lay --checksum
  grep '^checksum ' "$tmp/out" >"$tmp/got"
  if ! ref $lay 4 4 "$tmp/p4.xml" >"$tmp/want" 2>"$tmp/referr"; then nok "$lay: SimGrid replay failed: $(head -3 "$tmp/referr")"
  elif [ "$rc" -ne 0 ] || [ ! -s "$tmp/want" ] || ! cmp -s "$tmp/want" "$tmp/got"; then
    nok "$lay --checksum: exit $rc, lines differ from SimGrid's"
    sed 's/^/#   want /' "$tmp/want"; sed 's/^/#   got  /' "$tmp/got"
  else ok "$lay --checksum: SimGrid's data-mode replay's lines"; fi
done

# 17-18: a replay on fewer ranks than the layout's GPUs (--world). tp=2 on 4 GPUs
# (dp=2) runs rank 0, its TP partner 1 and its DP partner 2: the 30 TP calls and one
# gradient all-reduce (one bucket) = 31. tp=2,pp=2,dp=2,zero=1 on 8: the stages'
# representatives 0 and 4, their TP partners 1 and 5, their DP partners 2 and 6; the
# 50 calls of tp=2,pp=2 and ZeRO-1's reduce-scatter and all-gather on each stage = 54.
mpi 3 $A --layout tp=2 --world 4
if [ "$rc" -eq 0 ] && grep -Eq "^PASS step tiny .* ranks=3 collectives=31 sends=0 " "$tmp/out" &&
   grep -q "^step: ranks 0..2 run the GPUs 0,1,2 of the 4$" "$tmp/out"; then ok "tp=2 --world 4 on 3 ranks: PASS, 31 collectives"
else nok "tp=2 --world 4 on 3 ranks: exit $rc: $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi
mpi 6 $A --layout tp=2,pp=2,dp=2,zero=1 --world 8
if [ "$rc" -eq 0 ] && grep -Eq "^PASS step tiny .* ranks=6 collectives=54 sends=4 " "$tmp/out" &&
   grep -q "^step: ranks 0..5 run the GPUs 0,1,2,4,5,6 of the 8$" "$tmp/out"; then
  ok "tp=2,pp=2,dp=2,zero=1 --world 8 on 6 ranks: PASS, 54 collectives and 4 sends"
else nok "tp=2,pp=2,dp=2,zero=1 --world 8 on 6 ranks: exit $rc: $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi

# 19: the wrong -np: refused in one line naming both counts and the GPUs
mpi 4 $A --layout tp=2
expect "tp=2 on 4 ranks: refused" 2 "on 4 GPUs replays on 3 ranks .* but mpirun launched 4; use mpirun -np 3 \.\.\. --world 4"

# 20: ranks launched with different layouts
timeout 120 "$MPIRUN" -np 1 "$run" $A --layout tp=2 : -np 1 "$run" $A --layout pp=2 >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "ranks with different --layout: refused" 2 "ranks disagree on flags \(--layout differs"

# 21: flags of --op do not apply
mpi 2 $A --layout tp=2 --count 64
expect "--count with --step: refused" 2 "--count does not apply to --step"

# 22: a model that does not exist: the known ones are listed
mpi 2 --step --model no-such-model --layout tp=2
expect "unknown --model: the known models listed" 2 "--model: .*tiny"

# 23: a wrong byte on rank 1 is a FAIL naming it
mpi 2 $A --layout tp=2 --debug-corrupt-rank 1
if [ "$rc" -eq 1 ] && grep -q "^FAIL step tiny .*: rank 1 differs from the reference" "$tmp/out" &&
   grep -q "rank 1: FAIL: call " "$tmp/err"; then ok "corrupted rank 1: FAIL naming it"
else nok "corrupted rank 1: exit $rc: $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi

# 24: one GPU with --dry-compute: no communication, nothing to run
mpi 1 $A --layout dp=1
expect "dp=1 on 1 GPU: refused, no communication" 2 "has no communication"

# 25-26: the step the what-if's --verify replays on SimGrid has the same calls
whatif_counts() { # LAYOUT: "C collectives and S pipeline sends" of `spsim P --verify`
  "$build/spsim" "$tmp/p4.xml" --model tiny --layout "$1" --seq 256 --global-batch 8 --verify 2>/dev/null |
    sed -n 's/^verify: step-graph ([^:]*: \([0-9]*\) collectives and \([0-9]*\) pipeline sends).*/\1 \2/p'
}
if [ $have_sim = yes ]; then
  for lay in tp=2,pp=2 sp=4; do
    want=$(whatif_counts $lay)
    mpi 4 $A --layout $lay
    got=$(sed -n 's/^PASS step .* collectives=\([0-9]*\) sends=\([0-9]*\) .*/\1 \2/p' "$tmp/out")
    if [ -n "$want" ] && [ "$want" = "$got" ]; then ok "$lay: the calls of the what-if's --verify ($want)"
    else nok "$lay: what-if --verify counts '$want', spsim-run '$got'"; fi
  done
else
  for lay in tp=2,pp=2 sp=4; do n=$((n + 1)); echo "ok $n # SKIP $lay: spsim (SimGrid) not built"; done
fi

# 27-28: a size given as 0 is refused, not taken for "not given" (the default)
mpi 2 --step --model tiny --layout tp=2 --dry-compute --seq 0
expect "--seq 0: refused" 2 "--seq must be at least 1"
mpi 2 --step --model tiny --layout tp=2 --dry-compute --micro-batch 0
expect "--micro-batch 0: refused" 2 "--micro-batch must be at least 1"
