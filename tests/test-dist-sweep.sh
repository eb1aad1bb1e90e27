#!/bin/sh
# The what-if spread over mpirun's ranks (mpirun -np N spsim PLATFORM.xml): its
# standard output, standard error and documents must be those of the same what-if
# run by one process, byte for byte, at -np 2 and 3 (the other ranks print nothing;
# results do not depend on which rank priced a layout). On platforms/small.xml (8
# GPUs, 4 per node) with models/tiny.json, so that each run takes seconds under
# AddressSanitizer: the sweep (2,349 layouts, their step graphs), --all with every
# layout's row, one --layout, --simulate 0, and a what-if where nothing fits (exit 1
# and one error line, as one process says it; a bad flag: one error line); one report,
# not one per rank. A rank that fails alone before the what-if begins (a file missing
# on its node) is named by rank 0 and the job ends; no rank's exit cuts rank 0's error
# line short. spsim-mpi-relay refuses to be run by hand.
. "$(dirname "$0")/real-env.sh"
spsim="$build/spsim"
relay="$build/spsim-mpi-relay"
plat="$src/platforms/small.xml"
A="--model tiny --seq 256 --global-batch 8"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

echo "1..15"

# same NP DESC ARGS...: one process and NP ranks write the same stdout, stderr, exit
# status, --json and --csv
same() {
  np=$1; desc=$2; shift 2
  (cd "$tmp" && "$spsim" "$plat" $A "$@" -j 1 --json one.json --csv one.csv >one.out 2>one.err); r1=$?
  (cd "$tmp" && timeout 300 "$MPIRUN" -np "$np" "$spsim" "$plat" $A "$@" --json many.json --csv many.csv >many.out 2>many.err); rn=$?
  why=""
  [ "$r1" -eq "$rn" ] || why="exit $rn, one process $r1"
  for f in out json csv; do
    [ -f "$tmp/one.$f" ] || continue
    cmp -s "$tmp/one.$f" "$tmp/many.$f" || why="$why; $f differs"
  done
  # mpirun adds its own lines after a non-zero exit: the spsim lines must be the same
  grep '^spsim' "$tmp/one.err" >"$tmp/one.spsim"; grep '^spsim' "$tmp/many.err" >"$tmp/many.spsim"
  cmp -s "$tmp/one.spsim" "$tmp/many.spsim" || why="$why; stderr differs: $(head -c 300 "$tmp/many.err")"
  if [ -n "$why" ]; then nok "np=$np $desc: ${why#; }"; else ok "np=$np $desc: identical to one process"; fi
  rm -f "$tmp"/one.* "$tmp"/many.*
}

# 1-2: the sweep, with its step graphs
same 2 "sweep"
same 3 "sweep"
# 3-4: every layout's row
same 2 "--all" --all
same 3 "--all --json-full" --all --json-full
# 5: one layout (fewer layouts than ranks)
same 3 "--layout tp=2,pp=2,dp=2" --layout tp=2,pp=2,dp=2
# 6: the closed form alone
same 2 "--simulate 0" --simulate 0
# 7: more step graphs than ranks, --explain
same 3 "--simulate 20 --explain" --simulate 20 --explain
# 8: nothing fits in 0.001 GiB: exit 1, one error line on rank 0
same 2 "nothing fits" --gpu-mem 0.001
# 9: a bad request: the same one line
same 2 "bad --seq" --seq 0
# 10: an unknown flag: the same one line, not one per rank
same 3 "unknown flag" --no-such-flag

# 11: 3 ranks, one report: one header line and one table, from rank 0
(cd "$tmp" && timeout 300 "$MPIRUN" -np 3 "$spsim" "$plat" $A >many.out 2>many.err)
h=$(grep -c '^spsim what-if: tiny' "$tmp/many.out"); t=$(grep -c '^  #  layout' "$tmp/many.out")
if [ "$h" = 1 ] && [ "$t" = 1 ]; then ok "np=3: one header and one table"
else nok "np=3: $h headers and $t tables, want 1 and 1: $(head -c 400 "$tmp/many.out")"; fi

# 12: the relay is spsim's, not a command
"$relay" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 2 ] && grep -q "not run by hand" "$tmp/err"; then ok "spsim-mpi-relay run by hand: exit 2 with why"
else nok "spsim-mpi-relay run by hand: exit $rc: $(cat "$tmp/err")"; fi

# ranked ARGS0 -- ARGS: rank 0 runs spsim with ARGS0 after a 2 s pause (the other
# ranks reach their end first), the other ranks with ARGS
cat >"$tmp/ranked.sh" <<'EOS'
#!/bin/sh
exe=$1; shift
a0=""; while [ "$1" != "--" ]; do a0="$a0 $1"; shift; done; shift
if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then sleep 2; exec "$exe" $a0; fi
exec "$exe" "$@"
EOS
chmod +x "$tmp/ranked.sh"

# 13: every rank fails on a bad flag and rank 0 is the last to get there: its line is
# out, once, before the job ends (the others wait for it)
(cd "$tmp" && timeout 300 "$MPIRUN" -np 3 "$tmp/ranked.sh" "$spsim" "$plat" $A --no-such-flag -- "$plat" $A --no-such-flag \
  >out 2>err); rc=$?
c=$(grep -c '^spsim: .*no-such-flag' "$tmp/err")
if [ "$rc" -eq 2 ] && [ "$c" = 1 ]; then ok "np=3, rank 0 last to fail: its one line, exit 2"
else nok "np=3, rank 0 last to fail: exit $rc, $c lines: $(head -c 400 "$tmp/err")"; fi

# 14: rank 1 alone cannot read its platform: rank 0 names rank 1 and why, the job ends
(cd "$tmp" && timeout 300 "$MPIRUN" -np 2 "$tmp/ranked.sh" "$spsim" "$plat" $A -- "$tmp/no-such.xml" $A \
  >out 2>err); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q '^spsim: rank 1 of the mpirun job: .*no-such.xml' "$tmp/err"
then ok "np=2, rank 1 fails alone: rank 0 names it, exit $rc"
else nok "np=2, rank 1 fails alone: exit $rc: $(head -c 600 "$tmp/err")"; fi

# 15: rank 0 alone cannot read its platform: its line, and the job ends
(cd "$tmp" && timeout 300 "$MPIRUN" -np 2 "$tmp/ranked.sh" "$spsim" "$tmp/no-such.xml" $A -- "$plat" $A \
  >out 2>err); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(grep -c '^spsim: .*no-such.xml' "$tmp/err")" = 1 ]
then ok "np=2, rank 0 fails alone: its line, exit $rc"
else nok "np=2, rank 0 fails alone: exit $rc: $(head -c 600 "$tmp/err")"; fi
