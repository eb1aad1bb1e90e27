#!/bin/sh
# What-if answers a user acts on: families of equivalent layouts, --all, --csv, the
# layout keys, the platform's node size, the memory breakdown, --sensitivity, --export.
# Expectations are derived by hand or from the documented definitions, re-computed
# here with python3 from the JSON, never copied from spsim's output.
. "${SPSIM_SRCDIR:-.}/tests/tap-lib.sh"
# 4 nodes x 8 GPUs (H100-like host speed, 80 GiB property)
whatif_platform "$tmp/p.xml"
export SPSIM_MODELS_DIR="$src/models"
echo "1..30"
A="--fidelity analytic"
P="$tmp/p.xml"
M="--model llama3-8b"

# ---- 1. families: one row per plan
"$bin" "$P" $A $M --json "$tmp/a.json" --json-full >"$tmp/out" 2>"$tmp/err"
rc=$?
# The documented definition, applied to every layout of the JSON in rank order: one
# key (tp, tpsp, sp, cp, pp, vpp, ppfirst, pplast, ckpt, mb, fits, simulated); a row
# joins the latest family of its key when within 1 % of that family's best.
cat >"$tmp/fam.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["layouts"]
def lay(r): return dict(kv.split("=") for kv in r["layout"].split(","))
latest, best, fam, want = {}, [], {}, []
for r in rows:
    l = lay(r)
    key = tuple(l.get(k, "") for k in ("tp", "tpsp", "sp", "cp", "pp", "vpp", "ppfirst", "pplast", "ckpt", "mb")) + (r["fits"], r["simulated"])
    f = latest.get(key)
    if f is None or r["step_s"] > best[f] * 1.01:
        f = len(best); best.append(r["step_s"]); latest[key] = f
    want.append(f + 1)
got = [r["family"] for r in rows]
if got != want:
    i = next(i for i in range(len(got)) if got[i] != want[i])
    sys.exit("row %d (%s): family %d, expected %d" % (i + 1, rows[i]["label"], got[i], want[i]))
PY
if [ $rc = 0 ] && python3 "$tmp/fam.py" "$tmp/a.json" 2>"$tmp/perr"; then ok "JSON family ids follow the documented key and 1 % tolerance"
else nok "family ids: $(cat "$tmp/err" "$tmp/perr")"; fi
# By hand: ZeRO-3 over 32 ranks and ISP wp=32 gather the same weights in the same
# shards, so dp32 z3 sel and wp32 dp32 sel are one plan; cp2 splits the sequence,
# another plan even at the same step time.
python3 - "$tmp/a.json" <<'PY'
import json, sys
rows = {r["label"]: r for r in json.load(open(sys.argv[1]))["layouts"]}
a, b, c = rows["dp32 z3 sel"], rows["wp32 dp32 sel"], rows["cp2 dp16 z3 sel mb2"]
sys.exit(0 if a["family"] == b["family"] != c["family"] else 1)
PY
check $? "dp32 z3 sel and wp32 dp32 sel are one family, cp2 dp16 z3 sel mb2 another"
# The table: the winner's family row names what varies, counts its members and their
# step-time range as the JSON has them; the 10 rows are 10 distinct families.
python3 - "$tmp/a.json" "$tmp/out" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))["layouts"]
f1 = [r for r in rows if r["family"] == 1]
lines = [l for l in open(sys.argv[2]) if re.match(r"^ +\d+  ", l)]
want = "%d variants, %.3f-%.3f s" % (len(f1), min(r["step_s"] for r in f1), max(r["step_s"] for r in f1))
labels = [l.split()[1:l.split().index(next(t for t in l.split() if re.match(r"^\d+\.\d{3}\*?$", t)))] for l in lines]
ok = len(lines) == 10 and lines[0].rstrip().endswith(want) and lines[0].split()[1:4] == ["wpX", "dp32", "zX"] \
     and re.match(r"^\d+\.\d{3}$", lines[0].split()[4]) \
     and len(set(map(tuple, labels))) == 10
