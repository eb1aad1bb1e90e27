#!/bin/sh
# Validation of spsim's step-time predictions against published measured training runs.
# Cases: bench/validation/cases.tsv (sources in docs/validation.md); models not built in:
# bench/validation/models/*.json. For each case: generate the DGX platform of its size
# (spsim platform dgx, cached per GPU kind and node count), run spsim with the case's
# --layout (SimGrid flow fidelity, the default), read the JSON, convert the predicted
# step time into the case's metric and print measured, predicted and the signed error.
# A benchmark, not a test: exits 0 whatever the errors (2 when spsim is missing).
# Usage: bench/validate.sh [BUILDDIR [CASES.tsv]]   (default _build/release and
# bench/validation/cases.tsv; about 3 minutes on 2 cores, 1 of them for the 16,384-GPU case)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/_build/release}/spsim
cases=${2:-$here/bench/validation/cases.tsv}
[ -x "$bin" ] || { echo "validate.sh: no spsim at $bin (./build.sh release)" >&2; exit 2; }
[ -r "$cases" ] || { echo "validate.sh: no $cases" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
tab=$(printf '\t')
. "$here/bench/validation/case.sh"

# --attention (fused|unfused|flash2|triton) is used only when this spsim offers it
"$bin" platform dgx --nodes 1 > "$tmp/one.xml"
if { "$bin" --help 2>&1; "$bin" "$tmp/one.xml" --help 2>&1; } | grep -q -e '--attention'; then
  attn_opt=yes
else
  attn_opt=no
fi

printf 'spsim validation against published runs: %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf 'binary %s; fidelity flow; --attention %s\n' "$bin" \
  "$([ $attn_opt = yes ] && echo 'passed for unfused, flash2 and triton cases' || echo 'not offered by this spsim (every case priced with the fused-attention efficiency)')"
printf 'error = (predicted - measured) / measured; time err = predicted step time vs the step time the measured figure implies\n\n'
printf '%-17s %-22s %6s %-52s %-5s %9s %9s %8s %8s %8s  %s\n' \
  id model GPUs layout unit measured predicted 'err %' 'time %' 'mem GiB' 'comp/bubble/comm %'

# jnum KEY FILE: the first number after "KEY": in FILE
jnum() { grep -o "\"$1\": *[-0-9.e+]*" "$2" | head -n 1 | sed 's/.*: *//'; }
# mkey KEY FILE: an integer or string value of a model file
mkey() { tr -d '\n' < "$2" | grep -o "\"$1\": *\"*[A-Za-z0-9._-]*" | head -n 1 | sed 's/.*: *"*//'; }

tail -n +2 "$cases" | while IFS="$tab" read -r id src model gpu gpus gpn seq gb layout attn metric measured flops _notes; do
  [ -n "$id" ] || continue
  case $id in \#*) continue ;; esac
  # gpu: a preset, optionally followed by ,OPTION=VALUE pairs of spsim platform dgx
  # (a100,nic-bw=6: --gpu a100 --nic-bw 6)
  plat=$(case_platform "$bin" "$tmp" "$gpu" "$gpn" "$gpus")
  case $model in
    *.json) mfile=$here/$model; marg=$mfile ;;
    *) mfile=$here/models/$model.json; marg=$model ;;
  esac
  set -- --model "$marg" --seq "$seq" --global-batch "$gb" --layout "$layout" \
    --gpus "$gpus" --gpus-per-node "$gpn" --gpu-mem 65536 --json "$tmp/r.json"
  # --gpu-mem 65536: price the layout even when spsim's memory model puts it over 80 GiB
  # (the memory estimate is reported in the last column)
  # attention: an implementation, optionally followed by ,OPTION=VALUE pairs of the what-if
  # (fused,fp8=blockwise: --fp8 blockwise), as the gpu column takes platform options
  wopts=$(opt_pairs "$attn")
  attn=${attn%%,*}
  [ $attn_opt = yes ] && [ "$attn" != fused ] && set -- "$@" --attention "$attn"
  # shellcheck disable=SC2086
  [ -n "$wopts" ] && set -- "$@" $wopts
  rm -f "$tmp/r.json"
  short=$(basename "$model" .json)
  if ! "$bin" "$plat" "$@" > "$tmp/out" 2>&1 || [ ! -s "$tmp/r.json" ]; then
    printf '%-17s %-22s %6s %-52s %-5s %9s %9s  spsim: %s\n' "$id" "$short" "$gpus" "$layout" "$metric" "$measured" - \
      "$(grep 'spsim:' "$tmp/out" | head -n 1 | sed 's/^spsim: //')" | tee -a "$tmp/fail"
    continue
  fi
  step=$(jnum step_s "$tmp/r.json")
  mem=$(jnum total "$tmp/r.json")
  comp=$(jnum compute_s "$tmp/r.json"); bub=$(jnum bubble_s "$tmp/r.json")
  expo=$(grep -o '"exposed_s": *{[^}]*}' "$tmp/r.json" | head -n 1 | grep -o ': *[-0-9.e+][-0-9.e+]*' |
    tr -d ': ' | awk '{ x += $1 } END { print x + 0 }')
  # the GPU memory the run had (the platform's gpu_mem property) and whether the model is MoE
  gmem=$(grep -o 'gpu_mem" value="[0-9.e+]*' "$plat" | head -n 1 | sed 's/.*value="//')
  moe=$(mkey experts "$mfile"); [ -n "$moe" ] && [ "$moe" != 0 ] && moe=1 || moe=0
  L=$(mkey layers "$mfile"); h=$(mkey hidden "$mfile"); a=$(mkey heads "$mfile")
  kv=$(mkey kv_heads "$mfile"); ffn=$(mkey ffn "$mfile"); V=$(mkey vocab "$mfile"); mlp=$(mkey mlp "$mfile")
  awk -v id="$id" -v short="$short" -v gpus="$gpus" -v layout="$layout" -v metric="$metric" \
      -v meas="$measured" -v flops="$flops" -v src="$src" -v errfile="$tmp/errs" -v t="$step" -v mem="$mem" -v comp="$comp" -v bub="$bub" -v expo="$expo" -v B="$gb" -v s="$seq" \
      -v L="$L" -v h="$h" -v a="$a" -v kv="$kv" -v ffn="$ffn" -v V="$V" -v mlp="$mlp" -v gmem="${gmem:-0}" -v moe="$moe" 'BEGIN {
    # FLOPs per step by the formula the source used
    f = 0
    if (flops == "megatron2021") {
      # Narayanan et al. 2021, eq. (3): GEMM FLOPs with the recompute forward pass
      f = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    } else if (flops ~ /^palm/) {
      # PaLM model FLOPs (Chowdhery et al. 2022): 6 N + 12 L h s per token, N the matmul
      # weights incl. the LM head; equal to Megatron-Core num_floating_point_operations
      Lf = L; if (flops ~ /^palm@/) { Lf = substr(flops, 6) + 0 }
      d = h / a; m = (mlp == "swiglu") ? 3 : 2
      N = Lf * (h * (h + 2 * kv * d) + h * h + m * h * ffn) + V * h
      f = B * s * (6 * N + 12 * Lf * h * s)
    }
    if (metric == "iter_s") { pred = t; tmeas = meas }
    else if (metric == "tokens_per_s_per_gpu") { pred = B * s / (t * gpus); tmeas = B * s / (meas * gpus) }
    else if (metric == "tflops_per_gpu") { pred = f / (t * gpus) / 1e12; tmeas = f / (meas * 1e12 * gpus) }
    else { printf "%-17s unknown metric %s\n", id, metric; exit }
    err = (pred - meas) / meas * 100; terr = (t - tmeas) / tmeas * 100
    unit = (metric == "iter_s") ? "s" : (metric == "tflops_per_gpu") ? "TF/s" : "tok/s"
    pc = sprintf("%.0f/%.0f/%.0f", 100 * comp / t, 100 * bub / t, 100 * expo / t)
    printf "%-17s %-22s %6d %-52s %-5s %9.5g %9.5g %+8.1f %+8.1f %8.1f  %s\n", id, short, gpus, layout, unit, meas, pred, err, terr, mem / 1073741824, pc
    printf "%s %.4f %.4f %s %d %d\n", src, err, terr, id, moe, (gmem > 0 && mem > gmem) >> errfile
  }'
