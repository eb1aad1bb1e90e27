#!/bin/sh
# spsim bench and spsim platform: nccl-tests arithmetic, closed-form times on
# platforms/small.xml, and one clear error line for bad input.
# small.xml (docs/calibration.md, preset "toy"): 2 nodes x 4 GPUs; NVLink port
# 100 GB/s and 1 us per traversal (a GPU pair crosses two ports); NIC 10 GB/s and
# 5 us per traversal, leaf switch 1 us (a node pair crosses NIC, leaf, NIC);
# every collective costs each rank 10 us once (coll_latency).
bin="${SPSIM_BUILDDIR:-.}/spsim"
src="${SPSIM_SRCDIR:-.}"
small="$src/platforms/small.xml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
# expect_fail DESC PATTERN ARGS...: non-zero exit, exactly one stderr line "spsim: ...PATTERN"
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"
  else nok "$desc: $(cat "$tmp/err")"; fi
}
# rows FILE: one line "bytes time_us algbw busbw" per JSON row
rows() {
  tr '{' '\n' <"$1" | awk '/"bytes"/ {
    b = $0; sub(/.*"bytes":/, "", b); sub(/[,}].*/, "", b)
    t = $0; sub(/.*"time_us":/, "", t); sub(/[,}].*/, "", t)
    a = $0; sub(/.*"algbw":/, "", a); sub(/[,}].*/, "", a)
    u = $0; sub(/.*"busbw":/, "", u); sub(/[,}].*/, "", u)
    print b, t, a, u }'
}
# check_arith FILE FACTOR NROWS: algbw = bytes / time, busbw = algbw x FACTOR (rel 1e-9)
check_arith() {
  rows "$1" | awk -v f="$2" -v want="$3" '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; return y == 0 ? d : d / (y < 0 ? -y : y) }
    { k++; if ($2 <= 0 || rel($3, $1 / $2 / 1e3) > 1e-9 || rel($4, $3 * f) > 1e-9) bad++ }
    END { exit (bad > 0 || k != want) }'
}
echo "1..84"

# 1-2: all-reduce on 8 ranks, 1 KiB .. 1 MiB: 11 rows, busbw = algbw x 2(n-1)/n = 1.75
if "$bin" bench "$small" --coll all-reduce --ranks 8 --sizes 1K:1M --json >"$tmp/ar.json" 2>"$tmp/err" \
   && grep -q '"platform":' "$tmp/ar.json" && grep -q '"coll":"all-reduce"' "$tmp/ar.json" \
   && grep -q '"ranks":8' "$tmp/ar.json"; then ok "all-reduce JSON"; else nok "all-reduce JSON: $(cat "$tmp/err")"; fi
if check_arith "$tmp/ar.json" 1.75 11; then ok "all-reduce algbw/busbw arithmetic"; else nok "all-reduce arithmetic: $(rows "$tmp/ar.json")"; fi
# 3: all-gather on 4 ranks: factor (n-1)/n = 0.75, S = the whole gathered buffer
if "$bin" bench "$small" --coll all-gather --ranks 4 --sizes 64K:4M --algo ring --json >"$tmp/ag.json" 2>"$tmp/err" \
   && check_arith "$tmp/ag.json" 0.75 7 && rows "$tmp/ag.json" | head -1 | awk '{ exit ($1 != 65536) }'
then ok "all-gather arithmetic"; else nok "all-gather: $(cat "$tmp/err") $(rows "$tmp/ag.json")"; fi
# 4: reduce-scatter (0.75) and broadcast (1) factors
if "$bin" bench "$small" --coll reduce-scatter --ranks 4 --sizes 1M --json >"$tmp/rs.json" 2>"$tmp/err" \
   && check_arith "$tmp/rs.json" 0.75 1 \
   && "$bin" bench "$small" --coll broadcast --ranks 8 --sizes 1M --json >"$tmp/bc.json" 2>>"$tmp/err" \
   && check_arith "$tmp/bc.json" 1 1; then ok "reduce-scatter and broadcast factors"; else nok "factors: $(cat "$tmp/err")"; fi

# 5-6: one 1 GiB send-recv, closed form t = collective latency + route latency + S / B
# (1% tolerance)
#   rank 0 -> rank 1 (same node, NVLink): 10 us + 2 us + 2^30 / 100e9 s = 10749.42 us
#   rank 0 -> rank 7 (other node, own NICs): 10 us + 11 us + 2^30 / 10e9 s = 107395.18 us
closed() { # FILE WANT_US
  rows "$1" | awk -v w="$2" '{ k++; d = $2 - w; if (d < 0) d = -d; if (d > 0.01 * w) bad++ } END { exit (bad > 0 || k != 1) }'
}
if "$bin" bench "$small" --coll send-recv --ranks 2 --sizes 1G --json >"$tmp/sr.json" 2>"$tmp/err" \
   && closed "$tmp/sr.json" 10749.42; then ok "send-recv over NVLink = L + S/B"; else nok "send-recv NVLink: $(cat "$tmp/err") $(rows "$tmp/sr.json")"; fi
if "$bin" bench "$small" --coll send-recv --ranks 8 --sizes 1G --json >"$tmp/sr2.json" 2>"$tmp/err" \
   && closed "$tmp/sr2.json" 107395.18; then ok "send-recv across nodes = L + S/B"; else nok "send-recv NIC: $(cat "$tmp/err") $(rows "$tmp/sr2.json")"; fi
# 7: table output: header and one row per size
if "$bin" bench "$small" --coll all-reduce --ranks 4 --sizes 8:1K >"$tmp/t.txt" 2>"$tmp/err" \
   && grep -q '^# .*busbw' "$tmp/t.txt" && [ "$(grep -c '^  ' "$tmp/t.txt")" -eq 8 ]; then ok "table output"
