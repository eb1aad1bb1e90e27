#!/bin/sh
# NVLS-tree all-reduce, FLOW against STEP: bench/RESULTS.md's "A pipeline's blocks as one
# group" table. For each node count N (DGX H100 nodes, 8 GPUs each, `spsim platform dgx
# --nodes N`) and size S:
#   spsim bench P --coll all-reduce --ranks 8N --algo nvls-tree --proto simple --sizes S \
#     [--fidelity step]
# one markdown row: FLOW and STEP time (us), FLOW - STEP (%), and each run's wall seconds.
# STEP runs every chunk step by step: about 5 s at 32 nodes and 1 GiB, 94 s at 128, 15
# minutes at 256 (2-core VM), so large N are for patient reruns.
# Usage: bench/nvls-tree-flow.sh [path/to/spsim] [NODES [SIZES]]
#   defaults: NODES "2 4 8 16", SIZES "32M 64M 128M 256M 1G" (quote lists)
# Use a build without sanitizers (./build.sh release).
set -eu
bin=${1:-./spsim}
[ -x "$bin" ] || bin=$(command -v spsim)
nodes=${2:-2 4 8 16}
sizes=${3:-32M 64M 128M 256M 1G}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# price P RANKS SIZE [ARGS...]: "time_us wall_s" of one run
price() {
  p=$1; r=$2; s=$3; shift 3
  /usr/bin/time -f '%e' -o "$tmp/time" "$bin" bench "$p" --coll all-reduce --ranks "$r" \
    --algo nvls-tree --proto simple --sizes "$s" "$@" > "$tmp/out"
  t=$(grep -E '^ +[0-9]' "$tmp/out" | awk '{ print $9 }')
  echo "$t $(cat "$tmp/time")"
}

echo "| nodes | size | FLOW (us) | STEP (us) | FLOW - STEP | wall FLOW / STEP (s) |"
echo "|---|---|---|---|---|---|"
for n in $nodes; do
  p="$tmp/dgx$n.xml"
  "$bin" platform dgx --nodes "$n" -o "$p"
  for s in $sizes; do
    set -- $(price "$p" $((n * 8)) "$s") $(price "$p" $((n * 8)) "$s" --fidelity step)
    d=$(awk -v f="$1" -v t="$3" 'BEGIN { printf "%+.1f %%", (f - t) / t * 100 }')
    echo "| $n | $s | $1 | $3 | $d | $2 / $4 |"
  done
done
