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
# generated platforms (gen NAME ARGS...: $T/NAME.xml from `spsim platform dgx ARGS`), listed
# with their commands under the table
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
gens=""
gen() {
  name=$1; shift
  "$spsim" platform dgx "$@" -o "$T/$name.xml" || { echo "calibrate: spsim platform dgx $* failed" >&2; exit 2; }
  gens="$gens
| $name.xml | \`spsim platform dgx $*\` |"
}

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
  cmd=$(echo "spsim bench $*" | sed -e "s|$here/||g" -e "s|$T/||g")
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

# Azure AI-benchmarking-guide (github.com/Azure/AI-benchmarking-guide, Azure_Results/
# ND_H100_v5_results.md, ND_H200_v5_results.md, ND_A100_v4_results.md, ND_GB200_v6_results.md,
# "NCCL Bandwidth"): all_reduce_perf on the 8 GPUs of one VM (GB200: the 4 of one host), in-place
# busbw, NCCL's default algorithm (the H100/H200/A100 tables say NVLS, GB200 ring). Small sizes
# as times: busbw / (2(n-1)/n) = algbw, time = bytes / algbw.
gen b200x4 --nodes 1 --gpu b200 --gpus-per-node 4
row "8xH100 all-reduce auto busbw, 8 GiB [Azure ND H100 v5]" 478.87 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 8G
row "8xH100 all-reduce auto busbw, 64 MiB (67M row) [Azure ND H100 v5]" 361.78 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 64M
# the same tables' rows between 64 MiB and 1 GiB: NVLS's rise to its asymptote (its fill
# and drain, sp_tune_nvls_fill_s), added with it on 2026-12-07
row "8xH100 all-reduce auto busbw, 128 MiB (134M row) [Azure ND H100 v5]" 400.61 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 128M
row "8xH100 all-reduce auto busbw, 256 MiB (268M row) [Azure ND H100 v5]" 423.38 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 256M
row "8xH100 all-reduce auto busbw, 512 MiB (536M row) [Azure ND H100 v5]" 438.46 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 512M
row "8xH200 all-reduce auto busbw, 64 MiB (67M row) [Azure ND H200 v5]" 368.11 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 64M
row "8xH200 all-reduce auto busbw, 256 MiB (268M row) [Azure ND H200 v5]" 432.24 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 256M
row "8xH100 all-reduce auto time, 8 KiB (busbw 0.53: 27.1 us) [Azure ND H100 v5]" 27.05 time_us 2 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 8K
row "8xH100 all-reduce auto time, 32 KiB (busbw 1.71: 33.5 us) [Azure ND H100 v5]" 33.54 time_us 2 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 32K
row "8xH200 all-reduce auto busbw, 8 GiB [Azure ND H200 v5]" 479.98 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 8G
row "8xH200 all-reduce auto time, 8 KiB (busbw 0.47: 30.5 us) [Azure ND H200 v5]" 30.50 time_us 2 "$P/dgx.xml" --coll all-reduce --ranks 8 --sizes 8K
row "8xA100 all-reduce auto busbw, 64 MiB (67M row) [Azure ND A100 v4]" 166.63 busbw 0.10 "$P/a100.xml" --coll all-reduce --ranks 8 --sizes 64M
row "8xA100 all-reduce auto time, 8 KiB (busbw 0.33: 43.4 us) [Azure ND A100 v4]" 43.44 time_us 2 "$P/a100.xml" --coll all-reduce --ranks 8 --sizes 8K
row "4xB200 (GB200) all-reduce ring busbw, 8 GiB [Azure ND GB200 v6]" 679.61 busbw 0.10 "$T/b200x4.xml" --coll all-reduce --ranks 4 --algo ring --sizes 8G
row "4xB200 (GB200) all-reduce ring time, 8 KiB (busbw 0.76: 16.2 us) [Azure ND GB200 v6]" 16.17 time_us 2 "$T/b200x4.xml" --coll all-reduce --ranks 4 --algo ring --sizes 8K
# coreweave/nccl-tests pull request #43 ("Add a GB200 NVL72 example", February 2025):
# all_reduce_perf -b 512M -e 8G on a full GB200 NVL72 rack (72 GPUs in one NVLink domain),
# out-of-place busbw (834.57 at 8 GiB is above any ring on NVLink 5: NVLS). The 4 and 8 GiB
# rows are the calibration points of Blackwell's NVLS rate (SP_NVLS_EFFICIENCY_BLACKWELL,
# 435 / 900, with the pipeline's fill and drain); the 512 MiB to 2 GiB rows check the size
# dependence.
gen nvl72 --nodes 18 --gpu gb200
row "72xGB200 NVL72 all-reduce auto (NVLS) busbw, 8 GiB, calibration point [coreweave nccl-tests #43]" 834.57 busbw 0.10 "$T/nvl72.xml" --coll all-reduce --ranks 72 --sizes 8G
row "72xGB200 NVL72 all-reduce auto (NVLS) busbw, 1 GiB [coreweave nccl-tests #43]" 681.17 busbw 0.10 "$T/nvl72.xml" --coll all-reduce --ranks 72 --sizes 1G
row "72xGB200 NVL72 all-reduce auto (NVLS) busbw, 512 MiB [coreweave nccl-tests #43]" 586.06 busbw 0.10 "$T/nvl72.xml" --coll all-reduce --ranks 72 --sizes 512M
row "72xGB200 NVL72 all-reduce auto (NVLS) busbw, 2 GiB [coreweave nccl-tests #43]" 757.78 busbw 0.10 "$T/nvl72.xml" --coll all-reduce --ranks 72 --sizes 2G
# coreweave/nccl-tests pull request #48: 20 GB200 NVL72 racks (1,440 GPUs), all_reduce_perf up
# to 4 GiB, out-of-place busbw 346.38 GB/s there (still rising); NVLS-tree by NCCL's model
gen nvl72x20 --nodes 360 --gpu gb200
row "20 x 72 GB200 NVL72 all-reduce auto busbw, 4 GiB [coreweave nccl-tests #48]" 346.38 busbw 0.10 "$T/nvl72x20.xml" --coll all-reduce --ranks 1440 --sizes 4G
# coreweave/nccl-tests pull request #92 ("Add B200, B300, and GB300-IB NCCL test examples",
# May 2026), its test plan: 2 nodes of 8 GPUs, all_reduce_perf, "690.07 GB/s busbw @ 8G
# allreduce" on B200 and "440.58 GB/s busbw @ 8G allreduce" on H100 (one ConnectX-7 NDR per GPU)
gen b200x2 --nodes 2 --gpu b200
row "2x8 B200 all-reduce auto busbw, 8 GiB [coreweave nccl-tests #92]" 690.07 busbw 0.10 "$T/b200x2.xml" --coll all-reduce --ranks 16 --sizes 8G
row "2x8 H100 all-reduce auto busbw, 8 GiB [coreweave nccl-tests #92]" 440.58 busbw 0.10 "$P/dgx.xml" --coll all-reduce --ranks 16 --sizes 8G
# NVIDIA/nccl-tests issue #326: 8 x H100, all_gather_perf -b 128M -e 16384M: busbw "saturated at
# ~360 GB/s"; NCCL's maintainer: "360 GB/s is exactly what we'd expect on H100"
row "8xH100 all-gather auto busbw, 16 GiB [nccl-tests #326]" 360 busbw 0.10 "$P/dgx.xml" --coll all-gather --ranks 8 --sizes 16G
# AWS p5.48xlarge (8 x H100, 32 x 100 Gb/s EFA per node = 400 Gb/s per GPU), SageMaker
# HyperPod, nccl-tests out-of-place busbw: github.com/crazyguitar/aws-gpu-communication-benchmark,
# data/nccl_all_reduce.csv and data/nccl_alltoall.csv. The runs load aws-ofi-nccl's tuner
# plugin (NCCL_TUNER_PLUGIN, v1.16.3: k8s/nccl_all_reduce_perf.yaml, Dockerfile), so the
# platforms name it (--nccl-tuner aws-p5); it leaves 2 nodes and point-to-point to NCCL
for n in 2 4 8 16 32; do gen "p5x$n" --nodes "$n" --nccl-tuner aws-p5; done
gen p5x2sharp --nodes 2 --sharp
gen p5x32sharp --nodes 32 --sharp
row "2x8 H100 (AWS p5) all-reduce auto busbw, 8 GiB [aws-gpu-communication-benchmark]" 477.71 busbw 0.10 "$T/p5x2.xml" --coll all-reduce --ranks 16 --sizes 8G
row "4x8 H100 (AWS p5) all-reduce auto busbw, 8 GiB [aws-gpu-communication-benchmark]" 356.99 busbw 0.10 "$T/p5x4.xml" --coll all-reduce --ranks 32 --sizes 8G
row "8x8 H100 (AWS p5) all-reduce auto busbw, 8 GiB [aws-gpu-communication-benchmark]" 355.36 busbw 0.10 "$T/p5x8.xml" --coll all-reduce --ranks 64 --sizes 8G
row "16x8 H100 (AWS p5) all-reduce auto busbw, 8 GiB [aws-gpu-communication-benchmark]" 356.27 busbw 0.10 "$T/p5x16.xml" --coll all-reduce --ranks 128 --sizes 8G
row "32x8 H100 (AWS p5) all-reduce auto busbw, 8 GiB [aws-gpu-communication-benchmark]" 321.10 busbw 0.10 "$T/p5x32.xml" --coll all-reduce --ranks 256 --sizes 8G
row "4x8 H100 (AWS p5) all-reduce auto busbw, 64 MiB [aws-gpu-communication-benchmark]" 152.41 busbw 0.10 "$T/p5x4.xml" --coll all-reduce --ranks 32 --sizes 64M
row "2x8 H100 (AWS p5) all-to-all busbw, 2 GiB [aws-gpu-communication-benchmark]" 79.25 busbw 0.10 "$T/p5x2.xml" --coll all-to-all --ranks 16 --sizes 2G
row "8x8 H100 (AWS p5) all-to-all busbw, 2 GiB [aws-gpu-communication-benchmark]" 49.63 busbw 0.10 "$T/p5x8.xml" --coll all-to-all --ranks 64 --sizes 2G
row "32x8 H100 (AWS p5) all-to-all busbw, 2 GiB [aws-gpu-communication-benchmark]" 40.78 busbw 0.10 "$T/p5x32.xml" --coll all-to-all --ranks 256 --sizes 2G
echo
echo "Generated platforms:"
echo
echo "| platform | command |"
echo "|---|---|$gens"
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
  echo "| $desc | $v $( [ "$kind" = time_us ] && echo us || echo GB/s ) | \`$(echo "spsim bench $*" | sed -e "s|$here/||g" -e "s|$T/||g")\` |"
}
info "2 nodes (16 GPUs) all-reduce ring busbw, 1 GiB, 8 channels (rule: min(367.5, 8 x 47) = 367.5)" busbw "$P/dgx.xml" --coll all-reduce --ranks 16 --algo ring --sizes 1G
info "16 nodes (128 GPUs) all-reduce ring busbw, 1 GiB, 8 channels (rule: 367.5)" busbw "$P/dgx.xml" --coll all-reduce --ranks 128 --algo ring --sizes 1G
info "2 nodes (16 GPUs) all-reduce ring busbw, 1 GiB, one ring (--channels 1)" busbw "$P/dgx.xml" --coll all-reduce --ranks 16 --algo ring --sizes 1G --channels 1
info "2 nodes (16 GPUs) all-to-all direct busbw, 1 GiB" busbw "$P/dgx.xml" --coll all-to-all --ranks 16 --sizes 1G
info "8xH100 all-to-all direct busbw, 1 GiB" busbw "$P/dgx.xml" --coll all-to-all --ranks 8 --sizes 1G
# NCCL's double binary tree forced, against the AWS p5 figures above (whose algorithm,
# NCCL's default, is not published): 477.71, 356.99, 321.10 GB/s at 8 GiB
info "2x8 H100 all-reduce tree busbw, 8 GiB (AWS p5: 477.71)" busbw "$T/p5x2.xml" --coll all-reduce --ranks 16 --algo tree --proto simple --sizes 8G
info "4x8 H100 all-reduce tree busbw, 8 GiB (AWS p5: 356.99)" busbw "$T/p5x4.xml" --coll all-reduce --ranks 32 --algo tree --proto simple --sizes 8G
info "32x8 H100 all-reduce tree busbw, 8 GiB (AWS p5: 321.10)" busbw "$T/p5x32.xml" --coll all-reduce --ranks 256 --algo tree --proto simple --sizes 8G
# NVLS-tree (AUTO's choice at 8 GiB on these H100 platforms) and CollNet on the same
# platforms with the switches reducing (--sharp; AWS p5's EFA does not reduce, so no
# published figure of them here)
info "2x8 H100 all-reduce nvls-tree busbw, 8 GiB (AWS p5: 477.71)" busbw "$T/p5x2.xml" --coll all-reduce --ranks 16 --algo nvls-tree --sizes 8G
info "32x8 H100 all-reduce nvls-tree busbw, 8 GiB (AWS p5: 321.10)" busbw "$T/p5x32.xml" --coll all-reduce --ranks 256 --algo nvls-tree --sizes 8G
info "2x8 H100 all-reduce collnet-direct busbw, 8 GiB, --sharp" busbw "$T/p5x2sharp.xml" --coll all-reduce --ranks 16 --algo collnet-direct --sizes 8G
info "2x8 H100 all-reduce collnet-chain busbw, 8 GiB, --sharp" busbw "$T/p5x2sharp.xml" --coll all-reduce --ranks 16 --algo collnet-chain --sizes 8G
info "32x8 H100 all-reduce collnet-direct busbw, 8 GiB, --sharp" busbw "$T/p5x32sharp.xml" --coll all-reduce --ranks 256 --algo collnet-direct --sizes 8G
info "32x8 H100 all-reduce auto time, 1 MiB, --sharp (NCCL's model: collnet-direct)" time_us "$T/p5x32sharp.xml" --coll all-reduce --ranks 256 --sizes 1M
info "32x8 H100 all-reduce auto time, 1 MiB, no sharp" time_us "$T/p5x32.xml" --coll all-reduce --ranks 256 --sizes 1M
echo
[ "$fails" -eq 0 ] && echo "All calibration targets met." || echo "$fails figure(s) outside their target."
[ "$fails" -eq 0 ]
