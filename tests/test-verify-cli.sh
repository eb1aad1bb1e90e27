#!/bin/sh
# spsim verify: PASS on a small platform for every collective, checksum and JSON
# output shapes, and one clear "spsim:" line with a non-zero exit on bad input.
bin="${SPSIM_BUILDDIR:-.}/spsim"
src="${SPSIM_SRCDIR:-.}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 8 hosts on private 1 GB/s, 1 us links to a crossbar: a route is 2 links
cat > "$tmp/star.xml" <<'XML'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="star" prefix="h" suffix="" radical="0-7" speed="1Gf" bw="1GBps" lat="1us"
           sharing_policy="SPLITDUPLEX"/>
</platform>
XML
P="$tmp/star.xml"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"
  else nok "$desc: $(cat "$tmp/err")"; fi
}

echo "1..52"
for op in all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv; do
  if "$bin" verify "$P" --op $op --ranks 8 --dtype bf16 --count 100 >"$tmp/out" 2>"$tmp/err" &&
     grep -q "^PASS op=$op ranks=8 dtype=bf16 algo=[a-z]* bytes=[0-9]* simulated_time_us=[0-9.]*$" "$tmp/out"
  then ok "verify $op PASS"; else nok "verify $op: $(cat "$tmp/out" "$tmp/err")"; fi
done

# --op list: every operation, one line each with what it checks, exit 0 (no platform needed):
# the seven collectives first, then the operation library's 16 checks
if "$bin" verify --op list >"$tmp/out" 2>"$tmp/err" && [ "$(wc -l <"$tmp/out")" -eq 23 ] &&
   [ "$(awk 'NR <= 7 { printf "%s ", $1 }' "$tmp/out")" = "all-reduce all-gather reduce-scatter all-to-all broadcast reduce send-recv " ] &&
   grep -q '^tp-mlp-sp  *Megatron TP with sequence parallelism' "$tmp/out" && awk 'NF < 3 { exit 1 }' "$tmp/out"; then
  ok "verify --op list"; else nok "verify --op list: $(cat "$tmp/out" "$tmp/err")"; fi

# MoE layers at 16 ranks (forward: ep 8 x expert-data 2; backward: etp 2 x ep 4 x
# expert-data 2), each rank's output also checked against the single-device layer
cat > "$tmp/star16.xml" <<'XML'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="star" prefix="h" suffix="" radical="0-15" speed="1Gf" bw="1GBps" lat="1us"
           sharing_policy="SPLITDUPLEX"/>
</platform>
XML
for op in moe-layer moe-layer-bwd; do
  if "$bin" verify "$tmp/star16.xml" --op $op --ranks 16 --checksum >"$tmp/out" 2>"$tmp/err" &&
     grep -q "^PASS op=$op ranks=16 dtype=f32 algo=graph " "$tmp/out" &&
     [ "$(grep -c '^checksum rank=' "$tmp/out")" -eq 16 ]
  then ok "verify $op at 16 ranks PASS, 16 checksum lines"; else nok "verify $op 16: $(cat "$tmp/out" "$tmp/err")"; fi
done
# all-to-all-v (uneven counts, grouped sends) at 16 ranks
if "$bin" verify "$tmp/star16.xml" --op all-to-all-v --ranks 16 >"$tmp/out" 2>"$tmp/err" &&
   grep -q "^PASS op=all-to-all-v ranks=16 " "$tmp/out"
then ok "verify all-to-all-v at 16 ranks PASS"; else nok "all-to-all-v 16: $(cat "$tmp/out" "$tmp/err")"; fi
# all-to-all at 136 ranks, every rank sending to and receiving from 135 peers (more than
# one SimGrid actor posts: helper actors post them at the same simulated time). On a star
# of 1 GB/s split-duplex links every flow gets 1/135 of its links: 135 x 4,000 B = 540 us,
# plus the two links' 1 us latency: 542 us
sed 's/radical="0-15"/radical="0-135"/' "$tmp/star16.xml" > "$tmp/star136.xml"
if "$bin" verify "$tmp/star136.xml" --op all-to-all --ranks 136 --count 1000 >"$tmp/out" 2>"$tmp/err" &&
   grep -q "^PASS op=all-to-all ranks=136 dtype=f32 algo=direct bytes=544000 simulated_time_us=542.000$" "$tmp/out"
