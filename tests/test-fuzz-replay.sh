#!/bin/sh
# Fuzz harnesses (tests/fuzz) replayed over their seed corpus, one TAP line per
# harness: every seed must go through without a crash or a sanitizer report.
# bench/fuzz.sh runs the same harnesses under libFuzzer.
builddir="${SPSIM_BUILDDIR:-.}"
srcdir="${SPSIM_SRCDIR:-.}"
harnesses="model layout size topo misc platform nccltests gemmtable routing step"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
set -- $harnesses
echo "1..$#"
for h in $harnesses; do
  n=$((n + 1))
  prog="$builddir/tests/fuzz/replay-$h"
  corpus="$srcdir/tests/fuzz/corpus/$h"
  if [ ! -x "$prog" ] || [ ! -d "$corpus" ]; then
    echo "not ok $n - $h: missing $prog or $corpus"
    continue
  fi
  if "$prog" "$corpus" >"$tmp/$h.out" 2>"$tmp/$h.err"; then
    plan=$(grep -c '^ok ' "$tmp/$h.out")
    if grep -q "^1\.\.$plan\$" "$tmp/$h.out" && ! grep -q '^not ok' "$tmp/$h.out" && [ "$plan" -gt 0 ]; then
      echo "ok $n - $h: $plan inputs"
      continue
    fi
  fi
  echo "not ok $n - $h: last input $(grep '^ok ' "$tmp/$h.out" | tail -n 1)"
  sed 's/^/# /' "$tmp/$h.err" | tail -n 30
done
