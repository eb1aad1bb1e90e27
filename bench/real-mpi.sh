#!/bin/sh
# The MPI host transport against Open MPI's own collectives on this machine:
# spsim's lowered ring all-reduce and pairwise (direct) all-to-all, run by
# spsim-run over MPI_Isend/MPI_Irecv, versus MPI_Allreduce / MPI_Alltoall
# (spsim-run --native) on the same sizes, np 2 and 4. Prints both tables and
# the ratio lowered/native of the median times per size.
#   bench/real-mpi.sh [BUILDDIR]   (default _build/release or .)
# Use a build without sanitizers for numbers (./build.sh release).
# Each configuration is launched RUNS times (default 3), lowered and native
# alternating; a table entry is the median over the launches of spsim-run's
# per-launch median time. Timings of one launch move by up to 2x on a shared VM.
set -eu
build=${1:-}
[ -n "$build" ] || for d in _build/release _build/default .; do [ -x "$d/spsim-run" ] && build=$d && break; done
run="$build/spsim-run"
[ -x "$run" ] || { echo "bench/real-mpi.sh: spsim-run not found (pass the build dir)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
SIZES=${SIZES:-1K:64M}
ITERS=${ITERS:-10}
RUNS=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# median FILE: "size time" lines (several per size) -> "size median", by size
median() {
  sort -k1,1n -k2,2g "$1" | awk '{ n[$1]++; v[$1, n[$1]] = $2 }
    END { for (s in n) { k = n[s]; print s, (k % 2) ? v[s, (k + 1) / 2] : (v[s, k / 2] + v[s, k / 2 + 1]) / 2 } }' |
    sort -k1,1
}
echo "# bench/real-mpi.sh on $(uname -n): $(nproc) cores, $(mpirun --version | head -1), median of $RUNS launches"
for np in 2 4; do
  for pair in "all-reduce ring" "all-to-all direct"; do
    set -- $pair
    op=$1; algo=$2
    : >"$tmp/l"
    : >"$tmp/n"
    i=0
    while [ $i -lt "$RUNS" ]; do
      mpirun -np $np "$run" --op $op --algo $algo --time --sizes "$SIZES" --iters "$ITERS" --warmup 3 |
        grep -v '^#' | awk '{print $1, $5}' >>"$tmp/l"
      mpirun -np $np "$run" --op $op --native --time --sizes "$SIZES" --iters "$ITERS" --warmup 3 |
        grep -v '^#' | awk '{print $1, $5}' >>"$tmp/n"
      i=$((i + 1))
    done
    echo
    echo "## $op, np $np: lowered ($algo) vs native MPI"
    printf "# %12s %14s %14s %8s\n" "size(B)" "lowered(us)" "native(us)" "ratio"
    median "$tmp/l" >"$tmp/l2"
    median "$tmp/n" >"$tmp/n2"
    join "$tmp/l2" "$tmp/n2" | sort -k1,1n |
      awk '{printf "  %12d %14.2f %14.2f %8.2f\n", $1, $2, $3, ($3 > 0 ? $2 / $3 : 0)}'
  done
done
