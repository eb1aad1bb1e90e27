#!/bin/sh
# spsim calibrate: a round trip from a known platform, a log of published figures,
# and one clear error line for bad input.
# Round trip: the "true" platform is spsim's generator output for 2 nodes of 8 H100
# with its NVLink ports set to 380 GB/s and 2 us, its NICs to 40 GB/s and 3.5 us and
# coll_latency to 6 us (the preset has 450 / 1.3, 48 / 2, 8.4). spsim bench --format
# nccl-tests writes its logs (8 ranks in one node, 16 on two, all-reduce, all-gather,
# sendrecv between the nodes); calibrating the preset from them must give back the
# true constants within 2 %. The network switches' reduction (sharp, sharp_bw) is no
# constant of the fit: the written platform keeps the starting platform's (or the
# generator options').
bin="${SPSIM_BUILDDIR:-.}/spsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"
  else nok "$desc: $(cat "$tmp/err")"; fi
}
# near VALUE WANT TOL: |VALUE / WANT - 1| <= TOL
near() { awk -v v="$1" -v w="$2" -v t="$3" 'BEGIN { d = v / w - 1; if (d < 0) d = -d; exit !(v != "" && d <= t) }'; }
# link_attr FILE LINK ATTR: the number in ATTR of LINK (GBps / us as written)
link_attr() { grep "<link id=\"$2\"" "$1" | sed "s/.* $3=\"\\([0-9.e+-]*\\)[A-Za-z]*\".*/\\1/"; }
coll_lat() { grep -m1 -o '"coll_latency" value="[0-9.e+-]*us"' "$1" | sed 's/.*value="\([0-9.e+-]*\)us"/\1/'; }
echo "1..30"

"$bin" platform dgx --nodes 2 --gpu h100 >"$tmp/start.xml"
sed -E 's/(nvl[0-9]+" bandwidth=")450GBps" latency="1.3us"/\1380GBps" latency="2us"/;
        s/(nic[0-9]+" bandwidth=")48GBps" latency="2us"/\140GBps" latency="3.5us"/;
        s/"coll_latency" value="8.4us"/"coll_latency" value="6us"/g' "$tmp/start.xml" >"$tmp/truth.xml"
# 1: the truth differs from the preset where intended (16 links of each kind, 16 hosts)
if [ "$(grep -c 'bandwidth="380GBps" latency="2us"' "$tmp/truth.xml")" -eq 16 ] \
   && [ "$(grep -c 'bandwidth="40GBps" latency="3.5us"' "$tmp/truth.xml")" -eq 16 ] \
   && [ "$(grep -o '"coll_latency" value="6us"' "$tmp/truth.xml" | wc -l)" -eq 16 ]
then ok "true platform written"; else nok "true platform"; fi

B="$bin bench $tmp/truth.xml --format nccl-tests"
$B -b 8 -e 256M -f 2 -g 8 >"$tmp/ar8.log" \
  && $B -b 8 -e 256M -f 2 -g 16 --per-node 8 >"$tmp/ar16.log" \
  && $B --coll all-gather -b 1K -e 256M -f 2 -g 16 --per-node 8 >"$tmp/ag16.log" \
  && $B --coll sendrecv -b 8 -e 256M -f 4 -g 2 --per-node 1 >"$tmp/sr2.log"
# 2: the logs carry nccl-tests' header, devices (two hosts) and footer
if grep -q '^# Collective test starting: all_gather_perf$' "$tmp/ag16.log" \
   && [ "$(grep -c '^#  Rank .* on    node001 device' "$tmp/ar16.log")" -eq 8 ] \
   && grep -q '^# Avg bus bandwidth    : ' "$tmp/sr2.log"
then ok "logs in nccl-tests' layout"; else nok "logs: $(head -5 "$tmp/ag16.log")"; fi

# 3-8: round trip
if "$bin" calibrate "$tmp/ar8.log" "$tmp/ar16.log" "$tmp/ag16.log" "$tmp/sr2.log" --platform "$tmp/start.xml" \
     -o "$tmp/cal.xml" >"$tmp/rep.txt" 2>"$tmp/err"
