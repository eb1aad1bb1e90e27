#!/bin/sh
# Wall time of the what-if at 1,024 and 16,384 GPUs, and (given a second binary,
# e.g. one built from an earlier commit) whether the outputs are byte-identical.
#   1. the default run: spsim platforms/dgx.xml (llama3-70b sweep on 1,024 GPUs),
#      with --json, --trace and --svg;
#   2. one layout of llama3-70b on 1,024 GPUs: --layout tp=8,pp=4,dp=32,zero=1,ckpt=selective;
#   3. one layout of llama3-405b on 16,384 GPUs (spsim platform dgx --nodes 2048):
#      --model llama3-405b --global-batch 16M --layout tp=8,pp=16,dp=128,zero=1,ckpt=full;
#   4. the default sweep of llama3-405b on those 16,384 GPUs (--model llama3-405b);
#   5. (not by default) sweep4k: the same sweep on 4,096 GPUs (--nodes 512);
#      closed16k: the 16,384-GPU sweep's closed forms only (--simulate 0);
#      sweep16k-np2: the 16,384-GPU sweep over mpirun -np 2 (outputs compared with
#      sweep16k's when both run); bench256: spsim bench platforms/dgx.xml --ranks 256
#      -b 8 -e 1G -f 2 (--jobs $JOBS when JOBS is set).
# Usage: bench/speed.sh [path/to/spsim] [path/to/reference-spsim] [CASES...]
#   CASES: default, 70b, 405b, sweep16k, sweep4k, closed16k, sweep16k-np2, bench256
#   (default: the first four).
# LIMIT (environment): seconds allowed per command (default 900).
# JOBS (environment): -j for the what-ifs (default: none, spsim's own default of one
#   process per processor; JOBS=1 times one process; builds before -j take none).
# Use builds without sanitizers (./build.sh release).
set -eu
bin=${1:-./spsim}
ref=${2:-}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
cases=${*:-default 70b 405b sweep16k}
# the commands run in a scratch directory: absolute paths
abs() { case $1 in /*) echo "$1" ;; */*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;; *) command -v "$1" ;; esac; }
bin=$(abs "$bin")
[ -n "$ref" ] && ref=$(abs "$ref")
limit=${LIMIT:-900}
jf=""; [ -n "${JOBS:-}" ] && jf="-j $JOBS"
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run TAG BIN ARGS...: wall seconds and peak RSS into $tmp/TAG.time, stdout into $tmp/TAG.out
run() {
  tag=$1; b=$2; shift 2
  rc=0
  ( cd "$tmp" && timeout "$limit" /usr/bin/time -f '%e %M' -o "$tmp/$tag.time" "$b" "$@" >"$tmp/$tag.out" 2>"$tmp/$tag.err" ) || rc=$?
  [ "$rc" -eq 124 ] && echo "> $limit (stopped)" >"$tmp/$tag.time"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo "(exit $rc: $(tail -1 "$tmp/$tag.err"))" >>"$tmp/$tag.time"
  return 0
}
# timing TAG: wall seconds and peak RSS in MiB of a run into $wall and $mib (a stopped
# or failed run: its note as $wall, no $mib)
timing() {
  line=$(grep -v '^Command' "$tmp/$1.time" | tr '\n' ' ')
  case $line in
    [0-9]*' '[0-9]*' ') wall=${line%% *}; kb=${line#* }; kb=${kb%% *}; mib=$((kb / 1024)) ;;
    *) wall=$line; mib="" ;;
  esac
}

# both TAG ARGS...: run TAG with this spsim and, as ref-TAG, with the reference (when
# given); an @ in ARGS stands for the run's prefix ("" or "ref-") in its file names
both() {
  tag=$1; shift
  for who in "" ref-; do
    b=$bin; [ -n "$who" ] && b=$ref
    [ -n "$who" ] && [ -z "$ref" ] && continue
    (
      n=$#
      while [ "$n" -gt 0 ]; do set -- "$@" "$(printf '%s' "$1" | sed "s/@/$who/")"; shift; n=$((n - 1)); done
      run "${who}$tag" "$b" "$@"
    )
  done
}