else nok "table: $(cat "$tmp/err")"; fi
# 8: deterministic
"$bin" bench "$small" --coll all-reduce --ranks 8 --sizes 1K:1M --json >"$tmp/ar2.json" 2>/dev/null
if cmp -s "$tmp/ar.json" "$tmp/ar2.json"; then ok "bench output byte-identical"; else nok "bench determinism"; fi

# 9-17: bad input
printf '<?xml version="1.0"?>\n<platform version="4.1"><zone id="z" routing="Full"><host id="a"\n' >"$tmp/bad.xml"
expect_fail "missing platform" "not found" bench "$tmp/none.xml" --coll all-reduce --ranks 2
expect_fail "malformed platform" "" bench "$tmp/bad.xml" --coll all-reduce --ranks 2
expect_fail "more ranks than hosts" "fewer than --ranks" bench "$small" --coll all-reduce --ranks 9 --sizes 1K
expect_fail "size 0" "is 0" bench "$small" --coll all-reduce --ranks 2 --sizes 0:1K
expect_fail "unparsable size" "cannot parse size" bench "$small" --coll all-reduce --ranks 2 --sizes 8:lots
expect_fail "min > max" "larger than max" bench "$small" --coll all-reduce --ranks 2 --sizes 1M:1K
expect_fail "unknown collective" "" bench "$small" --coll all-shuffle --ranks 2
expect_fail "unknown algorithm" "" bench "$small" --coll all-reduce --algo butterfly --ranks 2
expect_fail "unknown flag" "" bench "$small" --coll all-reduce --ranks 2 --bogus
expect_fail "--ranks omitted" "--ranks N is required" bench "$small" --coll all-reduce --sizes 1K

# 18-20: platform generator CLI
if "$bin" platform dgx --nodes 2 --gpus-per-node 4 --gpu toy >"$tmp/p.xml" 2>"$tmp/err" && cmp -s "$tmp/p.xml" "$small"
then ok "platform dgx reproduces small.xml"; else nok "platform small: $(cat "$tmp/err")"; fi
expect_fail "platform --nodes 0" "nodes" platform dgx --nodes 0
expect_fail "platform unknown gpu" "unknown GPU" platform dgx --nodes 2 --gpu v100

# 21-23: ring channels across the two nodes. A 32 MiB all-reduce on 8 ranks runs 4
# channels (one per GPU of a node), each leaving every node through another GPU's NIC:
# 14 steps of 11 us + 1 MiB / 10e9 s (S/32 per channel and step, one NIC each):
# 10 us + 14 x 115.8576 us = 1632.01 us. One ring (--channels 1) moves S/8 = 4 MiB
# through one NIC per step: 10 us + 14 x 430.4304 us = 6036.03 us.
if "$bin" bench "$small" --coll all-reduce --ranks 8 --algo ring --sizes 32M --json >"$tmp/ch.json" 2>"$tmp/err" \
   && closed "$tmp/ch.json" 1632.01 && grep -q '"channels":4' "$tmp/ch.json"
then ok "4 ring channels across nodes = closed form"; else nok "channels: $(cat "$tmp/err") $(rows "$tmp/ch.json")"; fi
if "$bin" bench "$small" --coll all-reduce --ranks 8 --algo ring --sizes 32M --channels 1 --json >"$tmp/ch1.json" 2>"$tmp/err" \
   && closed "$tmp/ch1.json" 6036.03 && grep -q '"channels":1' "$tmp/ch1.json"
then ok "--channels 1: one ring through one NIC = closed form"; else nok "--channels 1: $(cat "$tmp/err") $(rows "$tmp/ch1.json")"; fi
expect_fail "--channels out of range" "channels must be between 0" bench "$small" --coll all-reduce --ranks 8 --channels 65

# 25-32: platforms SimGrid would abort on, or that cannot carry a run, are refused
# before any simulation with one line naming the fault (no backtrace, no abort)
plat() { # plat FILE BODY: a one-zone platform, with DOCTYPE unless NODOCTYPE is set
  { echo '<?xml version="1.0"?>'
    [ -n "${NODOCTYPE:-}" ] || echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
    echo '<platform version="4.1"><zone id="z" routing="Full">'; echo "$2"; echo '</zone></platform>'; } >"$1"
}
H2='<host id="a" speed="1Gf"/><host id="b" speed="1Gf"/>'
L='<link id="l" bandwidth="1GBps" latency="1us"/>'
plat "$tmp/noroute.xml" "$H2"
expect_fail "two hosts without a route: names the pair" "no route from host 'a' to host 'b'" \
  bench "$tmp/noroute.xml" --coll all-reduce --ranks 2
plat "$tmp/partial.xml" "$H2<host id=\"c\" speed=\"1Gf\"/>$L<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route><route src=\"b\" dst=\"c\"><link_ctn id=\"l\"/></route>"
expect_fail "a-b and b-c routed, a-c not: names a and c" "no route from host 'a' to host 'c'" \
  bench "$tmp/partial.xml" --coll all-reduce --ranks 2
expect_fail "verify on the same platform" "no route from host 'a' to host 'c'" \
  verify "$tmp/partial.xml" --op all-reduce --ranks 2
NODOCTYPE=1 plat "$tmp/nodoctype.xml" "$H2$L<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route>"
expect_fail "no DOCTYPE: says what to add" "has no DOCTYPE line.*add <!DOCTYPE platform SYSTEM" \
  bench "$tmp/nodoctype.xml" --coll all-reduce --ranks 2