then ok "calibrate runs"; else nok "calibrate: $(cat "$tmp/err")"; fi
v=$(link_attr "$tmp/cal.xml" node000-nvl0 bandwidth)
if near "$v" 380 0.02; then ok "NVLink bandwidth recovered ($v GB/s, true 380)"; else nok "NVLink bandwidth $v"; fi
v=$(link_attr "$tmp/cal.xml" node001-nvl5 latency)
if near "$v" 2 0.02; then ok "NVLink latency recovered ($v us, true 2)"; else nok "NVLink latency $v"; fi
v=$(link_attr "$tmp/cal.xml" node000-nic3 bandwidth)
if near "$v" 40 0.02; then ok "NIC bandwidth recovered ($v GB/s, true 40)"; else nok "NIC bandwidth $v"; fi
v=$(link_attr "$tmp/cal.xml" node001-nic0 latency)
if near "$v" 3.5 0.02; then ok "NIC latency recovered ($v us, true 3.5)"; else nok "NIC latency $v"; fi
v=$(coll_lat "$tmp/cal.xml")
if near "$v" 6 0.02; then ok "coll_latency recovered ($v us, true 6)"; else nok "coll_latency $v"; fi

# 9: logs of one node only: the NIC is not determined, said on stderr, kept at the start's
if "$bin" calibrate "$tmp/ar8.log" --platform "$tmp/start.xml" -o "$tmp/cal1.xml" >"$tmp/rep1.txt" 2>"$tmp/err1" \
   && grep -q 'warning: nic-bw is not determined' "$tmp/err1" \
   && [ "$(link_attr "$tmp/cal1.xml" node000-nic0 bandwidth)" = 48 ] \
   && near "$(link_attr "$tmp/cal1.xml" node000-nvl0 bandwidth)" 380 0.02
then ok "single-node logs: NIC not determined, warned, kept"; else nok "single node: $(cat "$tmp/err1")"; fi

# 10: a log written from published figures (docs/calibration.md: nccl-tests
# all_reduce_perf on 8 x H100 SXM5: ~26 us at 1 KiB, busbw 43.7 GB/s at 1 MiB and
# 367.5 GB/s at 1 GiB). Times by hand: t = S x 2(n-1)/n / busbw = S x 1.75 / busbw:
# 1 MiB: 41.99 us, 1 GiB: 5113.06 us. The calibrated platform must give back the
# 1 GiB busbw within 3 % and the 1 KiB time within 10 %.
{
  echo "# Collective test starting: all_reduce_perf"
  echo "# nThread 1 nGpus 8 minBytes 1024 maxBytes 1073741824 step: 1024(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0"
  echo "#"
  echo "# Using devices"
  for r in 0 1 2 3 4 5 6 7; do printf '#  Rank %2d Group  0 Pid  %5d on  dgx-h100 device %2d [0x%02x] NVIDIA H100 80GB HBM3\n' $r $((4000 + r)) $r $r; done
  echo "#"
  echo "#                                                              out-of-place                       in-place          "
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  echo "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
  echo "        1024           256     float     sum      -1    26.00    0.04    0.07      0    26.00    0.04    0.07      0"
  echo "     1048576        262144     float     sum      -1    41.99   24.97   43.70      0    41.99   24.97   43.70      0"
  echo "  1073741824     268435456     float     sum      -1   5113.1  210.00  367.50      0   5113.1  210.00  367.50      0"
  echo "# Out of bounds values : 0 OK"
  echo "# Avg bus bandwidth    : 137.09 "
} >"$tmp/pub.log"
if "$bin" calibrate "$tmp/pub.log" --platform "$tmp/start.xml" -o "$tmp/pub.xml" >"$tmp/repp.txt" 2>"$tmp/errp" \
   && "$bin" bench "$tmp/pub.xml" -g 8 --sizes 1G --json >"$tmp/p1g.json" 2>>"$tmp/errp" \
   && "$bin" bench "$tmp/pub.xml" -g 8 --sizes 1K --json >"$tmp/p1k.json" 2>>"$tmp/errp" \
   && near "$(sed 's/.*"busbw":\([0-9.e+-]*\).*/\1/' "$tmp/p1g.json")" 367.5 0.03 \
   && near "$(sed 's/.*"time_us":\([0-9.e+-]*\).*/\1/' "$tmp/p1k.json")" 26 0.10
