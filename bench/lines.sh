#!/bin/sh
# Whether large collectives lie on a line, as the what-if's pricer assumes above 4,096
# simulated ranks (src/sim/whatif_sim.c, by_line; docs/design-notes.md, "Large groups on
# a line"). Simulates, on one platform (spsim platform dgx --nodes NODES, default 16384:
# 131,072 GPUs), with spsim bench, LL128, 32 MiB:
#   - a tree all-reduce over one GPU per node (--per-node 1) of 256 to 16,384 members:
#     its time against its depth, one more level per doubling;
#   - a ring all-gather over consecutive GPUs (8 per node, one ring per GPU of a node) of
#     1,024 to 32,768 members: its time per member added.
# Prints each time and its increment per level (tree) or per member (ring).
# Usage: bench/lines.sh [BUILDDIR [NODES]]   (default _build/release, 16384; about 3
# minutes on 2 cores, most of it loading the platform once per run)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
nodes=${2:-16384}
[ -x "$bin" ] || { echo "lines.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" platform dgx --nodes "$nodes" -o "$tmp/p.xml"
gpus=$((nodes * 8))
# us ARGS...: the out-of-place time of one size
us() { "$bin" bench "$tmp/p.xml" --sizes 32M --proto ll128 "$@" | awk '!/^#/ && NF { print $9 }'; }
echo "tree all-reduce, LL128, 32 MiB, one GPU per node ($gpus GPUs platform)"
echo "| members | time us | per level us |"
echo "|---|---|---|"
prev=
for n in 256 512 1024 2048 4096 8192 16384; do
  [ "$n" -le "$nodes" ] || break
  t=$(us --coll all-reduce --algo tree --ranks "$n" --per-node 1)
  d=$([ -n "$prev" ] && awk -v a="$t" -v b="$prev" 'BEGIN { printf "%.2f", a - b }' || echo -)
  echo "| $n | $t | $d |"
  prev=$t
done
echo
echo "ring all-gather, LL128, 32 MiB, 8 members per node"
echo "| members | time us | per member us |"
echo "|---|---|---|"
prev= pn=
for n in 1024 2048 4096 8192 16384 32768; do
  [ "$n" -le "$gpus" ] || break
  t=$(us --coll all-gather --algo ring --ranks "$n")
  d=$([ -n "$prev" ] && awk -v a="$t" -v b="$prev" -v n="$n" -v m="$pn" 'BEGIN { printf "%.5f", (a - b) / (n - m) }' || echo -)
  echo "| $n | $t | $d |"
  prev=$t pn=$n
done