then ok "verify all-to-all at 136 ranks PASS in 542 us"; else nok "all-to-all 136: $(cat "$tmp/out" "$tmp/err")"; fi
# the MoE case is deterministic, and a graph operation takes no --count
"$bin" verify "$P" --op moe-layer-bwd --ranks 8 --checksum > "$tmp/a" 2>&1
"$bin" verify "$P" --op moe-layer-bwd --ranks 8 --checksum > "$tmp/b" 2>&1
if grep -q '^PASS' "$tmp/a" && cmp -s "$tmp/a" "$tmp/b"; then ok "moe-layer-bwd deterministic"
else nok "moe-layer-bwd: $(cat "$tmp/a")"; fi
expect_fail "moe-layer refuses --count" "--count does not apply to the graph operation .moe-layer." verify "$P" --op moe-layer --ranks 4 --count 100
# --moe sets the layer's configuration; 64 experts over ep 4 (16 per rank, more than
# one concat can take), top-8, expert tensor parallelism 2, drop by position
if "$bin" verify "$P" --op moe-layer-bwd --ranks 8 --moe experts=64,topk=8,ep=4,etp=2,tokens=16,hidden=8,ffn=8,capacity=1.5,drop=position \
     >"$tmp/out" 2>"$tmp/err" && grep -q "^PASS op=moe-layer-bwd ranks=8 " "$tmp/out"
then ok "moe-layer-bwd with --moe options PASS"; else nok "moe options: $(cat "$tmp/out" "$tmp/err")"; fi
# bad configurations: one line each naming the rule
expect_fail "moe: top-k above the experts" "moe: top-k (9) must be between 1 and the number of experts (8)" \
  verify "$P" --op moe-layer --ranks 8 --moe experts=8,topk=9
expect_fail "moe: ep not dividing the experts" "moe: ep (3) must divide the number of experts (8)" \
  verify "$P" --op moe-layer --ranks 6 --moe experts=8,ep=3
expect_fail "moe: ranks not divisible by ep x etp" "moe: the ranks (8) must be divisible by ep x etp (2 x 3)" \
  verify "$P" --op moe-layer --ranks 8 --moe ep=2,etp=3,ffn=6
expect_fail "moe: capacity factor 0" "moe: the capacity factor (0) must be > 0" verify "$P" --op moe-layer --ranks 4 --moe capacity=0
expect_fail "moe: capacity factor negative" "moe: the capacity factor (-0.5) must be > 0" verify "$P" --op moe-layer --ranks 4 --moe capacity=-0.5
expect_fail "moe: unknown key" "moe options: 'heads=2' is not KEY=VALUE" verify "$P" --op moe-layer --ranks 4 --moe heads=2
expect_fail "moe: too large for data mode" "too large to carry in data mode" verify "$P" --op moe-layer --ranks 4 --moe tokens=4096,hidden=4096
expect_fail "--moe on another operation" "the operation 'tp-mlp' takes no options" verify "$P" --op tp-mlp --ranks 4 --moe topk=1

# send-recv of 1000 bytes between two hosts: 2 links of 1 us + 1000 B / 1 GB/s = 3 us
"$bin" verify "$P" --op send-recv --ranks 2 --dtype u8 --size 1000 > "$tmp/out" 2>&1
if grep -q "bytes=1000 simulated_time_us=3.000$" "$tmp/out"; then ok "send-recv closed-form time"
else nok "send-recv time: $(cat "$tmp/out")"; fi

# --checksum: one line per member then the combined value; equal for the same data
"$bin" verify "$P" --op all-reduce --ranks 4 --algo ring --checksum > "$tmp/out" 2>"$tmp/err"
if [ "$(grep -c '^checksum rank=[0-3] 0x[0-9a-f]\{16\}$' "$tmp/out")" -eq 4 ] &&
   tail -n 1 "$tmp/out" | grep -q '^checksum all=0x[0-9a-f]\{16\}$'
then ok "checksum lines"; else nok "checksum lines: $(cat "$tmp/out" "$tmp/err")"; fi
# all-reduce: every rank holds the same result, so every per-rank checksum is equal
if [ "$(grep '^checksum rank=' "$tmp/out" | awk '{print $3}' | sort -u | wc -l)" -eq 1 ]
then ok "all-reduce checksums agree across ranks"; else nok "all-reduce checksums differ"; fi
# ring and tree compute the same bytes for integers (exact arithmetic)
a=$("$bin" verify "$P" --op all-reduce --ranks 8 --dtype i32 --algo ring --checksum | tail -n 1)
b=$("$bin" verify "$P" --op all-reduce --ranks 8 --dtype i32 --algo tree --checksum | tail -n 1)
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "i32 checksum independent of the algorithm"
else nok "i32 checksums: $a vs $b"; fi
# deterministic output
"$bin" verify "$P" --op all-to-all --ranks 8 --checksum > "$tmp/a" 2>&1
"$bin" verify "$P" --op all-to-all --ranks 8 --checksum > "$tmp/b" 2>&1
if cmp -s "$tmp/a" "$tmp/b"; then ok "deterministic"; else nok "output differs between runs"; fi

