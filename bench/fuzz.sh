#!/usr/bin/env bash
# Fuzz campaigns of every input parser: builds the harnesses of tests/fuzz with
# clang -fsanitize=fuzzer,address,undefined (libspsim configured with clang and
# coverage instrumentation in _build/fuzz), then runs each one with libFuzzer for
# FUZZ_SECONDS seconds over a copy of its seed corpus, one process (one core) at a
# time, and prints per harness: executions, seconds, corpus size, crashes.
#
# Usage: bench/fuzz.sh [--merge] [HARNESS...]
#   HARNESS   size layout topo misc model platform nccltests gemmtable routing step
#             (default: all, in that order)
#   --merge   afterwards, merge (minimised) the new inputs into tests/fuzz/corpus/HARNESS
#             (without it the seed corpus is never written)
# Environment:
#   FUZZ_SECONDS  seconds per harness (default 600)
#   FUZZ_JOBS     make jobs for the library build (default 2)
#   FUZZ_CPU      pin each campaign to this CPU with taskset (default: not pinned)
# Needs: clang with libFuzzer (Debian: apt-get install clang), and the packages of
# .ci/deps.sh (GLib, json-glib, SimGrid, Open MPI: configure wants them all).
# Findings are left in _build/fuzz/run/HARNESS/artifacts/; replay one with
#   _build/fuzz/fuzz-HARNESS FILE      (or tests/fuzz/replay-HARNESS FILE in a check build)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

merge=0
sel=()
for a in "$@"; do
  case $a in
    --merge) merge=1 ;;
    size|layout|topo|misc|model|platform|nccltests|gemmtable|routing|step) sel+=("$a") ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$a' (harnesses: size layout topo misc model platform nccltests gemmtable routing step; --merge)" >&2; exit 2 ;;
  esac
done
[ ${#sel[@]} -gt 0 ] || sel=(size layout topo misc model platform nccltests gemmtable routing step)
seconds=${FUZZ_SECONDS:-600}
jobs=${FUZZ_JOBS:-2}

CC=${CC:-clang}
if ! command -v "$CC" >/dev/null 2>&1; then
  echo "fuzz.sh: $CC not found: install it with 'apt-get install clang'" >&2
  exit 1
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$probe/p.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz.sh: $CC cannot link libFuzzer (-fsanitize=fuzzer): install 'clang' (Debian ships libFuzzer with it)" >&2
  cat "$probe/err" >&2
  exit 1
fi

# ---- build: libspsim + libspsim-sim with clang, sanitizers and coverage, static
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p _build/fuzz
cd _build/fuzz
if [ ! -f Makefile ]; then
  CC=$CC ../../configure --quiet --enable-sanitizers --disable-shared \
    CFLAGS='-O1 -g -fsanitize=fuzzer-no-link' >configure.log 2>&1 \
    || { tail -n 20 configure.log >&2; exit 1; }
fi
make -j"$jobs" libspsim.la libspsim-sim.la >make.log 2>&1 || { tail -n 30 make.log >&2; exit 1; }
cflags=(-std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -fno-omit-frame-pointer -I. -I"$top/src/core" -I"$top/src/sim" -I"$top/tests/fuzz")
read -r -a deps <<<"$(pkg-config --cflags glib-2.0 json-glib-1.0)"
read -r -a libs <<<"$(pkg-config --libs simgrid json-glib-1.0 glib-2.0)"
# the C++ routed platform builder carries UBSan's C++ checks: link their runtime too
for h in "${sel[@]}"; do
  "$CC" "${cflags[@]}" "${deps[@]}" "$top/tests/fuzz/fuzz-$h.c" .libs/libspsim-sim.a .libs/libspsim.a \
    "${libs[@]}" -lm -fsanitize-link-c++-runtime -lstdc++ -o "fuzz-$h"
done
cd "$top"

# ---- campaigns
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
pin=()
[ -n "${FUZZ_CPU:-}" ] && command -v taskset >/dev/null 2>&1 && pin=(taskset -c "$FUZZ_CPU")
printf '%-9s %12s %8s %7s %14s %8s  %s\n' harness executions seconds exec/s "corpus seeds>n" findings result
status=0
for h in "${sel[@]}"; do
  run=_build/fuzz/run/$h
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  cp tests/fuzz/corpus/"$h"/* "$run/corpus/"
  seeds=$(find "$run/corpus" -type f | wc -l)
  dict=()
  [ -f "tests/fuzz/dict/$h.dict" ] && dict=(-dict="$top/tests/fuzz/dict/$h.dict")
  t0=$(date +%s)
  rc=0
  (cd "$run" && "${pin[@]}" "$top/_build/fuzz/fuzz-$h" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=artifacts/ "${dict[@]}" corpus \
      >log 2>&1) || rc=$?
  t1=$(date +%s)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$run/log" | tail -n 1)
  n=$(find "$run/corpus" -type f | wc -l)
  found=$(find "$run/artifacts" -type f | wc -l)
  if [ "$rc" -eq 0 ] && [ "$found" -eq 0 ]; then result=ok
  else result="FOUND (exit $rc): $(ls "$run/artifacts" | tr '\n' ' ')"; status=1; fi
  secs=$((t1 - t0))
  rate=$(( secs > 0 ? ${execs:-0} / secs : 0 ))
  printf '%-9s %12s %8s %7s %14s %8s  %s\n' "$h" "${execs:-?}" "$secs" "$rate" "$seeds>$n" "$found" "$result"
  if [ "$found" -gt 0 ]; then
    grep -m 3 -E 'ERROR|runtime error|fuzz: |SUMMARY|deadly signal' "$run/log" | sed 's/^/    /' || true
  fi
  if [ "$merge" -eq 1 ]; then
    (cd "$run" && "$top/_build/fuzz/fuzz-$h" -merge=1 "$top/tests/fuzz/corpus/$h" corpus >merge.log 2>&1) \
      || echo "    merge failed: see $run/merge.log"
  fi
done
echo "logs and findings: _build/fuzz/run/HARNESS/{log,artifacts}"
exit $status
