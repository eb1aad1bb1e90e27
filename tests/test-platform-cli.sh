#!/bin/sh
# spsim platform dgx at more than one scalable unit, through SimGrid: times of one
# message against closed forms computed by hand from the toy preset's documented
# numbers (docs/calibration.md): NVLink port 100 GB/s and 1 us per traversal, NIC
# 10 GB/s and 5 us, leaf, uplink and spine hops 1 us each, 10 us per collective.
#   same node:        10 us + 2 x 1 us                       + S / 100e9
#   other SU:         10 us + 5 + 1 (leaf) + 1 (up) + 1 (spine) + 1 (up) + 1 (leaf) + 5
#                     = 25 us                                + S / 10e9
bin="${SPSIM_BUILDDIR:-.}/spsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
# time_us FILE: the time_us of the one JSON row
time_us() { tr '{' '\n' <"$1" | awk '/"bytes"/ && /"time_us"/ { t = $0; sub(/.*"time_us":/, "", t); sub(/[,}].*/, "", t); print t }'; }
# near FILE WANT_US: one row within 1% of WANT_US
near() { time_us "$1" | awk -v w="$2" '{ k++; d = $1 - w; if (d < 0) d = -d; if (d > 0.01 * w) bad++ } END { exit (bad > 0 || k != 1) }'; }
echo "1..7"

# 33 nodes of 2 GPUs: nodes 0-31 form SU 0, node 32 SU 1.
"$bin" platform dgx --nodes 33 --gpus-per-node 2 --gpu toy -o "$tmp/p.xml" 2>"$tmp/err"
# 1: computed routes: 3 routes per GPU, no table of GPU pairs
if [ "$(grep -c '<route ' "$tmp/p.xml")" -eq $((33 * 2 * 3)) ]; then ok "3 routes per GPU"
else nok "route count: $(grep -c '<route ' "$tmp/p.xml") $(cat "$tmp/err")"; fi
# 2: rank 0 -> rank 1, same node: 10 + 2 us + 2^30 / 100e9 s = 10749.42 us
if "$bin" bench "$tmp/p.xml" --coll send-recv --ranks 2 --sizes 1G --json >"$tmp/a.json" 2>"$tmp/err" \
   && near "$tmp/a.json" 10749.42; then ok "same node = L + S/B over NVLink"; else nok "same node: $(cat "$tmp/err") $(time_us "$tmp/a.json")"; fi
# 3: rank 0 -> rank 65 (node 32, SU 1): 25 us + 2^30 / 10e9 s = 107399.18 us
if "$bin" bench "$tmp/p.xml" --coll send-recv --ranks 66 --sizes 1G --json >"$tmp/b.json" 2>"$tmp/err" \
   && near "$tmp/b.json" 107399.18; then ok "other SU = L + S/B through leaf, uplinks and spine"
else nok "other SU: $(cat "$tmp/err") $(time_us "$tmp/b.json")"; fi
# 4: rank 0 -> rank 63 (node 31, same SU): 10 + 11 us + 2^30 / 10e9 s = 107395.18 us
if "$bin" bench "$tmp/p.xml" --coll send-recv --ranks 64 --sizes 1G --json >"$tmp/c.json" 2>"$tmp/err" \
   && near "$tmp/c.json" 107395.18; then ok "same SU = L + S/B through one leaf"
else nok "same SU: $(cat "$tmp/err") $(time_us "$tmp/c.json")"; fi

# Generator options. 5: two 1-GPU nodes, one per SU, 4:1 oversubscribed: the SU uplink
# carries 10 GB/s / 4 = 2.5 GB/s, so rank 0 -> rank 1 takes 25 us + 2^30 / 2.5e9 s = 429521.73 us
"$bin" platform dgx --nodes 2 --gpus-per-node 1 --gpu toy --su-nodes 1 --oversubscription 4 -o "$tmp/o.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/o.xml" --coll send-recv --ranks 2 --sizes 1G --json >"$tmp/o.json" 2>>"$tmp/err" \
   && near "$tmp/o.json" 429521.73 && grep -q 'oversubscribed' "$tmp/o.xml"; then ok "--oversubscription 4 with --su-nodes 1: the uplink is the bottleneck"
else nok "oversubscription: $(cat "$tmp/err") $(time_us "$tmp/o.json")"; fi
# 6: --nvlink-bw 50 inside a node: 10 + 2 us + 2^30 / 50e9 s = 21486.84 us; --nic-bw 20 written on each NIC
"$bin" platform dgx --nodes 1 --gpus-per-node 2 --gpu toy --nvlink-bw 50 --nic-bw 20 -o "$tmp/n.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/n.xml" --coll send-recv --ranks 2 --sizes 1G --json >"$tmp/n.json" 2>>"$tmp/err" \
   && near "$tmp/n.json" 21486.84 && grep -q 'id="node000-nic1" bandwidth="20GBps"' "$tmp/n.xml"
then ok "--nvlink-bw and --nic-bw replace the preset's"; else nok "bandwidth options: $(cat "$tmp/err") $(time_us "$tmp/n.json")"; fi
# 7: out-of-range options are refused in one line
bad=0
for a in "--oversubscription 0.5" "--su-nodes 0" "--nic-bw -3" "--nvlink-bw 0" "--nvlink-bw nan" "--nic-bw 40x"; do
  if "$bin" platform dgx --nodes 2 $a >/dev/null 2>"$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
     ! grep -q "^spsim: platform: --$(echo $a | sed 's/^--\([a-z-]*\).*/\1/')" "$tmp/err"; then bad=1; echo "# $a: $(cat "$tmp/err")"; fi
done
if [ $bad = 0 ]; then ok "out-of-range generator options refused"; else nok "generator options accepted"; fi