sys.exit(0 if ok else "%s / %s" % (want, lines[0]))
PY
check $? "the table's first row is the family wpX dp32 zX (no recomputation) with its count and range; 10 distinct families"
# No two family rows read alike, even when a family's slower variants (beyond 1 %) form
# another family of the same key: 60 rows, 60 distinct labels.
"$bin" "$P" $A $M --top 60 >"$tmp/out60" 2>&1
python3 - "$tmp/out60" <<'PY'
import re, sys
rows = [re.split(r" {2,}", l.strip())[1] for l in open(sys.argv[1]) if re.match(r"^ +\d+  ", l)]
sys.exit(0 if len(rows) == 60 and len(set(rows)) == 60 else "%d rows, %d labels" % (len(rows), len(set(rows))))
PY
check $? "60 family rows carry 60 distinct labels"
"$bin" "$P" $A $M --top 3 >"$tmp/out3" 2>&1
check $? "--top 3 runs"
if [ "$(grep -c '^  [0-9]  ' "$tmp/out3")" = 3 ]; then ok "--top 3 shows 3 families"; else nok "--top 3: $(cat "$tmp/out3")"; fi

# ---- 2. --all: every layout by step time, the fits column, the same exit status
"$bin" "$P" $A $M --all >"$tmp/all" 2>&1
rc=$?
python3 - "$tmp/a.json" "$tmp/all" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))["layouts"]
lines = [l.split("|") for l in open(sys.argv[2]) if re.match(r"^ *\d+  ", l)]
# ordered by step time to 5 significant digits (ties: fitting first, less memory); the
# table prints 3 decimals, so two times that tie to 5 digits may print up to one unit of
# the 5th digit (plus the printed rounding, 0.001 s) apart in either order
import math
steps = [float(re.findall(r"(\d+\.\d{3})\*? ", l[0])[-1]) for l in lines]
fits = [l[2].split()[1] for l in lines]
ordered = all(b >= a - 10 ** (math.floor(math.log10(a)) - 4) - 1e-3 for a, b in zip(steps, steps[1:]) if a > 0)
ok = len(lines) == len(rows) and ordered \
     and fits.count("yes") == sum(r["fits"] for r in rows) and fits.count("NO") == sum(not r["fits"] for r in rows)
sys.exit(0 if ok else "%d lines, %d layouts" % (len(lines), len(rows)))
PY
py=$?
if [ $rc = 0 ] && [ $py = 0 ]; then ok "--all lists every layout by step time with its fits column, exit 0"; else nok "--all: rc $rc"; fi
if grep -q '^(Faster but over memory: ' "$tmp/all"; then ok "--all keeps the faster-but-over-memory hint"; else nok "--all hint"; fi
"$bin" "$P" $A --model llama3-405b --all >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q 'every layout by step time' "$tmp/out" && grep -q '^spsim: .*cannot fit' "$tmp/err"; then ok "--all exits 1 when no layout fits"
else nok "--all none fits: rc $rc"; fi

# ---- 3. --csv: one RFC 4180 row per layout, read back with python3's csv module
"$bin" "$P" $A $M --csv "$tmp/a.csv" >/dev/null 2>&1
check $? "--csv runs"
python3 - "$tmp/a.csv" "$tmp/a.json" <<'PY'
import csv, json, sys
raw = open(sys.argv[1], newline="").read()
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
lays = json.load(open(sys.argv[2]))["layouts"]
GiB = 1024 ** 3
ok = raw.count("\r\n") == len(lays) + 1 and len(rows) == len(lays)
for r, j in zip(rows, lays):
    keys = dict(kv.split("=") for kv in j["layout"].split(","))
    parts = sum(int(r["mem_%s_bytes" % k]) for k in ("weights", "grads", "optim", "act", "buffers"))
    ok = ok and r["layout"] == j["layout"] and all(r[k] == keys[k] for k in ("tp", "tpsp", "sp", "cp", "wp", "pp", "dp", "zero", "ckpt", "mb")) \
        and abs(float(r["step_s"]) - j["step_s"]) <= 1e-8 * j["step_s"] and r["fits"] == ("true" if j["fits"] else "false") \
        and abs(parts - int(r["mem_total_bytes"])) <= 8 and int(r["family"]) == j["family"] \
        and abs(float(r["tokens_per_s_per_gpu"]) * 32 - j["tokens_per_s"]) <= 1e-6 * j["tokens_per_s"]
    # the later keys: vppgroup (0: pp) and the selective modules (core_attn by default)
    ok = ok and r["vppgroup"] == keys.get("vppgroup", "0") and r["ep"] == "1" and r["dispatcher"] == "alltoall" \
        and r["recompute"] == ("core_attn" if keys["ckpt"] == "selective" else "")
