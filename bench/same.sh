#!/bin/sh
# Same predictions from two builds of spsim: a change meant to leave every answer as it
# was (a speed-up, a restructuring) is checked here. Runs `spsim bench` cases over the
# generator's platform shapes and the what-if, on both builds, and compares the outputs
# byte for byte (bench --json; what-if text and --json), with each build's wall time.
# Usage: bench/same.sh OLD_BUILDDIR [NEW_BUILDDIR]   (NEW default _build/release; build the
# old one from a worktree: git worktree add /tmp/old REV && (cd /tmp/old && ./build.sh))
# Exit status 1 when an output differs.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/same.sh OLD_BUILDDIR [NEW_BUILDDIR]" >&2; exit 2; }
old=$1/spsim
new=${2:-$here/_build/release}/spsim
for b in "$old" "$new"; do
  [ -x "$b" ] || { echo "same.sh: no spsim at $b" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# wall SECONDS-FILE CMD...: run CMD, its output to $tmp/out, its wall seconds to the file
wall() {
  f=$1
  shift
  s=$(date +%s.%N)
  "$@" >"$tmp/out" 2>&1 || true
  e=$(date +%s.%N)
  echo "$s $e" | awk '{ printf "%.2f", $2 - $1 }' >"$f"
}

# compare NAME PLATFORM-ARGS -- ARGS... : one case (PLATFORM replaces the file's path)
compare() {
  name=$1 plat=$2
  shift 2
  # shellcheck disable=SC2086
  "$new" platform dgx $plat -o "$tmp/p.xml"
  for v in old new; do
    eval "b=\$$v"
    args=$(printf '%s\n' "$*" | sed "s|PLATFORM|$tmp/p.xml|g")
    # shellcheck disable=SC2086
    wall "$tmp/$v.s" "$b" $args
    sed "s|$tmp/p.xml|PLATFORM|g" "$tmp/out" >"$tmp/$v.out"
    if [ -s "$tmp/j.json" ]; then sed "s|$tmp/p.xml|PLATFORM|g" "$tmp/j.json" >>"$tmp/$v.out"; rm -f "$tmp/j.json"; fi
  done
  if cmp -s "$tmp/old.out" "$tmp/new.out"; then r=same; else r=DIFFERENT; fail=1; fi
  printf '%-52s %-9s %7s s %7s s\n' "$name" "$r" "$(cat "$tmp/old.s")" "$(cat "$tmp/new.s")"
}

small="--nodes 2 --gpu toy --gpus-per-node 4"
a100="--nodes 1 --gpu a100"
dgx="--nodes 128"
su="--nodes 128 --zones su"
pods="--nodes 96 --pod-sus 2 --oversubscription 2,2"
over="--nodes 64 --oversubscription 4"
nics="--nodes 64 --nics-per-node 2"
one="--nodes 64 --gpus-per-node 1"
sharp="--nodes 32 --sharp"
nvl72="--gpu gb200 --nodes 144"
b200="--gpu b200 --nodes 16"
mix="--mix h100:40,a100:40"
printf '%-52s %-9s %9s %9s\n' case result old new
for c in "small all-reduce 8|$small|bench PLATFORM --coll all-reduce --ranks 8 --sizes 1K:1G --json" \
         "small all-to-all 8 step|$small|bench PLATFORM --coll all-to-all --ranks 8 --sizes 1M:64M --fidelity step --json" \
         "a100 all-reduce 8|$a100|bench PLATFORM --coll all-reduce --ranks 8 --sizes 8:8G --json" \
         "dgx all-reduce 16|$dgx|bench PLATFORM --coll all-reduce --ranks 16 --sizes 1K:8G --json" \
         "dgx all-reduce 512 1G (nvls-tree)|$dgx|bench PLATFORM --coll all-reduce --ranks 512 --sizes 1G --json" \
         "dgx all-reduce 256 ring|$dgx|bench PLATFORM --coll all-reduce --algo ring --ranks 256 --sizes 1M:1G --json" \
         "dgx all-reduce 64 per-node 1 tree|$dgx|bench PLATFORM --coll all-reduce --algo tree --per-node 1 --ranks 64 --sizes 1M:256M --json" \
         "dgx all-reduce 64 step|$dgx|bench PLATFORM --coll all-reduce --ranks 64 --sizes 1M:256M --fidelity step --json" \
         "dgx all-gather 512|$dgx|bench PLATFORM --coll all-gather --ranks 512 --sizes 64M:256M --json" \
         "dgx reduce-scatter 256|$dgx|bench PLATFORM --coll reduce-scatter --ranks 256 --sizes 16M:256M --json" \
         "dgx broadcast 64|$dgx|bench PLATFORM --coll broadcast --ranks 64 --sizes 1M:1G --json" \
         "dgx all-to-all 256|$dgx|bench PLATFORM --coll all-to-all --ranks 256 --sizes 1M:1G --json" \
         "dgx all-to-all 64 step|$dgx|bench PLATFORM --coll all-to-all --ranks 64 --sizes 1M:64M --fidelity step --json" \
         "dgx send-recv 1024 (across SUs)|$dgx|bench PLATFORM --coll send-recv --ranks 1024 --sizes 1G --json" \
         "su zones all-reduce 1024 256M|$su|bench PLATFORM --coll all-reduce --ranks 1024 --sizes 256M --json" \
         "pods 2:2 all-reduce 768|$pods|bench PLATFORM --coll all-reduce --ranks 768 --sizes 256M --json" \
         "pods 2:2 all-to-all 192|$pods|bench PLATFORM --coll all-to-all --ranks 192 --sizes 64M --json" \
         "oversubscribed 4:1 all-to-all 512|$over|bench PLATFORM --coll all-to-all --ranks 512 --sizes 64M --json" \
         "nics-per-node 2 all-reduce 512|$nics|bench PLATFORM --coll all-reduce --ranks 512 --sizes 64M:256M --json" \
         "1 GPU per node all-reduce 64|$one|bench PLATFORM --coll all-reduce --ranks 64 --sizes 1M:1G --json" \
         "sharp collnet-direct 256|$sharp|bench PLATFORM --coll all-reduce --algo collnet-direct --ranks 256 --sizes 64M --json" \
         "b200 all-reduce 128|$b200|bench PLATFORM --coll all-reduce --ranks 128 --sizes 1M:1G --json" \
         "gb200 nvl72 all-reduce 576|$nvl72|bench PLATFORM --coll all-reduce --ranks 576 --sizes 256M --json" \
         "mixed h100/a100 all-reduce 640|$mix|bench PLATFORM --coll all-reduce --ranks 640 --sizes 256M --json" \
         "what-if llama3-70b, 1,024 GPUs (text, json)|$dgx|PLATFORM --json $tmp/j.json" \
         "what-if mixtral-8x7b, oversubscribed pods|$pods|PLATFORM --model mixtral-8x7b --json $tmp/j.json" \
         "what-if llama3-8b, 1 GPU per node|$one|PLATFORM --model llama3-8b --json $tmp/j.json"; do
  name=${c%%|*} rest=${c#*|}
  plat=${rest%%|*} args=${rest#*|}
  compare "$name" "$plat" "$args"
done
exit "$fail"
