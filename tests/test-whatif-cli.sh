#!/bin/sh
# What-if CLI: ranked output, determinism, artefacts, and clear errors on bad input.
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
whatif_platform "$tmp/p.xml"
export SPSIM_MODELS_DIR="$src/models"
# expect_fail DESC PATTERN ARGS...: non-zero exit and one "spsim:" line matching PATTERN
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"; else nok "$desc: $(cat "$tmp/err")"; fi
}
echo "1..85"
A="--fidelity analytic"
if "$bin" "$tmp/p.xml" $A --model llama3-8b >"$tmp/out" 2>"$tmp/err" && grep -q '^  1  ' "$tmp/out" && grep -q '^Why ' "$tmp/out" \
   && grep -q 'llama3-8b' "$tmp/out"; then ok "ranked table and explanation"; else nok "ranked table: $(cat "$tmp/err")"; fi
# 32 GPUs: the winner needs dp x ... = 32 and fits 73.6 GiB
if awk -F'|' '/^  1  /{ split($3, f, " "); if (f[2] != "yes") exit 1; found=1 } END { exit !found }' "$tmp/out"; then ok "winner fits"; else nok "winner fits"; fi
"$bin" "$tmp/p.xml" $A --model llama3-8b --json "$tmp/a.json" >/dev/null 2>&1
"$bin" "$tmp/p.xml" $A --model llama3-8b --json "$tmp/b.json" >/dev/null 2>&1
if [ -s "$tmp/a.json" ] && cmp -s "$tmp/a.json" "$tmp/b.json"; then ok "JSON byte-identical across runs"; else nok "JSON determinism"; fi
if grep -q '"layouts": \[' "$tmp/a.json" && grep -q '"exposed_s"' "$tmp/a.json"; then ok "JSON has the breakdown"; else nok "JSON content"; fi
if "$bin" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,pp=2,dp=2,ckpt=selective --svg "$tmp/c.svg" --trace "$tmp/t.json" >"$tmp/out" 2>&1 \
   && grep -q '^<svg' "$tmp/c.svg" && [ -s "$tmp/t.json" ] && grep -q 'tp8s pp2 dp2 sel' "$tmp/out"; then ok "--layout with --svg and --trace"; else nok "svg/trace: $(cat "$tmp/out")"; fi
expect_fail "unknown model lists the known ones" "known models: .*llama3-70b" "$tmp/p.xml" --model llama9
expect_fail "--seq 0" "seq" "$tmp/p.xml" $A --seq 0
expect_fail "--seq out of range" "--seq 99999999999999 is out of range" "$tmp/p.xml" $A --seq 99999999999999
expect_fail "a global batch whose token count would overflow" "out of range: at most" "$tmp/p.xml" $A --global-batch 99999999999999999
expect_fail "--eff-matmul nan is not a fraction" "fractions in (0, 1]" "$tmp/p.xml" $A --eff-matmul nan
expect_fail "layout not multiplying to the GPUs" "32 GPUs" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,pp=2,dp=3
echo '{"layers": 2, "hidden": 768, "heads": 12, "kv_heads": 12, "ffn": 3072, "vocab": 1000}' > "$tmp/h12.json"
expect_fail "heads not divisible by tp x sp" "12 heads are not divisible" "$tmp/p.xml" $A --model "$tmp/h12.json" --layout tp=8,dp=4
expect_fail "unknown flag" "Unknown option" "$tmp/p.xml" --frobnicate
echo '{"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 100}' > "$tmp/m.json"
expect_fail "model file with a missing field" "kv_heads" "$tmp/p.xml" $A --model "$tmp/m.json"
echo '{"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": -256, "vocab": 100}' > "$tmp/m2.json"
expect_fail "model file with a negative field" "positive" "$tmp/p.xml" $A --model "$tmp/m2.json"
expect_fail "a model that cannot fit anywhere" "cannot fit" "$tmp/p.xml" $A --model llama3-405b
if grep -q 'closest layouts' "$tmp/out"; then ok "closest layouts shown"; else nok "closest layouts"; fi
# The SimGrid engine prices the collectives (flow fidelity, the default) on the shipped
# DGX platform; its results must agree with the independent closed form of the analytic
# pricer (calibrated ring busbw 360 GB/s inside a node, min(360, 8 x 46) across nodes).
# The closed form's collective list is compared (--simulate 0): the step graph splits
# gradients into buckets, which these totals are not about.
D="$src/platforms/dgx.xml"
# comm_s of KIND in a --json file
comm() { sed -n "s/.*\"comm_s\": {[^}]*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -n 1; }
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; exit !(b > 0 && d <= p) }'; }
E="--gpus 64 --model llama3-8b"
"$bin" "$D" $E --simulate 0 --layout tp=8,dp=8 --json "$tmp/e1.json" >"$tmp/out" 2>&1
"$bin" "$D" $E --simulate 0 --layout tp=8,dp=8 --json "$tmp/e2.json" >/dev/null 2>&1
if grep -q 'collectives: flow' "$tmp/out" && [ -s "$tmp/e1.json" ] && cmp -s "$tmp/e1.json" "$tmp/e2.json"; then
  ok "engine pricing is used and byte-identical across runs"; else nok "engine pricing: $(head -c 400 "$tmp/out")"; fi
