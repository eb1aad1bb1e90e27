#!/bin/sh
# What-if CLI: ranked output, determinism, artefacts, and clear errors on bad input.
bin="${SPSIM_BUILDDIR:-.}/spsim"
src="${SPSIM_SRCDIR:-.}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 4 nodes x 8 GPUs (H100-like host speed, 80 GiB property)
{
  echo '<?xml version="1.0"?>'
  echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
  echo '<platform version="4.1"><zone id="w" routing="Full">'
  for n in 0 1 2 3; do
    echo " <zone id=\"n$n\" routing=\"Full\">"
    for g in 0 1 2 3 4 5 6 7; do
      echo "  <host id=\"g$n-$g\" speed=\"989.4Tf\"><prop id=\"gpu_memory\" value=\"80GiB\"/></host>"
    done
    echo " </zone>"
  done
  echo '</zone></platform>'
} > "$tmp/p.xml"
export SPSIM_MODELS_DIR="$src/models"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
# expect_fail DESC PATTERN ARGS...: non-zero exit and one "spsim:" line matching PATTERN
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"; else nok "$desc: $(cat "$tmp/err")"; fi
}
echo "1..14"
A="--fidelity analytic"
if "$bin" "$tmp/p.xml" $A --model llama3-8b >"$tmp/out" 2>"$tmp/err" && grep -q '^  1  ' "$tmp/out" && grep -q '^Why ' "$tmp/out" \
   && grep -q 'llama3-8b' "$tmp/out"; then ok "ranked table and explanation"; else nok "ranked table: $(cat "$tmp/err")"; fi
# 32 GPUs: the winner needs dp x ... = 32 and fits 73.6 GiB
if awk '/^  1  /{ if ($(NF) != "yes") exit 1; found=1 } END { exit !found }' "$tmp/out"; then ok "winner fits"; else nok "winner fits"; fi
"$bin" "$tmp/p.xml" $A --model llama3-8b --json "$tmp/a.json" >/dev/null 2>&1
"$bin" "$tmp/p.xml" $A --model llama3-8b --json "$tmp/b.json" >/dev/null 2>&1
if [ -s "$tmp/a.json" ] && cmp -s "$tmp/a.json" "$tmp/b.json"; then ok "JSON byte-identical across runs"; else nok "JSON determinism"; fi
if grep -q '"layouts": \[' "$tmp/a.json" && grep -q '"exposed_s"' "$tmp/a.json"; then ok "JSON has the breakdown"; else nok "JSON content"; fi
if "$bin" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,pp=2,dp=2,ckpt=selective --svg "$tmp/c.svg" --trace "$tmp/t.json" >"$tmp/out" 2>&1 \
   && grep -q '^<svg' "$tmp/c.svg" && [ -s "$tmp/t.json" ] && grep -q 'tp8s pp2 dp2 sel' "$tmp/out"; then ok "--layout with --svg and --trace"; else nok "svg/trace: $(cat "$tmp/out")"; fi
expect_fail "unknown model lists the known ones" "known models: .*llama3-70b" "$tmp/p.xml" --model llama9
expect_fail "--seq 0" "seq" "$tmp/p.xml" $A --seq 0
expect_fail "layout not multiplying to the GPUs" "32 GPUs" "$tmp/p.xml" $A --model llama3-8b --layout tp=8,pp=2,dp=3
echo '{"layers": 2, "hidden": 768, "heads": 12, "kv_heads": 12, "ffn": 3072, "vocab": 1000}' > "$tmp/h12.json"
expect_fail "heads not divisible by tp x sp" "12 heads are not divisible" "$tmp/p.xml" $A --model "$tmp/h12.json" --layout tp=8,dp=4
expect_fail "unknown flag" "Unknown option" "$tmp/p.xml" --frobnicate
echo '{"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 100}' > "$tmp/m.json"
expect_fail "model file with a missing field" "kv_heads" "$tmp/p.xml" $A --model "$tmp/m.json"
echo '{"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": -256, "vocab": 100}' > "$tmp/m2.json"
expect_fail "model file with a negative field" "positive" "$tmp/p.xml" $A --model "$tmp/m2.json"
expect_fail "a model that cannot fit anywhere" "cannot fit" "$tmp/p.xml" $A --model llama3-405b
if grep -q 'closest layouts' "$tmp/out"; then ok "closest layouts shown"; else nok "closest layouts"; fi
