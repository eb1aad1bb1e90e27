#!/bin/sh
# Dropless MoE dispatch (--moe ...,dropless=1): spsim verify passes (the run
# against the graph's reference bitwise, and against the single-device layer) at
# 4, 8 and 16 ranks with ep and etp > 1, forward and backward; spsim-run under
# mpirun -np 4 prints the same checksum lines as spsim verify; dropless=1 with
# capacity= is refused in one line. The per-destination counts themselves are
# checked against hand-derived routing in tests/test-ops-moe (/moe/layer-dropless).
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"

# pass PLATFORM OP RANKS OPTS: spsim verify prints PASS
pass() {
  if "$bin" verify "$src/platforms/$1" --op "$2" --ranks "$3" --moe "$4" >"$tmp/out" 2>"$tmp/err" &&
     grep -q "^PASS op=$2 ranks=$3 " "$tmp/out"; then ok "$2 --ranks $3 --moe $4"
  else nok "$2 --ranks $3 --moe $4: $(cat "$tmp/out" "$tmp/err" | head -3)"; fi
}
pass small.xml moe-layer 4 experts=8,topk=2,ep=2,etp=2,tokens=16,dropless=1
pass small.xml moe-layer-bwd 4 experts=4,topk=1,ep=2,etp=2,tokens=8,dropless=1
pass small.xml moe-layer 8 experts=8,topk=3,ep=4,etp=2,tokens=16,dropless=1
pass small.xml moe-layer-bwd 8 experts=8,topk=2,ep=2,etp=2,tokens=16,drop=position,dropless=1
pass small.xml moe-layer-bwd 8 experts=64,topk=8,ep=4,etp=2,tokens=16,dropless=1
pass dgx.xml moe-layer 16 dropless=1
pass dgx.xml moe-layer-bwd 16 experts=16,topk=4,ep=4,etp=2,tokens=16,dropless=1
pass dgx.xml moe-layer-bwd 16 experts=8,topk=2,ep=8,etp=2,tokens=8,dropless=1

# dropless keeps tokens the capacity would drop, so its output differs from the
# drop-and-pad layer's at the default capacity factor 1 (C = ceil(4 x 2 / 4) = 2 of
# 4 tokens: an expert chosen by 3 of a rank's tokens drops one)
"$bin" verify "$src/platforms/small.xml" --op moe-layer --ranks 4 --checksum | grep '^checksum all' >"$tmp/cap"
"$bin" verify "$src/platforms/small.xml" --op moe-layer --ranks 4 --moe dropless=1 --checksum |
  grep '^checksum all' >"$tmp/dl"
if [ -s "$tmp/cap" ] && [ -s "$tmp/dl" ] && ! cmp -s "$tmp/cap" "$tmp/dl"; then ok "dropless output differs from drop-and-pad"
else nok "dropless and drop-and-pad checksums: $(cat "$tmp/cap" "$tmp/dl")"; fi

# the refusal: one line, non-zero exit, nothing on stdout
for opts in dropless=1,capacity=2 capacity=1.5,dropless=1; do
  if "$bin" verify "$src/platforms/small.xml" --op moe-layer --ranks 4 --moe "$opts" >"$tmp/out" 2>"$tmp/err"; then
    nok "--moe $opts accepted"
  elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] &&
       grep -q "^spsim: moe options: dropless=1 keeps every routed token and has no capacity: leave out capacity=" "$tmp/err"; then
    ok "--moe $opts refused in one line"
  else nok "--moe $opts: $(cat "$tmp/out" "$tmp/err")"; fi
done

# too large for data mode: 16 ranks x 1024 experts x etp 4 = 65536 blocks > 32768
if "$bin" verify "$src/platforms/dgx.xml" --op moe-layer --ranks 16 \
     --moe experts=1024,topk=2,ep=4,etp=4,dropless=1 >"$tmp/out" 2>"$tmp/err"; then
  nok "a dropless case of 65536 blocks accepted"
elif [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "ranks x experts x etp = 65536 expert blocks, at most 32768" "$tmp/err"; then
  ok "a dropless case of 65536 blocks refused in one line"
else nok "65536 blocks: $(cat "$tmp/out" "$tmp/err")"; fi

# spsim-run under mpirun: the same checksum lines as spsim verify
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="${MPIRUN:-mpirun}"
for op in moe-layer moe-layer-bwd; do
  mo=experts=8,topk=2,ep=2,etp=2,tokens=16,dropless=1
  if ! command -v "$MPIRUN" >/dev/null 2>&1 || [ ! -x "$build/spsim-run" ]; then
    n=$((n + 1)); echo "ok $n # SKIP $op under mpirun: mpirun or spsim-run not found"; continue
  fi
  "$bin" verify "$src/platforms/small.xml" --op $op --ranks 4 --moe $mo --checksum | grep '^checksum ' >"$tmp/want"
  timeout 120 "$MPIRUN" -np 4 "$build/spsim-run" --op $op --moe $mo --checksum >"$tmp/out" 2>"$tmp/err"
  grep '^checksum ' "$tmp/out" >"$tmp/got"
  if grep -q "^PASS $op graph " "$tmp/out" && grep -q '^checksum all=' "$tmp/want" && cmp -s "$tmp/want" "$tmp/got"; then
    ok "mpirun -np 4 spsim-run --op $op --moe $mo: same checksums as spsim verify"
  else
    nok "$op under mpirun: $(cat "$tmp/out" "$tmp/err" | head -5)"
  fi
done
echo "1..$n"
