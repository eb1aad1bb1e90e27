#!/bin/sh
# spsim-run under faults and bad input (MPI host transport): a rank that dies,
# ranks launched with different flags, a deadlocking schedule, a wrong result,
# bad flags. Every case must end non-zero within a bounded time with a message
# naming the rank and the cause. `timeout 120` turns a hang into a failure; no case
# asserts on elapsed time (a loaded machine must not fail a test), the messages
# show which bound fired.
# Also: the --time table shape and MPI's native collectives (--native).
. "$(dirname "$0")/real-env.sh"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# mpi NP ARGS...: run under timeout 120 (a hang guard); sets rc; output in $tmp/out, $tmp/err
mpi() {
  np=$1; shift
  timeout 120 "$MPIRUN" -np "$np" "$run" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# expect DESC RC PATTERN: exit status RC (124 is the hang guard), stderr matching
# PATTERN (grep -E)
expect() {
  if [ "$rc" -ne "$2" ]; then nok "$1: exit $rc, want $2: $(head -c 600 "$tmp/err")"
  elif ! grep -Eq -- "$3" "$tmp/err"; then nok "$1: stderr lacks /$3/: $(head -c 600 "$tmp/err")"
  else ok "$1"; fi
}

echo "1..20"

# 1-2: a rank exits before communicating: the job ends, non-zero, naming it
mpi 3 --op all-reduce --count 64 --debug-die-rank 1
expect "rank 1 exits: job ends non-zero" 3 "rank 1: exiting with status 3"
mpi 4 --op all-to-all --count 64 --debug-die-rank 3 --timeout 5
expect "rank 3 exits mid-run: job ends non-zero, mpirun names the rank" 3 "\[\[[0-9]+,1\],3\]"

# 3: ranks launched with different flags
mpi 3 --op all-reduce --count 64 --debug-flag-mismatch
expect "mismatched flags: rank 0 names the flag" 2 "ranks disagree on flags \(--count differs"
if [ "$(grep -c '^spsim-run:' "$tmp/err")" = 1 ]; then ok "mismatched flags: one message"
else nok "mismatched flags: $(grep -c '^spsim-run:' "$tmp/err") messages"; fi

# 5-6: a schedule that deadlocks: every rank times out naming the peer it waits for
mpi 3 --op all-reduce --debug-deadlock --timeout 2
expect "deadlock: bounded by --timeout, names the peer" 4 \
  "rank [0-2]: timed out after 2 s waiting for recv from rank [0-2] \(tag 7\)"
# rank r of the deadlock waits for rank (r + 1) mod 3: the message names that peer
if grep -Eq "rank (0: .* from rank 1|1: .* from rank 2|2: .* from rank 0) \(tag 7\)" "$tmp/err" &&
   ! grep -Eq "rank (0: .* from rank [02]|1: .* from rank [01]|2: .* from rank [12]) \(tag" "$tmp/err"
then ok "deadlock: the named peer is the one never sending"
else nok "deadlock peer: $(head -c 600 "$tmp/err")"; fi

# 7: a wrong result is reported, never a silent checksum
mpi 2 --op all-gather --count 100 --checksum --debug-corrupt-rank 1
if [ "$rc" -eq 1 ] && grep -q '^FAIL all-gather .*rank 1 differs' "$tmp/out" &&
   grep -q 'rank 1: FAIL: .*differs from the reference' "$tmp/err"; then ok "corrupted result: FAIL, exit 1"
else nok "corrupted result: rc=$rc $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi

# 8-11: bad flags: one line from rank 0, exit 2
mpi 2 --op all-sum
expect "unknown op" 2 "^spsim-run: unknown --op 'all-sum': use one of all-reduce"
[ "$(wc -l <"$tmp/err" | tr -d ' ')" -ge 1 ] && [ "$(grep -c '^spsim-run:' "$tmp/err")" = 1 ] \
  && ok "unknown op: one message" || nok "unknown op: $(cat "$tmp/err")"
mpi 2 --op all-reduce --ranks 3
expect "--ranks differs from -np" 2 "^spsim-run: --ranks 3 but mpirun launched 2 ranks"
mpi 2 --op all-reduce --timeout -1
expect "bad --timeout" 2 "^spsim-run: --timeout must be"
mpi 1 --op send-recv
expect "send-recv on one rank: says to launch two" 2 "^spsim-run: send-recv goes from rank 0 to the last rank: launch 2 or more"
mpi 2 --op all-reduce --count 0
expect "--count 0 is refused, not replaced by the default" 2 "^spsim-run: --count must be at least 1 \(got 0\)"
mpi 2 --op all-reduce --count 100000000000000000
expect "a count beyond host memory is refused with the sizes" 2 \
  "^spsim-run: all-reduce of 100000000000000000 f32 elements per rank needs .* more than this machine's"

# 12: the GPU transport without a GPU (or without CUDA in the build) fails clearly
mpi 2 --op all-reduce --transport nccl --timeout 20
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -Eq "built without CUDA/NCCL \(configure --with-cuda=DIR\)|rank [01]: (cuda|nccl)[A-Za-z]+ failed|no CUDA device" "$tmp/err"; then
  ok "nccl transport without GPU: clear error"
elif [ "$rc" -eq 0 ]; then ok "nccl transport: a GPU is present and the run passed # SKIP has a GPU"
else nok "nccl transport: rc=$rc $(head -c 600 "$tmp/err")"; fi

# 13-14: --time prints the spsim bench table: 3 sizes, 7 columns, positive times
mpi 2 --op all-reduce --time --sizes 1K:4K --iters 3 --warmup 1
rows=$(grep -v '^#' "$tmp/out" | awk 'NF == 7 && $1 ~ /^[0-9]+$/ && $5 > 0' | wc -l)
if [ "$rc" -eq 0 ] && [ "$rows" = 3 ] && grep -q '^#  *size  *count  *type  *algo  *time  *algbw  *busbw' "$tmp/out"
then ok "--time: table of 3 sizes"
else nok "--time: rc=$rc rows=$rows $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi
# sizes are bytes, counts per rank follow the nccl-tests convention: 1024 B
# all-gather on 2 ranks of f32 = 128 elements per rank
mpi 2 --op all-gather --time --sizes 1K --iters 2 --warmup 0
if grep -v '^#' "$tmp/out" | awk '$1 == 1024 && $2 == 128 {f=1} END {exit !f}'; then ok "--time: all-gather counts"
else nok "--time all-gather: $(cat "$tmp/out" "$tmp/err" | head -c 600)"; fi

# 15-16: MPI's own collectives, checked with a tolerance
bad=""
for op in all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv; do
  mpi 4 --op $op --dtype f32 --count 999 --native
  [ "$rc" -eq 0 ] && grep -q "^PASS $op native" "$tmp/out" || bad="$bad $op"
done
[ -z "$bad" ] && ok "--native f32: every collective" || nok "--native f32 failed:$bad"
mpi 4 --op all-reduce --dtype bf16 --redop avg --count 999 --native
[ "$rc" -eq 0 ] && grep -q "^PASS all-reduce native bf16 avg" "$tmp/out" && ok "--native bf16 avg (user MPI_Op)" \
  || nok "--native bf16 avg: $(cat "$tmp/out" "$tmp/err" | head -c 600)"

# 20: a native (blocking) MPI collective whose peer is alive but never calls it:
# the watchdog bounds it by --timeout and names the call
mpi 2 --op all-reduce --native --count 1000 --timeout 3 --debug-hang-rank 1
expect "--native with a hanging peer: bounded by --timeout, names the call" 4 \
  "rank 0: no progress for 3 s in MPI_Allreduce \(--native\)"
