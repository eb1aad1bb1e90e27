#!/bin/sh
# What-if sanity against published training runs (docs/whatif.md, "Sanity against
# published runs"): GPT-3 175B on 1,024 A100 (Narayanan et al. 2021) and Llama 3 405B
# on 16,384 H100 (Llama 3 paper), with the layouts those runs used, SimGrid flow pricing.
# Prints each run's table row and its MFU / HFU / TFLOP/s per GPU from the JSON.
# Usage: bench/published.sh [BUILDDIR]   (default _build/release; about 3 minutes)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
[ -x "$bin" ] || { echo "published.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" platform dgx --nodes 128 --gpu a100 > "$tmp/a100-1024.xml"
"$bin" platform dgx --nodes 2048 > "$tmp/dgx16k.xml"
# Meta's 126 layers plus embedding and head balanced over 16 x 4 chunks: 128 layer slots
sed 's/"layers": *126/"layers": 128/' "$here/models/llama3-405b.json" > "$tmp/l405-128.json"

row() { # LABEL PLATFORM ARGS...
  label=$1; plat=$2; shift 2
  rm -f "$tmp/r.json"
  "$bin" "$plat" "$@" --json "$tmp/r.json" > "$tmp/out" 2>&1 || true # layouts over memory exit 1, no JSON
  printf '%s: %s\n' "$label" "$(grep '^  1 ' "$tmp/out" | tr -s ' ')"
  if [ -s "$tmp/r.json" ]; then
    grep -o '"mfu": [0-9.e+-]*\|"hfu": [0-9.e+-]*\|"tflops_per_gpu": [0-9.e+-]*' "$tmp/r.json" | tr '\n' ' '
    echo
  fi
}
G="--model gpt3-175b --seq 2048 --global-batch 1536"
row "GPT-3 175B, plain 1F1B (published: 138 TFLOP/s incl. recompute, 44 % HFU)" "$tmp/a100-1024.xml" $G --layout tp=8,pp=16,dp=8,ckpt=full
row "GPT-3 175B, vpp 2" "$tmp/a100-1024.xml" $G --layout tp=8,pp=16,vpp=2,dp=8,ckpt=full
row "GPT-3 175B, --eff-matmul 0.58" "$tmp/a100-1024.xml" $G --layout tp=8,pp=16,dp=8,ckpt=full --eff-matmul 0.58
L="--model $tmp/l405-128.json --seq 8192 --global-batch 16M"
for v in 1 2 4; do
  row "Llama 3 405B, vpp $v (published: 400 TFLOP/s, 38-43 % MFU)" "$tmp/dgx16k.xml" $L \
    --layout tp=8,pp=16,vpp=$v,dp=128,zero=1,ckpt=selective
done
