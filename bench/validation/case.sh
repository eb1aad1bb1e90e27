# Shared by bench/validate.sh and bench/choice.sh (sourced): the platform and the option
# columns of a case of bench/validation/cases.tsv.

# opt_pairs COLUMN: the ,OPTION=VALUE pairs after a column's first field as flags
# ("a100,nic-bw=6" -> "--nic-bw 6 "; "fused,fp8=blockwise" -> "--fp8 blockwise ")
opt_pairs() {
  [ "${1%%,*}" = "$1" ] || printf '%s' "${1#*,}" | tr ',' '\n' | sed 's/^/--/; s/=/ /' | tr '\n' ' '
}

# case_platform BIN DIR GPU GPN GPUS: the DGX platform of the case (a --gpu preset and its
# options, GPUs per node, GPUs), generated once per kind and node count in DIR; prints its path
case_platform() {
  _nodes=$(( ($5 + $4 - 1) / $4 ))
  _plat=$2/$(printf '%s' "$3" | tr ',=' '__')-$4-$_nodes.xml
  # shellcheck disable=SC2046
  [ -s "$_plat" ] || "$1" platform dgx --nodes "$_nodes" --gpu "${3%%,*}" --gpus-per-node "$4" $(opt_pairs "$3") > "$_plat"
  printf '%s\n' "$_plat"
}
