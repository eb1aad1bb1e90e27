# Shared by the shell tests (sourced): the binaries and sources, a scratch directory
# removed on exit, TAP result lines, and the 4-node test platform of the what-if tests.
bin="${SPSIM_BUILDDIR:-.}/spsim"
build="${SPSIM_BUILDDIR:-.}"
src="${SPSIM_SRCDIR:-.}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# check STATUS DESC: ok when STATUS is 0
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }

# expect_fail DESC PATTERN ARGS...: spsim ARGS fails with one line "spsim: ...PATTERN" on stderr
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "^spsim: .*$pat" "$tmp/err"; then ok "$desc"; else nok "$desc: $(cat "$tmp/err")"; fi
}
# jval KEY FILE: the first value of KEY in a JSON file
jval() { grep -o "\"$1\": *[^,}]*" "$2" | head -n 1 | sed 's/.*: *//; s/"//g'; }

# whatif_platform FILE: 4 nodes x 8 GPUs in node zones (H100-like host speed, 80 GiB)
whatif_platform() {
  {
    echo '<?xml version="1.0"?>'
    echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
    echo '<platform version="4.1"><zone id="w" routing="Full">'
    for nd in 0 1 2 3; do
      echo " <zone id=\"n$nd\" routing=\"Full\">"
      for g in 0 1 2 3 4 5 6 7; do
        echo "  <host id=\"g$nd-$g\" speed=\"989.4Tf\"><prop id=\"gpu_mem\" value=\"80GiB\"/></host>"
      done
      echo " </zone>"
    done
    echo '</zone></platform>'
  } > "$1"
}
