#!/bin/sh
# Scale of platform loading. For each node count (DGX H100 nodes, 8 GPUs each):
#   1. spsim platform dgx --nodes N: wall time and file size;
#   2. spsim bench PLATFORM --coll all-reduce --ranks 8 --sizes 1M: wall time and
#      peak RSS. The collective is trivial, so this is the cost of loading the
#      platform (spsim reads the file itself, then a child process loads it into
#      SimGrid, checks it and carries on as the run);
#   3. at 2,048 nodes (16,384 GPUs), one what-if layout:
#      spsim PLATFORM --model llama3-405b --global-batch 16M --layout tp=8,pp=16,dp=128,zero=1,ckpt=full
#      (Llama 3's 16M-token batch; a layout that fits in 80 GiB);
#   4. at 16,384 nodes (131,072 GPUs), an all-reduce of 1 GiB on every GPU (flow
#      fidelity): spsim bench PLATFORM --coll all-reduce --ranks 131072 --sizes 1G;
#   5. with SWEEP=1 (environment), at every node count, the default sweep of
#      llama3-405b in one process: spsim PLATFORM --model llama3-405b -j 1 (about 1.2,
#      2.5 and 6 minutes at 128, 2,048 and 16,384 nodes on 2 cores; LIMIT applies).
# Usage: bench/scale.sh [path/to/spsim] [NODES...]   (default: 128 2048 16384)
# ZONES (environment): node, su or auto (default), passed as spsim platform dgx --zones.
# ALGO (environment): the 131,072-rank all-reduce's --algo (default auto: NCCL's choice;
# ALGO=ring gives bench/RESULTS.md's "Beyond 32,000 ranks" row).
# spsim builds a platform it generated straight into SimGrid as one routed zone
# (docs/calibration.md, "The routed build"); SPSIM_PLATFORM_XML=1 (environment) makes it
# parse the file with SimGrid instead, to compare.
# LIMIT (environment): seconds allowed per command (default 600); a command that
# runs longer is stopped and reported as "> LIMIT".
# Use a build without sanitizers (./build.sh release).
set -eu
bin=${1:-./spsim}
[ -x "$bin" ] || bin=$(command -v spsim)
[ $# -gt 0 ] && shift
nodes=${*:-128 2048 16384}
limit=${LIMIT:-600}
zones=${ZONES:-auto}
algo=${ALGO:-auto}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# timed LABEL CMD...: one markdown row: wall seconds and peak RSS (MiB)
timed() {
  label=$1; shift
  rc=0
  timeout "$limit" /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "| $label | > $limit (stopped) | |"
  else
    read -r wall kb <<EOT
$(grep -v '^Command' "$tmp/time")
EOT
    echo "| $label$([ "$rc" -ne 0 ] && echo " (exit $rc)") | $wall | $((kb / 1024)) |"
  fi
}

echo "| case | wall s | peak RSS MiB |"
echo "|---|---|---|"
for n in $nodes; do
  gpus=$((n * 8))
  p="$tmp/dgx$n.xml"
  timed "generate $n nodes ($gpus GPUs, --zones $zones)" "$bin" platform dgx --nodes "$n" --zones "$zones" -o "$p"
  [ -f "$p" ] || continue
  echo "| (file: $(($(wc -c <"$p") / 1048576)) MiB) | | |"
  timed "load $gpus GPUs (bench, 8 ranks)" "$bin" bench "$p" --coll all-reduce --ranks 8 --sizes 1M
  if [ "$n" -eq 2048 ]; then
    timed "what-if llama3-405b tp=8,pp=16,dp=128,zero=1,ckpt=full, 16M tokens, on $gpus GPUs" \
      "$bin" "$p" --model llama3-405b --global-batch 16M --layout tp=8,pp=16,dp=128,zero=1,ckpt=full
  fi
  if [ "$n" -eq 16384 ]; then
    timed "all-reduce 1 GiB on $gpus ranks (flow, --algo $algo)" "$bin" bench "$p" --coll all-reduce --ranks "$gpus" --sizes 1G --algo "$algo"
  fi
  if [ "${SWEEP:-0}" = 1 ]; then
    timed "default sweep llama3-405b on $gpus GPUs (-j 1)" "$bin" "$p" --model llama3-405b -j 1
  fi
  rm -f "$p"
done
