#!/bin/sh
# Time one simulated step graph: one layout, priced and run on SimGrid, as the what-if
# does for the layouts that may win. Reports the wall time of the whole command and the
# time spent after the platform is loaded (the load of a large platform is a separate
# cost: bench/sim-scale.sh), the graph's size and the predicted step.
# Usage: bench/stepgraph.sh [BUILDDIR]
# Targets: llama3-70b, tp=8,pp=4,dp=32 on 1,024 GPUs under 1 s; llama3-405b,
# tp=8,pp=16,dp=128 on 16,384 GPUs under 5 s after the platform is loaded.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/_build/release}
bin=$build/spsim
[ -x "$bin" ] || { echo "stepgraph.sh: no spsim in $build (build first: ./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }

run() { # NAME PLATFORM ARGS...
  name=$1 plat=$2
  shift 2
  t0=$(now)
  "$bin" "$plat" --simulate 0 "$@" >"$tmp/cf" 2>&1 || true  # load + closed form only
  t1=$(now)
  "$bin" "$plat" "$@" --json "$tmp/r.json" >"$tmp/sim" 2>&1
  t2=$(now)
  "$bin" "$plat" "$@" --trace "$tmp/trace.json" >/dev/null 2>&1
  tasks=$(grep -o '"ph":"X"' "$tmp/trace.json" | wc -l)
  step=$(tr '{' '\n' < "$tmp/r.json" | grep -o '"step_s": [0-9.e+-]*' | head -n 1 | cut -d' ' -f2)
  printf '%-36s total %6.2f s, step graph %5.2f s (total minus the closed-form run); %s timed tasks; step %s s\n' \
    "$name" "$(echo "$t2 - $t1" | bc)" "$(echo "($t2 - $t1) - ($t1 - $t0)" | bc)" "$tasks" "$step"
}

run "llama3-70b 1,024 GPUs tp8 pp4" "$here/platforms/dgx.xml" --model llama3-70b \
  --layout tp=8,pp=4,dp=32,zero=1,ckpt=selective
run "llama3-70b 1,024 GPUs tp8 pp4 vpp5" "$here/platforms/dgx.xml" --model llama3-70b \
  --layout tp=8,pp=4,vpp=5,dp=32,zero=1,ckpt=selective
"$bin" platform dgx --nodes 2048 > "$tmp/dgx16k.xml"
# --gpu-mem: price it whatever spsim's memory model says (as bench/validate.sh does)
run "llama3-405b 16,384 GPUs tp8 pp16 vpp8" "$tmp/dgx16k.xml" --model llama3-405b --global-batch 16M --gpu-mem 65536 \
  --layout tp=8,pp=16,vpp=8,ppfirst=7,pplast=7,dp=128,zero=1,ckpt=none
echo "stepgraph.sh: $(nproc) cores, $(date -u '+%Y-%m-%d')"
