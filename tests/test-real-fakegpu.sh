#!/bin/sh
# The CUDA transports of spsim-run on the fake device (tests/fakegpu): device
# buffers, deferred streams and NCCL point-to-point stood in by host memory and
# MPI, so the transports' logic runs in CI without a GPU. What it checks:
#  - identity: for --transport nccl and cuda-mpi, every collective at 2 and 4
#    ranks (f32, bf16, i32), every algorithm on several ring chunks, AVG on
#    bf16 (the SCALE kernel), 8 ranks for the strided all-to-all:
#      mpirun -np N spsim-run-fakegpu --transport T --op OP ... --checksum
#    prints the same checksum lines as
#      spsim verify platforms/small.xml --op OP --ranks N ... --checksum;
#  - every graph operation of the library (Ulysses, TP, ISP, ring attention,
#    pipelines, ...) at 4 ranks on both transports and 2 on NCCL, checksums
#    equal to spsim verify (model kernels of COMPUTE steps run on the host);
#  - --native on NCCL (the fake runs NCCL's collectives by their definitions):
#    PASS within the tolerance for every collective;
#  - faults: two NCCL ranks on one GPU, no GPU, a deadlocking schedule, and
#    injected faults (out of device
#    memory, a faulting kernel, an NCCL group failing asynchronously) each end
#    non-zero with a message naming the rank and the call, in bounded time.
# The fake checks every pointer: a host buffer handed to a kernel, a copy of
# the wrong direction or NCCL fails the run naming the pointer.
. "$(dirname "$0")/real-env.sh"
run="$build/tests/spsim-run-fakegpu"
platform="$src/platforms/small.xml"
if [ ! -x "$run" ] || [ ! -x "$build/spsim" ]; then
  echo "1..0 # SKIP spsim-run-fakegpu or spsim not built"
  exit 0
fi
export SPSIM_FAKEGPU_DEVICES=8

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# judge DESC PASS_PATTERN: spsim-run's output ($tmp/out) has the PASS line and
# the checksum lines of spsim verify's ($tmp/vout), byte for byte
judge() {
  grep '^checksum ' "$tmp/vout" >"$tmp/want"
  grep '^checksum ' "$tmp/out" >"$tmp/got"
  if ! grep -q "$2" "$tmp/out"; then
    nok "$1: no PASS line: $(cat "$tmp/out")"
  elif ! grep -q '^checksum all=0x[0-9a-f]\{16\}$' "$tmp/want" || ! cmp -s "$tmp/want" "$tmp/got"; then
    nok "$1: checksums differ"
    sed 's/^/#   want /' "$tmp/want"; sed 's/^/#   got  /' "$tmp/got"
  else
    ok "$1"
  fi
}

# case_ TRANSPORT NP OP DTYPE COUNT [EXTRA FLAGS...]: checksums equal to spsim verify
case_() {
  tr=$1; np=$2; op=$3; dt=$4; cnt=$5; shift 5
  desc="$tr $op $dt count=$cnt np=$np${*:+ $*}"
  if ! "$build/spsim" verify "$platform" --op "$op" --ranks "$np" --dtype "$dt" --count "$cnt" \
       "$@" --checksum >"$tmp/vout" 2>"$tmp/verr"; then
    nok "$desc: spsim verify failed: $(head -3 "$tmp/verr")"; return
  fi
  if ! timeout 120 "$MPIRUN" -np "$np" "$run" --transport "$tr" --op "$op" --dtype "$dt" \
       --count "$cnt" "$@" --checksum >"$tmp/out" 2>"$tmp/err"; then
    nok "$desc: spsim-run failed: $(head -c 800 "$tmp/err")"; return
  fi
  judge "$desc" "^PASS $op .*transport=$tr"
}

for tr in nccl cuda-mpi; do
  for op in all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv; do
    for dt in f32 bf16 i32; do
      case_ $tr 2 $op $dt 1001
    done
    case_ $tr 4 $op f32 4099
  done
  # several ring chunks and strided messages, every algorithm
  for algo in ring direct tree; do
    case_ $tr 4 all-reduce bf16 300000 --algo $algo
  done
  case_ $tr 4 reduce-scatter f32 100003 --algo ring --chunk 65536
  case_ $tr 4 all-reduce bf16 5001 --redop avg
  case_ $tr 8 all-to-all f32 999
done
# cuda-mpi lets ranks share a GPU (NCCL does not): 4 ranks on one device
SPSIM_FAKEGPU_DEVICES=1
case_ cuda-mpi 4 all-to-all bf16 1001
SPSIM_FAKEGPU_DEVICES=8

# graph operations of the library (the list from spsim-run's unknown --op message):
# messages and local steps on the device, COMPUTE kernels staged through the host
colls="all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv"
graph_ops=$(SPSIM_FAKEGPU_DEVICES=1 "$MPIRUN" -np 1 "$run" --op no-such-op 2>&1 |
  sed -n "s/.*unknown --op 'no-such-op': use one of //p" | tr -d ',' | tr ' ' '\n' |
  grep -v '^$' | grep -vx "$(echo $colls | tr ' ' '\n')" | tr '\n' ' ')
