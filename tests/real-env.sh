# Shared setup of the spsim-run shell tests (sourced): paths, a scratch directory,
# Open MPI as root (CI) with more ranks than cores, and ASan's leak checker off
# (it reports Open MPI's own leaks; the other checks stay on). Skips the whole
# test when mpirun is missing.
build="${SPSIM_BUILDDIR:-.}"
src="${SPSIM_SRCDIR:-.}"
run="$build/spsim-run"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="${MPIRUN:-mpirun}"
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
  echo "1..0 # SKIP mpirun not found"
  exit 0
fi