plat "$tmp/speed0.xml" "<host id=\"a\" speed=\"0f\"/><host id=\"b\" speed=\"1Gf\"/>$L<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route>"
expect_fail "a host of speed 0" "host 'a' has speed 0 flop/s" bench "$tmp/speed0.xml" --coll all-reduce --ranks 2
plat "$tmp/bw0.xml" "$H2<link id=\"l\" bandwidth=\"0Bps\" latency=\"1us\"/><route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route>"
expect_fail "a link of bandwidth 0" "link 'l' has bandwidth 0 B/s" bench "$tmp/bw0.xml" --coll all-reduce --ranks 2
plat "$tmp/nolink.xml" "$H2$L<route src=\"a\" dst=\"b\"><link_ctn id=\"nosuch\"/></route>"
expect_fail "a route through an undeclared link: SimGrid's reason" "rejected by SimGrid: .*Link not found: nosuch" \
  bench "$tmp/nolink.xml" --coll all-reduce --ranks 2
plat "$tmp/badnum.xml" "<host id=\"a\" speed=\"fast\"/>"
expect_fail "a speed that is not a number: SimGrid's reason with the line" "rejected by SimGrid: Parse error at .*badnum.xml:4: cannot parse number" \
  bench "$tmp/badnum.xml" --coll all-reduce --ranks 1

# 33: JSON strings are escaped (json-glib): a platform path with a quote, a backslash,
# a control character and a byte that is not UTF-8 (written as U+FFFD)
odd="$tmp/q\"b\\s$(printf '\001')x$(printf '\377').xml"
cp "$small" "$odd"
want=$(printf '"platform":"%s/q\\"b\\\\s\\u0001x\357\277\275.xml","coll"' "$tmp")
if "$bin" bench "$odd" --coll all-reduce --ranks 2 --sizes 1K --json >"$tmp/odd.json" 2>"$tmp/err" \
   && grep -qF -- "$want" "$tmp/odd.json"
then ok "JSON escapes the platform path"; else nok "JSON escaping: $(cat "$tmp/err" "$tmp/odd.json")"; fi

# 34-50: nccl-tests' flags and layout (NVIDIA/nccl-tests README "Arguments", src/util.cu)
# 34: -b 1K -e 1M -f 2 -g 8 is --ranks 8 --sizes 1K:1M (same rows, same times)
if "$bin" bench "$small" -b 1K -e 1M -f 2 -g 8 --json >"$tmp/nt.json" 2>"$tmp/err" \
   && [ "$(rows "$tmp/nt.json")" = "$(rows "$tmp/ar.json")" ] && grep -q '"ranks":8' "$tmp/nt.json"
then ok "-b -e -f -g = --sizes --ranks"; else nok "-b/-e/-f/-g: $(cat "$tmp/err")"; fi
# 35: ranks = threads x GPUs per thread x processes
if "$bin" bench "$small" -t 2 -g 2 --procs 2 -b 1K -e 1K --json >"$tmp/t.json" 2>"$tmp/err" && grep -q '"ranks":8' "$tmp/t.json"
then ok "-t 2 -g 2 --procs 2 = 8 ranks"; else nok "-t x -g: $(cat "$tmp/err")"; fi
# 36: -i: 1K, 2K, 3K, 4K
if "$bin" bench "$small" -g 2 -b 1K -e 4K -i 1K --json >"$tmp/i.json" 2>"$tmp/err" \
   && [ "$(rows "$tmp/i.json" | awk '{ printf "%s ", $1 }')" = "1024 2048 3072 4096 " ]
then ok "-i steps by bytes"; else nok "-i: $(cat "$tmp/err") $(rows "$tmp/i.json")"; fi
# 37: all-gather blocks are multiples of 16 bytes: 100 B of float on 4 ranks = 25 elements,
# 6 per rank, rounded down to 4: count 4, size 4 x 4 B x 4 = 64
if "$bin" bench "$small" --coll all-gather -g 4 -b 100 -e 100 --json >"$tmp/ag16.json" 2>"$tmp/err" \
   && grep -q '"bytes":64,"count":4,' "$tmp/ag16.json"
then ok "all-gather: 16-byte blocks as nccl-tests"; else nok "all-gather 16 B: $(cat "$tmp/err" "$tmp/ag16.json")"; fi
# 38-41: --format nccl-tests: its column header byte for byte, 13 fields per row,
# in-place = out-of-place for all-reduce here, the footer, avg busbw = mean of every busbw
"$bin" bench "$small" -b 1K -e 1M -f 4 -g 8 --format nccl-tests >"$tmp/nt.txt" 2>"$tmp/err"
hdr=$(printf '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s' size count type redop root time algbw busbw '#wrong' time algbw busbw '#wrong' '')
if grep -qxF -- "$hdr" "$tmp/nt.txt" && grep -qx '# Collective test starting: all_reduce_perf' "$tmp/nt.txt" \
   && [ "$(grep -vc '^#' "$tmp/nt.txt")" -eq 6 ] && ! grep -v '^#' "$tmp/nt.txt" | awk 'NF != 13 { bad = 1 } END { exit !bad }'
then ok "nccl-tests layout: header and rows"; else nok "nccl-tests layout: $(cat "$tmp/err") $(cat "$tmp/nt.txt")"; fi
if grep -v '^#' "$tmp/nt.txt" | awk '{ if ($3 != "float" || $4 != "sum" || $5 != -1 || $6 != $10 || $8 != $12 || $9 != "N/A") bad = 1 } END { exit bad }'
then ok "nccl-tests rows: type float, redop sum, root -1, in-place = out-of-place, #wrong N/A"; else nok "rows: $(grep -v '^#' "$tmp/nt.txt")"; fi
avg=$(grep -v '^#' "$tmp/nt.txt" | awk '{ s += $8 + $12; k += 2 } END { print s / k }')
got=$(sed -n 's/^# Avg bus bandwidth    : \([0-9.e+-]*\) $/\1/p' "$tmp/nt.txt")
if grep -qx '# Out of bounds values : 0 OK' "$tmp/nt.txt" && awk -v a="$avg" -v g="$got" 'BEGIN { d = a - g; exit !(g != "" && d < 0.01 && d > -0.01) }' \
   && grep -qx '# Collective test concluded: all_reduce_perf' "$tmp/nt.txt"
