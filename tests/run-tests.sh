#!/usr/bin/env bash
# Build spsim with -Werror, AddressSanitizer and UBSan (_build/check) and run the
# whole test suite (GTest and shell tests, TAP). Packages: see .ci/deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh check
cd _build/check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if ! make -j"$(nproc)" check; then
  for f in $(find tests -name '*.log'); do
    grep -q '^not ok\|^ERROR\|Sanitizer\|runtime error' "$f" && { echo "== $f"; tail -n 40 "$f"; }
  done
  exit 1
fi