then ok "published figures: 1 GiB busbw and 1 KiB time reproduced"; else nok "published: $(cat "$tmp/errp") $(cat "$tmp/p1g.json" "$tmp/p1k.json")"; fi

# 11-13: bad input, one line each
printf 'Hello\nthis is not a log\n' >"$tmp/notes.txt"
expect_fail "not nccl-tests output" "notes.txt: not nccl-tests output" calibrate "$tmp/notes.txt" --platform "$tmp/start.xml"
grep -v '^#  Rank' "$tmp/ag16.log" >"$tmp/ag-norank.log"
"$bin" bench "$tmp/truth.xml" --format nccl-tests --coll all-gather -b 1K -e 1M -f 4 -g 8 | grep -v '^#  Rank' >"$tmp/ag8-norank.log"
expect_fail "logs of different GPU counts without Rank lines" "different GPU counts" \
  calibrate "$tmp/ag-norank.log" "$tmp/ag8-norank.log" --platform "$tmp/start.xml"
grep -v '^#' "$tmp/ar8.log" >"$tmp/rows-only.txt"
expect_fail "a log that does not name its collective" "give --coll" calibrate "$tmp/rows-only.txt" --platform "$tmp/start.xml"

# 14-19: sharp and sharp_bw carried over from the starting platform or --sharp
"$bin" platform dgx --nodes 2 --gpu h100 --sharp --sharp-bw 40 >"$tmp/sharp.xml"
if "$bin" calibrate "$tmp/ar8.log" --platform "$tmp/sharp.xml" -o "$tmp/calsharp.xml" >/dev/null 2>"$tmp/errs" \
   && grep -q '<prop id="sharp" value="1"/>' "$tmp/calsharp.xml" \
   && grep -q '<prop id="sharp_bw" value="40GBps"/>' "$tmp/calsharp.xml"
then ok "--platform with sharp=1, sharp_bw=40GBps: both kept"; else nok "sharp from --platform: $(cat "$tmp/errs")"; fi
if "$bin" calibrate "$tmp/ar8.log" --gpu h100 --nodes 2 --sharp -o "$tmp/gensharp.xml" >/dev/null 2>"$tmp/errs" \
   && grep -q '<prop id="sharp" value="1"/>' "$tmp/gensharp.xml" && ! grep -q 'sharp_bw' "$tmp/gensharp.xml"
then ok "generator --sharp: sharp=1, no sharp_bw"; else nok "generator --sharp: $(cat "$tmp/errs")"; fi
if ! grep -q 'sharp' "$tmp/cal1.xml"; then ok "a platform without sharp stays without"; else nok "sharp appeared"; fi
# the kept property is the one CollNet needs: spsim bench --algo collnet-direct runs there
if "$bin" bench "$tmp/calsharp.xml" -g 16 --per-node 8 --sizes 64M --algo collnet-direct --json >"$tmp/cn.json" 2>"$tmp/errs" \
   && grep -q '"algo" *: *"collnet-direct"' "$tmp/cn.json"
then ok "collnet-direct runs on the calibrated sharp platform"; else nok "collnet on calibrated: $(cat "$tmp/errs")"; fi
expect_fail "--sharp with --platform" "--platform and generator options" \
  calibrate "$tmp/ar8.log" --platform "$tmp/sharp.xml" --sharp
expect_fail "--sharp-bw without --sharp" "--sharp-bw '40' needs --sharp" calibrate "$tmp/ar8.log" --sharp-bw 40
# 20: an all-gather of 8 ranks on one node of the preset (NVLink 450 GB/s): NCCL's ring
# there moves at its effective NVLink bandwidth (18 x 20.6 = 370.8 GB/s), below the
# line rate, so no row is bound by the platform's NVLink: not determined, and said why
$bin bench "$tmp/start.xml" --format nccl-tests --coll all-gather -b 1M -e 1G -f 4 -g 8 >"$tmp/ag8.log"
if "$bin" calibrate "$tmp/ag8.log" --platform "$tmp/start.xml" >/dev/null 2>"$tmp/errag" \
   && grep -q "warning: nvlink-bw is not determined by these logs (no collective of these logs inside a node is bound by it: NCCL's effective NVLink bandwidth" "$tmp/errag"
