#!/bin/sh
# The what-if spread over processes of this machine (spsim PLATFORM.xml -j N): its
# standard output, standard error, exit status and documents must be those of one
# process (-j 1), byte for byte, at -j 2 and 3 and by default (one process per
# processor); the other processes print nothing. spsim bench --jobs N: the same
# table, nccl-tests layout, JSON and errors as --jobs 1. On platforms/small.xml with
# models/tiny.json (seconds under AddressSanitizer). Bad -j values get one line; -j
# under mpirun is refused; a worker that dies is named by the first process, which
# stops the others and exits 1 instead of waiting.
. "$(dirname "$0")/tap-lib.sh"
spsim="$bin"
plat="$src/platforms/small.xml"
A="--model tiny --seq 256 --global-batch 8"

echo "1..17"

# same J DESC ARGS...: -j 1 and -j J ("" for the default) write the same stdout,
# stderr, exit status, --json and --csv
same() {
  j=$1; desc=$2; shift 2
  jf=""; [ -n "$j" ] && jf="-j $j"
  (cd "$tmp" && "$spsim" "$plat" $A "$@" -j 1 --json one.json --csv one.csv >one.out 2>one.err); r1=$?
  (cd "$tmp" && timeout 300 "$spsim" "$plat" $A "$@" $jf --json many.json --csv many.csv >many.out 2>many.err); rn=$?
  why=""
  [ "$r1" -eq "$rn" ] || why="exit $rn, one process $r1"
  for f in out err json csv; do
    [ -f "$tmp/one.$f" ] || continue
    cmp -s "$tmp/one.$f" "$tmp/many.$f" || why="$why; $f differs"
  done
  if [ -n "$why" ]; then nok "-j ${j:-default} $desc: ${why#; }: $(head -c 300 "$tmp/many.err")"
  else ok "-j ${j:-default} $desc: identical to one process"; fi
  rm -f "$tmp"/one.* "$tmp"/many.*
}

# 1-3: the sweep with its step graphs
same 2 "sweep"
same 3 "sweep"
same "" "sweep"
# 4: every layout's row and document
same 3 "--all --json-full" --all --json-full
# 5: more step graphs than processes, --explain
same 2 "--simulate 20 --explain" --simulate 20 --explain
# 6: the closed form alone
same 3 "--simulate 0" --simulate 0
# 7: nothing fits: exit 1, the same one error line
same 2 "nothing fits" --gpu-mem 0.001

# 8-9: -j out of range: one line, exit 1
for v in -1 1025; do
  expect_fail "-j $v: refused in one line" "-j/--jobs $v: processes from 1 to 1024" "$plat" $A -j "$v"
done

# 10: a worker killed before its first exchange: named, exit 1, no hang
(timeout 300 "$spsim" "$plat" $A -j 3 --debug-kill-worker 2 >"$tmp/out" 2>"$tmp/err"); rc=$?
if [ "$rc" -eq 1 ] && grep -Eq "^spsim: -j 3: worker process 2 of the what-if (stopped|was killed by signal 9)" "$tmp/err" &&
   ! grep -q "^  #  layout" "$tmp/out"
then ok "-j 3, worker 2 killed: named, exit 1"
else nok "-j 3, worker 2 killed: exit $rc: $(head -c 400 "$tmp/err")"; fi

# 11: one process, one report: one header and one table
"$spsim" "$plat" $A -j 3 >"$tmp/out" 2>"$tmp/err"
h=$(grep -c '^spsim what-if: tiny' "$tmp/out"); t=$(grep -c '^  #  layout' "$tmp/out")
if [ "$h" = 1 ] && [ "$t" = 1 ]; then ok "-j 3: one header and one table"
else nok "-j 3: $h headers and $t tables, want 1 and 1"; fi

# 12: -j 2 under mpirun: refused (mpirun's ranks already share the sweep)
MPIRUN="${MPIRUN:-mpirun}"
if command -v "$MPIRUN" >/dev/null 2>&1; then
  (export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
   export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
   timeout 300 "$MPIRUN" -np 2 "$spsim" "$plat" $A -j 2 >"$tmp/out" 2>"$tmp/err"); rc=$?
  c=$(grep -c '^spsim: -j/--jobs 2 under mpirun' "$tmp/err")
  if [ "$rc" -ne 0 ] && [ "$c" = 1 ]; then ok "-j 2 under mpirun -np 2: refused once"
  else nok "-j 2 under mpirun: exit $rc, $c lines: $(head -c 400 "$tmp/err")"; fi
else
  ok "# SKIP mpirun not found"
fi

# 13-16: spsim bench --jobs: sizes spread over processes, the same output as one
"$bin" platform dgx --nodes 2 -o "$tmp/p2.xml" >/dev/null 2>&1
# bsame J DESC ARGS...: bench ARGS with --jobs 1 and --jobs J: same stdout, stderr, exit
bsame() {
  j=$1; desc=$2; shift 2
  "$bin" bench "$@" --jobs 1 >"$tmp/b1.out" 2>"$tmp/b1.err"; r1=$?
  timeout 300 "$bin" bench "$@" --jobs "$j" >"$tmp/bj.out" 2>"$tmp/bj.err"; rj=$?
  if [ "$r1" -eq "$rj" ] && cmp -s "$tmp/b1.out" "$tmp/bj.out" && cmp -s "$tmp/b1.err" "$tmp/bj.err"
  then ok "bench --jobs $j $desc: identical to one process (exit $rj)"
  else nok "bench --jobs $j $desc: exit $rj (one process $r1): $(head -c 300 "$tmp/bj.err")"; fi
}
bsame 2 "all-reduce 16 ranks, 8 B to 256 MiB" "$tmp/p2.xml" --ranks 16 -b 8 -e 256M -f 4
bsame 3 "all-to-all, nccl-tests layout" "$tmp/p2.xml" --ranks 16 --coll all-to-all -b 1K -e 64M -f 8 --format nccl-tests
bsame 3 "--check 1, JSON" "$plat" --ranks 8 --coll reduce-scatter -b 64 -e 1M -f 4 --check 1 --json
# 16: every size fails: the first size's error, once
bsame 3 "collnet without SHARP (every size refused)" "$plat" --ranks 8 --algo collnet-direct -b 1K -e 1M -f 4
# 17: --jobs out of range
expect_fail "bench --jobs -1: refused in one line" "--jobs -1: processes from 1 to 1024" bench "$plat" --ranks 8 --jobs -1