then ok "nccl-tests footer (avg busbw $got = mean $avg)"; else nok "footer: $got vs $avg"; fi
# the 1 GiB send-recv across nodes of test 6 (107395.18 us) in nccl-tests' 7-character field
if "$bin" bench "$small" --coll sendrecv -g 8 --sizes 1G --format nccl-tests >"$tmp/sr.txt" 2>"$tmp/err" \
   && grep -v '^#' "$tmp/sr.txt" | awk '{ exit !($6 == "107395" && $10 == "107395") }' \
   && grep -qx '# Collective test starting: sendrecv_perf' "$tmp/sr.txt"
then ok "sendrecv_perf row = closed form"; else nok "sendrecv nccl-tests: $(cat "$tmp/err" "$tmp/sr.txt")"; fi
# 42-45: -c 1 runs real bytes: #wrong 0 out of place and in place
for c in "all-reduce -g 8" "reduce -g 8 -r 3 -o max" "all-to-all -g 8 -d bfloat16" "sendrecv -g 8"; do
  set -- $c
  cc=$1; shift
  if "$bin" bench "$small" --coll "$cc" "$@" -b 1K -e 64K -f 8 -c 1 --format nccl-tests >"$tmp/c.txt" 2>"$tmp/err" \
     && grep -v '^#' "$tmp/c.txt" | awk '{ k++; if ($9 != 0 || $13 != 0) bad = 1 } END { exit bad || k != 3 }' \
     && grep -qx '# Out of bounds values : 0 OK' "$tmp/c.txt"
  then ok "-c 1: $cc checked with real bytes, #wrong 0"; else nok "-c 1 $cc: $(cat "$tmp/err" "$tmp/c.txt")"; fi
done
# 46: nccl-tests' timing flags are accepted and named as without effect; the default
# table names the algorithm of each row
if "$bin" bench "$small" -g 8 -b 1K -e 1M -f 1024 -n 50 -w 5 -a 1 -z 0 >"$tmp/tab.txt" 2>"$tmp/err" \
   && grep -q 'no effect on a simulation: -n 50 -w 5 -a 1 -z 0' "$tmp/tab.txt" \
   && grep '^  ' "$tmp/tab.txt" | head -1 | grep -q ' tree ' && grep '^  ' "$tmp/tab.txt" | tail -1 | grep -q ' ring '
then ok "-n -w -a -z accepted, algorithm per row"; else nok "timing flags: $(cat "$tmp/err" "$tmp/tab.txt")"; fi
# 47-50: contradictions
expect_fail "-f 1" "-f must be >= 2" bench "$small" -g 2 -b 8 -e 1K -f 1
expect_fail "--sizes and -b" "give one" bench "$small" -g 2 --sizes 8:1K -b 8
expect_fail "--ranks disagrees with -g" "--ranks 8 but -t x -g" bench "$small" --ranks 8 -g 4
expect_fail "a type spsim does not have" "type 'double' is not one of spsim's" bench "$small" -g 2 -d double

# 51-56: NCCL's protocols and NVLink SHARP (docs/nccl-tests.md, spsim/tuning.h)
# 51: a protocol changes the price, as NCCL's ratios say: send-recv of 1 MiB inside a
# node with LL = coll_latency x 6.6/8.4 + route latency x 0.6/3.4 + S / (B / 2):
#   10 x 6.6/8.4 + 2 x 0.6/3.4 + 2^20 x 2 / 100e9 s = 7.857143 + 0.352941 + 20.97152 = 29.181604 us
if "$bin" bench "$small" --coll send-recv --ranks 2 --sizes 1M --proto ll --json >"$tmp/ll.json" 2>"$tmp/err" \
   && closed "$tmp/ll.json" 29.181604 && grep -q '"proto":"LL"' "$tmp/ll.json"
then ok "send-recv with LL = latency x NCCL's ratios + S / (B x 1/2)"; else nok "LL: $(cat "$tmp/err") $(rows "$tmp/ll.json")"; fi
# 61 (here for its closed form): across nodes, the links between nodes take NCCL's network
# ratio (one GPU per node: the tree's, 5/14): rank 0 -> 7, 1 MiB, LL:
#   10 x 6.6/8.4 + 11 x 5/14 + 2^20 x 2 / 10e9 s = 7.857143 + 3.928571 + 209.7152 = 221.500914 us
if "$bin" bench "$small" --coll send-recv --ranks 8 --sizes 1M --proto ll --json >"$tmp/ll2.json" 2>"$tmp/err" \
   && closed "$tmp/ll2.json" 221.500914
then ok "send-recv across nodes with LL: network latency x 5/14"; else nok "LL across nodes: $(cat "$tmp/err") $(rows "$tmp/ll2.json")"; fi
# 52: one DGX H100 node: NVLS all-reduce of 1 GiB, each GPU sending S to the switch and
# receiving S once at 275/450 of its 450 GB/s port, plus the fill and drain of NCCL's
# three-stage pipeline (two loops of 16 channels x 8 heads x 128 KiB chunks = 16 MiB):
# t = 25 us (NVLS latency) + 2 x 2.6 us (the two steps of its programs) + 2^30 / 275e9 s
# + 2 x 2^24 / 275e9 s = 3934.716 + 122.016 = 4056.732 us, busbw = 1.75 x 2^30 / t
# = 463.19 GB/s (published: ~480 at the largest sizes; 466.35 at 1 GiB on Azure's ND H100 v5)
"$bin" platform dgx --nodes 1 >"$tmp/dgx1.xml"
if "$bin" bench "$tmp/dgx1.xml" -g 8 --sizes 1G --json >"$tmp/nvls.json" 2>"$tmp/err" \
   && grep -q '"algo":"nvls","proto":"Simple"' "$tmp/nvls.json" && closed "$tmp/nvls.json" 4056.732 \
   && rows "$tmp/nvls.json" | awk '{ d = $4 - 463.19; exit !(d < 0.05 && d > -0.05) }'
