#!/bin/sh
# Scale of the SimGrid engine: wall time and peak memory of
#   1. cost-mode 1 GiB ring all-reduce on 4,096 ranks, flow fidelity (target < 10 s)
#   2. cost-mode 1 GiB ring all-reduce on 1,024 ranks, step fidelity (target < 60 s),
#      one ring (--channels 1; the default 8 channels simulate 8x the messages)
#   3. data-mode all-to-all verification on 1,024 ranks          (target < 120 s)
#   4. cost-mode 1 GiB all-to-all on 512 and 1,024 ranks, step fidelity (a message per
#      pair, every peer in flight) and flow fidelity (by rail): the same predicted time
# on generated DGX H100 platforms (spsim platform dgx). Use a build WITHOUT
# sanitizers (ASan builds run the thread context factory and are far slower).
# Usage: bench/sim-scale.sh [path/to/spsim]   (default: ./spsim, then spsim on PATH)
set -eu
bin=${1:-./spsim}
[ -x "$bin" ] || bin=$(command -v spsim)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" platform dgx --nodes 512 > "$tmp/dgx4k.xml"
"$bin" platform dgx --nodes 128 > "$tmp/dgx1k.xml"

# run LABEL RANKS CMD...: one markdown row with wall seconds, peak RSS and the result
run() {
  label=$1; ranks=$2; shift 2
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  read -r wall kb < "$tmp/time"
  result=$(grep -v '^#' "$tmp/out" | grep -v '^$' | head -n 1 | tr -s ' ')
  per=$(awk -v kb="$kb" -v r="$ranks" 'BEGIN { printf "%.0f", kb / r }')
  echo "| $label | $wall | $((kb / 1024)) | $per | $result |"
}

echo "| case | wall s | peak RSS MiB | KiB per rank | result |"
echo "|---|---|---|---|---|"
run "all-reduce 1 GiB, 4,096 ranks, flow" 4096 \
  "$bin" bench "$tmp/dgx4k.xml" --coll all-reduce --ranks 4096 --algo ring --sizes 1G:1G --fidelity flow
run "all-reduce 1 GiB, 1,024 ranks, step, one ring" 1024 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-reduce --ranks 1024 --algo ring --channels 1 --sizes 1G:1G --fidelity step
run "all-reduce 1 GiB, 1,024 ranks, flow, one ring" 1024 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-reduce --ranks 1024 --algo ring --channels 1 --sizes 1G:1G --fidelity flow
run "all-reduce 1 GiB, 1,024 ranks, flow, 8 channels" 1024 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-reduce --ranks 1024 --algo ring --sizes 1G:1G --fidelity flow
run "verify all-to-all, 1,024 ranks, 4 B/msg" 1024 \
  "$bin" verify "$tmp/dgx1k.xml" --op all-to-all --ranks 1024
run "verify all-to-all, 1,024 ranks, 256 B/msg" 1024 \
  "$bin" verify "$tmp/dgx1k.xml" --op all-to-all --ranks 1024 --count 64
run "verify all-to-all, 512 ranks, 4 B/msg" 512 \
  "$bin" verify "$tmp/dgx1k.xml" --op all-to-all --ranks 512
run "all-to-all 1 GiB, 512 ranks, step" 512 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-to-all --ranks 512 --sizes 1G --fidelity step
run "all-to-all 1 GiB, 1,024 ranks, step, one channel" 1024 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-to-all --ranks 1024 --proto simple --channels 1 --sizes 1G --fidelity step
run "all-to-all 1 GiB, 1,024 ranks, flow by rail, one channel" 1024 \
  "$bin" bench "$tmp/dgx1k.xml" --coll all-to-all --ranks 1024 --proto simple --channels 1 --sizes 1G