[ -n "$graph_ops" ] && ok "graph operations listed: $graph_ops" || nok "no graph operation listed"
graph_case() { # TRANSPORT NP OP
  tr=$1; np=$2; op=$3; desc="$tr graph $op np=$np"
  if ! "$build/spsim" verify "$platform" --op "$op" --ranks "$np" --checksum >"$tmp/vout" 2>"$tmp/verr"; then
    if grep -qi 'must be\|divisib\|multiple\|cannot\|needs' "$tmp/verr"; then
      ok "$desc # SKIP the operation rejects $np ranks"; return
    fi
    nok "$desc: spsim verify failed: $(head -3 "$tmp/verr")"; return
  fi
  if ! timeout 120 "$MPIRUN" -np "$np" "$run" --transport "$tr" --op "$op" --checksum \
       >"$tmp/out" 2>"$tmp/err"; then
    nok "$desc: spsim-run failed: $(head -c 800 "$tmp/err")"; return
  fi
  judge "$desc" "^PASS $op graph .*transport=$tr"
}
for op in $graph_ops; do
  graph_case nccl 4 "$op"
  graph_case cuda-mpi 4 "$op"
  graph_case nccl 2 "$op"
done

# --native: NCCL's own collectives, compared with a tolerance
for op in all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv; do
  for dt in f32 bf16; do
    if timeout 120 "$MPIRUN" -np 4 "$run" --transport nccl --native --op $op --dtype $dt \
         --count 1001 >"$tmp/out" 2>"$tmp/err" && grep -q "^PASS $op .*transport=nccl" "$tmp/out"; then
      ok "nccl --native $op $dt np=4"
    else
      nok "nccl --native $op $dt np=4: $(head -c 600 "$tmp/out" "$tmp/err")"
    fi
  done
done

# --time on NCCL prints the spsim bench table shape (size, count, type, op, time, algbw, busbw)
if timeout 120 "$MPIRUN" -np 2 "$run" --transport nccl --op all-reduce --time --sizes 1K:4K \
     --iters 2 --warmup 1 >"$tmp/out" 2>"$tmp/err" &&
   [ "$(grep -cv '^#' "$tmp/out")" = 3 ] && grep -q '^# spsim-run (measured): .*transport nccl' "$tmp/out"; then
  ok "nccl --time: one row per size"
else
  nok "nccl --time: $(head -c 600 "$tmp/out" "$tmp/err")"
fi

# faults: FAKE_DEVICES NP DESC RC PATTERN ARGS... ($fail: the injected failure, if any)
fault() {
  devs=$1; np=$2; desc=$3; want=$4; pat=$5; shift 5
  SPSIM_FAKEGPU_DEVICES=$devs SPSIM_FAKEGPU_FAIL=${fail:-} timeout 120 "$MPIRUN" -np "$np" "$run" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?  # 124: the hang guard fired; no case asserts on elapsed time
  if [ "$rc" -ne "$want" ]; then nok "$desc: exit $rc, want $want: $(head -c 600 "$tmp/err")"
  elif ! grep -Eq -- "$pat" "$tmp/err"; then nok "$desc: stderr lacks /$pat/: $(head -c 600 "$tmp/err")"
  else ok "$desc"; fi
}
fault 1 2 "nccl: two ranks on one GPU are refused, pointing at cuda-mpi" 4 \
  "this node runs 2 ranks on 1 GPU; .*--transport cuda-mpi" --transport nccl --op all-reduce
fault 0 2 "no GPU: the CUDA call is named" 4 "cudaGetDeviceCount failed" --transport cuda-mpi --op all-reduce
fault 8 3 "nccl deadlock: bounded by --timeout, names the call" 4 \
  "rank [0-2]: timed out after 2 s waiting for recv from rank [0-2] \(tag 7\) on the GPU" \
  --transport nccl --op all-reduce --debug-deadlock --timeout 2
fault 8 3 "cuda-mpi deadlock: bounded by --timeout, names the peer" 4 \
  "rank [0-2]: timed out after 2 s waiting for recv from rank [0-2] \(tag 7\)" \
  --transport cuda-mpi --op all-reduce --debug-deadlock --timeout 2
# injected GPU and NCCL errors on one rank (SPSIM_FAKEGPU_FAIL): the job ends, naming rank and call
export SPSIM_FAKEGPU_FAIL_RANK=1
fail=malloc:2; fault 8 2 "cudaMalloc out of memory: named" 4 \
  "rank 1: cudaMalloc failed: cudaErrorMemoryAllocation" --transport nccl --op all-reduce --count 1001
fail=kernel:1; fault 8 3 "a kernel faults: the sticky error is named" 4 \
  "rank 1: .*cudaErrorIllegalAddress" --transport cuda-mpi --op all-reduce --count 1001
fail=nccl:2; fault 8 3 "an NCCL group fails asynchronously: named" 4 \
  "rank 1: .*failed: remote process exited or there was a network error: injected" \
  --transport nccl --op all-reduce --count 1001
unset SPSIM_FAKEGPU_FAIL_RANK; fail=

echo "1..$n"
