#!/bin/sh
# Per-layer times published for a stated layer and GPU, against spsim's: the
# difference between the predicted steps of the model with 2L and with L layers, over
# L, less the optimizer step's share (the published times are a layer's forward and
# backward). The GEMM efficiencies of the kernel model are calibrated on these rows
# (src/core/step/kernel_model.c); bench/validate.sh checks the training runs against
# them.
# - A100: Korthikanti et al. 2022 (arXiv:2205.05198), Table 4, "time taken per
#   transformer layer" of their 22B GPT: 8 x A100 80 GB on Selene, TP 8, micro-batch 4,
#   sequence 2048, Megatron-LM's unfused attention; 24 and 48 layers here.
# - H100: NVIDIA Transformer Engine's getting-started benchmark ("on an NVIDIA H100
#   GPU"; NVIDIA/TransformerEngine docs/getting_started/getting_started_pytorch.out,
#   commit a976740): one GPT layer, hidden 4096, FFN 16384 (GeLU), 32 heads, sequence
#   2048, batch 8, te.Linear and te.LayerNorm with TE's causal attention, BF16 ("TE
#   Unfused + TE Attention") and in FP8 with delayed scaling; one GPU, 2 and 4 layers.
# - H100, measured (not published): bench/gpu/torch-layer.py --warm 20 on one NVIDIA
#   H100 80GB HBM3 (SXM, 700 W), bench/gpu/h100-layer-warm.csv: the same GPT layer in
#   plain PyTorch with PyTorch's FlashAttention-2 backend, and a Llama 3 8B block as
#   torchtitan writes it without torch.compile (eager element-wise ops, FlashAttention-2),
#   sequence 8192, batch 1 and 2; timed after 20 s of running, at the clocks a training
#   run holds.
# Usage: bench/layer-profile.sh [BUILDDIR]   (default _build/release; a few seconds)
# Prints one row per configuration: name, published ms, spsim ms, error %.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
[ -x "$bin" ] || { echo "layer-profile.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" platform dgx --nodes 1 --gpu a100 >"$tmp/a100.xml"
"$bin" platform dgx --nodes 1 >"$tmp/h100.xml"
m="$here/bench/validation/models/megatron-gpt-22b.json"
for L in 24 48; do sed "s/\"layers\": 48/\"layers\": $L/" "$m" >"$tmp/a$L.json"; done
for L in 2 4; do
  printf '{"name": "te-gpt", "layers": %d, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 16384, "vocab": 1024, "mlp": "gelu"}\n' \
    "$L" >"$tmp/h$L.json"
  sed "s/\"layers\": 32/\"layers\": $L/" "$here/bench/validation/models/llama3-8b-torchtitan.json" >"$tmp/l$L.json"
done
printf '%-28s %10s %10s %8s\n' configuration "published" "spsim ms" "err %"
# name, GPU (platform), model (a: the 22B GPT, h: TE's GPT layer, l: Llama 3 8B as
# torchtitan runs it), layers L, GPUs, batch, sequence, layout, options, published ms
while read -r name gpu model L gpus batch seq layout opts ms; do
  [ "$opts" = - ] && opts=""
  for k in 1 2; do
    # shellcheck disable=SC2086
    "$bin" "$tmp/$gpu.xml" --model "$tmp/$model$((k * L)).json" --seq "$seq" --global-batch "$batch" \
      --gpus "$gpus" --gpu-mem 65536 --layout "$layout,pp=1,dp=1,zero=0,mb=$batch" $opts --json "$tmp/r$k.json" \
      >/dev/null 2>&1 || { echo "layer-profile.sh: spsim failed on $name" >&2; exit 1; }
  done
  awk -v name="$name" -v ms="$ms" -v L="$L" -v r1="$tmp/r1.json" -v r2="$tmp/r2.json" '
    function val(f, k,   l, i) { while ((getline l < f) > 0) if ((i = index(l, "\"" k "\":")) > 0) {
        l = substr(l, i + length(k) + 3); sub(/^ */, "", l); sub(/[,}].*/, "", l); close(f); return l + 0 } close(f); return -1 }
    BEGIN { a = val(r1, "step_s") - val(r1, "optimizer_s")
            b = val(r2, "step_s") - val(r2, "optimizer_s")
            t = (b - a) / L * 1000; printf "%-28s %10.3f %10.2f %+8.1f\n", name, ms, t, (t - ms) / ms * 100 }' </dev/null
done <<'T'
a100-22b-none a100 a 24 8 4 2048 tp=8,tpsp=0,ckpt=none --attention=unfused 19.6
a100-22b-sequence-parallel a100 a 24 8 4 2048 tp=8,tpsp=1,ckpt=none --attention=unfused 19.0
a100-22b-full-recompute a100 a 24 8 4 2048 tp=8,tpsp=0,ckpt=full --attention=unfused 27.2
a100-22b-selective a100 a 24 8 4 2048 tp=8,tpsp=0,ckpt=selective --attention=unfused 20.9
a100-22b-selective+sp a100 a 24 8 4 2048 tp=8,tpsp=1,ckpt=selective --attention=unfused 20.3
h100-te-gpt-bf16 h100 h 2 1 8 2048 tp=1,ckpt=none - 35.709
h100-te-gpt-fp8 h100 h 2 1 8 2048 tp=1,ckpt=none --fp8=delayed 23.406
h100-torch-gpt-flash2 h100 h 2 1 8 2048 tp=1,ckpt=none --attention=flash2 35.028
h100-torch-llama3-8b-b1 h100 l 2 1 1 8192 tp=1,ckpt=none --attention=flash2 29.461
h100-torch-llama3-8b-b2 h100 l 2 1 2 8192 tp=1,ckpt=none --attention=flash2 54.815
T
