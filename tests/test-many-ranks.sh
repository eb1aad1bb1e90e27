#!/bin/sh
# More ranks than SimGrid's default actor stacks allow: each actor's stack is a
# memory mapping (two with SimGrid's guard page) and Linux allows 65,530 mappings
# per process (vm.max_map_count), so a collective on 40,960 ranks needs more than
# guard pages leave room for. A release build runs it without guard pages; a
# sanitizer build (one thread per actor) says what to raise, in one line, without
# a crash. The release result is checked against the latency-bound ring: 2 (n - 1)
# steps of 25 bytes or less, each about one route latency, so twice the ranks take
# twice the time (within 3 %: the share of steps that cross SUs differs a little).
bin="${SPSIM_BUILDDIR:-.}/spsim"
cfg="${SPSIM_BUILDDIR:-.}/config.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "1..2"
"$bin" platform dgx --nodes 5120 -o "$tmp/p.xml" || { echo "Bail out! spsim platform dgx --nodes 5120"; exit 1; }
time_us() { sed 's/"in_place".*//; s/.*"time_us"://; s/[,}].*//' "$1"; }
run() { "$bin" bench "$tmp/p.xml" --ranks "$1" --algo ring --channels 1 --sizes 1M --json >"$tmp/out$1" 2>"$tmp/err$1"; }
if grep -q '^#define SP_SANITIZERS 1' "$cfg" 2>/dev/null; then
  run 40960; rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && [ "$(wc -l <"$tmp/err40960")" -eq 1 ] &&
     grep -q '^spsim: .*40960 ranks.*vm.max_map_count' "$tmp/err40960"; then
    echo "ok 1 - 40,960 ranks in a sanitizer build: one line naming vm.max_map_count (exit $rc)"
  elif [ "$rc" -eq 0 ] && [ "$(cat /proc/sys/vm/max_map_count)" -gt 200000 ]; then
    echo "ok 1 - 40,960 ranks in a sanitizer build: this system allows them"
  else
    echo "not ok 1 - 40,960 ranks in a sanitizer build: exit $rc, $(head -c 300 "$tmp/err40960")"
  fi
  echo "ok 2 # SKIP release builds only (40,960 threads)"
else
  if run 40960 && run 20480; then
    echo "ok 1 - a ring all-reduce on 40,960 ranks runs"
    a=$(time_us "$tmp/out40960"); b=$(time_us "$tmp/out20480")
    if awk -v a="$a" -v b="$b" 'BEGIN { r = (a / b) / (40959 / 20479); exit !(a > 0 && r > 0.97 && r < 1.03) }'; then
      echo "ok 2 - 40,960 ranks take 40,959 / 20,479 (within 3 %) of 20,480 ranks' time ($a and $b us)"
    else
      echo "not ok 2 - 40,960 ranks $a us, 20,480 ranks $b us: not in the ratio of their steps"
    fi
  else
    echo "not ok 1 - exit non-zero: $(cat "$tmp/err40960" "$tmp/err20480" | head -c 300)"
    echo "not ok 2 # no result"
  fi
fi