"$bin" "$D" $E $A --simulate 0 --layout tp=8,dp=8 --json "$tmp/a1.json" >/dev/null 2>&1
te=$(comm "$tmp/e1.json" tp); ta=$(comm "$tmp/a1.json" tp)
if within "$te" "$ta" 0.20; then ok "intra-node TP all-reduces: engine $te s vs closed form $ta s"; else nok "TP engine $te vs closed form $ta"; fi
"$bin" "$D" $E --simulate 0 --layout dp=64,zero=2,ckpt=full --json "$tmp/e3.json" >/dev/null 2>&1
"$bin" "$D" $E $A --simulate 0 --layout dp=64,zero=2,ckpt=full --json "$tmp/a3.json" >/dev/null 2>&1
de=$(comm "$tmp/e3.json" dp); da=$(comm "$tmp/a3.json" dp)
if within "$de" "$da" 0.15; then ok "8-node ZeRO-2 gradient collectives use all 8 NICs: engine $de s vs closed form $da s"; else nok "DP engine $de vs closed form $da"; fi
expect_fail "missing platform file" "No such file" "$tmp/none.xml" --model llama3-8b

# --verify: the chosen layout's dimensions run in data mode on the platform (SimGrid),
# each with the layout's degree on the real ranks of its groups, compared with the
# operation library's global references; then the priced step graph, reduced to one
# layer per chunk and pp micro-batches (2 without pipelining), replays its collectives
# and sends with real bytes. Counts by hand from Megatron's layer: TP with SP 4 forward
# + 6 backward per layer and micro-batch, +3 for the output layer (all-gather forward,
# re-gather and reduce-scatter backward) and +2 for the embedding (reduce-scatter forward,
# all-gather backward); Ulysses 4 + 4; plain TP 2 + 2, +1 for the embedding's all-reduce and
# +1 for the output layer's input-gradient all-reduce; ring cp - 1 forward and backward; ISP gather, gather, reduce-scatter; DP one
# bucket (all-reduce, or ZeRO's reduce-scatter + all-gather) per stage.
S="$src/platforms/small.xml"   # 2 nodes x 4 GPUs
echo '{"layers": 4, "hidden": 256, "heads": 8, "kv_heads": 2, "ffn": 1024, "vocab": 1000}' > "$tmp/v.json"
V="--model $tmp/v.json --verify"
if "$bin" "$S" $V --layout tp=2,sp=2,dp=2 --json "$tmp/v1.json" >"$tmp/out" 2>"$tmp/err" \
   && grep -qx 'verify: tp-mlp-sp tp=2 on ranks {0,1}: PASS' "$tmp/out" \
   && grep -qx 'verify: ulysses-attention sp=2 (2 heads, 1 KV) on ranks {0,2} and 1 sibling group (4 ranks): PASS' "$tmp/out" \
   && grep -q '^verify: dp-all-reduce replicas=4 .* on ranks {0,2,4,6} and 1 sibling group (8 ranks): PASS$' "$tmp/out" \
   && grep -qx "verify: step-graph (1 layer, 2 micro-batches: $((2 * (10 + 3 + 2) + 2 * 8 + 1)) collectives and 0 pipeline sends) of the stages' ranks {0} with the members of their groups (5 ranks): PASS" "$tmp/out" \
   && [ "$(grep -c '^verify: .*: PASS$' "$tmp/out")" = 4 ] && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ]; then
  ok "--verify tp x sp x dp: one check per dimension on its real groups, PASS"; else nok "--verify PASS: $(cat "$tmp/out" "$tmp/err" | tail -n 8)"; fi
if grep -q '"verify": {"layout": "tp=2,tpsp=1,sp=2,.*"result": "PASS"' "$tmp/v1.json" \
   && [ "$(grep -c '{"name": "[a-z-]*", "dim": .*"result": "PASS"' "$tmp/v1.json")" = 4 ] \
   && grep -q '"name": "ulysses-attention", "dim": "sp=2 (2 heads, 1 KV)", "degree": 2, "ranks": \[0, 2\], "ranks_simulated": 4' "$tmp/v1.json"; then
  ok "--json has the verify member with each check"; else nok "verify JSON: $(grep -A5 '"verify"' "$tmp/v1.json")"; fi
