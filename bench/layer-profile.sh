#!/bin/sh
# Per-layer time of the 22B GPT of Korthikanti et al. 2022 (arXiv:2205.05198, Table 4:
# "time taken per transformer layer", 8 x A100 80 GB on Selene, TP 8, micro-batch 4,
# sequence 2048, Megatron-LM's unfused attention) against spsim's: the difference
# between the predicted steps of the model with 48 and with 24 layers, over 24, less
# the optimizer step's share (the table times the layer's forward and backward). The
# A100 GEMM efficiency of the kernel model is calibrated on this table
# (src/core/step/kernel_model.c); bench/validate.sh checks the other runs against it.
# Usage: bench/layer-profile.sh [BUILDDIR]   (default _build/release; about 10 s)
# Prints one row per configuration: name, published ms, spsim ms, error %.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
[ -x "$bin" ] || { echo "layer-profile.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" platform dgx --nodes 1 --gpu a100 >"$tmp/a100.xml"
m="$here/bench/validation/models/megatron-gpt-22b.json"
for L in 24 48; do sed "s/\"layers\": 48/\"layers\": $L/" "$m" >"$tmp/g$L.json"; done
printf '%-24s %10s %10s %8s\n' configuration "Table 4 ms" "spsim ms" "err %"
# name, layout, Table 4's combined forward + backward time per layer (ms)
while read -r name layout ms; do
  for L in 24 48; do
    "$bin" "$tmp/a100.xml" --model "$tmp/g$L.json" --seq 2048 --global-batch 4 --gpus 8 --gpu-mem 65536 \
      --attention unfused --layout "$layout,pp=1,dp=1,zero=0,mb=4" --json "$tmp/r$L.json" >/dev/null 2>&1 ||
      { echo "layer-profile.sh: spsim failed on $layout" >&2; exit 1; }
  done
  awk -v name="$name" -v ms="$ms" -v r24="$tmp/r24.json" -v r48="$tmp/r48.json" '
    function val(f, k,   l, i) { while ((getline l < f) > 0) if ((i = index(l, "\"" k "\":")) > 0) {
        l = substr(l, i + length(k) + 3); sub(/^ */, "", l); sub(/[,}].*/, "", l); close(f); return l + 0 } close(f); return -1 }
    BEGIN { a = val(r24, "step_s") - val(r24, "optimizer_s")
            b = val(r48, "step_s") - val(r48, "optimizer_s")
            t = (b - a) / 24 * 1000; printf "%-24s %10.1f %10.2f %+8.1f\n", name, ms, t, (t - ms) / ms * 100 }' \
    </dev/null
done <<'T'
none tp=8,tpsp=0,ckpt=none 19.6
sequence-parallel tp=8,tpsp=1,ckpt=none 19.0
full-recompute tp=8,tpsp=0,ckpt=full 27.2
selective tp=8,tpsp=0,ckpt=selective 20.9
selective+sequence-par. tp=8,tpsp=1,ckpt=selective 20.3
T
