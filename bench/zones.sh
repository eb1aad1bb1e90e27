#!/bin/sh
# Same predictions with node zones and SU zones (spsim platform dgx --zones node|su).
# For each platform below, generates both structures, runs every `spsim bench` case and
# the default what-if on each, and compares the outputs with the platform path removed:
# "same" means byte-identical JSON (bench) or text and JSON (what-if).
# Usage: bench/zones.sh [BUILDDIR]   (default _build/release)
# Exit status 1 when an output differs.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/_build/release}
bin=$build/spsim
[ -x "$bin" ] || { echo "zones.sh: no spsim in $build (build first: ./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# maxrel: the largest relative difference between the time_us of node.out and su.out
maxrel() {
  for z in node su; do tr ',' '\n' <"$tmp/$z.out" | sed -n 's/.*"time_us":\([0-9.e+-]*\).*/\1/p' >"$tmp/$z.t"; done
  paste "$tmp/node.t" "$tmp/su.t" | awk '{ d = ($2 - $1) / $1; if (d < 0) d = -d; if (d > m) m = d; k++ }
    END { printf "%d times, largest relative difference %.2g", k, m }'
}

# compare NAME PLATFORM-ARGS -- CASE-ARGS... : one bench case on both structures
compare() {
  name=$1 plat=$2
  shift 2
  for z in node su; do
    # shellcheck disable=SC2086
    "$bin" platform dgx $plat --zones "$z" -o "$tmp/$z.xml"
    "$bin" "$@" "$tmp/$z.xml" 2>&1 | sed "s|$tmp/$z.xml|PLATFORM|g" >"$tmp/$z.out" || true
  done
  if cmp -s "$tmp/node.out" "$tmp/su.out"; then r=same; else r="differs: $(maxrel)"; fail=1; fi
  printf '%-58s %s\n' "$name" "$r"
}

small="--nodes 2 --gpu toy --gpus-per-node 4"
a100="--nodes 1 --gpu a100"
dgx="--nodes 128"
pods="--nodes 96 --pod-sus 2 --oversubscription 2,2"
nics="--nodes 64 --nics-per-node 2"
nvl72="--gpu gb200 --nodes 144"
mix="--mix h100:40,a100:40"
for c in "small all-reduce 8|$small|--coll all-reduce --ranks 8 --sizes 1K:1G" \
         "small all-gather 8|$small|--coll all-gather --ranks 8 --sizes 1K:1G" \
         "small send-recv 2 (NVLink)|$small|--coll send-recv --ranks 2 --sizes 1G" \
         "small send-recv 8 (NIC)|$small|--coll send-recv --ranks 8 --sizes 1G" \
         "small all-to-all 8 step|$small|--coll all-to-all --ranks 8 --sizes 1M:64M --fidelity step" \
         "a100 all-reduce 8|$a100|--coll all-reduce --ranks 8 --sizes 8:8G" \
         "a100 reduce-scatter 8 step|$a100|--coll reduce-scatter --ranks 8 --sizes 1M:256M --fidelity step" \
         "dgx all-reduce 16|$dgx|--coll all-reduce --ranks 16 --sizes 1K:8G" \
         "dgx all-reduce 1024|$dgx|--coll all-reduce --ranks 1024 --sizes 256M" \
         "dgx all-gather 512|$dgx|--coll all-gather --ranks 512 --sizes 64M:256M" \
         "dgx reduce-scatter 256|$dgx|--coll reduce-scatter --ranks 256 --sizes 16M:256M" \
         "dgx broadcast 64|$dgx|--coll broadcast --ranks 64 --sizes 1M:1G" \
         "dgx reduce 64|$dgx|--coll reduce --ranks 64 --sizes 1M:1G" \
         "dgx all-to-all 64|$dgx|--coll all-to-all --ranks 64 --sizes 1M:256M" \
         "dgx all-to-all 32 step|$dgx|--coll all-to-all --ranks 32 --sizes 1M:64M --fidelity step" \
         "dgx all-reduce 64 step|$dgx|--coll all-reduce --ranks 64 --sizes 1M:256M --fidelity step" \
         "dgx send-recv 1024 (across SUs)|$dgx|--coll send-recv --ranks 1024 --sizes 1G" \
         "dgx all-reduce 32 per-node 1 (rails)|$dgx|--coll all-reduce --ranks 32 --per-node 1 --sizes 1M:1G" \
         "pods all-reduce 768|$pods|--coll all-reduce --ranks 768 --sizes 256M" \
         "nics-per-node 2 all-reduce 512|$nics|--coll all-reduce --ranks 512 --sizes 64M:256M" \
         "gb200 nvl72 all-reduce 576|$nvl72|--coll all-reduce --ranks 576 --sizes 256M" \
         "mixed h100/a100 all-reduce 640|$mix|--coll all-reduce --ranks 640 --sizes 256M"; do
  name=${c%%|*} rest=${c#*|}
  plat=${rest%%|*} args=${rest#*|}
  # shellcheck disable=SC2086
  compare "bench $name" "$plat" bench $args --json
done
for z in node su; do
  "$bin" platform dgx $dgx --zones "$z" -o "$tmp/w$z.xml"
  "$bin" "$tmp/w$z.xml" --json "$tmp/w$z.json" 2>&1 | sed "s|$tmp/w$z.xml|PLATFORM|g" >"$tmp/w$z.out" || true
  sed "s|$tmp/w$z.xml|PLATFORM|g" "$tmp/w$z.json" >>"$tmp/w$z.out"
done
if cmp -s "$tmp/wnode.out" "$tmp/wsu.out"; then r=same; else r=DIFFERENT; fail=1; fi
printf '%-58s %s\n' "what-if (default model, 1,024 GPUs; text and --json)" "$r"
exit "$fail"