then ok "NVLS all-reduce busbw on 8 H100 = 463.19 GB/s"; else nok "NVLS: $(cat "$tmp/err") $(rows "$tmp/nvls.json")"; fi
# 53: NCCL's choice on 8 H100 (by hand from its tuning constants: ring LL up to 1 MiB,
# NVLS from 2 MiB); the table names algorithm and protocol
if "$bin" bench "$tmp/dgx1.xml" -g 8 --sizes 1M:2M >"$tmp/ch.txt" 2>"$tmp/err" \
   && grep '^  ' "$tmp/ch.txt" | head -1 | grep -q ' ring  *LL ' && grep '^  ' "$tmp/ch.txt" | tail -1 | grep -q ' nvls  *Simple '
then ok "8 x H100: ring/LL at 1 MiB, nvls/Simple at 2 MiB"; else nok "choice: $(cat "$tmp/err" "$tmp/ch.txt")"; fi
# 54: --format nccl-tests keeps nccl-tests' rows and says the choices in a comment line
if "$bin" bench "$tmp/dgx1.xml" -g 8 -b 1M -e 2M -f 2 --format nccl-tests >"$tmp/ntc.txt" 2>"$tmp/err" \
   && grep -qx '# spsim: algorithm/protocol by size: 1048576 B ring/LL, 2097152 B nvls/Simple' "$tmp/ntc.txt" \
   && ! grep -v '^#' "$tmp/ntc.txt" | awk 'NF != 13 { bad = 1 } END { exit !bad }'
then ok "nccl-tests layout with the choices in a comment"; else nok "nccl-tests choices: $(cat "$tmp/err" "$tmp/ntc.txt")"; fi
# 55-56: NVLS needs the platform's NVLink SHARP; unknown protocol
expect_fail "nvls on a platform without it" "nvls=1" bench "$small" --ranks 4 --sizes 1M --algo nvls
expect_fail "unknown protocol" "unknown protocol" bench "$small" --ranks 4 --sizes 1M --proto LL256
# 57-58: broadcast and reduce on auto: NCCL's pipelined chain, with the chunk of least
# time. 8 x H100, 1 GiB (Simple; hop L = 2 x 1.3 us, B = 450 GB/s): C = round(sqrt(6 x
# 2^30 / (450e9 x 2.6e-6))) = round(74.2) = 74 chunks of ceil(2^28 / 74) = 3627507
# floats = 14510028 B; t = 8.4 us + (74 + 8 - 2) x (2.6 us + 14510028 / 450e9 s) =
# 8.4 + 80 x 34.84451 = 2795.957 us (busbw 384.0 GB/s, 85 % of the link)
for c in broadcast reduce; do
  if "$bin" bench "$tmp/dgx1.xml" --coll $c -g 8 --sizes 1G --json >"$tmp/$c.json" 2>"$tmp/err" \
     && grep -q '"algo":"ring","proto":"Simple"' "$tmp/$c.json" && closed "$tmp/$c.json" 2795.957
  then ok "$c 1 GiB on 8 H100 = pipelined chain closed form"; else nok "$c chain: $(cat "$tmp/err") $(rows "$tmp/$c.json")"; fi
done
# 59-60: point-to-point inside an H100 node at NCCL's NVLink bandwidth, 18 x 20.6 =
# 370.8 GB/s (src/graph/topo.h SM90_NVLINK_BW), not the 450 GB/s line rate:
#   send-recv 0 -> 7, 1 GiB: 8.4 + 2.6 + 2^30 / 370.8e9 s = 2906.744 us
#   all-to-all, 1 GiB per rank: 7 pairwise steps of 2^27 B: 8.4 + 7 x (2.6 + 2^27 / 370.8e9 s)
#   = 2560.376 us (busbw 7/8 x 2^30 / t = 366.9 GB/s)
if "$bin" bench "$tmp/dgx1.xml" --coll send-recv -g 8 --sizes 1G --json >"$tmp/p2p.json" 2>"$tmp/err" \
   && closed "$tmp/p2p.json" 2906.744
then ok "send-recv on 8 H100 at NCCL's NVLink bandwidth"; else nok "p2p: $(cat "$tmp/err") $(rows "$tmp/p2p.json")"; fi
if "$bin" bench "$tmp/dgx1.xml" --coll all-to-all -g 8 --sizes 1G --json >"$tmp/a2a.json" 2>"$tmp/err" \
   && closed "$tmp/a2a.json" 2560.376
