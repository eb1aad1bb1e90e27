#!/usr/bin/env bash
# Build spsim out of tree: ./build.sh [release|check] [extra configure flags...]
#   release: optimised build in _build/release (the spsim you run)
#   check:   -Werror + AddressSanitizer/UBSan build in _build/check (the one tests use)
set -euo pipefail
cd "$(dirname "$0")"
kind=${1:-release}; shift || true
case $kind in
  release) flags=(CFLAGS="-O2 -g") ;;
  check)   flags=(--enable-werror --enable-sanitizers CFLAGS="-O1 -g") ;;
  *) echo "build.sh: unknown build kind '$kind' (release or check)" >&2; exit 2 ;;
esac
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p "_build/$kind"
cd "_build/$kind"
[ -f Makefile ] || ../../configure --quiet "${flags[@]}" "$@"
make -j"$(nproc)" >/dev/null
echo "build.sh: built _build/$kind/spsim"
