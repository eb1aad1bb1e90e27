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
echo "1..33"

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
