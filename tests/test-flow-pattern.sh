#!/bin/sh
# FLOW summaries of ring collectives: from the posts of one block and a repeat
# count (sp_lower_coll_pattern, sp_flow_sum_feed_repeat), or from every step of
# the lowering (SPSIM_FLOW_STEPS): spsim bench prints the same table, byte for
# byte, for all-reduce, all-gather and reduce-scatter over sizes with empty
# chunks (odd counts, sizes below one element per member, several chunk rounds),
# one or several channels, in and across nodes, and for the schedules the pattern
# does not cover (they take the step path either way).
bin="${SPSIM_BUILDDIR:-.}/spsim"
src="${SPSIM_SRCDIR:-.}"
small="$src/platforms/small.xml"
dgx="$src/platforms/dgx.xml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
# same DESC ARGS...: the table with the pattern equals the one without
same() {
  desc=$1; shift
  if ! "$bin" bench "$@" >"$tmp/a" 2>"$tmp/ea"; then nok "$desc: $(cat "$tmp/ea")"; return; fi
  if ! SPSIM_FLOW_STEPS=1 "$bin" bench "$@" >"$tmp/b" 2>"$tmp/eb"; then nok "$desc (steps): $(cat "$tmp/eb")"; return; fi
  if cmp -s "$tmp/a" "$tmp/b"; then ok "$desc"; else nok "$desc: $(diff "$tmp/a" "$tmp/b" | head -4)"; fi
}
echo "1..15"
for c in all-reduce all-gather reduce-scatter; do
  same "$c, 8 ranks on 2 nodes, 1 B to 64 MiB" "$small" --coll "$c" --ranks 8 --sizes 1:64M --dtype half
  same "$c, 3 ranks, odd sizes" "$small" --coll "$c" --ranks 3 -b 7 -e 100000 -i 9973 --dtype bfloat16
  same "$c, 64 ranks of dgx, 4 KiB to 256 MiB, chunk 64 KiB" "$dgx" --coll "$c" --ranks 64 --sizes 4K:256M --chunk 65536
done
same "all-reduce, 2 ranks (next = prev), 4 channels" "$small" --coll all-reduce --ranks 2 --channels 4 --sizes 1:16M
same "all-reduce avg, 6 ranks, 4 per node" "$small" --coll all-reduce --ranks 6 --per-node 3 --op avg --sizes 1:16M
same "all-reduce, 24 ranks across 3 dgx nodes, 16 channels" "$dgx" --coll all-reduce --ranks 24 --channels 16 --sizes 1K:64M
same "all-reduce, tree and direct (no pattern)" "$small" --coll all-reduce --ranks 8 --algo tree --sizes 1K:1M
same "broadcast (no pattern)" "$small" --coll broadcast --ranks 8 --sizes 1K:16M
same "all-reduce, step fidelity" "$small" --coll all-reduce --ranks 8 --fidelity step --sizes 1K:1M
