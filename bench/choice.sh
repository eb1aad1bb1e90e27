#!/bin/sh
# Layout choice against published runs: for each case of bench/validation/cases.tsv,
# spsim prices the layout the run used (as bench/validate.sh does) and then sweeps every
# layout of the same model, GPUs, sequence and global batch on the same platform, with
# the GPU's real memory. It prints the published layout's predicted step, the sweep's
# winner and its step, how much faster spsim says its winner is (gap), and both
# layouts' memory per GPU (the published one priced whatever its memory, as in
# bench/validate.sh; the sweep ranks only what fits first). A small gap says spsim would
# have sent the user to the layout the experts ran or one it prices as good; a large one
# names a disagreement to look at.
# A benchmark, not a test: exits 0 whatever the gaps (2 when spsim is missing).
# Usage: bench/choice.sh [BUILDDIR [ID...]]   (default _build/release and the cases
# below, about 3 minutes on 2 cores)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
[ $# -gt 0 ] && shift
ids=${*:-k22-175b-sel k22-530b-sel m24-70b m24-177b mpt-70b-128 mb-l3-70b-h100 mb-l31-405b-h100 l3-405b-16k qwen3-235b-h100-256}
cases=$here/bench/validation/cases.tsv
[ -x "$bin" ] || { echo "choice.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
tab=$(printf '\t')
. "$here/bench/validation/case.sh"

printf 'spsim layout choice against published runs: %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf 'gap = (published layout step - sweep winner step) / published layout step, both predicted by spsim\n\n'
printf '%-19s %6s %-44s %9s %7s  %-56s %9s %7s %7s\n' id GPUs 'published layout' 'step s' 'mem GiB' 'sweep winner' 'step s' 'mem GiB' 'gap %'

# memtot FILE: the first layout's memory per GPU, bytes ("mem_bytes": {..., "total": N})
memtot() { grep -o '"mem_bytes": *{[^}]*}' "$1" | head -n 1 | grep -o '"total": *[0-9.e+]*' | sed 's/.*: *//'; }
# jfirst KEY FILE: the first value after "KEY": in FILE (a number, or a string whole)
jfirst() { grep -o -E "\"$1\": *(\"[^\"]*\"|[^,}]*)" "$2" | head -n 1 | sed 's/^[^:]*: *//; s/^"//; s/"$//'; }

for id in $ids; do
  line=$(awk -F"$tab" -v id="$id" '$1 == id' "$cases")
  [ -n "$line" ] || { printf '%-19s  no such case in %s\n' "$id" "$cases"; continue; }
  printf '%s\n' "$line" > "$tmp/line"
  IFS="$tab" read -r _id _src model gpu gpus gpn seq gb layout attn _rest < "$tmp/line"
  plat=$(case_platform "$bin" "$tmp" "$gpu" "$gpn" "$gpus")
  case $model in
    *.json) marg=$here/$model ;;
    *) marg=$model ;;
  esac
  wopts=$(opt_pairs "$attn")
  attn=${attn%%,*}
  aopt=
  [ "$attn" != fused ] && aopt="--attention $attn"
  # the run's framework reduced gradients in fp32 (dpfp32=1): the sweep's layouts too
  gopt=
  case ,$layout, in *,dpfp32=1,*) gopt="--grad-reduce fp32" ;; esac
  common="--model $marg --seq $seq --global-batch $gb --gpus $gpus --gpus-per-node $gpn $aopt $wopts $gopt"
  # shellcheck disable=SC2086
  if ! "$bin" "$plat" $common --layout "$layout" --gpu-mem 65536 --json "$tmp/p.json" > "$tmp/out" 2>&1; then
    printf '%-19s %6s %-44s  spsim: %s\n' "$id" "$gpus" "$layout" "$(grep 'spsim:' "$tmp/out" | head -n 1 | sed 's/^spsim: //')"
    continue
  fi
  plabel=$(jfirst label "$tmp/p.json"); pstep=$(jfirst step_s "$tmp/p.json"); pmem=$(memtot "$tmp/p.json")
  # shellcheck disable=SC2086
  if ! "$bin" "$plat" $common --json "$tmp/s.json" > "$tmp/out" 2>&1; then
    printf '%-19s %6s %-44s %9.4g  spsim: %s\n' "$id" "$gpus" "$plabel" "$pstep" "$(grep 'spsim:' "$tmp/out" | head -n 1 | sed 's/^spsim: //')"
    continue
  fi
  wlabel=$(jfirst label "$tmp/s.json"); wstep=$(jfirst step_s "$tmp/s.json"); wmem=$(memtot "$tmp/s.json")
  # awk for the arithmetic: the JSON writes large counts with an exponent
  awk -v id="$id" -v g="$gpus" -v pl="$plabel" -v ps="$pstep" -v pm="$pmem" -v wl="$wlabel" -v ws="$wstep" -v wm="$wmem" \
    'BEGIN { printf "%-19s %6s %-44s %9.4g %7.1f  %-56s %9.4g %7.1f %+7.1f\n", id, g, pl, ps, pm / 1073741824, wl, ws,
             wm / 1073741824, (ps - ws) / ps * 100 }'
done
