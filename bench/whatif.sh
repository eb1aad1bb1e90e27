#!/bin/sh
# Time the default what-if run (spsim platforms/dgx.xml, no other argument) on this machine.
# Usage: bench/whatif.sh [BUILDDIR] [PLATFORM]   (target: under 60 s on 2 cores)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/_build/release}
plat=${2:-$here/platforms/dgx.xml}
bin=$build/spsim
[ -x "$bin" ] || { echo "whatif.sh: no spsim in $build (build first: ./build.sh release)" >&2; exit 2; }
[ -f "$plat" ] || { echo "whatif.sh: no platform $plat" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
"$bin" "$plat" >"$out"
end=$(date +%s.%N)
secs=$(echo "$end - $start" | bc)
head -4 "$out"
sed -n '/^  1  /p' "$out"
echo "whatif.sh: default run on $(basename "$plat") took ${secs} s on $(nproc) cores (target < 60 s)"
awk -v s="$secs" 'BEGIN { exit !(s < 60) }'
