#!/bin/sh
# spsim-run --step with compute: the step graph of models/tiny.json (4 layers, h 256,
# 4 heads of 64, SwiGLU ffn 1024, vocab 1024) at --seq 256 --global-batch 8, its
# compute tasks run as CPU kernels and its communication over MPI. No case asserts on
# a time; the kernels' work is counted by hand from Megatron-LM's layer (T tokens of
# a micro-batch on the rank, GEMM forward 2 T N K, data and weight gradients the same
# again each; causal attention forward 2 b a s^2 d / 2 ... as the kernel model):
#   per layer and micro-batch at T = 256, tp = 1: QKV 2*256*768*256 = 100663296, output
#     projection 2*256*256*256 = 33554432, MLP up (SwiGLU, 2 x 1024) 2*256*2048*256 =
#     268435456, down 2*256*256*1024 = 134217728: forward 536870912, x 3 with the
#     backward = 1610612736; the output layer 2*256*1024*256 = 134217728, x 3.
#   dp=2 (4 micro-batches per replica): 4 x (4 x 1610612736 + 3 x 134217728) =
#     27380416512; attention 4 heads, s 256, d 64: forward 2*4*256*256*64/2... counted
#     as the kernel model counts causal attention, 2 b a s s d = 33554432, backward 2.5
#     times that: 16 x 3.5 x 33554432 = 1879048192.
#   tp=2,pp=2 on 4, rank 0 = stage 0 (layers 0-1, no output layer), 8 micro-batches,
#     TP halves every GEMM: 8 x 2 x 1610612736 / 2 = 12884901888.
#   cp=2: T = 128 per rank, 8 micro-batches: the dp=2 figure (half the tokens, twice
#     the micro-batches) 27380416512; attention in 2 causal blocks of 128 per layer,
#     each 2*4*128*128*64 = 8388608: 32 x 2 x 3.5 x 8388608 = 1879048192.
#   tp=2,ckpt=full: + the forward again, 32 x 536870912 / 2 = 8589934592 ->
#     35970351104; attention + 32 x 2*2*256*256*64 = 536870912 -> 2415919104.
#   tp=2,ckpt=op: + K (2*256*128*256), output projection (2*256*256*128) and SwiGLU's
#     w3 (2*256*512*256) per layer and micro-batch = 100663296 x 32 -> 30601641984.
#   tp=2,ckpt=selective,recompute=layernorm+mlp: + the MLP's up (2*256*1024*256) and
#     down (2*256*256*512) projections again, 201326592 x 32 -> 33822867456; no
#     attention recomputed (core_attn not named) -> 1879048192.
# Then: the measured step and its table per kind, --trace (a Chrome trace of every
# task that takes time, as the what-if's), --checksum kept (the reduced replay's lines,
# as with --dry-compute), spsim platform local and --compare (both figures printed;
# their agreement is not asserted), the closed loop's quick run, and refusals and
# faults bounded by --timeout; --device cuda on the fake device.
. "$(dirname "$0")/real-env.sh"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

