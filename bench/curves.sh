#!/bin/sh
# spsim's all-reduce against whole published all_reduce_perf curves: busbw per size,
# published and predicted (with the algorithm and protocol spsim's auto picks), the error
# of each row and the mean absolute error of each curve.
# Usage: bench/curves.sh [BUILDDIR] [nvls|ring|aws|all] (default $SPSIM_BUILDDIR or ., all).
# A benchmark: exits 0 whatever the errors (2 without spsim).
#
# Curves (busbw in GB/s, as published):
#   nvls: Azure AI-benchmarking-guide, Azure_Results/ND_H100_v5_results.md and
#     ND_H200_v5_results.md, "NCCL Bandwidth": all_reduce_perf on the 8 GPUs of one VM,
#     in-place busbw, NCCL's NVLS (rows "2M" ... "8G" are 2^21 ... 2^33 bytes);
#     coreweave/nccl-tests pull request #43 ("Add a GB200 NVL72 example"): all_reduce_perf
#     -b 512M -e 8G on a full GB200 NVL72 rack, out-of-place busbw.
#   ring: Azure AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md, "NCCL
#     Bandwidth": all_reduce_perf on the 8 A100s of one VM (no NVLink SHARP on A100:
#     NCCL's ring), in-place busbw, rows "2M" ... "8G"; priced on platforms/a100.xml.
#   aws: github.com/crazyguitar/aws-gpu-communication-benchmark, data/nccl_all_reduce.csv:
#     all_reduce_perf on 2 to 32 p5.48xlarge (8 x H100, 32 x 100 Gb/s EFA), out-of-place
#     busbw, 32 MiB ... 8 GiB; the runs set NCCL_TUNER_PLUGIN to aws-ofi-nccl's tuner
#     (v1.16.3, k8s/nccl_all_reduce_perf.yaml and Dockerfile), so each curve is priced on
#     `spsim platform dgx --nodes N --nccl-tuner aws-p5` and, for comparison, without it.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${SPSIM_BUILDDIR:-.}}
which=${2:-all}
spsim="$build/spsim"
[ -x "$spsim" ] || { echo "curves: no spsim binary in $build" >&2; exit 2; }
case $which in nvls | ring | aws | all) ;; *) echo "curves: nvls, ring, aws or all, not '$which'" >&2; exit 2 ;; esac
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# curve NAME PLATFORM RANKS FIRST_BYTES "BUSBW ..." (sizes FIRST_BYTES x 2^k)
curve() {
  name=$1 plat=$2 ranks=$3 first=$4 pub=$5
  n=$(echo "$pub" | wc -w)
  last=$(awk -v f="$first" -v n="$n" 'BEGIN { printf "%.0f", f * 2 ^ (n - 1) }')
  if ! "$spsim" bench "$plat" --coll all-reduce --ranks "$ranks" -b "$first" -e "$last" -f 2 --json \
       >"$T/out.json" 2>"$T/err"; then
    echo "$name: $(cat "$T/err")"
    return
  fi
  tr '{' '\n' <"$T/out.json" | awk '/"bytes":/ { b = $0; a = $0; p = $0; sub(/.*"bytes":/, "", b); sub(/,.*/, "", b);
      sub(/.*"algo":"/, "", a); sub(/".*/, "", a); sub(/.*"proto":"/, "", p); sub(/".*/, "", p);
      x = $0; sub(/.*"busbw":/, "", x); sub(/[,}].*/, "", x); print b, a "/" p, x }' >"$T/rows"
  echo "$pub" | tr ' ' '\n' | paste -d ' ' "$T/rows" - | awk -v name="$name" '
    { e = ($3 - $4) / $4 * 100; s += (e < 0 ? -e : e); k++
      printf "%-22s %12s %-12s %9.2f %9.2f %+7.1f\n", name, $1, $2, $4, $3, e }
    END { printf "%-22s mean |error| over %d sizes: %.1f %%\n\n", name, k, s / k }'
}

printf 'spsim all-reduce against published curves (busbw, GB/s)\n'
printf '%-22s %12s %-12s %9s %9s %7s\n' curve bytes algo/proto published predicted 'err %'
if [ "$which" = nvls ] || [ "$which" = all ]; then
  "$spsim" platform dgx --nodes 18 --gpu gb200 -o "$T/nvl72.xml" || exit 2
  curve "8xH100 (Azure v5)" "$here/platforms/dgx.xml" 8 2097152 \
    "81.93 128.73 172.13 234.45 295.53 361.78 400.61 423.38 438.46 466.35 472.36 475.54 478.87"
  curve "8xH200 (Azure v5)" "$here/platforms/dgx.xml" 8 2097152 \
    "88.78 138.44 181.94 240.41 300.91 368.11 412.45 432.24 442.72 467.58 472.57 477.41 479.98"
  curve "72xGB200 (NVL72 #43)" "$T/nvl72.xml" 72 536870912 "586.06 681.17 757.78 839.16 834.57"
fi
if [ "$which" = ring ] || [ "$which" = all ]; then
  curve "8xA100 (Azure v4)" "$here/platforms/a100.xml" 8 2097152 \
    "53.54 71.43 89.99 109.22 132.77 166.63 174.18 213.87 221.58 228.10 230.22 230.48 231.58"
fi
if [ "$which" = aws ] || [ "$which" = all ]; then
  while read -r nodes pub; do
    "$spsim" platform dgx --nodes "$nodes" --nccl-tuner aws-p5 -o "$T/p5t.xml" || exit 2
    "$spsim" platform dgx --nodes "$nodes" -o "$T/p5.xml" || exit 2
    curve "${nodes}xp5 tuner aws-p5" "$T/p5t.xml" $((8 * nodes)) 33554432 "$pub"
    curve "${nodes}xp5 NCCL's model" "$T/p5.xml" $((8 * nodes)) 33554432 "$pub"
  done <<'EOF'
2 147.32 207.00 305.13 364.46 395.99 435.14 445.05 465.81 477.71
4 95.38 152.41 229.48 273.34 278.41 280.30 347.57 354.45 356.99
8 86.74 103.85 156.33 232.09 272.62 274.47 278.15 351.32 355.36
16 74.85 92.39 129.20 148.11 223.80 269.23 270.91 306.15 356.27
32 66.34 83.60 115.78 137.99 156.83 220.08 269.47 302.81 321.10
EOF
fi
exit 0