then ok "one-node ring logs: NVLink bandwidth not determined, and why"; else nok "one-node ring: $(cat "$tmp/errag")"; fi
# 21-23: the tuner plugin the logs ran under. A log of 4 p5 nodes written under aws-ofi-nccl's
# plugin (ring LL128 at 1 GiB, ring Simple from 2 GiB: spsim/tuner_plugin.h) is that
# platform's own output, so with the platform kept the fit starts exactly on it (every
# "before" equals "measured"); without the plugin NCCL's model runs NVLS-tree at 1 GiB, a
# different time
"$bin" platform dgx --nodes 4 --nccl-tuner aws-p5 -o "$tmp/p5t.xml"
"$bin" platform dgx --nodes 4 -o "$tmp/p5.xml"
"$bin" bench "$tmp/p5t.xml" --format nccl-tests -g 32 -b 1G -e 4G -f 2 >"$tmp/p5.log"
# before_equal FILE: every point's "before" equals its "measured" within 1e-5 (the log's
# times are rounded to 0.1 us)
before_equal() { awk '$1 == "p5.log" { k++; d = $5 - $6; if (d < 0) d = -d; if (d > 1e-5 * $5) bad++ }
  END { exit (k != 3 || bad > 0) }' "$1"; }
if "$bin" calibrate "$tmp/p5.log" --platform "$tmp/p5t.xml" -o "$tmp/calp5.xml" >"$tmp/o1" 2>"$tmp/errs" \
   && before_equal "$tmp/o1" && grep -q '<prop id="nccl_tuner" value="aws-p5"/>' "$tmp/calp5.xml" \
   && "$bin" calibrate "$tmp/p5.log" --nccl-tuner aws-p5 -o "$tmp/genp5.xml" >"$tmp/o2" 2>>"$tmp/errs" \
   && before_equal "$tmp/o2" && grep -q '<prop id="nccl_tuner" value="aws-p5"/>' "$tmp/genp5.xml"
then ok "the tuner plugin kept from --platform or given: the fit prices its choices"
else nok "tuner kept: $(cat "$tmp/errs") $(cat "$tmp/o1")"; fi
if "$bin" calibrate "$tmp/p5.log" --platform "$tmp/p5.xml" >"$tmp/o3" 2>"$tmp/errs" && ! before_equal "$tmp/o3"
then ok "without the plugin the same log starts off its times"; else nok "no tuner: $(cat "$tmp/errs")"; fi
expect_fail "--nccl-tuner unknown" "--nccl-tuner must be aws-p5, aws-p5en, aws-p6 or none (got 'ofi')" \
  calibrate "$tmp/p5.log" --nccl-tuner ofi
# 24: the same for the switches' reduction: on 2 nodes with sharp NCCL's model runs CollNet
# Direct at 1 to 4 MiB (docs/nccl-tests.md), so a log of them starts exactly on the platform
# it came from only if the fit's platforms keep sharp
"$bin" platform dgx --nodes 2 --sharp -o "$tmp/s2.xml"
"$bin" bench "$tmp/s2.xml" --format nccl-tests -g 16 -b 1M -e 4M -f 2 >"$tmp/p5.log"
if "$bin" calibrate "$tmp/p5.log" --platform "$tmp/s2.xml" >"$tmp/o4" 2>"$tmp/errs" && before_equal "$tmp/o4"
then ok "sharp kept in the fit: CollNet's times where the logs ran it"; else nok "sharp fit: $(cat "$tmp/errs") $(cat "$tmp/o4")"; fi
# 25-26: a log whose NCCL_DEBUG=INFO lines say NCCL loaded aws-ofi-nccl's tuner plugin
# ("TUNER/Plugin: Using nccl_ofi_tuner (v3)"): calibrating it without the plugin says so,
# with it says nothing of it; a plugin spsim does not model is named
"$bin" bench "$tmp/p5t.xml" --format nccl-tests -g 32 -b 1G -e 4G -f 2 >"$tmp/p5b.log"
{ echo "p5-1:4012:4100 [0] NCCL INFO TUNER/Plugin: Using nccl_ofi_tuner (v3)"; cat "$tmp/p5b.log"; } >"$tmp/p5i.log"
if "$bin" calibrate "$tmp/p5i.log" --platform "$tmp/p5.xml" >/dev/null 2>"$tmp/e1" \
   && grep -q "warning: .*p5i.log ran under aws-ofi-nccl's tuner plugin (nccl_ofi_tuner).*give --nccl-tuner aws-p5" "$tmp/e1" \
   && "$bin" calibrate "$tmp/p5i.log" --platform "$tmp/p5t.xml" >/dev/null 2>"$tmp/e2" \
   && ! grep -q "tuner plugin" "$tmp/e2"
then ok "a log run under aws-ofi-nccl's plugin: calibrating without it warns"; else nok "plugin warning: $(cat "$tmp/e1" "$tmp/e2")"; fi
sed 's/nccl_ofi_tuner/site_tuner/' "$tmp/p5i.log" >"$tmp/p5s.log"
if "$bin" calibrate "$tmp/p5s.log" --platform "$tmp/p5t.xml" >/dev/null 2>"$tmp/e3" \
   && grep -q "warning: .*p5s.log ran under the tuner plugin 'site_tuner', which spsim does not model" "$tmp/e3"
then ok "a plugin spsim does not model is named"; else nok "unknown plugin: $(cat "$tmp/e3")"; fi
# 27: an all_gather_perf row whose count (2^62 floats) is more bytes than 2^64: the GPU
# count read from sizes and counts wrapped that product to 0 and divided by it (SIGFPE);
# now it is no whole number of GPUs, so the count must be given
{ echo "# Collective test starting: all_gather_perf"
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  echo "     1048576   4611686018427387904     float     none      -1      20.0    0.00    0.00      0    20.0   52.4   91.7      0"
} >"$tmp/wrap.log"
expect_fail "a count past 2^64 bytes: no GPU count from the sizes" "no '#  Rank' lines, so its GPU count is unknown" \
  calibrate "$tmp/wrap.log"
# 28: a row with an infinite time ("inf" read as a number made a NaN bandwidth) is left
# out with a warning naming its line; the fit runs on the other rows
"$bin" bench "$tmp/start.xml" --format nccl-tests -g 8 -b 64M -e 1G -f 4 >"$tmp/ar8.log"
awk '!done && $1 == "268435456" { $6 = "inf"; done = 1 } { print }' "$tmp/ar8.log" >"$tmp/inf.log"
line=$(awk '$1 == "268435456" { print NR; exit }' "$tmp/inf.log")
if "$bin" calibrate "$tmp/inf.log" --platform "$tmp/start.xml" >"$tmp/o5" 2>"$tmp/e5" \
   && grep -q "warning: .*inf.log: 1 line shaped like a result row could not be read, left out (the first: line $line;" "$tmp/e5" \
   && [ "$(grep -c ' all-reduce  *8  ' "$tmp/o5")" -eq 2 ] && ! grep -qi 'nan' "$tmp/o5"
then ok "an infinite time: that row left out with a warning, the fit on the others"
else nok "inf row: line '$line' $(cat "$tmp/e5") $(cat "$tmp/o5")"; fi
# 29: one log inside one node: NVLink's latency moves every point with coll_latency, and
# the warning says that (it said "no log has two ranks in one node", of a log of 8)
if "$bin" calibrate "$tmp/ar8.log" --platform "$tmp/start.xml" >/dev/null 2>"$tmp/e6" \
   && grep -q "warning: nvlink-lat is not separable from coll-lat by these logs (over their points it moves every time in proportion to coll-lat" "$tmp/e6" \
   && ! grep -q "no log has two ranks in one node" "$tmp/e6"
then ok "a latency held with coll-lat is said to be held for that reason"; else nok "held: $(cat "$tmp/e6")"; fi
# 30: rows whose times are all 0: nothing to fit, and the line says why (it spoke of sizes)
{ echo "# Collective test starting: all_reduce_perf"
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  echo "     1048576        262144     float     sum      -1    0.00    0.00    0.00      0    0.00   0.00   0.00      0"
} >"$tmp/zero.log"
expect_fail "a log whose times are 0" "no row with a count and an out-of-place time above 0" calibrate "$tmp/zero.log" --ranks 8