then ok "all-to-all on 8 H100 at NCCL's NVLink bandwidth"; else nok "a2a: $(cat "$tmp/err") $(rows "$tmp/a2a.json")"; fi
# 62: NCCL's double binary tree, closed form. 4 nodes of one toy GPU (NIC 10 GB/s), 1 GiB,
# Simple: tree 0 = 0 -> 2 -> {1, 3}, tree 1 = 3 -> 1 -> {2, 0}, each on S/2. Nodes 1
# and 2 are inner in one tree (send S/2 up and 2 x S/2 down) and leaves in the other
# (S/2 up): 2 S each over their NIC, so t >= 2 S / B = 214.7 ms (algbw <= B/2 = 5 GB/s);
# with 4 MiB chunks, C = 128 per tree and depth H = 2, the pipeline runs C + 2H + 1 =
# 133 steps of at most 4 chunks per NIC: t <= 133 x 4 x 4 MiB / B + 133 x 21 us of
# latencies = 226.0 ms (algbw >= 4.75 GB/s)
"$bin" platform dgx --nodes 4 --gpus-per-node 1 --gpu toy -o "$tmp/toy4.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/toy4.xml" --coll all-reduce --ranks 4 --algo tree --proto simple --sizes 1G --json \
     >"$tmp/tree.json" 2>>"$tmp/err" \
   && rows "$tmp/tree.json" | awk '{ exit !($3 >= 4.75 && $3 <= 5.0) }'
then ok "tree all-reduce on 4 nodes within its closed-form bounds (B/2, pipeline fill)"
else nok "tree closed form: $(cat "$tmp/err") $(rows "$tmp/tree.json")"; fi
# 63-64: PAT, closed form. 4 nodes of one toy GPU (NIC 10 GB/s, 5 us each side, 1 us
# leaf: 11 us a message), 1 GiB: recursive doubling moves S/4 then S/2 over every NIC
# (partners 1^1, 1^2, ... never share a NIC), so t = 10 us (coll_latency) + 2 x 11 us +
# 3/4 x 2^30 / 10e9 s = 80562.64 us; recursive halving (reduce-scatter) the same
for c in all-gather reduce-scatter; do
  if "$bin" bench "$tmp/toy4.xml" --coll $c --ranks 4 --algo pat --sizes 1G --json >"$tmp/pat.json" 2>"$tmp/err" \
     && closed "$tmp/pat.json" 80562.64
  then ok "pat $c on 4 nodes = L + 2 steps + 3/4 S/B"; else nok "pat $c: $(cat "$tmp/err") $(rows "$tmp/pat.json")"; fi
done
# 65: NCCL's tuning picks PAT at one GPU per node (16 nodes, 64 KiB: PAT 68.8 us of latency
# against ring LL's 81.6, tests/test-tuning.c) and the table says so
"$bin" platform dgx --nodes 16 --gpus-per-node 1 --gpu toy -o "$tmp/toy16.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/toy16.xml" --coll all-gather --ranks 16 --sizes 64K >"$tmp/pat.txt" 2>"$tmp/err" \
   && grep -Eq "^ +65536 .* pat +Simple " "$tmp/pat.txt"
then ok "auto picks pat at one GPU per node"; else nok "auto pat: $(cat "$tmp/err" "$tmp/pat.txt")"; fi
# 66-73: NVLS-tree and CollNet all-reduces on 2 DGX H100 nodes (16 GPUs; NVLink 450 GB/s,
# 1.3 us per port; NIC 48 GB/s, a node pair 4.2 us apart; coll_latency 8.4 us). One chunk
# per part (--chunk = the part), so the phases run one after the other:
# NVLS-tree, 1 GiB: 25 us (NVLS-tree's latency) + reduce-scatter and all-gather inside
# the node, each S/2 once each way at 275/450 of the port (S / 550e9 + 2.6 us), + the
# tree across 2 nodes, up then down, S/16 per GPU and NIC each (S / 16 / 48e9 + 4.2 us):
#   25 + 2 x (1952.2579 + 2.6) + 2 x (1398.1013 + 4.2) = 6739.32 us
"$bin" platform dgx --nodes 2 -o "$tmp/dgx2.xml"
if "$bin" bench "$tmp/dgx2.xml" --ranks 16 --algo nvls-tree --sizes 1G --chunk 67108864 --json >"$tmp/nt.json" 2>"$tmp/err" \
   && grep -q '"algo":"nvls-tree","proto":"Simple"' "$tmp/nt.json" && closed "$tmp/nt.json" 6739.32
then ok "nvls-tree on 2 H100 nodes, one chunk = closed form"; else nok "nvls-tree: $(cat "$tmp/err") $(rows "$tmp/nt.json")"; fi
# NCCL's chunks (the default --chunk) pipeline the phases: no faster than the node's
# NVLink carrying both intra-node phases (25 + 2 x 1952.2579 us = 3929.52), no slower
# than one chunk; FLOW prices the pipeline's links as one group plus its fill and
# drain (src/sim/flow.c), within 5 % of STEP, which runs every chunk step by step
if "$bin" bench "$tmp/dgx2.xml" --ranks 16 --algo nvls-tree --sizes 1G --json >"$tmp/ntf.json" 2>"$tmp/err" \
   && "$bin" bench "$tmp/dgx2.xml" --ranks 16 --algo nvls-tree --sizes 1G --fidelity step --json >"$tmp/nts.json" 2>>"$tmp/err" \
   && f=$(rows "$tmp/ntf.json" | awk '{ print $2 }') && s=$(rows "$tmp/nts.json" | awk '{ print $2 }') \
   && awk -v f="$f" -v s="$s" 'BEGIN { d = (f - s) / s; if (d < 0) d = -d
        exit !(f >= 3929.52 && f < 6739.32 && s >= 3929.52 && s < 6739.32 && d <= 0.05) }'
then ok "nvls-tree pipelined: FLOW within 5 % of STEP, both within the closed-form bounds"
else nok "nvls-tree pipelined: $(cat "$tmp/err") flow $(rows "$tmp/ntf.json") step $(rows "$tmp/nts.json")"; fi
# NCCL's model picks NVLS-tree for 1 GiB across 2 H100 nodes (tests/test-tuning.c: 2874
# us against tree Simple's 6171 and ring Simple's 5427)
if "$bin" bench "$tmp/dgx2.xml" --ranks 16 --sizes 1G --json >"$tmp/nta.json" 2>"$tmp/err" \
   && grep -q '"algo":"nvls-tree"' "$tmp/nta.json"