# ring (Ulysses x ring hybrid), ISP with prefetch, ZeRO over the remaining replicas
if "$bin" "$S" $V --layout sp=2,cp=2,wp=4,dp=2,zero=1 >"$tmp/out" 2>"$tmp/err" \
   && grep -qx 'verify: ulysses-ring sp=2 x cp=2 on ranks {0..3}: PASS' "$tmp/out" \
   && grep -qx 'verify: isp-linear wp=4 (prefetch) on ranks {0..3}: PASS' "$tmp/out" \
   && grep -q '^verify: zero1-step replicas=2 .* on ranks {0,4} and 3 sibling groups (8 ranks): PASS$' "$tmp/out" \
   && grep -q "^verify: step-graph (1 layer, 2 micro-batches: $((2 * 8 + 2 * 2 + 2 * 3 + 2)) collectives and 0 pipeline sends) .*: PASS$" "$tmp/out" \
   && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ]; then ok "--verify sp x cp x wp with ZeRO-1"; else nok "--verify sp/cp/wp: $(cat "$tmp/out" "$tmp/err" | tail -n 8)"; fi
# pipeline between stages 4 ranks apart, plain TP, ZeRO-2
if "$bin" "$S" $V --layout tp=2,tpsp=0,pp=2,dp=2,zero=2 >"$tmp/out" 2>"$tmp/err" \
   && grep -qx 'verify: tp-mlp tp=2 on ranks {0,1}: PASS' "$tmp/out" \
   && grep -qx 'verify: pipeline-1f1b pp=2 on ranks {0,4} and 3 sibling groups (8 ranks): PASS' "$tmp/out" \
   && grep -qx 'verify: zero2-step dp=2 on ranks {0,2} and 1 sibling group (4 ranks): PASS' "$tmp/out" \
   && grep -qx "verify: step-graph (2 layers, 2 micro-batches: $((2 * 2 * 4 + 2 * (1 + 1) + 2 * 2)) collectives and 4 pipeline sends) of the stages' ranks {0,4} with the members of their groups (6 ranks): PASS" "$tmp/out" \
   && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ]; then ok "--verify tp x pp x dp with ZeRO-2"; else nok "--verify pp: $(cat "$tmp/out" "$tmp/err" | tail -n 8)"; fi
# tpoverlap=1 (Megatron's --tp-comm-overlap): per layer and micro-batch, forward 2 ring
# exchanges of tp - 1 = 3 shard steps (QKV, MLP up) and 2 reduce-scatters pipelined in 4
# chunks (output projection, MLP down), backward 2 ring exchanges (output projection and
# MLP down data gradients) and the column-parallel GEMMs' re-gather and reduce-scatter
# (2 x 2): 14 + 10; +3 for the output layer, +2 for the embedding; one DP bucket
if "$bin" "$S" $V --layout tp=4,tpoverlap=1,dp=2 >"$tmp/out" 2>"$tmp/err" \
   && grep -q "^verify: step-graph (1 layer, 2 micro-batches: $((2 * (2 * 3 + 2 * 4 + 2 * 3 + 2 * 2 + 3 + 2) + 1)) collectives and 0 pipeline sends) .*: PASS$" "$tmp/out" \
   && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ]; then ok "--verify tp=4 with tpoverlap=1: the overlapped chunks replayed"; else nok "--verify tpoverlap: $(cat "$tmp/out" "$tmp/err" | tail -n 8)"; fi
# A --layout that does not fit (0.1 GiB of GPU memory) is still priced, explained,
# verified, exported and traced: memory plays no part in its semantics; --sensitivity
# (a re-ranking of layouts that fit) says it does not apply; the status stays 1 and
# standard error says why.
if "$bin" "$S" $V --layout tp=2,pp=2,dp=2 --gpu-mem 0.1 --trace "$tmp/nf.json" --export megatron --sensitivity \
   >"$tmp/out" 2>"$tmp/err"; then rc=0; else rc=$?; fi
if [ $rc = 1 ] && grep -q '^Layout tp2s pp2 dp2: compute is .*, so it does NOT fit\.' "$tmp/out" \
   && grep -q -- '--tensor-model-parallel-size 2' "$tmp/out" \
   && grep -qx -- '--sensitivity: not run, it re-ranks layouts that fit and this one does not.' "$tmp/out" \
   && grep -qx 'verify: pipeline-1f1b pp=2 on ranks {0,4} and 3 sibling groups (8 ranks): PASS' "$tmp/out" \
   && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ] && grep -q '"traceEvents"' "$tmp/nf.json" \
   && grep -q '^spsim: layout tp2s pp2 dp2 needs .* GiB per GPU, more than the 0.1 GiB usable' "$tmp/err"; then
  ok "a --layout that does not fit is explained, verified and traced, and exits 1"; else nok "no-fit --verify: rc $rc $(tail -n 4 "$tmp/out") $(cat "$tmp/err")"; fi
expect_fail "tpoverlap without sequence parallelism" "tpoverlap=1 .*needs tp > 1 and tpsp=1" "$S" --model "$tmp/v.json" --layout tp=4,tpsp=0,tpoverlap=1
if "$bin" "$S" --model "$tmp/v.json" --layout tp=4,tpoverlap=1,dp=2 --export megatron >"$tmp/out" 2>"$tmp/err" \
   && grep -q -- '--tp-comm-overlap' "$tmp/out" && grep -q -- '--sequence-parallel' "$tmp/out"; then ok "Megatron export names --tp-comm-overlap"
