#!/bin/sh
# The measured rates of a platform written by `spsim platform local`, read back by the
# what-if: top-zone local_gemm_flops, local_attn_flops and local_attn_bwd_flops on a
# 2-GPU toy platform (no GEMM table: every GEMM at local_gemm_flops). Hand-derived:
# models/tiny.json at dp=2, --seq 256 --global-batch 8 runs 4 micro-batches of 4
# layers per rank; causal attention backward per layer and micro-batch is 2.5 x 4 b a
# (s s / 2) d = 2.5 x 4 x 4 x 32768 x 64 = 83886080 FLOP, so F = 16 x 83886080 =
# 1342177280 FLOP per step.
#   no local_attn_bwd_flops: the backward at the forward's share of the GPU's
#     backward, local_attn_flops x (H100 attn_bwd_eff / attn_fwd_eff = 0.45 / 0.60,
#     src/core/step/kernel_model.c) = 2e9 x 0.75 = 1.5e9 FLOP/s;
#   local_attn_bwd_flops 1.5e9: the same compute time (to 1e-6 s);
#   local_attn_bwd_flops 1e9: F / 1e9 - F / 1.5e9 = 0.447392 s more compute.
bin="${SPSIM_BUILDDIR:-.}/spsim"
srcdir="${SPSIM_SRCDIR:-.}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
echo "1..4"

"$bin" platform dgx --gpu toy --nodes 1 --gpus-per-node 2 -o "$tmp/toy.xml" || { echo "Bail out! spsim platform dgx"; exit 1; }
# plat NAME PROPS: the toy platform with PROPS after its gpus_per_node property
plat() {
  sed "s|<prop id=\"gpus_per_node\" value=\"2\"/>|&$2|" "$tmp/toy.xml" >"$tmp/$1.xml"
}
rates='<prop id="local_gemm_flops" value="1e10"/><prop id="local_attn_flops" value="2e9"/>'
plat none "$rates"
plat same "$rates<prop id=\"local_attn_bwd_flops\" value=\"1.5e9\"/>"
plat slow "$rates<prop id=\"local_attn_bwd_flops\" value=\"1e9\"/>"
# compute NAME: compute_s of the one layout row
compute() {
  "$bin" "$tmp/$1.xml" --model "$srcdir/models/tiny.json" --layout dp=2 --seq 256 --global-batch 8 --json - 2>"$tmp/err" |
    tr ',{' '\n\n' | awk -F: '/"compute_s"/ { gsub(/ /, "", $2); print $2; exit }'
}
a=$(compute none); b=$(compute same); c=$(compute slow)
if [ -n "$a" ] && awk -v a="$a" 'BEGIN { exit !(a > 0) }'; then ok "the what-if prices the local platform's compute ($a s)"
else nok "no compute_s on the local platform: $(head -c 400 "$tmp/err")"; fi
if [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-6) }'; then
  ok "local_attn_bwd_flops 1.5e9 = the forward's share of the GPU's backward: same compute ($a, $b)"
else nok "local_attn_bwd_flops 1.5e9: compute $b, want $a"; fi
if [ -n "$c" ] && awk -v b="$b" -v c="$c" 'BEGIN { d = c - b - 0.447392; if (d < 0) d = -d; exit !(d < 1e-5) }'; then
  ok "local_attn_bwd_flops 1e9: 0.447392 s more compute ($b -> $c)"
else nok "local_attn_bwd_flops 1e9: compute $c, want $b + 0.447392"; fi
# a platform's GPU figures are untouched by the property when there is no local_gemm_flops
plat gpu '<prop id="local_attn_bwd_flops" value="1e9"/>'
d=$(compute gpu); e=$("$bin" "$tmp/toy.xml" --model "$srcdir/models/tiny.json" --layout dp=2 --seq 256 --global-batch 8 --json - 2>/dev/null |
    tr ',{' '\n\n' | awk -F: '/"compute_s"/ { gsub(/ /, "", $2); print $2; exit }')
if [ -n "$d" ] && [ "$d" = "$e" ]; then ok "without local_gemm_flops the property changes nothing ($d s)"
else nok "without local_gemm_flops: compute $d, want $e"; fi
