#!/bin/sh
# spsim's ring all-reduce on one node against a whole published all_reduce_perf curve:
# busbw per size, published and predicted, the error of each row and the mean absolute
# error of the curve. Usage: bench/ring-curve.sh [BUILDDIR] (default $SPSIM_BUILDDIR or
# .). A benchmark: exits 0 whatever the errors (2 without spsim).
#
# Curve (busbw in GB/s, as published): Azure AI-benchmarking-guide,
# Azure_Results/ND_A100_v4_results.md, "NCCL Bandwidth": all_reduce_perf on the 8 A100s
# of one VM (no NVLink SHARP on A100: NCCL's ring), in-place busbw; rows "2M" ... "8G"
# are 2^21 ... 2^33 bytes. Priced on platforms/a100.xml with NCCL's choice per size.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${SPSIM_BUILDDIR:-.}}
spsim="$build/spsim"
[ -x "$spsim" ] || { echo "ring-curve: no spsim binary in $build" >&2; exit 2; }
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
      printf "%-20s %12s %-12s %9.2f %9.2f %+7.1f\n", name, $1, $2, $4, $3, e }
    END { printf "%-20s mean |error| over %d sizes: %.1f %%\n\n", name, k, s / k }'
}

printf 'spsim ring all-reduce on one node against a published curve (busbw, GB/s)\n'
printf '%-20s %12s %-12s %9s %9s %7s\n' curve bytes algo/proto published predicted 'err %'
curve "8xA100 (Azure v4)" "$here/platforms/a100.xml" 8 2097152 \
  "53.54 71.43 89.99 109.22 132.77 166.63 174.18 213.87 221.58 228.10 230.22 230.48 231.58"
exit 0