else nok "tpoverlap export: $(cat "$tmp/out" "$tmp/err" | tail -n 5)"; fi
# vppgroup=3 (Megatron-Core's micro-batch groups): 5 micro-batches on pp=2 run in a group
# of 3 and one of 2; the reduced step of --verify runs one group (3 micro-batches); a last
# group of 1 (groups of 4) is refused as Megatron-Core refuses it; the export names the flag
G="--model $tmp/v.json --global-batch 10"
if "$bin" "$S" $G --layout tp=2,pp=2,vpp=2,vppgroup=3,dp=2 --verify >"$tmp/out" 2>"$tmp/err" \
   && grep -q "tp2s pp2v2g3 dp2" "$tmp/out" && grep -q '^verify: step-graph (4 layers, 3 micro-batches:' "$tmp/out" \
   && [ "$(tail -n 1 "$tmp/out")" = "verify: PASS" ]; then ok "vppgroup=3: 5 micro-batches on pp=2 priced, verified in one group"
else nok "vppgroup verify: $(cat "$tmp/out" "$tmp/err" | tail -n 6)"; fi
expect_fail "vppgroup leaving a last group below pp" "vppgroup=4 .*1 left" "$S" $G --layout tp=2,pp=2,vpp=2,vppgroup=4,dp=2
expect_fail "5 micro-batches on pp=2 without vppgroup" "divisible by pp=2 (or vppgroup" "$S" $G --layout tp=2,pp=2,vpp=2,dp=2
if "$bin" "$S" $G --layout tp=2,pp=2,vpp=2,vppgroup=3,dp=2 --export megatron >"$tmp/out" 2>"$tmp/err" \
   && grep -q -- '--microbatch-group-size-per-virtual-pipeline-stage 3' "$tmp/out"; then ok "Megatron export names the micro-batch group"
else nok "vppgroup export: $(cat "$tmp/out" "$tmp/err" | tail -n 5)"; fi
# micro-batches past the sweep's 1, 2, 4 while memory allows: a 4-layer model at seq 128
# fits at any size, so the sweep doubles up to the global batch (64 sequences on at
# least one replica); --micro-batch fixes the size
"$bin" "$S" --model "$tmp/v.json" --seq 128 --global-batch 64 $A --json "$tmp/mbx.json" >/dev/null 2>&1
"$bin" "$S" --model "$tmp/v.json" --seq 128 --global-batch 64 $A --micro-batch 2 --json "$tmp/mb2.json" >/dev/null 2>&1
if grep -q 'mb=\(8\|16\|32\|64\)[,"]' "$tmp/mbx.json" && ! grep -q 'mb=128' "$tmp/mbx.json" \
   && grep -q 'mb=2[,"]' "$tmp/mb2.json" && ! grep -q 'mb=\([13-9]\|[0-9][0-9]\)[,"]' "$tmp/mb2.json"; then
  ok "micro-batches doubled past 4 while they fit; --micro-batch fixes it"
else nok "micro-batch sweep: $(grep -o 'mb=[0-9]*' "$tmp/mbx.json" "$tmp/mb2.json" | sort | uniq -c | tr '\n' ' ')"; fi
# --grad-reduce fp32: every layout's gradients reduced in fp32 (dpfp32=1), the winner's label
# says so and its data-parallel reduction moves twice the bf16 bytes
if "$bin" "$tmp/p.xml" $A --model llama3-8b --grad-reduce fp32 >"$tmp/out" 2>"$tmp/err" \
   && grep -q '^  1  .* dpfp32' "$tmp/out" && ! grep -E '^ +[0-9]+  ' "$tmp/out" | grep -qv dpfp32; then
  ok "--grad-reduce fp32 sets dpfp32 on every layout"
else nok "--grad-reduce fp32: $(sed -n 6,8p "$tmp/out") $(cat "$tmp/err")"; fi
expect_fail "--grad-reduce with an unknown dtype" "--grad-reduce: 'int8' is not fp32 or model" "$tmp/p.xml" $A --grad-reduce int8
# A corrupted output on rank 2 (testing aid) must be found: FAIL names the rank, exits 1,
# and the TP check (ranks 0, 1) still passes.
"$bin" "$S" $V --layout tp=2,sp=2,dp=2 --debug-corrupt-rank 2 --json "$tmp/v2.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" = 1 ] && grep -qx 'verify: tp-mlp-sp tp=2 on ranks {0,1}: PASS' "$tmp/out" \
   && grep -q '^verify: ulysses-attention .*: FAIL (first differing rank 2, offset [0-9]*)$' "$tmp/out" \
   && grep -q '^verify: step-graph .*: FAIL (first differing rank 2, offset [0-9]*)$' "$tmp/out" \
   && grep -q '^verify: FAIL (first differing rank 2, offset [0-9]*)$' "$tmp/out" \
   && grep -q '"result": "FAIL", "first_bad_rank": 2' "$tmp/v2.json"; then ok "--verify FAIL: exit 1, first differing rank"