sys.exit(0 if ok else 1)
PY
check $? "the CSV parses back: one row per JSON layout, same keys, step, fits, family; memory parts add up; tok/s/GPU x 32 GPUs; vppgroup, ep, dispatcher, recompute"
# The layout column holds commas: quoted; a model name with a quote and a comma is not
# in the table, but the writer quotes any field: check on the layout column's raw text.
if grep -q '^1,1,[^,]*,"tp=1,tpsp=0,' "$tmp/a.csv"; then ok "a field with commas is quoted (RFC 4180)"; else nok "CSV quoting: $(sed -n 2p "$tmp/a.csv")"; fi

# ---- 5. the node size is the platform's: 8-GPU nodes are not 16-GPU nodes
"$bin" "$P" $A $M --gpus-per-node 16 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "^spsim: --gpus-per-node 16 disagrees with platform '.*', whose nodes hold 8 GPUs" "$tmp/err"; then
  ok "--gpus-per-node 16 on 8-GPU nodes is refused"; else nok "--gpus-per-node 16: rc $rc $(cat "$tmp/err")"; fi
"$bin" "$P" $A $M --gpus-per-node 8 --top 1 >/dev/null 2>&1
check $? "--gpus-per-node 8 on 8-GPU nodes is accepted"

# ---- 6. the memory breakdown adds up to its total (ZeRO-3: gather buffers too)
"$bin" "$P" $A $M --layout dp=32,zero=3,ckpt=selective --json "$tmp/m.json" >"$tmp/out" 2>&1
python3 - "$tmp/out" "$tmp/m.json" <<'PY'
import json, re, sys
m = re.search(r"It needs (\d+\.\d) GiB per GPU \(weights (\d+\.\d), gradients (\d+\.\d), optimizer (\d+\.\d), "
              r"activations (\d+\.\d)[a-z ]*, gather buffers (\d+\.\d)\)", open(sys.argv[1]).read())
if not m: sys.exit("no breakdown")
v = [round(float(x) * 10) for x in m.groups()]
b = json.load(open(sys.argv[2]))["layouts"][0]["mem_bytes"]
exact = [b[k] / 2**30 for k in ("weights", "grads", "optim", "act", "buffers")]
ok = sum(v[1:]) == v[0] and all(abs(x / 10 - e) < 0.1 for x, e in zip(v[1:], exact)) and abs(v[0] / 10 - b["total"] / 2**30) <= 0.05
sys.exit(0 if ok else "%s vs %s" % (m.groups(), exact))
PY
check $? "the text's memory parts (weights, gradients, optimizer, activations, buffers) add up to its total"

# ---- 4. layouts as users name them
"$bin" "$P" --help >"$tmp/help" 2>&1
miss=""
for k in "tp=N" "tpsp=0|1" "sp=N      Ulysses" "cp=N      context parallelism: ring" "wp=N      ISP" "pp=N" "vpp=V" "dp=N" "zero=0..3" "ckpt=none|selective|full" "mb=N"; do
  grep -qF -- "$k" "$tmp/help" || miss="$miss $k"
done
if [ -z "$miss" ] && grep -q 'Exit status: 0 when at least one layout fits' "$tmp/help"; then ok "--help lists every layout key and the exit status"
else nok "--help misses:$miss"; fi
"$bin" "$P" $A $M --layout tp=8,dp=4 >"$tmp/out" 2>&1
rc=$?
"$bin" "$P" $A $M --layout tp=8,tpsp=1,dp=4 >"$tmp/out1" 2>&1
if [ $rc = 0 ] && grep -q '^layout: Megatron sequence parallelism is on (tp=8 > 1 turns it on; tpsp=0 turns it off)$' "$tmp/out" \
   && ! grep -q 'Megatron sequence parallelism is on' "$tmp/out1"; then ok "tp=8 without tpsp says that Megatron SP is on by default; tpsp=1 given does not"