# row LABEL TAG FILES...: one markdown row; with a reference, compare stdout and FILES
row() {
  label=$1; tag=$2; shift 2
  timing "$tag"
  same=""
  if [ -n "$ref" ]; then
    rwall=$(grep -v '^Command' "$tmp/ref-$tag.time" | head -1 | cut -d' ' -f1)
    same="identical"
    cmp -s "$tmp/$tag.out" "$tmp/ref-$tag.out" || same="stdout differs"
    for f in "$@"; do cmp -s "$tmp/$f" "$tmp/ref-$f" || same="$same; $f differs"; done
    echo "| $label | $wall | $mib | $rwall | $same |"
  else
    echo "| $label | $wall | $mib | | |"
  fi
}

echo "| case | wall s | peak RSS MiB | reference wall s | outputs vs reference |"
echo "|---|---|---|---|---|"
for c in $cases; do
  case $c in
    default)
      # shellcheck disable=SC2086
      both default "$src/platforms/dgx.xml" $jf --json=@default.json --trace=@default.trace --svg=@default.svg
      row "default run (llama3-70b sweep, 1,024 GPUs; --json --trace --svg)" default default.json default.trace default.svg ;;
    70b)
      # shellcheck disable=SC2086
      both 70b "$src/platforms/dgx.xml" $jf --layout tp=8,pp=4,dp=32,zero=1,ckpt=selective --json=@70b.json
      row "one layout llama3-70b tp=8,pp=4,dp=32,zero=1,ckpt=selective, 1,024 GPUs" 70b 70b.json ;;
    405b|sweep16k)
      [ -f "$tmp/p16k.xml" ] || "$bin" platform dgx --nodes 2048 -o "$tmp/p16k.xml"
      if [ "$c" = 405b ]; then args="--global-batch 16M --layout tp=8,pp=16,dp=128,zero=1,ckpt=full"; label="one layout llama3-405b tp=8,pp=16,dp=128,zero=1,ckpt=full, 16M tokens, 16,384 GPUs"
      else args=""; label="default sweep llama3-405b, 16,384 GPUs"; fi
      # shellcheck disable=SC2086
      both "$c" "$tmp/p16k.xml" --model llama3-405b $jf $args --json=@"$c.json"
      row "$label" "$c" "$c.json" ;;
    sweep4k)
      [ -f "$tmp/p4k.xml" ] || "$bin" platform dgx --nodes 512 -o "$tmp/p4k.xml"
      # shellcheck disable=SC2086
      both "$c" "$tmp/p4k.xml" --model llama3-405b $jf --json=@"$c.json"
      row "default sweep llama3-405b, 4,096 GPUs" "$c" "$c.json" ;;
    closed16k)
      [ -f "$tmp/p16k.xml" ] || "$bin" platform dgx --nodes 2048 -o "$tmp/p16k.xml"
      # shellcheck disable=SC2086
      both "$c" "$tmp/p16k.xml" --model llama3-405b $jf --simulate 0 --json=@"$c.json"
      row "closed forms of the llama3-405b sweep, 16,384 GPUs (--simulate 0)" "$c" "$c.json" ;;
    sweep16k-np2)
      [ -f "$tmp/p16k.xml" ] || "$bin" platform dgx --nodes 2048 -o "$tmp/p16k.xml"
      root=""; [ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
      run "$c" mpirun $root --oversubscribe -np 2 "$bin" "$tmp/p16k.xml" --model llama3-405b --json="$c.json"
      same=""
      if [ -f "$tmp/sweep16k.json" ]; then
        same="vs one process: identical"
        { cmp -s "$tmp/$c.out" "$tmp/sweep16k.out" && cmp -s "$tmp/$c.json" "$tmp/sweep16k.json"; } || same="vs one process: differs"
      fi
      timing "$c"
      echo "| default sweep llama3-405b, 16,384 GPUs, mpirun -np 2 | $wall | $mib | | $same |" ;;
    bench256)
      bj=""; [ -n "${JOBS:-}" ] && bj="--jobs $JOBS"
      # shellcheck disable=SC2086
      both "$c" bench "$src/platforms/dgx.xml" --ranks 256 -b 8 -e 1G -f 2 $bj
      row "spsim bench, all-reduce on 256 ranks, 8 B to 1 GiB" "$c" ;;
    *) echo "bench/speed.sh: unknown case '$c'" >&2; exit 2 ;;
  esac
done