else nok "--verify FAIL (rc $rc): $(cat "$tmp/out" "$tmp/err" | tail -n 6)"; fi
expect_fail "--debug-corrupt-rank outside the GPUs" "not a rank of the 8 GPUs" "$S" $V --layout tp=2,sp=2,dp=2 --debug-corrupt-rank 8
# --verify needs the engine even when pricing is analytic: a platform SimGrid rejects is
# one clear error, not a crash
{
  echo '<?xml version="1.0"?>'
  echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
  echo '<platform version="4.1"><zone id="w" routing="Full"><prop id="gpus_per_node" value="4"/>'
  for g in 0 1 2 3; do echo "  <host id=\"g$g\" speed=\"fast\"/>"; done
  echo '</zone></platform>'
} > "$tmp/bad.xml"
expect_fail "--verify on a platform SimGrid rejects" "--verify needs the SimGrid engine: .*rejected" "$tmp/bad.xml" $A $V --layout tp=2,dp=2
if "$bin" "$tmp/bad.xml" $A --model "$tmp/v.json" --layout tp=2,dp=2 >/dev/null 2>&1; then ok "the same without --verify prices analytically"
else nok "analytic run on the bad platform failed"; fi
# Interleaved 1F1B trace of the simulated step graph: llama3-8b's 32 layers on pp 8 x vpp 2
# over 64 micro-batches. Every layer runs its forward (one "norm" kernel on the compute
# stream each) and its backward once per micro-batch: 32 x 64 = 2048 each; (8 x 2 - 1) x 64
# = 960 sends each way; stage 0 runs Megatron's warm-up of (pp - 1) x 2 + (vpp - 1) x pp = 22
# forwards of its 2-layer chunks, then the steady state's forward, before its first
# backward: 23 chunks, 46 layer forwards.
"$bin" "$D" --gpus 64 --model llama3-8b --layout tp=8,pp=8,vpp=2,dp=1,ckpt=full --global-batch 64 --fidelity analytic \
  --trace "$tmp/il.json" >/dev/null 2>&1
tr '{' '\n' < "$tmp/il.json" | grep '"ph":"X"' > "$tmp/ev"
nf=$(grep '"name":"norm","cat":"fwd"' "$tmp/ev" | grep -c '"tid":0,')
nb=$(grep '"name":"norm backward","cat":"bwd"' "$tmp/ev" | grep -c '"tid":0,')
nsa=$(grep -c '"name":"send activations"' "$tmp/ev"); nsg=$(grep -c '"name":"send gradients"' "$tmp/ev")
if [ "$nf" = 2048 ] && [ "$nb" = 2048 ] && [ "$nsa" = 960 ] && [ "$nsg" = 960 ]; then ok "interleaved trace: 2048 layer forwards and backwards, 960 sends each way"
else nok "interleaved trace counts: $nf $nb $nsa $nsg"; fi
w=$(grep '"pid":0,"tid":0,' "$tmp/ev" | awk '/"cat":"(bwd|recompute)"/ { exit } /"name":"norm","cat":"fwd"/ { n++ } END { print n + 0 }')
if [ "$w" = 46 ]; then ok "interleaved warm-up on stage 0: 22 + 1 chunk forwards"; else nok "warm-up: $w layer forwards"; fi
# The trace's last event ends at the reported step time.
"$bin" "$D" --gpus 64 --model llama3-8b --layout tp=8,pp=2,dp=4,ckpt=selective --global-batch 64 --trace "$tmp/st.json" \
  --json "$tmp/st-r.json" >/dev/null 2>&1
last=$(tr '{' '\n' < "$tmp/st.json" | grep '"ph":"X"' | sed 's/.*"ts":\([0-9.e+-]*\),"dur":\([0-9.e+-]*\).*/\1 \2/' \
       | awk '{ e = $1 + $2; if (e > m) m = e } END { printf "%.9g", m / 1e6 }')
st=$(tr '{' '\n' < "$tmp/st-r.json" | grep -o '"step_s": [0-9.e+-]*' | head -n 1 | cut -d' ' -f2)
if within "$last" "$st" 0.000001; then ok "the trace ends at the step time ($st s)"; else nok "trace end $last vs step $st"; fi

# --explain names the winner's dominant term from the simulation, and the step without
# overlap: compute + bubble + every collective's busy time, so never below the step.
"$bin" "$D" --gpus 64 --model llama3-8b --layout tp=8,pp=2,dp=4,ckpt=selective --global-batch 64 --explain \
  >"$tmp/ex.txt" 2>&1
ex_step=$(sed -n 's/^Dominant term of .* of its \([0-9.]*\) s step.*/\1/p' "$tmp/ex.txt")
ex_ser=$(sed -n 's/.*the step would take \([0-9.]*\) s.*/\1/p' "$tmp/ex.txt")
if grep -q 'from the simulated step graph' "$tmp/ex.txt" && [ -n "$ex_step" ] && [ -n "$ex_ser" ] &&
   awk -v a="$ex_ser" -v b="$ex_step" 'BEGIN { exit !(a + 0 >= b + 0 && b > 0) }'; then
  ok "--explain: dominant term, and the step without overlap ($ex_ser s) not below the step ($ex_step s)"