A="--step --model tiny --seq 256 --global-batch 8"
mpi() {
  np=$1; shift
  timeout 300 "$MPIRUN" -np "$np" "$run" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
expect() {
  if [ "$rc" -ne "$2" ]; then nok "$1: exit $rc, want $2: $(head -c 600 "$tmp/err")"
  elif ! grep -Eq -- "$3" "$tmp/err"; then nok "$1: stderr lacks /$3/: $(head -c 600 "$tmp/err")"
  else ok "$1"; fi
}
# flops NP LAYOUT GEMM ATTN: the step runs, rank 0 reports these FLOPs, and the
# measured step and its per-kind table are printed
flops() {
  mpi "$1" $A --layout "$2"
  if [ "$rc" -ne 0 ]; then nok "np=$1 $2: exit $rc: $(head -c 600 "$tmp/err")"
  elif ! grep -q "^measured: rank 0 (stage 0) ran [0-9]* kernels: $3 GEMM FLOP, $4 attention FLOP" "$tmp/out"; then
    nok "np=$1 $2: want $3 GEMM and $4 attention FLOP: $(grep '^measured' "$tmp/out")"
  elif ! grep -Eq "^measured: step [0-9]+\.[0-9]+ s" "$tmp/out" || ! grep -Eq "^  compute +[0-9.]+ " "$tmp/out"; then
    nok "np=$1 $2: no measured step time or compute row: $(cat "$tmp/out")"
  else ok "np=$1 $2: $3 GEMM FLOP and $4 attention FLOP, step timed"; fi
}

echo "1..25"

# 1-6: the kernels of the step, counted by hand
flops 2 dp=2 27380416512 1879048192
flops 4 tp=2,pp=2 12884901888 939524096
flops 2 cp=2 27380416512 1879048192
flops 2 tp=2,ckpt=full 35970351104 2415919104
flops 2 tp=2,ckpt=op 30601641984 1879048192
flops 2 tp=2,ckpt=selective,recompute=layernorm+mlp 33822867456 1879048192

# 7: the TP rows: tp=2 runs its collectives (busy time above 0 on the tp stream)
mpi 2 $A --layout tp=2
if [ "$rc" -eq 0 ] && awk '$1 == "tp" && $2 > 0 { f = 1 } END { exit !f }' "$tmp/out"; then
  ok "tp=2: the tp stream's busy time is reported"
else nok "tp=2: no tp busy time: $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi

# 8: --trace: a Chrome trace with a complete event per task that takes time: tp=2,pp=2
# stage 0 runs 2 layers x 8 micro-batches of compute
mpi 4 $A --layout tp=2,pp=2 --trace "$tmp/t.json"
if [ "$rc" -eq 0 ] && python3 - "$tmp/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
x = [e for e in ev if e.get("ph") == "X"]
assert len(x) > 2 * 8, len(x)
assert all(e["dur"] >= 0 for e in x)
assert {e["pid"] for e in x} >= {0, 1} or len({e["pid"] for e in x}) == 2, {e["pid"] for e in x}
PY
then ok "--trace: a Chrome trace of both stages' tasks"
else nok "--trace: exit $rc $(head -c 300 "$tmp/err")"; fi

# 9: --checksum: the same lines with compute as with --dry-compute (the reduced replay)
mpi 4 $A --layout tp=2,pp=2 --checksum --dry-compute
grep '^checksum ' "$tmp/out" >"$tmp/want"
mpi 4 $A --layout tp=2,pp=2 --checksum
grep '^checksum ' "$tmp/out" >"$tmp/got"
if [ "$rc" -eq 0 ] && [ -s "$tmp/want" ] && cmp -s "$tmp/want" "$tmp/got"; then ok "--checksum: the replay's lines, with compute"
else nok "--checksum with compute: exit $rc, lines differ"; fi

# 10-12: spsim platform local, accepted by the what-if, and --compare with both figures
if [ -x "$build/spsim" ]; then
  # the measured rates, the attention backward's among them, and a collective's cost
  # between computing ranks as coll_latency, at least the one-way MPI latency
  if "$build/spsim" platform local -np 2 -o "$tmp/local.xml" 2>"$tmp/perr" && [ -s "$tmp/local-gemm.csv" ] &&
     grep -q 'prop id="local_gemm_flops"' "$tmp/local.xml" && grep -Eq 'prop id="local_attn_bwd_flops" value="[0-9.]+e[-+][0-9]+"' "$tmp/local.xml" &&
     awk '/MPI point-to-point/ { for (i = 1; i <= NF; i++) if ($i == "s" && $(i + 1) == "one") lat = $(i - 1) }
          /id="coll_latency" value=/ { v = $0; sub(/.*coll_latency" value="/, "", v); sub(/us".*/, "", v); c = v + 0; k++ }
          END { exit !(k == 2 && lat > 0 && c >= lat * 1e6 * 0.999) }' "$tmp/local.xml"; then
    ok "spsim platform local -np 2: platform, GEMM table, attention backward rate, coll_latency"
  else nok "spsim platform local: $(head -c 600 "$tmp/perr") $(grep -E 'attn|coll_latency|point-to-point' "$tmp/local.xml" | head -c 600)"; fi
  if "$build/spsim" "$tmp/local.xml" --model tiny --layout tp=2 --seq 256 --global-batch 8 >"$tmp/w" 2>&1 &&
     grep -q "tp2" "$tmp/w" && grep -q "(measured by spsim platform local)" "$tmp/w" &&
     grep -q "(measured GEMM table)" "$tmp/w"; then ok "the what-if accepts the local platform and prices with its measured rates"
  else nok "what-if on the local platform: $(head -c 600 "$tmp/w")"; fi
  mpi 2 $A --layout tp=2 --compare --platform "$tmp/local.xml"
  if [ "$rc" -eq 0 ] && grep -Eq "^  step +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%" "$tmp/out" &&
     grep -Eq "^  compute +[0-9.]+ +[0-9.]+ " "$tmp/out" && grep -q -- "--gemm-table" "$tmp/out"; then
    ok "--compare: measured and predicted step and compute"
  else nok "--compare: exit $rc: $(cat "$tmp/out" "$tmp/err" | tail -c 800)"; fi
else
  for i in 1 2 3; do n=$((n + 1)); echo "ok $n # SKIP spsim not built"; done
fi

# 13: the closed loop runs and prints both figures per layout
if [ -x "$build/spsim" ] && SPSIM_BUILDDIR="$build" MPIRUN="$MPIRUN" sh "$src/bench/closed-loop.sh" --quick \
     >"$tmp/loop" 2>&1 && [ "$(grep -Ec '^\| 2 \| [a-z=,0-9]+ \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+%' "$tmp/loop")" = 2 ] &&
   grep -q '^median |step error|' "$tmp/loop"; then ok "bench/closed-loop.sh --quick: both figures for 2 layouts"
elif [ ! -x "$build/spsim" ]; then n=$((n + 1)); echo "ok $n # SKIP spsim not built"
else nok "closed loop: $(head -c 800 "$tmp/loop")"; fi

# 14: a rank that dies in the middle of the step: the job ends non-zero, naming it
mpi 2 $A --layout tp=2 --debug-die-mid-rank 1 --timeout 10
expect "rank 1 dies mid-step: job ends non-zero" 3 "rank 1: exiting with status 3 in the middle of the step"

# 15: ranks launched with different flags
timeout 120 "$MPIRUN" -np 1 "$run" $A --layout tp=2 : -np 1 "$run" $A --layout tp=2 --dry-compute \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "--dry-compute on one rank only: refused" 2 "ranks disagree on flags \(--dry-compute differs"

# 16: too big for memory: refused before allocating, naming the need and what is free
mpi 2 $A --layout tp=2 --debug-mem-avail 1000000
expect "model too big for memory: refused" 2 "model too big for memory: the step needs .* GiB per rank.* available"

# 17: compute needs every GPU of the layout
mpi 3 $A --layout tp=2 --world 4
expect "--world 4 on 3 ranks with compute: refused" 2 "--world 4 needs mpirun -np 4 \(or use --dry-compute"

# 18: --compare without a platform measures this machine in the job (as spsim platform
# local does) and prints both figures; on one rank, where there is nothing to measure
# between ranks, it says how to make one
if [ -x "$build/spsim" ]; then
  mpi 2 $A --layout tp=2 --compare
  if [ "$rc" -eq 0 ] && grep -q "^compare: the platform of this machine measured in this job" "$tmp/out" &&
     grep -Eq "^  step +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%" "$tmp/out" && grep -Eq "^  tp +[0-9.]+ +[0-9.]+ " "$tmp/out"; then
    ok "--compare without --platform: measured here, both figures"
  else nok "--compare without --platform: exit $rc: $(cat "$tmp/out" "$tmp/err" | tail -c 600)"; fi
else n=$((n + 1)); echo "ok $n # SKIP spsim not built"; fi
mpi 1 $A --layout dp=1 --compare
expect "--compare on one rank without --platform: says how" 2 "spsim platform local -np 2 -o local.xml"

# 19: a rank that hangs in the middle of the step: the others stop within --timeout,
# naming the stream and task they wait on
mpi 2 $A --layout tp=2 --debug-hang-rank 1 --timeout 3
expect "rank 1 hangs mid-step: bounded by --timeout, names the wait" 4 \
  "rank 0: the step made no progress for 3 s \(--timeout\); waiting on: .*tp '"

# 20: --device cuda on the fake device (tests/fakegpu: cuBLAS's BF16 GEMMs queued on the
# rank's stream, run on the host): the same kernels as on the CPU, and on a GPU the
# kernel model knows (the fake named as an H100) its price of them beside
fake="$build/tests/spsim-run-fakegpu"
if [ -x "$fake" ] && grep -q "define SP_HAVE_CUBLAS 1" "$build/config.h" 2>/dev/null; then
  SPSIM_FAKEGPU_NAME="NVIDIA H100 80GB HBM3" timeout 300 "$MPIRUN" -np 2 "$fake" --step \
    --model "$src/models/tiny.json" --seq 256 --global-batch 8 --layout dp=2 --device cuda >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "compute on the GPU (cuBLAS)" "$tmp/out" &&
     grep -q "^measured: rank 0 (stage 0) ran [0-9]* kernels: 27380416512 GEMM FLOP, 1879048192 attention FLOP" "$tmp/out" &&
     grep -Eq "^measured: on NVIDIA H100 80GB HBM3 \(fakegpu 0\) the kernel model prices rank 0's GEMMs \(BF16\) at [0-9.]+ s \([-+][0-9.]+ % of the measured\)" "$tmp/out" &&
     grep -Eq "^measured: step [0-9]+\.[0-9]+ s" "$tmp/out"; then ok "--device cuda on the fake device: dp=2's kernels, step timed"
  else nok "--device cuda (fake device): exit $rc: $(cat "$tmp/out" "$tmp/err" | tail -c 600)"; fi
else n=$((n + 1)); echo "ok $n # SKIP not built with CUDA and cuBLAS (no fake device)"; fi

# 21: an unknown --device
mpi 2 $A --layout tp=2 --device gpu
expect "--device gpu: refused" 2 "--device must be cpu or cuda \(got 'gpu'\)"

# 22: a sliding-window model: its windows are priced, and spsim-run's attention kernels
# score the whole causal prefix, so a step with compute is refused; the step without
# compute, or at a sequence within the window, runs
sed 's/"vocab": 1024,/"vocab": 1024, "sliding_window": 64,/' "$src/models/tiny.json" >"$tmp/tinyw.json"
timeout 300 "$MPIRUN" -np 2 "$run" --step --model "$tmp/tinyw.json" --seq 256 --global-batch 8 --layout tp=2 \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "sliding-window model with compute: refused" 2 "sliding-window layers \(sliding_window 64 < --seq 256\).*--dry-compute"

# 23: one GPU: no collective or pipeline send, so nothing to replay, but the step's
# compute runs: all 8 sequences on the one rank, twice dp=2's per-rank FLOPs
# (27380416512 GEMM and 1879048192 attention for 4 sequences, the dp=2 row above)
flops 1 dp=1 54760833024 3758096384
# 24: ... and with --dry-compute nothing is left to run: refused, saying what to do
mpi 1 $A --layout dp=1 --dry-compute
expect "one GPU with --dry-compute: refused" 2 "no communication.*drop it to time the step's compute"
