#!/bin/sh
# The kernel model against per-layer times: bench/layer-profile.sh prices one layer of
# Korthikanti et al. 2022's 22B GPT on 8 A100s (Table 4: 19.6, 19.0, 27.2, 20.9 and 20.3 ms
# for no recomputation, sequence parallelism, full recomputation, selective recomputation,
# and both) and the GPT layer of Transformer Engine's getting-started benchmark on one H100
# (35.709 ms in BF16, 23.406 ms in FP8), each within 3 %, but for the FP8 layer within 7 %:
# spsim prices FP8 GEMMs at the rate measured in training layers held at a training run's
# clocks (0.62 of peak, bench/gpu/h100-fp8-layer-gemms.txt), and a short one-GPU benchmark
# runs its GEMMs faster (BF16: 780-805 TFLOP/s at once against 690-700 sustained,
# bench/gpu/h100-gemm-probe.txt); and three layers measured on an
# H100 SXM in eager PyTorch (bench/gpu/h100-layer-warm.csv: the GPT layer with
# FlashAttention-2, 35.028 ms; a Llama 3 8B block as torchtitan runs it, 29.461 and
# 54.815 ms at batch 1 and 2, sequence 8192), each within 8 % (the same layers measured on
# a cool GPU, bench/gpu/h100-layer.csv, differ from these by up to 9 %).
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
echo "1..10"
if ! sh "$src/bench/layer-profile.sh" "$build" >"$tmp/out" 2>"$tmp/err"; then
  for i in 1 2 3 4 5 6 7 8 9 10; do nok "bench/layer-profile.sh failed: $(head -c 300 "$tmp/err")"; done
  exit 0
fi
tail -n +2 "$tmp/out" | while read -r name pub got err; do
  n=$((n + 1))
  tol=3
  case $name in h100-torch-*) tol=8 ;; h100-te-gpt-fp8) tol=7 ;; esac
  if awk -v e="$err" -v t="$tol" 'BEGIN { exit !(e >= -t && e <= t) }'; then echo "ok $n - $name: $got ms against $pub ms ($err %)"
  else echo "not ok $n - $name: $got ms against $pub ms ($err %)"; fi
done
