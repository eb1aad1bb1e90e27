#!/bin/sh
# Identity of the real backend (MPI host transport) with the simulation: for
# every collective, dtypes f32/bf16/i32 and 2, 4 and 8 ranks,
#   mpirun -np N spsim-run --op OP --dtype D --count C --checksum
# prints the same checksum lines, byte for byte, as
#   spsim verify platforms/small.xml --op OP --ranks N --dtype D --count C --checksum
# (SimGrid engine). While `spsim verify` or platforms/small.xml are not there,
# the reference is the same case run in process over the loopback transport
# (tests/test-real-ref); the TAP comment says which one was used.
# Expected values also come from an independent fact: an all-reduce gives
# every rank the same bytes, so its per-rank checksums must all be equal.
build="${SPSIM_BUILDDIR:-.}"
src="${SPSIM_SRCDIR:-.}"
run="$build/spsim-run"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Open MPI as root (CI) and more ranks than cores; ASan's leak checker reports
# Open MPI's own leaks, the other checks stay on.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="${MPIRUN:-mpirun}"

if ! command -v "$MPIRUN" >/dev/null 2>&1; then
  echo "1..0 # SKIP mpirun not found"
  exit 0
fi

# the reference: spsim verify when it is built, else the loopback helper
ref_kind=loopback
platform="$src/platforms/small.xml"
if [ -f "$platform" ] && [ -x "$build/spsim" ] &&
   "$build/spsim" verify "$platform" --op all-reduce --ranks 2 --dtype f32 --count 8 --checksum \
     >"$tmp/probe" 2>&1 && grep -q '^checksum all=' "$tmp/probe"; then
  ref_kind=verify
fi
reference() { # OP DTYPE COUNT N [ALGO]
  if [ $ref_kind = verify ]; then
    "$build/spsim" verify "$platform" --op "$1" --ranks "$4" --dtype "$2" --count "$3" \
      ${5:+--algo "$5"} --checksum | grep '^checksum '
  else
    "$build/tests/test-real-ref" "$1" "$2" "$3" "$4" $5
  fi
}

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

echo "# reference: $ref_kind"
# case OP DTYPE COUNT N [ALGO]
case_() {
  op=$1; dt=$2; cnt=$3; np=$4; algo=$5
  desc="$op $dt count=$cnt np=$np${algo:+ algo=$algo}"
  if ! reference "$op" "$dt" "$cnt" "$np" "$algo" >"$tmp/want" 2>"$tmp/referr"; then
    nok "$desc: reference failed: $(head -3 "$tmp/referr")"; return
  fi
  if ! timeout 120 "$MPIRUN" -np "$np" "$run" --op "$op" --dtype "$dt" --count "$cnt" \
       ${algo:+--algo "$algo"} --checksum >"$tmp/out" 2>"$tmp/err"; then
    nok "$desc: spsim-run failed: $(head -5 "$tmp/err")"; return
  fi
  grep '^checksum ' "$tmp/out" >"$tmp/got"
  if ! grep -q "^PASS $op " "$tmp/out"; then
    nok "$desc: no PASS line: $(cat "$tmp/out")"
  elif [ ! -s "$tmp/want" ] || ! cmp -s "$tmp/want" "$tmp/got"; then
    nok "$desc: checksums differ"
    sed 's/^/#   want /' "$tmp/want"; sed 's/^/#   got  /' "$tmp/got"
  else
    ok "$desc"
  fi
}

echo "1..69"
for np in 2 4 8; do
  for op in all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv; do
    for dt in f32 bf16 i32; do
      case_ $op $dt 1001 $np
    done
  done
done
# every lowering algorithm of the all-reduce, larger than one ring chunk
for algo in ring direct tree; do
  case_ all-reduce bf16 300000 4 $algo
done
case_ all-gather f32 5000 8 direct
case_ reduce-scatter f32 5000 8 tree

# independent check: all-reduce leaves the same bytes on every rank, and the
# lines have the canonical shape: one per rank in order, then the combination
if timeout 120 "$MPIRUN" -np 4 "$run" --op all-reduce --dtype f32 --count 257 --checksum \
     >"$tmp/out" 2>"$tmp/err" &&
   [ "$(grep -c '^checksum rank=[0-3] 0x[0-9a-f]\{16\}$' "$tmp/out")" = 4 ] &&
   [ "$(grep '^checksum rank=' "$tmp/out" | awk '{print $3}' | sort -u | wc -l)" = 1 ] &&
   grep -q '^checksum all=0x[0-9a-f]\{16\}$' "$tmp/out"; then
  ok "all-reduce: 4 equal per-rank checksums in canonical lines"
else
  nok "all-reduce checksum lines: $(cat "$tmp/out" "$tmp/err")"
fi