else nok "tpsp default note: $(cat "$tmp/out")"; fi
if grep -q '^Layout tp8s dp4: compute is ' "$tmp/out" && ! grep -q '^Why ' "$tmp/out"; then ok "a single --layout is explained, not said to win"
else nok "--layout explanation"; fi
# By hand: dp=32 without ZeRO keeps 16 bytes per parameter (bf16 weights and gradients,
# fp32 master, m and v) = 8.03e9 x 16 / 2^30 = 119.7 GiB > 73.6 GiB usable, whatever
# the recomputation: it does not fit, and still writes its row and JSON.
"$bin" "$P" $A $M --layout dp=32,ckpt=full --json "$tmp/nf.json" --csv "$tmp/nf.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
python3 - "$tmp/nf.json" "$tmp/nf.csv" <<'PY'
import csv, json, sys
l = json.load(open(sys.argv[1]))["layouts"]
c = list(csv.DictReader(open(sys.argv[2], newline="")))
sys.exit(0 if len(l) == 1 and l[0]["fits"] is False and l[0]["mem_bytes"]["total"] > 119.7 * 2**30 and len(c) == 1 and c[0]["fits"] == "false" else 1)
PY
py=$?
if [ $rc = 1 ] && [ $py = 0 ] && grep -q '^  1  dp32 full .* NO$' "$tmp/out" && grep -q '^spsim: layout dp32 full needs' "$tmp/err"; then
  ok "a --layout that does not fit prints its row, writes JSON and CSV with fits false, exits 1"; else nok "no-fit layout: rc $rc py $py $(cat "$tmp/out" "$tmp/err")"; fi

# ---- 8. --export: the winner in a framework's own names
# By hand for tp=4,pp=2,vpp=2,dp=4,zero=1,ckpt=full of llama3-8b (32 layers) on 32 GPUs:
# 32 / (2 x 2) = 8 layers per virtual stage, Megatron SP on by default, ZeRO-1 = the
# distributed optimizer, no context parallelism; 1024 / (4 x 1) = 256 micro-batches.
L="--layout tp=4,pp=2,vpp=2,dp=4,zero=1,ckpt=full"
"$bin" "$P" $A $M $L --export megatron >"$tmp/out" 2>&1
rc=$?
sed -n '/^# spsim: /,$p' "$tmp/out" | grep '^--' | sed 's/ \\$//' >"$tmp/flags"
printf '%s\n' "--tensor-model-parallel-size 4" "--sequence-parallel" "--pipeline-model-parallel-size 2" \
  "--num-layers-per-virtual-pipeline-stage 8" "--recompute-granularity full" "--recompute-method uniform" \
  "--recompute-num-layers 1" "--use-distributed-optimizer" "--micro-batch-size 1" "--global-batch-size 1024" "--seq-length 8192" >"$tmp/want"
if [ $rc = 0 ] && cmp -s "$tmp/flags" "$tmp/want" && ! grep -q 'cannot express' "$tmp/out"; then ok "--export megatron: the hand-derived flags, nothing left out"
else nok "--export megatron: $(cat "$tmp/out")"; fi
"$bin" "$P" $A $M $L --export deepspeed >"$tmp/out" 2>&1
python3 - "$tmp/out" <<'PY'
import json, re, sys
t = open(sys.argv[1]).read()
cfg = json.loads(re.search(r"^\{.*?^\}", t, re.S | re.M).group(0))
ok = cfg["train_batch_size"] == 1024 and cfg["train_micro_batch_size_per_gpu"] == 1 and cfg["gradient_accumulation_steps"] == 256 \
     and cfg["train_batch_size"] == 1 * 256 * 4 and cfg["zero_optimization"]["stage"] == 1 \
     and "# cannot express: vpp=2 " in t and "--ds-sequence-parallel-size" not in t
sys.exit(0 if ok else t)
PY
check $? "--export deepspeed: a config JSON with batch = micro x accumulation x dp, and vpp named as not expressible"
"$bin" "$P" $A $M --layout cp=2,wp=4,dp=16,ckpt=selective --export torchtitan >"$tmp/out" 2>&1
python3 - "$tmp/out" <<'PY'
import re, sys, tomllib
t = open(sys.argv[1]).read()
c = tomllib.loads(t[t.index("[parallelism]"):])
p = c["parallelism"]
ok = p["context_parallel_degree"] == 2 and p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"] == 16 \
     and p["tensor_parallel_degree"] == 1 and p["pipeline_parallel_degree"] == 1 and c["training"]["global_batch_size"] == 1024 \
     and c["activation_checkpoint"]["mode"] == "selective" and "# cannot express: wp=4 " in t
