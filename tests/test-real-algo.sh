#!/bin/sh
# spsim-run --algo: the names `spsim bench --algo` accepts (spsim's and NCCL_ALGO's
# spellings), each running its lowered schedule on the MPI host transport, and the
# combinations no transport can run refused in one line.
#   mpirun -np 4 spsim-run --op all-reduce --dtype i32 --algo A --checksum
# An i32 sum is exact in any order, so every algorithm must leave the bytes of the
# ring's all-reduce: the same per-rank and combined checksums.
. "$(dirname "$0")/real-env.sh"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# --help lists every algorithm name `spsim bench --algo` documents
"$MPIRUN" -np 1 "$run" --help >"$tmp/help" 2>&1
for a in auto ring tree direct nvls pat nvls-tree collnet-direct collnet-chain; do
  if grep -A4 -- '--algo' "$tmp/help" | grep -q -- "[ ,]$a[ ,)]"; then
    ok "spsim-run --help lists --algo $a"
  else
    nok "spsim-run --help lacks --algo $a: $(grep -A4 -- '--algo' "$tmp/help")"
  fi
done

runalgo() { # ALGO NP COUNT -> $tmp/out, $tmp/err
  timeout 120 "$MPIRUN" -np "$2" "$run" --op all-reduce --dtype i32 --count "$3" --algo "$1" \
    --checksum >"$tmp/out" 2>"$tmp/err"
}

for np in 4 8; do
  if ! runalgo ring $np 70001; then
    nok "ring np=$np: $(head -3 "$tmp/err")"; continue
  fi
  grep '^checksum ' "$tmp/out" >"$tmp/want"
  for a in nvls-tree collnet-direct collnet-chain nvls tree NVLSTree CollNetDirect CollNetChain; do
    if ! runalgo $a $np 70001; then
      nok "$a np=$np: spsim-run failed: $(head -3 "$tmp/err")"
    elif ! grep -q '^PASS all-reduce ' "$tmp/out"; then
      nok "$a np=$np: no PASS line: $(cat "$tmp/out")"
    elif [ "$(grep -c '^checksum rank=' "$tmp/want")" != $np ] || ! grep '^checksum ' "$tmp/out" | cmp -s - "$tmp/want"; then
      nok "$a np=$np: checksums differ from the ring's"
    else
      ok "$a np=$np: the ring's bytes on every rank"
    fi
  done
done

# refused in one line: an algorithm the collective lacks, --algo with --native, an unknown name
refuse() { # DESC PATTERN ARGS...
  desc=$1 pat=$2; shift 2
  if timeout 60 "$MPIRUN" -np 2 "$run" "$@" >"$tmp/out" 2>"$tmp/err"; then
    nok "$desc: accepted"
  elif [ "$(grep -c '^spsim-run: ' "$tmp/err")" = 1 ] && grep -q "^spsim-run: .*$pat" "$tmp/err"; then
    ok "$desc: refused in one line"
  else
    nok "$desc: $(cat "$tmp/err")"
  fi
}
refuse "all-reduce --algo pat" "no pat algorithm" --op all-reduce --algo pat
refuse "--native --algo nvls-tree" "--algo nvls-tree does not apply to --native" --op all-reduce --native --algo nvls-tree
refuse "--algo nvls_tree" "unknown algorithm 'nvls_tree'" --op all-reduce --algo nvls_tree
echo "1..$n"