else nok "--explain: $(tail -n 2 "$tmp/ex.txt")"; fi

# Bad input is refused before SimGrid loads the platform (a platform it would
# reject shows it: the flag's error comes first), and numeric flags are ranged.
{ echo '<?xml version="1.0"?>'; echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
  echo '<platform version="4.1"><zone id="z" routing="Full"><prop id="gpus_per_node" value="8"/>'
  for g in 0 1 2 3 4 5 6 7; do echo "<host id=\"h$g\" speed=\"989.4Tf\"/>"; done
  echo '</zone></platform>'; } >"$tmp/unrouted.xml"
# a flat platform that does not say how many GPUs share a node: asked for, never assumed
sed 's|<prop id="gpus_per_node" value="8"/>||' "$tmp/unrouted.xml" >"$tmp/flat.xml"
expect_fail "impossible layout refused before the platform loads" "not divisible by pp x vpp" \
  "$tmp/unrouted.xml" --model llama3-8b --layout tp=2,pp=4,vpp=3
expect_fail "the same platform, valid request: the missing route" "no route from host 'h0' to host 'h1'" \
  "$tmp/unrouted.xml" --model llama3-8b --layout tp=8
expect_fail "GPUs per node neither in the platform nor given" "gpus_per_node.*--gpus-per-node" \
  "$tmp/flat.xml" --model llama3-8b --layout tp=8
# an attention kernel the model cannot use: fused kernels stop at head dim 256
echo '{"layers": 4, "hidden": 2560, "heads": 8, "kv_heads": 8, "ffn": 1024, "vocab": 1000}' >"$tmp/wide.json"
expect_fail "flash attention with 320-wide heads" "attention flash takes head dims up to 256, and the model's heads are 320 wide.*--attention unfused" \
  "$src/platforms/small.xml" --model "$tmp/wide.json" --layout tp=2,dp=4
if "$bin" "$src/platforms/small.xml" --model "$tmp/wide.json" --layout tp=2,dp=4 --attention unfused >/dev/null 2>&1; then
  ok "the same model with --attention unfused"; else nok "unfused attention on 320-wide heads failed"; fi
expect_fail "--gpus 0" "--gpus must be between 1 and the platform's 32 hosts (got 0)" "$tmp/p.xml" $A --gpus 0
expect_fail "--gpus -8" "--gpus must be between 1 and the platform's 32 hosts (got -8)" "$tmp/p.xml" $A --gpus -8
expect_fail "--peak-tflops 0" "--peak-tflops must be a positive" "$tmp/p.xml" $A --peak-tflops 0
expect_fail "--gpus-per-node 0" "--gpus-per-node must be at least 1" "$tmp/p.xml" $A --gpus-per-node 0
expect_fail "--comm-slowdown -1" "--comm-slowdown must be a fraction between 0 and 10 (got -1)" "$tmp/p.xml" $A --comm-slowdown -1
expect_fail "--simulate -1" "--simulate must be between 0 and 100000 layouts (got -1)" "$tmp/p.xml" $A --simulate -1
sed 's/"vocab"/"num_experts": 8, "vocab"/' "$src/models/llama3-8b.json" >"$tmp/moe.json"
expect_fail "unknown model key: named, known keys listed" "unknown key 'num_experts' (a model file knows name, layers" \
  "$tmp/p.xml" $A --model "$tmp/moe.json"
if "$bin" "$tmp/p.xml" $A --model "$tmp/moe.json" --lenient >/dev/null 2>"$tmp/err" &&
   grep -q "^spsim: warning: .*ignoring unknown keys (--lenient): num_experts" "$tmp/err"
then ok "--lenient: a warning, exit 0"; else nok "--lenient: $(cat "$tmp/err")"; fi
sed 's/gpu_mem/gpu_memory/' "$tmp/p.xml" >"$tmp/pm.xml"
expect_fail "unknown host property: named, known ones listed" "unknown host property 'gpu_memory' (first in <host> 'g0-0') (spsim knows gpu, gpu_mem" \
  "$tmp/pm.xml" $A --model llama3-8b
# --json -: the JSON alone on standard output, the report on standard error
"$bin" "$tmp/p.xml" $A --model llama3-8b --json - >"$tmp/so.json" 2>"$tmp/err"
"$bin" "$tmp/p.xml" $A --model llama3-8b --json "$tmp/f.json" >/dev/null 2>&1
if cmp -s "$tmp/so.json" "$tmp/f.json" && grep -q '^  1  ' "$tmp/err" && [ ! -e ./- ]
then ok "--json - writes the JSON to standard output"; else nok "--json -: $(head -c 300 "$tmp/so.json")"; fi
expect_fail "two artefacts on standard output" "only one of --json, --csv, --svg and --trace" "$tmp/p.xml" $A --json - --svg -