sys.exit(0 if ok else t)
PY
check $? "--export torchtitan: TOML that parses, cp and dp degrees, wp named as not expressible"
# InternEvo, by hand for sp=2,wp=4,dp=16,zero=1,ckpt=selective on 32 GPUs: Ulysses + ISP is
# tensor mode isp of size 2 with weight size 4, ZeRO-1 over the data-parallel group is
# zero1 -1, 1024 sequences / 16 replicas = 64 micro-batches of 1; selective recomputation
# is not expressible (model.checkpoint recomputes whole layers)
"$bin" "$P" $A $M --layout sp=2,wp=4,dp=16,zero=1,ckpt=selective --export internevo >"$tmp/out" 2>&1
python3 - "$tmp/out" <<'PY'
import sys
t = open(sys.argv[1]).read()
code = "\n".join(l for l in t[t.index("parallel = dict("):].splitlines() if not l.startswith("#"))
env = {"dict": dict, "True": True, "False": False}
exec(code, env)
p, d, m = env["parallel"], env["data"], env["model"]
ok = p["tensor"] == {"size": 2, "mode": "isp"} and p["weight"]["size"] == 4 and p["zero1"]["size"] == -1 \
     and p["pipeline"]["size"] == 1 and d == {"seq_len": 8192, "micro_num": 64, "micro_bsz": 1} \
     and m["checkpoint"] is False and "# cannot express: ckpt=selective " in t
sys.exit(0 if ok else t)
PY
check $? "--export internevo: parallel/data/model dicts that Python reads back, isp with weight parallelism, selective named"