# --json
"$bin" verify "$P" --op all-gather --ranks 8 --json --checksum > "$tmp/out" 2>"$tmp/err"
if grep -q '^{"op":"all-gather","ranks":8,"dtype":"f32","algo":"[a-z]*","bytes":[0-9]*,"pass":true,"simulated_time_us":[0-9.e+-]*,"checksum":"0x[0-9a-f]\{16\}"}$' "$tmp/out"
then ok "json object"; else nok "json: $(cat "$tmp/out" "$tmp/err")"; fi

# --trace writes a Chrome trace
"$bin" verify "$P" --op all-reduce --ranks 4 --trace "$tmp/t.json" > /dev/null 2>&1
if grep -q '"traceEvents"' "$tmp/t.json" 2>/dev/null; then ok "trace file"; else nok "no trace file"; fi

# bad input
expect_fail "missing platform" "does not exist" verify "$tmp/none.xml" --op all-reduce --ranks 2
echo '<platform version="4.1"><host id="a"' > "$tmp/bad.xml"
expect_fail "malformed platform" "not valid XML" verify "$tmp/bad.xml" --op all-reduce --ranks 2
# graph operations build fixed shapes: a size or type flag is refused, not ignored (as spsim-run does)
expect_fail "graph op refuses --count" "--count does not apply to the graph operation .tp-mlp." verify "$P" --op tp-mlp --ranks 4 --count 100
expect_fail "graph op refuses --dtype" "--dtype does not apply to the graph operation .ulysses-attention." verify "$P" --op ulysses-attention --ranks 4 --dtype bf16
printf '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n<platform version="4.1"><cluster id="c" prefix="h" suffix="" radical="0-3" speed="1Gf" bw="fast" lat="1us"/></platform>' > "$tmp/rej.xml"
expect_fail "platform SimGrid rejects: its reason" "rejected by SimGrid: .*cannot parse number:fast" verify "$tmp/rej.xml" --op all-reduce --ranks 2
expect_fail "ranks 0" "ranks" verify "$P" --op all-reduce --ranks 0
expect_fail "more ranks than hosts" "platform has 8 hosts, --ranks asks for 9" verify "$P" --op all-reduce --ranks 9
expect_fail "size 0" "must be positive" verify "$P" --op all-reduce --ranks 2 --size 0
expect_fail "unparsable size" "not a size" verify "$P" --op all-reduce --ranks 2 --size 12Q
expect_fail "unknown op" "unknown operation" verify "$P" --op all-scatter --ranks 2
expect_fail "unknown dtype" "dtype" verify "$P" --op all-reduce --ranks 2 --dtype f8
expect_fail "unknown algo" "algorithm" verify "$P" --op all-reduce --ranks 2 --algo fast
expect_fail "unknown flag" "" verify "$P" --op all-reduce --ranks 2 --frobnicate
# 1e17 f32 elements per rank (400 PB) cannot be carried: refused with the sizes, not thrashing
expect_fail "count beyond host memory" "needs .* of host memory .* more than this machine's" \
  verify "$P" --op all-gather --ranks 2 --count 100000000000000000
expect_fail "flow fidelity" "fidelity step" verify "$P" --op all-reduce --ranks 2 --fidelity flow
# ring channels (coll.h): every channel count and rotation block is bitwise equal to the reference
for cfg in "8 4 4" "6 3 3" "7 2 7"; do
  set -- $cfg
  if "$bin" verify "$P" --op all-reduce --ranks $1 --algo ring --channels $2 --channel-block $3 --dtype bf16 --count 1001 \
       >"$tmp/out" 2>"$tmp/err" && grep -q "^PASS op=all-reduce ranks=$1 " "$tmp/out"
  then ok "ring all-reduce, $1 ranks, $2 channels, block $3"; else nok "channels $cfg: $(cat "$tmp/out" "$tmp/err")"; fi
done
expect_fail "too many channels" "at most 64" verify "$P" --op all-reduce --ranks 8 --algo ring --channels 100
# PAT (all-gather and reduce-scatter): every group size 2..16, one GPU per node
"$bin" platform dgx --nodes 16 --gpus-per-node 1 --gpu toy -o "$tmp/toy16.xml" 2>"$tmp/err"
for op in all-gather reduce-scatter; do
  bad=""
  for r in 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
    "$bin" verify "$tmp/toy16.xml" --op $op --algo pat --ranks $r --count 37 >"$tmp/out" 2>"$tmp/err" \
      && grep -q "^PASS op=$op ranks=$r .*algo=pat" "$tmp/out" || bad="$bad $r"
  done
  if [ -z "$bad" ]; then ok "pat $op verifies on 2..16 ranks"; else nok "pat $op fails on:$bad $(cat "$tmp/err")"; fi
done
expect_fail "pat all-reduce refused" "all-reduce has no pat algorithm" verify "$tmp/toy16.xml" --op all-reduce --algo pat --ranks 4