# The kernel model's choices: unfused attention pays the s^2 traffic (slower than
# flash on the same layout), a measured GEMM table without a nearby shape is refused.
step_of() { tr '{' '\n' <"$1" | grep -o '"step_s": [0-9.e+-]*' | head -n 1 | cut -d' ' -f2; }
"$bin" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,dp=4 --json "$tmp/fl.json" >/dev/null 2>&1
"$bin" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,dp=4 --attention unfused --json "$tmp/un.json" >/dev/null 2>&1
if awk -v f="$(step_of "$tmp/fl.json")" -v u="$(step_of "$tmp/un.json")" 'BEGIN { exit !(f > 0 && u > f) }' &&
   grep -q '"attention": "unfused"' "$tmp/un.json"
then ok "--attention unfused costs more than flash"; else nok "--attention: $(step_of "$tmp/fl.json") vs $(step_of "$tmp/un.json")"; fi
expect_fail "--attention sdpa" "--attention: attention must be flash (or fused), flash2, triton or unfused (got 'sdpa')" "$tmp/p.xml" $A --attention sdpa
printf 'm,n,k,tflops\n64,64,64,100\n' >"$tmp/gemm.csv"
expect_fail "--gemm-table without a near shape" "GEMM table '.*gemm.csv' has no 16-bit shape near" \
  "$tmp/p.xml" $A --model llama3-8b --layout tp=8,dp=4 --gemm-table "$tmp/gemm.csv"
expect_fail "--gemm-table that is not a table" "the CSV header must name the columns m, n, k and tflops" \
  "$tmp/p.xml" $A --model llama3-8b --gemm-table "$tmp/p.xml"
# the library from a program: examples/whatif (one layout, then a sweep) names a winner
ex="${SPSIM_BUILDDIR:-.}/examples/whatif"
if "$ex" "$src/platforms/small.xml" "$src/models" >"$tmp/out" 2>"$tmp/err" \
   && grep -q '^one layout: 1 layout evaluated, 1 fit; winner tp4s dp2 sel: ' "$tmp/out" \
   && grep -q '^sweep: [0-9]* layouts evaluated, [0-9]* fit; winner ' "$tmp/out" && grep -q 'Why .* wins' "$tmp/out"
then ok "examples/whatif runs a what-if through the library"; else nok "examples/whatif: $(cat "$tmp/out" "$tmp/err")"; fi
# --json through a real serialiser: a model name with quotes and markup stays valid JSON
# (read back by json-glib: tests/json-check) and SVG; sizes are exact integers
jc="${SPSIM_BUILDDIR:-.}/tests/json-check"
printf '%s\n' '{"name": "my \"quoted\" <model> & co", "layers": 4, "hidden": 256, "heads": 8, "kv_heads": 2, "ffn": 1024, "vocab": 1000}' >"$tmp/q.json"
"$bin" "$S" --model "$tmp/q.json" --layout tp=2,dp=4 --json "$tmp/q-out.json" --svg "$tmp/q.svg" >"$tmp/out" 2>"$tmp/err"
if "$jc" "$tmp/q-out.json" 2>"$tmp/err" && [ "$("$jc" "$tmp/q-out.json" model.name)" = 'my "quoted" <model> & co' ]
then ok "--json of a model named with quotes is valid JSON and keeps the name"; else nok "quoted name: $(cat "$tmp/err"; head -c 300 "$tmp/q-out.json")"; fi
if grep -q 'spsim what-if: my &quot;quoted&quot; &lt;model&gt; &amp; co on 8 GPUs' "$tmp/q.svg"
then ok "--svg escapes the model name"; else nok "svg escaping: $(grep -o 'spsim what-if: [^/]*' "$tmp/q.svg")"; fi
p=$("$jc" "$tmp/q-out.json" model.params); t=$("$jc" "$tmp/q-out.json" layouts.0.mem_bytes.total)
if printf '%s\n' "$p" "$t" | grep -qv '^[0-9][0-9]*$'; then nok "integers: params $p, total $t"
else ok "--json writes parameter and byte counts as exact integers ($p parameters)"; fi

# mixture of experts: ep layouts ranked, refused with the fix
if "$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1,ckpt=full >"$tmp/out" 2>"$tmp/err" \
   && grep -q 'dp32 z1 ep8 full' "$tmp/out"; then ok "MoE layout with ep"; else nok "MoE layout: $(cat "$tmp/err")"; fi
expect_fail "ep not dividing the experts" "ep=16 does not divide the 8 experts.*choose an ep" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=16
expect_fail "ep not dividing dp x cp" "ep=8 does not divide sp x cp x dp = 1 x 1 x 4 = 4.*raise dp" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=8,ep=8
expect_fail "ep on a dense model" "need an MoE model" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,ep=2
expect_fail "--routing on a dense model" "needs an MoE model" "$tmp/p.xml" $A --model llama3-8b --routing zipf:1
if "$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1,ckpt=full --export megatron >"$tmp/out" 2>"$tmp/err" \
   && grep -q -- '--expert-model-parallel-size 8' "$tmp/out"; then ok "Megatron export names ep"; else nok "ep export: $(cat "$tmp/err")"; fi
