#!/bin/sh
# Memcheck over a build without sanitizers (./build.sh release): every GTest
# program of tests/ and the main paths of the spsim CLI (verify with real
# bytes, a graph operation, bench, topo, platform, the what-if). Prints TAP; an
# invalid read or write, a use of uninitialised memory or a definite leak fails
# the case (valgrind --error-exitcode). ASan/UBSan cover the same code in
# `make check`; this is the second opinion the standards ask for.
#   tests/valgrind.sh [BUILDDIR]      (default _build/release)
# SPSIM_VALGRIND_ALL=1 adds the slow kernel test on the fake device (2 min).
set -u
build=${1:-_build/release}
src=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v valgrind >/dev/null 2>&1; then echo "1..0 # SKIP valgrind not installed"; exit 0; fi
if [ ! -x "$build/spsim" ]; then echo "1..0 # SKIP no spsim in $build (./build.sh release)"; exit 0; fi
build=$(cd "$build" && pwd)
make -C "$build" -s check TESTS= >/dev/null 2>&1 || { echo "Bail out! cannot build the tests in $build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SPSIM_SRCDIR="$src" SPSIM_BUILDDIR="$build" G_DEBUG=fatal-criticals G_SLICE=always-malloc
vg="$build/libtool --mode=execute valgrind -q --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite --show-leak-kinds=definite"

n=0
fails=0
# check DESC CMD...: runs CMD under memcheck; it must exit ${want:-0}
check() {
  desc=$1; shift
  n=$((n + 1))
  $vg "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc = "${want:-0}" ]; then
    echo "ok $n - $desc"
  else
    fails=$((fails + 1))
    echo "not ok $n - $desc (exit $rc)"
    grep -m 12 '==[0-9]*==' "$tmp/err" | sed 's/^/#   /'
    [ $rc = 99 ] || tail -n 5 "$tmp/out" "$tmp/err" | sed 's/^/#   /'
  fi
}

for t in "$build"/tests/test-*; do
  name=$(basename "$t")
  case $name in
    *.o|*.log|*.trs|*.sh) continue ;;
    test-real-cuda|test-real-ref|test-real-step-ref) continue ;; # no GPU here / a helper driven by the shell tests
    test-kernels-fakegpu) [ "${SPSIM_VALGRIND_ALL:-0}" = 1 ] || continue ;;
  esac
  [ -x "$t" ] && check "$name" "$t"
done

S="$build/spsim"
small="$src/platforms/small.xml"
check "spsim verify all-reduce (real bytes, 4 ranks)" "$S" verify "$small" --op all-reduce --ranks 4 --dtype bf16 --count 3001 --checksum
check "spsim verify all-to-all, step fidelity" "$S" verify "$small" --op all-to-all --ranks 8 --fidelity step
# 136 ranks: a block of 135 sends and 135 receives, posted by helper actors
"$S" platform dgx --nodes 17 --gpu toy -o "$tmp/toy136.xml"
check "spsim verify all-to-all, 136 ranks (helper actors)" "$S" verify "$tmp/toy136.xml" --op all-to-all --ranks 136 --count 100
check "spsim verify ulysses-attention (graph operation)" "$S" verify "$small" --op ulysses-attention --ranks 4
check "spsim verify ring-attention-bwd (graph operation)" "$S" verify "$small" --op ring-attention-bwd --ranks 4
check "spsim verify moe-layer-bwd (graph operation, --moe)" "$S" verify "$small" --op moe-layer-bwd --ranks 8 \
  --moe experts=16,topk=2,tokens=8
check "spsim verify moe-layer-bwd, dropless dispatch" "$S" verify "$small" --op moe-layer-bwd --ranks 4 \
  --moe experts=8,topk=2,ep=2,etp=2,tokens=8,dropless=1
check "spsim bench" "$S" bench "$small" --coll all-reduce --ranks 8 --sizes 1K:1M
check "spsim topo" "$S" topo --axes pipe=2,data=2,tensor=2 --json
check "spsim platform" "$S" platform dgx --nodes 2 -o "$tmp/p2.xml"
check "spsim what-if, one layout with trace" "$S" "$tmp/p2.xml" --model llama3-8b --seq 4096 --global-batch 32 \
  --layout tp=8,pp=2,dp=1,ckpt=selective --trace "$tmp/t.json"
check "spsim what-if sweep" "$S" "$tmp/p2.xml" --model llama3-8b --seq 4096 --global-batch 32 --fidelity analytic
want=1 check "spsim error path (a layout that does not divide the GPUs)" "$S" "$tmp/p2.xml" --model llama3-8b --layout tp=3
want=1 check "spsim error path (malformed platform)" "$S" verify "$src/tests/local.mk" --op all-reduce --ranks 2
echo "1..$n"
[ $fails = 0 ]
