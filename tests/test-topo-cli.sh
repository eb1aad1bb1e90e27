#!/bin/sh
# spsim topo: exact JSON shapes (hand-derived), human output, and one clear error
# line with a non-zero exit for bad input.
bin="${SPSIM_BUILDDIR:-.}/spsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# expect_json DESC EXPECTED ARGS...: exit 0, empty stderr, stdout exactly EXPECTED
expect_json() {
  desc=$1; want=$2; shift 2
  if "$bin" topo "$@" >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/err" ] \
     && [ "$(cat "$tmp/out")" = "$want" ]; then ok "$desc"
  else nok "$desc: got '$(cat "$tmp/out")' stderr '$(cat "$tmp/err")'"; fi
}
# expect_has DESC NEEDLE ARGS...: exit 0 and stdout contains NEEDLE (fixed string)
expect_has() {
  desc=$1; want=$2; shift 2
  if "$bin" topo "$@" >"$tmp/out" 2>"$tmp/err" && grep -qF -- "$want" "$tmp/out"; then ok "$desc"
  else nok "$desc: got '$(cat "$tmp/out")' stderr '$(cat "$tmp/err")'"; fi
}
# expect_fail DESC PATTERN ARGS...: non-zero exit, nothing on stdout, exactly one
# stderr line "spsim: ..." matching PATTERN (so no sanitizer report either)
expect_fail() {
  desc=$1; pat=$2; shift 2
  if "$bin" topo "$@" >"$tmp/out" 2>"$tmp/err"; then nok "$desc (exit 0)"; return; fi
  if [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^spsim: .*$pat" "$tmp/err" && [ ! -s "$tmp/out" ]; then
    ok "$desc"
  else nok "$desc: $(cat "$tmp/err")"; fi
}

echo "1..40"
AX=pipe=2,data=2,tensor=2
G='"groups":{"pipe":[[0,4],[1,5],[2,6],[3,7]],"data":[[0,2],[1,3],[4,6],[5,7]],"tensor":[[0,1],[2,3],[4,5],[6,7]]}'
A='"axes":[{"name":"pipe","size":2},{"name":"data","size":2},{"name":"tensor","size":2}]'
expect_json "axes JSON" "{\"world\":8,$A,$G}" --axes $AX --json
expect_json "axes JSON with filter" "{\"world\":8,$A,$G,\"filter\":[2,3]}" --axes $AX --filter pipe=0,data=1 --json
expect_json "order string: first token fastest" \
  '{"world":8,"order":"tp-dp-pp","axes":[{"name":"pp","size":2},{"name":"dp","size":2},{"name":"tp","size":2}],"groups":{"pp":[[0,4],[1,5],[2,6],[3,7]],"dp":[[0,2],[1,3],[4,6],[5,7]],"tp":[[0,1],[2,3],[4,5],[6,7]]}}' \
  --order tp-dp-pp --axes tp=2,dp=2,pp=2 --json
expect_json "axis names escaped in JSON" \
  '{"world":4,"axes":[{"name":"a\"b","size":2},{"name":"c\\d","size":2}],"groups":{"a\"b":[[0,2],[1,3]],"c\\d":[[0,1],[2,3]]}}' \
  --axes 'a"b=2,c\d=2' --json
expect_json "factor 12 k 2" '{"n":12,"k":2,"factorizations":[[1,12],[2,6],[3,4],[4,3],[6,2],[12,1]]}' --factor 12 --k 2 --json
F='[[1,1,64],[1,2,32],[1,4,16],[1,8,8],[1,16,4],[1,32,2],[1,64,1],[2,1,32],[2,2,16],[2,4,8],[2,8,4],[2,16,2],[2,32,1],[4,1,16],[4,2,8],[4,4,4],[4,8,2],[4,16,1],[8,1,8],[8,2,4],[8,4,2],[8,8,1],[16,1,4],[16,2,2],[16,4,1],[32,1,2],[32,2,1],[64,1,1]]'
expect_json "factor 64 k 3 (28 = C(8,2))" "{\"n\":64,\"k\":3,\"factorizations\":$F}" --factor 64 --k 3 --json
expect_json "init 8/2/2 (initialiser docstring)" \
  '{"world":8,"mp":2,"pp":2,"dp":2,"mp_clamped":false,"groups":{"model":[[0,1],[2,3],[4,5],[6,7]],"pipeline":[[0,2],[1,3],[4,6],[5,7]],"data":[[0,4],[1,5],[2,6],[3,7]]}}' \
  --world 8 --init-mp 2 --init-pp 2 --json
expect_has "init 12/2/3 pipeline groups" '"pipeline":[[0,2,4],[1,3,5],[6,8,10],[7,9,11]]' --world 12 --init-mp 2 --init-pp 3 --json
expect_has "init rank 9 of 12/2/3 lies in its groups" \
  '"rank":{"rank":9,"model":{"group":4,"position":1},"pipeline":{"group":3,"position":1},"data":{"group":3,"position":1}}' \
  --world 12 --init-mp 2 --init-pp 3 --rank 9 --json
# mp > world is clamped with a warning (exit 0)
if "$bin" topo --world 4 --init-mp 8 --json >"$tmp/out" 2>"$tmp/err" && grep -q '^spsim: warning: model parallelism 8 .* using 4' "$tmp/err" \
   && grep -qF '"mp":4,"pp":1,"dp":1,"mp_clamped":true' "$tmp/out"; then ok "mp clamped to the world with a warning"
else nok "clamp: $(cat "$tmp/out") $(cat "$tmp/err")"; fi
expect_has "grid p2p pairs wrap around" '"p2p":[[0,4],[1,5],[2,6],[3,7],[4,0],[5,1],[6,2],[7,3]]' --axes $AX --grid --json
expect_has "grid embedding groups" '"embedding":[[0,4],[1,5],[2,6],[3,7]],"position_embedding":[[0],[1],[2],[3]]' --axes $AX --grid --json
expect_has "grid model and tensor+data groups" '"model":[[0,1,4,5],[2,3,6,7]],"tensor_data":[[0,1,2,3],[4,5,6,7]]' --axes $AX --grid --json
expect_has "rank 5 coordinate, label and stage" \
  '"rank":{"rank":5,"coord":{"pipe":1,"data":0,"tensor":1},"label":"tensor_1","stage":1,"data_parallel_id":0,"first_stage":false,"last_stage":true,"next_stage_rank":1}' \
  --axes $AX --rank 5 --grid --json
expect_has "human: one line per axis" 'pipe   : [0,4] [1,5] [2,6] [3,7]' --axes $AX
expect_has "human: filter" 'filter pipe=0,data=1: [2,3]' --axes $AX --filter pipe=0,data=1
expect_has "human: init rank" 'rank 2: model group 1 [2,3] (position 0), pipeline group 0 [0,2] (position 1), data group 2 [2,6] (position 0)' \
  --world 8 --init-mp 2 --init-pp 2 --rank 2
expect_has "human: factorisations" '3 x 4' --factor 12 --k 2
"$bin" topo --axes pipe=2,data=3,tensor=2,seq=2 --grid --rank 7 --json >"$tmp/a" 2>&1
"$bin" topo --axes pipe=2,data=3,tensor=2,seq=2 --grid --rank 7 --json >"$tmp/b" 2>&1
if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; then ok "byte-identical across runs"; else nok "determinism"; fi

expect_fail "size 0" "size 0" --axes pipe=0
expect_fail "repeated axis" "twice" --axes a=2,a=2
expect_fail "axis without size" "'pipe' has no value" --axes pipe
expect_fail "non-integer size" "must be an integer" --axes pipe=x
expect_fail "world overflow" "exceeds" --axes a=65536,b=65536
expect_fail "unknown axis in filter" "unknown axis 'seq'" --axes $AX --filter seq=0
expect_fail "filter value out of range" "data=2 is out of range" --axes $AX --filter data=2
expect_fail "rank out of range" "rank 8 is out of range" --axes $AX --rank 8
expect_fail "--factor 0" "factor 0" --factor 0
expect_fail "--k 0" "k 0" --factor 12 --k 0
expect_fail "too many factorisations" "smaller k" --factor 1073741824 --k 20
expect_fail "unknown flag" "Unknown option" --frobnicate
expect_fail "world 0" "world 0" --world 0
expect_fail "world not divisible" "not divisible by model x pipeline parallelism 2 x 3 = 6" --world 8 --init-mp 2 --init-pp 3
expect_fail "no mode" "nothing to do"
expect_fail "two modes" "separate modes" --axes $AX --factor 8
# An axis of the order without a size is 1 (Megatron): tp-cp-dp-pp with tp=2,dp=2,pp=2 is
# 8 ranks, tp fastest; rank 5 = 1 + 0*2 (cp) + 0*2 (dp, stride 2) + 1*4 (pp, stride 4).
if "$bin" topo --order tp-cp-dp-pp --axes tp=2,dp=2,pp=2 --rank 5 >"$tmp/out" 2>&1 && grep -q '^world 8, 4 axes' "$tmp/out" \
   && grep -q '^rank 5: pp=1 dp=0 cp=0 tp=1 ' "$tmp/out" && grep -q '^dp *: \[0,2\] \[1,3\] \[4,6\] \[5,7\]$' "$tmp/out"; then
  ok "an order's axis without a size is 1 (the help's example)"; else nok "order without a size: $(cat "$tmp/out")"; fi
expect_fail "stray argument" "unexpected argument" --axes $AX extra

# expert parallelism (Megatron-Core): ep folded into dp; groups derived by hand
# (expert rank = etp + 2 ep + 8 edp + 16 pp for tp=2 ep=4 dp=8 pp=2)
expect_has "ep groups inside the data-parallel groups" "ep        : [0,2,4,6] [1,3,5,7] [8,10,12,14]" \
  --order tp-cp-ep-dp-pp --axes tp=2,ep=4,dp=8,pp=2
expect_has "expert data-parallel groups" "expert-dp : [0,8] [1,9] [2,10]" --order tp-cp-ep-dp-pp --axes tp=2,ep=4,dp=8,pp=2
expect_fail "ep not dividing dp x cp" "ep=3 must divide dp x cp = 8 x 1.*choose ep among 1, 2, 4, 8" \
  --order tp-cp-ep-dp-pp --axes tp=2,ep=3,dp=8,pp=2
