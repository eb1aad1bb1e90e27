#!/usr/bin/env bash
# Configure spsim with -Werror, AddressSanitizer and UBSan in _build/check, build it
# and run the whole test suite (TAP). Installs nothing; see .ci/run for packages.
set -euo pipefail
cd "$(dirname "$0")/.."
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p _build/check
cd _build/check
[ -f Makefile ] || ../../configure --enable-werror --enable-sanitizers --quiet
jobs=$(nproc)
make -j"$jobs" >/dev/null
if ! make -j"$jobs" check; then
  for f in $(find . -name '*.log' -path '*tests*'); do grep -q '^not ok\|ERROR\|Sanitizer' "$f" 2>/dev/null && { echo "== $f"; tail -n 40 "$f"; }; done
  exit 1
fi
grep -h '^# \(PASS\|FAIL\|ERROR\|SKIP\|TOTAL\)' test-suite.log 2>/dev/null || true