done
[ -s "$tmp/errs" ] && awk '
  function abs(x) { return x < 0 ? -x : x }
  { n++; ae = abs($2); sum += ae; tsum += abs($3); if (ae > max) { max = ae; worst = $4 }
    g = $5 ? "moe" : "dense"; gn[g]++; gs[g] += ae; if (ae > gm[g]) { gm[g] = ae; gw[g] = $4 }
    if ($6) { over++; overs = overs " " $4 }
    k[$1]++; ks[$1] += ae; kb[$1] += $3; if (!($1 in seen)) { seen[$1] = 1; order[++nk] = $1 } }
  END {
    if (!n) exit
    printf "\n%d cases priced: mean absolute error %.1f %%, max %.1f %% (%s); mean absolute step-time error %.1f %%\n", n, sum / n, max, worst, tsum / n
    if (gn["dense"] && gn["moe"])
      for (i = 1; i <= 2; i++) { g = i == 1 ? "dense" : "moe"
        printf "  %-5s %3d cases: mean absolute error %.1f %%, max %.1f %% (%s)\n", g, gn[g], gs[g] / gn[g], gm[g], gw[g] }
    printf "memory: %d of %d cases predicted over their GPU memory (every run fitted, so each is a miss of the memory model)%s\n", over, n, over ? ":" overs : ""
    printf "by source: cases, mean |err|, mean signed step-time err (negative: spsim predicts a shorter step)\n"
    for (i = 1; i <= nk; i++) { s = order[i]; printf "  %-16s %3d %7.1f %% %+7.1f %%\n", s, k[s], ks[s] / k[s], kb[s] / k[s] }
  }' "$tmp/errs"
[ -s "$tmp/fail" ] && echo "$(wc -l < "$tmp/fail") cases not priced (spsim refused them; see above)"
exit 0
