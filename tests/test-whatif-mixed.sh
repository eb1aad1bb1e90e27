#!/bin/sh
# The what-if on a mixed cluster: 2 nodes of 4 GPUs (spsim platform dgx --nodes 2
# --gpus-per-node 4), the first node's hosts rewritten as A100 SXM4 40GB (312 TFLOP/s
# dense bf16, 40 GiB = 42949672960 bytes, 1,555 GB/s HBM: NVIDIA A100 datasheet), the
# second's left H100 SXM5 80GB. (The first host's GPU generation picks NCCL's tuning
# for the collectives, as on any platform: the A100 first, so that the all-A100
# cluster below prices its collectives alike.) A
# synchronous step waits for its slowest GPU and a layout must fit on the GPU with the
# least memory, so the expectations are:
#   1. the header says "mixed cluster:" with both kinds, 4 of each, and prices at
#      312.0 TFLOP/s and 40.0 GiB (92% usable: 36.8 GiB);
#   2. its ranking is that of the same cluster with all 8 GPUs A100 40GB (the same
#      links): every row and figure;
#   3. its winner fits in 40 GiB x 0.92 = 39514607206 bytes, while on the all-H100
#      cluster (80 GiB) the winner needs more than that (so the smaller memory decides);
#   4. --gpus 4 uses the first node only: not mixed, 312.0 TFLOP/s;
#   5. with the A100 node at 2 MB (2000000 bytes), no layout of the tiny model fits:
#      exit 1, "does not fit in 0.0 GiB per GPU (the smallest GPU of this mixed
#      cluster)", one error line.
build="${SPSIM_BUILDDIR:-.}"
spsim="$build/spsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
echo "1..7"

"$spsim" platform dgx --nodes 2 --gpus-per-node 4 -o "$tmp/h100.xml" || { echo "Bail out! cannot generate a platform"; exit 1; }
# slow NODES MEM: the hosts of NODES (a sed address) as A100 40GB with gpu_mem MEM
slow() {
  sed -e "/$1/s/speed=\"989.4Tf\"/speed=\"312Tf\"/" -e "/$1/s/H100-SXM5-80GB/A100-SXM4-40GB/" \
      -e "/$1/s/value=\"85899345920\"/value=\"$2\"/" -e "/$1/s/value=\"3350000000000\"/value=\"1555000000000\"/" "$tmp/h100.xml"
}
slow 'node000-gpu' 42949672960 >"$tmp/mixed.xml"
slow '-gpu[0-9]' 42949672960 >"$tmp/a100.xml"
slow 'node000-gpu' 2000000 >"$tmp/tiny-mem.xml"
A="--model llama3-8b --seq 4096 --global-batch 64 --micro-batch 1 --simulate 4 --top 5"

"$spsim" "$tmp/mixed.xml" $A --json "$tmp/mixed.json" >"$tmp/mixed.out" 2>"$tmp/mixed.err"; rc=$?
# 1
if [ "$rc" -eq 0 ] && grep -q '^mixed cluster: 4 x A100-SXM4-40GB (312.0 TFLOP/s, 40.0 GiB, .*), 4 x H100-SXM5-80GB (989.4 TFLOP/s, 80.0 GiB, 3.35 TB/s HBM)' "$tmp/mixed.out" &&
   grep -q '^GPU: 312.0 TFLOP/s bf16 .*, 40.0 GiB' "$tmp/mixed.out"; then ok "mixed: header names both kinds, priced at 312.0 TFLOP/s and 40.0 GiB"
else nok "mixed: exit $rc: $(head -c 800 "$tmp/mixed.out") $(cat "$tmp/mixed.err")"; fi
# 2
"$spsim" "$tmp/a100.xml" $A >"$tmp/a100.out" 2>&1
grep -v '^mixed cluster:' "$tmp/mixed.out" >"$tmp/m"; grep -v '^mixed cluster:' "$tmp/a100.out" >"$tmp/a"
if cmp -s "$tmp/m" "$tmp/a" && ! grep -q '^mixed' "$tmp/a100.out"; then ok "mixed: ranked as the all-A100 cluster"
else nok "mixed: differs from the all-A100 cluster: $(diff "$tmp/m" "$tmp/a" | head -c 800)"; fi
# 3
# the first row of --json (rank 1): its memory total and whether it fits
first() { grep '"rank": 1,' "$1" | sed -n 's/.*"total": \([0-9]*\)}, "fits": \([a-z]*\).*/\1 \2/p'; }
w=$(first "$tmp/mixed.json")
if [ -n "$w" ] && [ "${w#* }" = true ] && [ "${w% *}" -le 39514607206 ]; then ok "mixed: the winner fits in 36.8 GiB ($w)"
else nok "mixed: winner memory/fits '$w', want <= 39514607206 and true"; fi
"$spsim" "$tmp/h100.xml" $A --json "$tmp/h100.json" >/dev/null 2>&1
wh=$(first "$tmp/h100.json"); wh=${wh% *}
if [ -n "$wh" ] && [ "$wh" -gt 39514607206 ]; then ok "all-H100: the winner needs $wh bytes, more than the mixed cluster's 36.8 GiB"
else nok "all-H100: winner needs '$wh' bytes, want more than 39514607206 (the case would not test the memory)"; fi
# 4
"$spsim" "$tmp/mixed.xml" $A --gpus 4 >"$tmp/four.out" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && ! grep -q '^mixed' "$tmp/four.out" && grep -q '^GPU: 312.0 TFLOP/s' "$tmp/four.out"; then ok "--gpus 4: the A100 node alone, not mixed"
else nok "--gpus 4: exit $rc: $(head -c 600 "$tmp/four.out")"; fi
# 5
"$spsim" "$tmp/tiny-mem.xml" --model tiny --seq 256 --global-batch 8 --simulate 0 >"$tmp/none.out" 2>"$tmp/none.err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q '^tiny does not fit in 0.0 GiB per GPU (the smallest GPU of this mixed cluster) with any layout' "$tmp/none.out" &&
   [ "$(grep -c '^spsim:' "$tmp/none.err")" = 1 ]; then ok "mixed, nothing fits: exit 1 and the smallest GPU named"
else nok "mixed, nothing fits: exit $rc: $(head -c 600 "$tmp/none.out") $(cat "$tmp/none.err")"; fi
# 6: the uniform cluster says nothing of mixing
if ! grep -q 'mixed' "$tmp/a100.out"; then ok "uniform cluster: no mixed line"; else nok "uniform cluster: a mixed line"; fi
