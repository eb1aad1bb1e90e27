#!/bin/sh
# Peer comparison: SimGrid's own SMPI (MPI_Allreduce with the "lr" logical-ring
# algorithm, MPI_Alltoall with "basic_linear") against spsim's prediction of the same
# schedule (ring all-reduce; direct all-to-all: every peer's send and receive posted,
# then one wait) on the same platform file, with the same network model (CM02, set on
# the smpirun command line because smpirun forces its own SMPI model otherwise).
# Prints a markdown table of predicted times and wall times.
# Usage: bench/smpi.sh [BUILDDIR] [RANKS...]   (default ranks: 256 1024)
# Use a build without sanitizers for wall times (e.g. configure CFLAGS=-O2).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${SPSIM_BUILDDIR:-.}}
[ $# -gt 0 ] && shift
ranks=${*:-256 1024}
spsim="$build/spsim"
plat="$here/platforms/dgx.xml"
size=1073741824
[ -x "$spsim" ] || { echo "smpi.sh: no spsim in $build" >&2; exit 2; }
command -v smpicc >/dev/null && command -v smpirun >/dev/null || { echo "smpi.sh: smpicc/smpirun not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
smpicc -O2 "$here/bench/smpi_coll.c" -o "$tmp/smpi_coll" 2>"$tmp/cc.err" || { cat "$tmp/cc.err" >&2; exit 2; }
grep -o '<host id="[^"]*"' "$plat" | sed 's/<host id="//; s/"$//' >"$tmp/hosts"

now() { date +%s.%N; }
# smpi COLL ALGO N -> "time_s wall_s"
# spsim moves an all-to-all's messages between nodes at 0.876 of the NIC rate
# (A2A_NET_EFFICIENCY, src/core/lower/tuning.c); SMPI gets the same factor on every message
# (inside a node they are not the bottleneck: their NVLink ports carry no network traffic)
smpi() {
  bf=1.0
  [ "$1" = alltoall ] && bf=0.876
  t0=$(now)
  out=$(smpirun -np "$3" -platform "$plat" -hostfile "$tmp/hosts" \
        --cfg=network/model:CM02 --cfg=network/bandwidth-factor:$bf --cfg=smpi/"$1":"$2" --cfg=smpi/simulate-computation:no \
        --cfg=smpi/shared-malloc-blocksize:$size --log=root.thres:critical \
        "$tmp/smpi_coll" "$1" "$size" 2>/dev/null | sed -n 's/^time_s=//p')
  t1=$(now)
  echo "${out:-nan} $(echo "$t1 - $t0" | bc -l)"
}
# spsim COLL ALGO N FIDELITY -> "time_s wall_s" (Simple: SMPI's messages have no protocol)
sp() {
  t0=$(now)
  out=$("$spsim" bench "$plat" --coll "$1" --algo "$2" --proto simple --ranks "$3" --channels 1 --sizes $size --fidelity "$4" --json 2>/dev/null \
        | sed 's/"in_place".*//; s/.*"time_us"://; s/[,}].*//')
  t1=$(now)
  echo "$(echo "${out:-0} / 1000000" | bc -l) $(echo "$t1 - $t0" | bc -l)"
}

echo "| collective (1 GiB) | ranks | SMPI predicted (ms) | SMPI wall (s) | spsim predicted (ms) | diff | spsim wall flow / step (s) | speed-up flow / step |"
echo "|---|---|---|---|---|---|---|---|"
for n in $ranks; do
  for c in "allreduce lr all-reduce ring" "alltoall basic_linear all-to-all direct"; do
    set -- $c
    s=$(smpi "$1" "$2" "$n"); f=$(sp "$3" "$4" "$n" flow); st=$(sp "$3" "$4" "$n" step)
    echo "$s $f $st" | awk -v c="$1 ($2) vs $3 ($4)" -v n="$n" '{
      printf "| %s | %d | %.3f | %.2f | %.3f | %+.2f%% | %.2f / %.2f | %.0fx / %.0fx |\n",
        c, n, $1 * 1e3, $2, $3 * 1e3, ($3 - $1) / $1 * 100, $4, $6, $2 / $4, $2 / $6 }'
  done
done
