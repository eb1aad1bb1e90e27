#!/bin/sh
# What-if with the newer models' shapes and MoE dispatch, as a user runs it: a Hugging
# Face config.json with head_dim and sliding windows (the values of Qwen3-30B-A3B and
# gpt-oss), the JSON that names them, dispatcher=flex in a layout, its label and its
# Megatron-Core flags, and one-line refusals.
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
export SPSIM_MODELS_DIR="$src/models"
"$bin" platform dgx --nodes 2 >"$tmp/p.xml" 2>/dev/null
echo "1..7"
cat >"$tmp/config.json" <<'J'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
 "decoder_sparse_step": 1, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
 "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": false, "use_sliding_window": false,
 "sliding_window": 4096, "torch_dtype": "bfloat16"}
J
A="--fidelity analytic --gpus 16 --gpus-per-node 8 --seq 4096 --global-batch 64"
# 1: the config's head width is kept: 30,532,110,336 parameters (hand count in tests/test-model.c)
"$bin" "$tmp/p.xml" $A --model "$tmp/config.json" --layout tp=1,ep=16,dp=16,zero=1 --json "$tmp/q.json" >"$tmp/out" 2>&1
if [ "$(jval head_dim "$tmp/q.json")" = 128 ] && [ "$(jval params "$tmp/q.json")" = 30532110336 ] &&
   ! grep -q '"sliding_window"' "$tmp/q.json"; then ok "config.json with head_dim 128: 30532110336 parameters, no window"
else nok "config.json: head_dim $(jval head_dim "$tmp/q.json") params $(jval params "$tmp/q.json"): $(head -c 300 "$tmp/out")"; fi
# 2: the same layout with the flex dispatcher: labelled, and its step no longer than the all-to-all's
"$bin" "$tmp/p.xml" $A --model "$tmp/config.json" --layout tp=1,ep=16,dp=16,zero=1,dispatcher=flex --json "$tmp/f.json" >"$tmp/outf" 2>&1
t0=$(jval step_s "$tmp/q.json"); t1=$(jval step_s "$tmp/f.json")
if grep -q "ep16 flex" "$tmp/outf" && [ -n "$t0" ] && [ -n "$t1" ] && awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b < a) }'
then ok "dispatcher=flex labelled 'flex', its step shorter between 2 nodes ($t0 -> $t1 s)"
else nok "dispatcher=flex: $t0 -> $t1: $(grep -m1 'ep16' "$tmp/outf")"; fi
# 3: --export megatron writes the flex dispatcher
"$bin" "$tmp/p.xml" $A --model "$tmp/config.json" --layout tp=1,ep=16,dp=16,zero=1,dispatcher=flex --export megatron >"$tmp/exp" 2>&1
if grep -q -- "--moe-token-dispatcher-type flex" "$tmp/exp" && grep -q -- "--moe-flex-dispatcher-backend hybridep" "$tmp/exp" &&
   grep -q -- "--expert-model-parallel-size 16" "$tmp/exp"; then ok "--export megatron: flex dispatcher flags"
else nok "--export megatron: $(grep -i moe "$tmp/exp" | head -c 300)"; fi
# 4: DeepSeek-V3's router groups are exported too
"$bin" "$tmp/p.xml" $A --model deepseek-v3 --gpu-mem 65536 --layout tp=1,ep=16,dp=16,zero=1,dispatcher=flex --export megatron >"$tmp/exp" 2>&1
if grep -q -- "--moe-router-num-groups 8" "$tmp/exp" && grep -q -- "--moe-router-group-topk 4" "$tmp/exp"; then ok "--export megatron: router groups 8 and 4"
else nok "router groups: $(grep -i moe "$tmp/exp" | head -c 300)"; fi
# 5: a sliding-window config: the window is in the JSON and attention gets cheaper
sed 's/"use_sliding_window": false,/"layer_types": [LT],/' "$tmp/config.json" >"$tmp/w.json"
lt=$(awk 'BEGIN { for (i = 0; i < 48; i++) printf "%s\"%s\"", i ? ", " : "", i % 2 ? "full_attention" : "sliding_attention" }')
sed -i "s/LT/$lt/; s/\"sliding_window\": 4096/\"sliding_window\": 128/" "$tmp/w.json"
"$bin" "$tmp/p.xml" $A --model "$tmp/w.json" --layout tp=1,ep=16,dp=16,zero=1 --json "$tmp/w.out.json" >"$tmp/out" 2>&1
tw=$(jval step_s "$tmp/w.out.json")
if [ "$(jval sliding_window "$tmp/w.out.json")" = 128 ] && [ -n "$tw" ] && awk -v a="$t0" -v b="$tw" 'BEGIN { exit !(b < a) }'
then ok "sliding windows on every other layer: window 128 in JSON, step $t0 -> $tw s"
else nok "sliding window: $(jval sliding_window "$tmp/w.out.json") step $tw: $(head -c 300 "$tmp/out")"; fi
# 6-7: refusals in one line
expect_fail "dispatcher=deepep refused" "dispatcher must be alltoall or flex (got 'deepep')" "$tmp/p.xml" $A --model "$tmp/config.json" --layout tp=1,ep=16,dp=16,dispatcher=deepep
expect_fail "dispatcher=flex on a dense model refused" "need an MoE model" "$tmp/p.xml" $A --model llama3-8b --layout tp=1,dp=16,dispatcher=flex