# ---- 7. --sensitivity: the winner (dp32 z3 or wp16 dp32 z1, equal to a millisecond;
# with flash attention selective recomputation frees no memory, so none is chosen) is compute bound (its exposed communication is milliseconds, checked
# below), so GEMM efficiency -10 % slows it by more than 0 and at most
# 1/0.9 - 1 = 11.1 % (only the GEMMs slow down), +10 % speeds it by at most
# 1 - 1/1.1 = 9.1 %; +-20 % bandwidth moves it by no more than its exposed
# communication; the range spans exactly the listed times.
"$bin" "$P" $A $M --sensitivity --json "$tmp/s.json" >"$tmp/out" 2>&1
rc=$?
python3 - "$tmp/out" "$tmp/s.json" <<'PY'
import json, re, sys
t = open(sys.argv[1]).read()
w = json.load(open(sys.argv[2]))["layouts"][0]
exposed = sum(w["exposed_s"].values())
v = {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^  (.+?)\s+winner\s+(\d+\.\d+) s", t, re.M)}
t0 = w["step_s"]
rng = re.search(r"^Winner's step time (\d+\.\d+)-(\d+\.\d+) s over these variations; it stays the best", t, re.M)
ok = len(v) == 8 and w["label"] in ("dp32 z3", "wp16 dp32 z1") and exposed < 0.001 * t0 and rng \
     and 0 < v["GEMM efficiency -10%"] - t0 <= t0 * (1 / 0.9 - 1) + 0.001 \
     and 0 < t0 - v["GEMM efficiency +10%"] <= t0 * (1 - 1 / 1.1) + 0.001 \
     and all(abs(v[k] - t0) <= exposed + 0.001 for k in v if "bandwidth" in k) \
     and float(rng.group(1)) == min(v.values()) and float(rng.group(2)) == max(v.values())
sys.exit(0 if ok else t)
PY
py=$?
if [ $rc = 0 ] && [ $py = 0 ]; then ok "--sensitivity: GEMM +-10 % within the hand bounds, bandwidth within the exposed communication, the range spans them"
else nok "--sensitivity: rc $rc $(cat "$tmp/out")"; fi

# ---- SVG: no text runs past the picture. Each label's extent is bounded by 7.5 px per
# character at 12 px sans-serif and 10 px at the title's 15 px bold (DejaVu Sans averages
# about 0.6 em per character); end-anchored labels must start at x >= 0, the others end
# inside the width. (Rendered to PNG and looked at by eye as well: see docs/whatif.md.)
"$bin" "$P" $A $M --svg "$tmp/w.svg" >/dev/null 2>&1
python3 - "$tmp/w.svg" <<'PY'
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
width = float(root.get("width"))
bad = []
for t in root.iter(ns + "text"):
    s = "".join(t.itertext()); x = float(t.get("x"))
    cw = 10.0 if t.get("font-size") == "15" else 7.5
    w = cw * len(s); a = t.get("text-anchor", "start")
    lo, hi = (x - w, x) if a == "end" else (x - w / 2, x + w / 2) if a == "middle" else (x, x + w)
    if lo < 0 or hi > width: bad.append((s, lo, hi, width))
print(bad, file=sys.stderr)
sys.exit(1 if bad or width <= 0 else 0)
PY
check $? "--svg: every label inside the picture"

# ---- --json: only the table's rows, each the same object as in the full dump (--json-full)
"$bin" "$P" $A $M --json "$tmp/full.json" --json-full >/dev/null 2>&1
"$bin" "$P" $A $M --json "$tmp/sum.json" >"$tmp/out" 2>&1
rows=$(grep -c '^ *[0-9][0-9]*  ' "$tmp/out")
python3 - "$tmp/full.json" "$tmp/sum.json" "$rows" <<'PY'
import json, sys
f, s, rows = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
ok = (s["layouts_total"] == len(f["layouts"]) == f["layouts_total"] and len(s["layouts"]) == rows > 0
      and all(r == f["layouts"][r["rank"] - 1] for r in s["layouts"]) and s["layouts"][0]["rank"] == 1
      and len(s["layouts"]) < len(f["layouts"]))
sys.exit(0 if ok else 1)
PY
check $? "--json: the table's $rows rows, equal to their rows of the full dump, and the total"

# ---- the default answer states a range: with the GEMM efficiency 10 % lower the step
# cannot be shorter nor more than 1/0.9 = 1.111 times longer; 10 % higher, not longer nor
# shorter than 1/1.1 = 0.909 times (only the GEMMs' share of the step scales)
"$bin" "$P" $A $M >"$tmp/out" 2>&1
python3 - "$tmp/out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
step = float(re.search(r"^Why .+? wins: compute is [0-9.]+% of its ([0-9.]+) s step", t, re.M).group(1))
lo, hi = map(float, re.search(r"With a GEMM efficiency 10% lower or higher its step would take ([0-9.]+)-([0-9.]+) s", t).group(1, 2))
ok = step / 1.1 - 0.005 <= lo <= step + 0.005 and step - 0.005 <= hi <= step / 0.9 + 0.005 and lo < hi
sys.exit(0 if ok else "%s %s %s" % (lo, step, hi))
PY
check $? "default answer: the winner's step as a range under GEMM efficiency +-10 %, within the hand bounds"
# the table says what its labels mean: sp is Ulysses, tpNs Megatron's sequence parallelism
if grep -q 'spN Ulysses sequence' "$tmp/out" && grep -q 'tpNs with Megatron sequence parallelism (tpsp)' "$tmp/out"
then ok "the table's legend names sp as Ulysses and tpNs as Megatron SP"; else nok "legend: $(grep -A3 '(step:' "$tmp/out")"; fi
# an output file that cannot be written is refused before the sweep: one line naming the
# flag and the path, no report on standard output, exit 1 (a folder that does not exist, a
# folder given as the file, an empty path)
bad=0
for a in "--json $tmp/no-such-dir/r.json" "--csv $tmp" "--svg ''" "--trace $tmp/no-such-dir/t.json"; do
  flag=$(echo "$a" | sed 's/ .*//')
  eval "\"\$bin\" \"\$P\" $A $M $a" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 1 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q -- "^spsim: $flag '" "$tmp/err"; then
    bad=1; echo "# $a: rc $rc, $(cat "$tmp/err")"
  fi
done
check $bad "unwritable --json, --csv, --svg and --trace paths are refused at once, in one line"
# an MoE layout's explanation names its all-to-alls after the experts, not Ulysses (sp = 1):
# Qwen3-30B-A3B's 128 experts over ep=16 are 8 per GPU; the all-to-all term is the
# dominant one here (an ep group of two nodes, no overlap), so both sentences name it
"$bin" "$P" $A --model qwen3-30b-a3b --seq 4096 --global-batch 64 --layout tp=1,pp=1,ep=16,etp=1,dp=32,zero=1,ckpt=none,mb=1 \
  --explain >"$tmp/out" 2>"$tmp/err"
grep -E '^(Layout|Dominant)' "$tmp/out" >"$tmp/expl"
if grep -q 'Expert parallelism ep=16 holds 8 of the 128 experts per GPU, its tokens dispatched and combined by all-to-all' "$tmp/expl" &&
   grep -q 'SPa2a: Ulysses. and the experts. all-to-alls' "$tmp/out" && ! grep -q 'Ulysses' "$tmp/expl" &&
   grep -q '^Dominant term of .*: expert all-to-all, ' "$tmp/expl"
then ok "an MoE layout's explanation names the expert all-to-alls, not Ulysses"
else nok "MoE explanation: $(cat "$tmp/err" "$tmp/expl" | head -4)"; fi
