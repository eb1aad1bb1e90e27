#!/bin/sh
# Man pages: `make install` installs spsim.1 and spsim-run.1, generated from the
# programs' --help and --version by help2man. Installed into a scratch DESTDIR with
# automake's install-man, then read back: the title, the version the programs print,
# the subcommands and options their --help names; rendered by man(1) when present.
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
echo "1..4"
if ! grep -q '^HELP2MAN = /' "$build/Makefile" 2>/dev/null; then
  for i in 1 2 3 4; do skip "help2man not found at configure time: no man pages"; done
  exit 0
fi
if make -s -C "$build" install-man DESTDIR="$tmp" >"$tmp/log" 2>&1; then ok "make install-man"
else nok "make install-man: $(tail -n 5 "$tmp/log")"; fi
man1=$(find "$tmp" -type d -path '*/man/man1' | head -n 1)
ver=$("$build/spsim" --version | awk '{ print $2 }')
# spsim.1: title, the version spsim prints, every subcommand of `spsim --help`
p="$man1/spsim.1"
if [ -f "$p" ] && grep -q '^\.TH SPSIM "1"' "$p" && grep -q "spsim $ver" "$p" &&
   grep -q 'what-if analysis' "$p" && grep -q 'verify' "$p" && grep -q 'calibrate' "$p" && grep -q 'bench' "$p" &&
   grep -q '^\.SH "WHAT-IF' "$p" && grep -q 'global-batch' "$p" && grep -q '^\.SH "SPSIM BENCH"' "$p"
then ok "spsim.1 installed: title, version $ver, subcommands, the what-if's and each subcommand's options"; else nok "spsim.1: $(ls "$man1" 2>&1; head -n 20 "$p" 2>&1)"; fi
# spsim-run.1: its options
p="$man1/spsim-run.1"
if [ -f "$p" ] && grep -q '^\.TH SPSIM-RUN "1"' "$p" && grep -q "spsim-run $ver" "$p" &&
   grep -q 'checksum' "$p" && grep -q 'transport' "$p"
then ok "spsim-run.1 installed: title, version, options"; else nok "spsim-run.1: $(head -n 20 "$p" 2>&1)"; fi
# `man spsim` renders it (man-db reads the installed tree through -M)
if command -v man >/dev/null 2>&1; then
  if MANWIDTH=100 man -M "$(dirname "$man1")" spsim 2>/dev/null | grep -q 'SYNOPSIS\|DESCRIPTION'; then ok "man spsim renders"
  else nok "man spsim does not render: $(man -M "$(dirname "$man1")" spsim 2>&1 | head -n 5)"; fi
else
  skip "man(1) not installed"
fi
