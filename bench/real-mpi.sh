#!/bin/sh
# The MPI host transport against Open MPI's own collectives on this machine:
# spsim's lowered ring all-reduce and pairwise (direct) all-to-all, run by
# spsim-run over MPI_Isend/MPI_Irecv, versus MPI_Allreduce / MPI_Alltoall
# (spsim-run --native) on the same sizes, np 2 and 4. Prints both tables and
# the ratio lowered/native of the median times per size.
#   bench/real-mpi.sh [BUILDDIR]   (default _build/release or .)
# Use a build without sanitizers for numbers (./build.sh release).
set -eu
build=${1:-}
[ -n "$build" ] || for d in _build/release _build/default .; do [ -x "$d/spsim-run" ] && build=$d && break; done
run="$build/spsim-run"
[ -x "$run" ] || { echo "bench/real-mpi.sh: spsim-run not found (pass the build dir)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
SIZES=${SIZES:-1K:64M}
ITERS=${ITERS:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# bench/real-mpi.sh on $(uname -n): $(nproc) cores, $(mpirun --version | head -1)"
for np in 2 4; do
  for pair in "all-reduce ring" "all-to-all direct"; do
    set -- $pair
    op=$1; algo=$2
    mpirun -np $np "$run" --op $op --algo $algo --time --sizes "$SIZES" --iters "$ITERS" --warmup 3 >"$tmp/l"
    mpirun -np $np "$run" --op $op --native --time --sizes "$SIZES" --iters "$ITERS" --warmup 3 >"$tmp/n"
    echo
    echo "## $op, np $np: lowered ($algo) vs native MPI"
    printf "# %12s %14s %14s %8s\n" "size(B)" "lowered(us)" "native(us)" "ratio"
    grep -v '^#' "$tmp/l" | awk '{print $1, $5}' >"$tmp/l2"
    grep -v '^#' "$tmp/n" | awk '{print $1, $5}' >"$tmp/n2"
    join "$tmp/l2" "$tmp/n2" | awk '{printf "  %12d %14.2f %14.2f %8.2f\n", $1, $2, $3, ($3 > 0 ? $2 / $3 : 0)}'
  done
done
