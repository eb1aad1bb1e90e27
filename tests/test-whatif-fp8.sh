#!/bin/sh
# What-if --fp8: the precision reported, FP8 peak and weight cache against hand-derived
# figures, and one-line refusals of an unknown recipe and of a GPU without FP8.
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
whatif_platform "$tmp/p.xml"
export SPSIM_MODELS_DIR="$src/models"
echo "1..8"
A="--fidelity analytic --model llama3-8b --layout tp=8,dp=4"
"$bin" "$tmp/p.xml" $A --json "$tmp/bf16.json" >/dev/null 2>&1
"$bin" "$tmp/p.xml" $A --fp8 delayed --json "$tmp/fp8.json" >"$tmp/out" 2>&1
if [ "$(jval precision "$tmp/bf16.json")" = bf16 ] && [ "$(jval fp8_recipe "$tmp/bf16.json")" = none ]; then ok "JSON precision bf16 without --fp8"
else nok "JSON precision without --fp8: $(jval precision "$tmp/bf16.json")"; fi
if [ "$(jval precision "$tmp/fp8.json")" = fp8 ] && [ "$(jval fp8_recipe "$tmp/fp8.json")" = delayed ]; then ok "JSON precision fp8, recipe delayed"
else nok "JSON precision with --fp8: $(jval precision "$tmp/fp8.json")"; fi
# H100 dense FP8 1,979 TFLOP/s = 2 x 989.4 (datasheet), at 0.668 over K + 448 (fitted on
# GEMMs of training layers on an H100 SXM, bench/gpu/h100-fp8-layer-gemms.txt)
if [ "$(jval fp8_peak_flops "$tmp/fp8.json")" = 1.9788e+15 ] && [ "$(jval fp8_tile_k0 "$tmp/fp8.json")" = 448 ] \
   && grep -q "FP8 (delayed recipe): layers' linear GEMMs at 1978.8 TFLOP/s x 0.668 over K + 448" "$tmp/out"
then ok "FP8 peak 2 x 989.4 TFLOP/s at 0.668 over K + 448"; else nok "FP8 peak: $(jval fp8_peak_flops "$tmp/fp8.json")"; fi
# FP8 weight cache: 1 byte per linear weight of the rank, llama3-8b over tp 8: 32 layers x
# (4096 x (4096 + 2 x 1024) + 4096^2 + 3 x 4096 x 14336) / 8 = 872415232 bytes
w0=$(jval weights "$tmp/bf16.json"); w1=$(jval weights "$tmp/fp8.json")
if [ -n "$w0" ] && [ -n "$w1" ] && awk -v a="$w0" -v b="$w1" 'BEGIN { exit !(b - a == 872415232) }'; then ok "FP8 weight cache +872415232 bytes"
else nok "FP8 weight cache: $w0 -> $w1"; fi
# FP8 GEMMs shorten the step, but less than halve it (attention, LM head, casts and collectives stay)
t0=$(jval step_s "$tmp/bf16.json"); t1=$(jval step_s "$tmp/fp8.json")
if [ -n "$t0" ] && [ -n "$t1" ] && awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b < a && b > a / 2) }'; then ok "FP8 step shorter ($t0 -> $t1 s)"
else nok "FP8 step: $t0 -> $t1"; fi
expect_fail "unknown recipe in one line" "--fp8: unknown FP8 recipe 'mxfp4' (delayed, tensorwise or blockwise)" "$tmp/p.xml" $A --fp8 mxfp4
"$bin" platform dgx --nodes 1 --gpu a100 >"$tmp/a100.xml" 2>/dev/null
expect_fail "A100 refused in one line" "--fp8 blockwise on .*no FP8 tensor cores" "$tmp/a100.xml" --gpus 8 --model llama3-8b --layout tp=8 --fp8 blockwise
# without --fp8 the text output does not mention FP8
"$bin" "$tmp/p.xml" $A >"$tmp/out0" 2>&1
if ! grep -q FP8 "$tmp/out0" && grep -q '^spsim what-if' "$tmp/out0"; then ok "no FP8 line without --fp8"; else nok "FP8 line without --fp8"; fi
