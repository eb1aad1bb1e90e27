#!/bin/sh
# Rerun spsim's predictions for the published figures of docs/calibration.md and
# print the comparison as a markdown table (figure, published, predicted, error %,
# command). Usage: bench/calibrate.sh [BUILDDIR] (default: $SPSIM_BUILDDIR or .)
# Exit status 1 when a figure misses its target (busbw within 10%, latency 2x).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${SPSIM_BUILDDIR:-.}}
spsim="$build/spsim"
[ -x "$spsim" ] || { echo "calibrate: no spsim binary in $build" >&2; exit 2; }
P="$here/platforms"
fails=0

# field FILE NAME ROW: NAME of the ROW-th JSON row (1-based)
field() {
  tr '{' '\n' <"$1" | awk -v f="\"$2\":" -v r="$3" 'index($0, "\"bytes\"") { k++; if (k == r) { s = $0; i = index(s, f); s = substr(s, i + length(f)); sub(/[,}].*/, "", s); print s } }'
}
# row DESC PUBLISHED KIND(busbw|time_us) TOL(rel busbw | factor time) ARGS...
row() {
  desc=$1; pub=$2; kind=$3; tol=$4; shift 4
  out=$(mktemp)
  if ! "$spsim" bench "$@" --json >"$out" 2>"$out.err"; then
    echo "| $desc | $pub | ERROR: $(cat "$out.err") | | \`spsim bench $*\` |"
    fails=$((fails + 1)); rm -f "$out" "$out.err"; return
  fi
  val=$(field "$out" "$kind" 1)
  rm -f "$out" "$out.err"
  res=$(awk -v p="$pub" -v v="$val" -v k="$kind" -v t="$tol" 'BEGIN {
    e = (v - p) / p * 100
    if (k == "busbw") { okk = (e <= t * 100 && e >= -t * 100) ; printf "%.2f GB/s|%+.1f%%|%s", v, e, okk ? "ok" : "MISS" }
    else { r = v / p; okk = (r <= t && r >= 1 / t); printf "%.2f us|%+.1f%% (x%.2f)|%s", v, e, r, okk ? "ok" : "MISS" } }')
  pv=${res%%|*}; rest=${res#*|}; err=${rest%%|*}; verdict=${rest#*|}
  [ "$verdict" = ok ] || fails=$((fails + 1))
  unit="GB/s"; [ "$kind" = time_us ] && unit="us"
  cmd=$(echo "spsim bench $*" | sed "s|$here/||g")
  echo "| $desc | $pub $unit | $pv | $err $verdict | \`$cmd\` |"
}

echo "| figure | published | predicted | error | command |"
echo "|---|---|---|---|---|"
row "8xH100 all-reduce ring busbw, 1 GiB" 367.5 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --algo ring --sizes 1G
row "8xH100 reduce-scatter ring busbw, 1 GiB" 360 busbw 0.10 "$P/dgx.xml" --coll reduce-scatter --ranks 8 --algo ring --sizes 1G
row "8xH100 all-gather ring busbw, 1 GiB" 350 busbw 0.10 "$P/dgx.xml" --coll all-gather --ranks 8 --algo ring --sizes 1G
row "8xH100 all-reduce ring busbw, 1 MiB" 43.7 busbw 0.25 "$P/dgx.xml" --coll all-reduce --ranks 8 --algo ring --sizes 1M
row "8xH100 all-reduce ring time, 1 KiB" 26 time_us 2 "$P/dgx.xml" --coll all-reduce --ranks 8 --algo ring --sizes 1K
row "8xH100 all-reduce auto (ring LL) time, 1 KiB" 26 time_us 2 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 1K
row "8xA100 all-reduce ring busbw, 8 GiB" 232 busbw 0.10 "$P/a100.xml" --coll all-reduce --ranks 8 --algo ring --sizes 8G
row "8xA100 all-reduce ring busbw, 1 GiB" 232 busbw 0.10 "$P/a100.xml" --coll all-reduce --ranks 8 --algo ring --sizes 1G
row "H100 one NDR NIC, send-recv busbw, 1 GiB" 47 busbw 0.05 "$P/dgx.xml" --coll send-recv --ranks 9 --sizes 1G
# NVIDIA/nccl-tests issue #212 (NCCL's maintainer, 8 x H100): "On 8 GPUs, you should reach a
# peak busBw of ~480GB/s (algbw ~275GB/s)" with NVLink SHARP; "an effective NVLink bandwidth
# of 370GB/s, which you can observe as BusBw when running non-allreduce operations"
row "8xH100 all-reduce auto (NVLS) busbw, 1 GiB [nccl-tests #212]" 480 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 1G
row "8xH100 all-to-all busbw, 1 GiB (non-allreduce ~370) [nccl-tests #212]" 370 busbw 0.10 "$P/dgx.xml" --coll all-to-all --ranks 8 --sizes 1G
row "8xH100 broadcast busbw, 1 GiB (non-allreduce ~370) [nccl-tests #212]" 370 busbw 0.10 "$P/dgx.xml" --coll broadcast --ranks 8 --sizes 1G
row "8xH100 reduce busbw, 1 GiB (non-allreduce ~370) [nccl-tests #212]" 370 busbw 0.10 "$P/dgx.xml" --coll reduce --ranks 8 --sizes 1G
# NVIDIA/nccl-tests issue #272: 8 x H200 (NVLink4, as H100), NCCL 2.20.3, all_reduce_perf
# -b 64k -e 4G: "peak bandwidth of 475 GB/s" (NVLS)
row "8xH200 all-reduce auto (NVLS) busbw, 4 GiB [nccl-tests #272]" 475 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 4G
# NVIDIA/nccl-tests issue #309: one node of 8 H100 SXM, all_reduce_perf -b 8 -e 16G:
# "Once I disable NVLS, i got 368.76 GB/s" (ring, its largest sizes)
row "8xH100 all-reduce ring (NVLS off) busbw, 8 GiB [nccl-tests #309]" 368.76 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --algo ring --sizes 8G
echo
echo "Informational (no published figure of the same algorithm):"
echo
echo "| figure | predicted | command |"
echo "|---|---|---|"
info() {
  desc=$1; kind=$2; shift 2
  out=$(mktemp)
  "$spsim" bench "$@" --json >"$out" 2>/dev/null && v=$(field "$out" "$kind" 1 | awk '{ printf "%.2f", $1 }') || v="error"
  rm -f "$out"
  echo "| $desc | $v $( [ "$kind" = time_us ] && echo us || echo GB/s ) | \`$(echo "spsim bench $*" | sed "s|$here/||g")\` |"
}
info "2 nodes (16 GPUs) all-reduce ring busbw, 1 GiB, 8 channels (rule: min(367.5, 8 x 47) = 367.5)" busbw "$P/dgx.xml" --coll all-reduce --ranks 16 --algo ring --sizes 1G
info "16 nodes (128 GPUs) all-reduce ring busbw, 1 GiB, 8 channels (rule: 367.5)" busbw "$P/dgx.xml" --coll all-reduce --ranks 128 --algo ring --sizes 1G
info "2 nodes (16 GPUs) all-reduce ring busbw, 1 GiB, one ring (--channels 1)" busbw "$P/dgx.xml" --coll all-reduce --ranks 16 --algo ring --sizes 1G --channels 1
info "2 nodes (16 GPUs) all-to-all direct busbw, 1 GiB" busbw "$P/dgx.xml" --coll all-to-all --ranks 16 --sizes 1G
info "8xH100 all-to-all direct busbw, 1 GiB" busbw "$P/dgx.xml" --coll all-to-all --ranks 8 --sizes 1G
echo
[ "$fails" -eq 0 ] && echo "All calibration targets met." || echo "$fails figure(s) outside their target."
[ "$fails" -eq 0 ]