then ok "auto picks nvls-tree at 1 GiB on 2 H100 nodes"; else nok "auto nvls-tree: $(cat "$tmp/err") $(rows "$tmp/nta.json")"; fi
# CollNet Direct, 1 GiB, with the switches reducing (--sharp): 31 us (CollNet's latency)
# + reduce-scatter and all-gather inside the node, 7/8 S each way (7/8 S / 450e9 + 2.6
# us), + the switch's reduction across 2 nodes: S/16 up and S/16 down per GPU and NIC:
#   31 + 2 x (2087.8313 + 2.6) + 2 x (1398.1013 + 4.2) = 7016.47 us
"$bin" platform dgx --nodes 2 --sharp -o "$tmp/dgx2s.xml"
if grep -q '<prop id="sharp" value="1"/>' "$tmp/dgx2s.xml" && ! grep -q 'id="sharp"' "$tmp/dgx2.xml" \
   && "$bin" bench "$tmp/dgx2s.xml" --ranks 16 --algo collnet-direct --sizes 1G --chunk 134217728 --json >"$tmp/cd.json" 2>"$tmp/err" \
   && closed "$tmp/cd.json" 7016.47
then ok "collnet-direct on 2 H100 nodes with --sharp, one chunk = closed form"; else nok "collnet-direct: $(cat "$tmp/err") $(rows "$tmp/cd.json")"; fi
# switches reducing at half the NIC's rate: the exchange across nodes takes twice as long
#   31 + 2 x 2090.4313 + 2 x (2 x 1398.1013 + 4.2) = 9812.67 us
"$bin" platform dgx --nodes 2 --sharp --sharp-bw 24 -o "$tmp/dgx2h.xml"
if grep -q '<prop id="sharp_bw" value="24GBps"/>' "$tmp/dgx2h.xml" \
   && "$bin" bench "$tmp/dgx2h.xml" --ranks 16 --algo collnet-direct --sizes 1G --chunk 134217728 --json >"$tmp/cdh.json" 2>"$tmp/err" \
   && closed "$tmp/cdh.json" 9812.67
then ok "collnet-direct with sharp_bw = NIC / 2"; else nok "sharp_bw: $(cat "$tmp/err") $(rows "$tmp/cdh.json")"; fi
expect_fail "collnet-direct without SHARP is refused" "collnet-direct needs switches that reduce (SHARP: the platform property sharp=1" \
  bench "$tmp/dgx2.xml" --ranks 16 --algo collnet-direct --sizes 1M
expect_fail "nvls-tree on one node is refused" "nvls-tree needs NVLink SHARP" \
  bench "$tmp/dgx2.xml" --ranks 8 --algo nvls-tree --sizes 1M
expect_fail "--sharp-bw needs --sharp" "needs --sharp" platform dgx --nodes 2 --sharp-bw 24

# 74-75: NCCL's channels for few bytes (enqueue.cc topoGetAlgoInfo): a ring LL all-reduce
# runs one channel per 512 threads x 8 B x 16 ranks = 64 KiB, so 64 KiB .. 1 MiB on 2
# DGX nodes run 1, 2, 4, 8 and 8 channels (no more than the 8 GPUs of a node), each size
# in the time of 8 channels (NCCL's model gives the protocol's rate to the whole collective)
dgx="$src/platforms/dgx.xml"
"$bin" bench "$dgx" --coll all-reduce --ranks 16 --algo ring --proto ll --sizes 64K:1M --json >"$tmp/lc.json" 2>"$tmp/err"
"$bin" bench "$dgx" --coll all-reduce --ranks 16 --algo ring --proto ll --sizes 64K:1M --channels 8 --json >"$tmp/l8.json" 2>>"$tmp/err"
chans() { tr '{' '\n' <"$1" | sed -n 's/.*"channels":\([0-9]*\).*/\1/p' | paste -sd' ' -; }
if [ "$(chans "$tmp/lc.json")" = "1 2 4 8 8" ] && [ "$(chans "$tmp/l8.json")" = "8 8 8 8 8" ]
then ok "ring LL: NCCL's channels for few bytes"; else nok "LL channels: $(cat "$tmp/err") $(chans "$tmp/lc.json") / $(chans "$tmp/l8.json")"; fi
if rows "$tmp/lc.json" >"$tmp/lc.rows" && rows "$tmp/l8.json" >"$tmp/l8.rows" && [ "$(wc -l <"$tmp/lc.rows")" -eq 5 ] \
   && paste "$tmp/lc.rows" "$tmp/l8.rows" | awk '{ d = $2 - $6; if (d < 0) d = -d; if (d > 1e-9 * $6) bad++ } END { exit bad > 0 }'
then ok "fewer channels, same time as 8"; else nok "LL channel time: $(paste "$tmp/lc.rows" "$tmp/l8.rows")"; fi

# 76-77: in place. Where the hosts charge local steps (--charge-local: HBM copies), the
# in-place run pays the snapshot of its input, so its column is slower than out of
# place; where they charge nothing the two programs differ in local copies only and one
# simulation gives both columns, equal
"$bin" platform dgx --nodes 2 --charge-local -o "$tmp/cl.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/cl.xml" --coll all-reduce --ranks 16 --sizes 1M:4M --json >"$tmp/ip.json" 2>>"$tmp/err" \
   && tr '{' '\n' <"$tmp/ip.json" | sed -n 's/.*"time_us":\([0-9.e+-]*\).*/\1/p' | paste - - \
      | awk '{ k++; if (!($2 > $1)) bad++ } END { exit (bad > 0 || k != 3) }'