# a2aoverlap=1: the layout's label and Megatron-Core's flag; refused where Megatron-Core refuses it
if "$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1,ckpt=selective,a2aoverlap=1 --gpu-mem 65536 --export megatron >"$tmp/out" 2>"$tmp/err" \
   && grep -q "dp32 ep8 a2aov z1 sel" "$tmp/out" && grep -q -- '--overlap-moe-expert-parallel-comm' "$tmp/out"
then ok "a2aoverlap=1 ranked and exported"; else nok "a2aoverlap: $(cat "$tmp/err")"; fi
expect_fail "a2aoverlap with full recompute" "a2aoverlap=1 cannot run with full recompute" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,ckpt=full,a2aoverlap=1
expect_fail "a2aoverlap on a dense model" "need an MoE model" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,a2aoverlap=1
# recompute=: Megatron-Core's --recompute-modules, in the label, the report and the export; refused
# without ckpt=selective, for an unknown module and for a module the model has not
if "$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1,ckpt=selective,recompute=layernorm+moe_act --gpu-mem 65536 --export megatron >"$tmp/out" 2>"$tmp/err" \
   && grep -q "z1 sel(layernorm+moe_act)" "$tmp/out" && grep -q -- '--recompute-modules layernorm moe_act' "$tmp/out" \
   && grep -q "with selective recomputation (layernorm moe_act)" "$tmp/out"
then ok "recompute=layernorm+moe_act ranked, explained and exported"; else nok "recompute=: $(cat "$tmp/err")"; fi
expect_fail "recompute= without ckpt=selective" "add ckpt=selective" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,recompute=mlp
expect_fail "recompute= with an unknown module" "unknown module 'attn'" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,ckpt=selective,recompute=attn
expect_fail "recompute=mla_up_proj without latent attention" "has no latent attention" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,ckpt=selective,recompute=mla_up_proj
# a skewed routing (zipf:1.5 over 8 experts on 8 ranks: the busiest takes 8 / (1 + 2^-1.5 + ... + 8^-1.5) = 4.15 x the mean) is slower
"$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1 --json "$tmp/u.json" >/dev/null 2>&1
"$bin" "$tmp/p.xml" $A --model mixtral-8x7b --layout tp=1,ep=8,zero=1 --routing zipf:1.5 --json "$tmp/z.json" >/dev/null 2>&1
tu=$(grep -o '"step_s": *[0-9.e+-]*' "$tmp/u.json" | head -n 1 | sed 's/.*: *//')
tz=$(grep -o '"step_s": *[0-9.e+-]*' "$tmp/z.json" | head -n 1 | sed 's/.*: *//')
if [ -n "$tu" ] && [ -n "$tz" ] && awk -v u="$tu" -v z="$tz" 'BEGIN { exit !(z > u * 1.2) }'; then ok "--routing zipf:1.5 slows the step ($tu -> $tz s)"
else nok "--routing zipf: '$tu' -> '$tz'"; fi
# HBM-bound kernels stream at BabelStream's measured Triad fraction of the datasheet's
# bandwidth: H100 0.83 x 3.35 TB/s = 2.78 TB/s (3,314.9 of 4,000 GB/s on GH200), A100 80 GB
# 0.85 x 2.039 TB/s = 1.73 TB/s (1,724.8 of 2,039 GB/s)
"$bin" "$D" --gpus 8 --model llama3-8b --layout tp=8 >"$tmp/out" 2>&1
if grep -q 'HBM 2.78 TB/s streamed (0.83 of 3.35)' "$tmp/out"; then ok "H100 HBM streamed at 0.83"; else nok "H100 HBM: $(sed -n 2p "$tmp/out")"; fi
"$bin" platform dgx --nodes 1 --gpu a100 >"$tmp/a100.xml" 2>/dev/null
"$bin" "$tmp/a100.xml" --gpus 8 --model llama3-8b --layout tp=8 >"$tmp/out" 2>&1
if grep -q 'HBM 1.73 TB/s streamed (0.85 of 2.04)' "$tmp/out"; then ok "A100 HBM streamed at 0.85"; else nok "A100 HBM: $(sed -n 2p "$tmp/out")"; fi
"$bin" "$tmp/a100.xml" --gpus 8 --model llama3-8b --layout tp=8 --json "$tmp/hb.json" >/dev/null 2>&1
if grep -qF '"hbm_streamed_bw": 1.73315e+12' "$tmp/hb.json"; then ok "JSON hbm_streamed_bw = 0.85 x 2.039e12"; else nok "JSON hbm_streamed_bw: $(grep -o '"hbm_[a-z_]*": *[0-9.e+]*' "$tmp/hb.json" | head -2)"; fi