then ok "in place pays its input's copy where local steps cost"; else nok "in place, charged: $(cat "$tmp/err") $(rows "$tmp/ip.json")"; fi
if tr '{' '\n' <"$tmp/l8.json" | sed -n 's/.*"time_us":\([0-9.e+-]*\).*/\1/p' | paste - - \
      | awk '{ k++; if ($2 != $1) bad++ } END { exit (bad > 0 || k != 5) }'
then ok "in place = out of place where local steps are free"; else nok "in place, free: $(rows "$tmp/l8.json")"; fi

# 78-80: a ring inside one node as NCCL runs it: the bytes at NCCL's effective NVLink
# bandwidth (18 x 20.6 = 370.8 GB/s on H100, 18 x 40.1 = 721.8 on B200: src/graph/topo.h)
# and the steps' latency (2 x 1.3 us each) once, as the pipeline's fill:
#   8 x H100 all-reduce, 1 GiB: 8.4 + 14 x 2.6 + 1.75 x 2^30 / 370.8e9 s = 5112.351 us
#   8 x H100 all-gather, 1 GiB gathered: 8.4 + 7 x 2.6 + 0.875 x 2^30 / 370.8e9 s = 2560.376 us
#   4 x B200 all-reduce, 8 GiB: 8.4 + 6 x 2.6 + 1.5 x 2^33 / 721.8e9 s = 17875.069 us
#   (busbw 720.8 GB/s; Azure's ND GB200 v6 tray measured 679.6)
if "$bin" bench "$tmp/dgx1.xml" -g 8 --algo ring --proto simple --sizes 1G --json >"$tmp/rp.json" 2>"$tmp/err" \
   && closed "$tmp/rp.json" 5112.351
then ok "ring all-reduce on 8 H100: pipelined at NCCL's NVLink bandwidth"; else nok "ring AR: $(cat "$tmp/err") $(rows "$tmp/rp.json")"; fi
if "$bin" bench "$tmp/dgx1.xml" --coll all-gather -g 8 --algo ring --proto simple --sizes 1G --json >"$tmp/rg.json" 2>"$tmp/err" \
   && closed "$tmp/rg.json" 2560.376
then ok "ring all-gather on 8 H100: pipelined at NCCL's NVLink bandwidth"; else nok "ring AG: $(cat "$tmp/err") $(rows "$tmp/rg.json")"; fi
"$bin" platform dgx --nodes 1 --gpu b200 --gpus-per-node 4 -o "$tmp/b4.xml" 2>"$tmp/err"
if "$bin" bench "$tmp/b4.xml" -g 4 --algo ring --proto simple --sizes 8G --json >"$tmp/rb.json" 2>>"$tmp/err" \
   && closed "$tmp/rb.json" 17875.069
then ok "ring all-reduce on 4 B200: pipelined at NVLink 5's effective bandwidth"; else nok "ring B200: $(cat "$tmp/err") $(rows "$tmp/rb.json")"; fi

# 81-83: a cluster's NCCL tuner plugin. aws-ofi-nccl v1.16.3's region tuner for p5
# (src/tuner/nccl_ofi_regions.cpp) on 4 nodes of 8 (32 ranks): Tree LL128 up to its edge
# (31457280, 16)-(37748736, 32), so at 16 MiB; Ring LL128 between that edge and
# (1073741824, 17)-(2147483648, 64), so at 64 MiB and 1 GiB; Ring Simple from
# (1610612736, 32), so at 4 GiB. Without the plugin NCCL's model runs NVLS-tree at 64 MiB.
algos() { tr '{' '\n' <"$1" | sed -n 's/.*"algo":"\([a-z-]*\)","proto":"\([A-Za-z0-9]*\)".*"time_us".*/\1\/\2/p' | tr '\n' ' '; }
"$bin" platform dgx --nodes 4 --nccl-tuner aws-p5 -o "$tmp/p5t.xml" 2>"$tmp/err"
"$bin" platform dgx --nodes 4 -o "$tmp/p5.xml" 2>>"$tmp/err"
if "$bin" bench "$tmp/p5t.xml" -g 32 -b 16M -e 4G -f 4 --json >"$tmp/t.json" 2>>"$tmp/err" \
   && [ "$(algos "$tmp/t.json")" = "tree/LL128 ring/LL128 ring/LL128 ring/LL128 ring/Simple " ] \
   && "$bin" bench "$tmp/p5.xml" -g 32 --sizes 64M --json >"$tmp/n.json" 2>>"$tmp/err" \
   && [ "$(algos "$tmp/n.json")" = "nvls-tree/Simple " ]
then ok "--nccl-tuner aws-p5: the plugin's algorithm and protocol per size"
else nok "aws-p5 tuner: $(cat "$tmp/err") [$(algos "$tmp/t.json")] [$(algos "$tmp/n.json")]"; fi
expect_fail "--nccl-tuner with an unknown plugin" "nccl-tuner must be aws-p5, aws-p5en, aws-p6 or none" \
  platform dgx --nodes 4 --nccl-tuner nccl
sed 's/"nccl_tuner" value="aws-p5"/"nccl_tuner" value="azure"/' "$tmp/p5t.xml" >"$tmp/bad.xml"
expect_fail "a platform naming an unknown tuner plugin" "property nccl_tuner 'azure' is not a tuner plugin" \
  bench "$tmp/bad.xml" -g 32 --sizes 64M
# 84: nccl-tests' counts a simulation ignores still must be counts: a negative -n was
# taken for "not given" and printed as nccl-tests' default
expect_fail "bench -n -5" "bench: -n must be 0 or more (got -5)" bench "$tmp/dgx1.xml" -g 8 -n -5 --sizes 8
