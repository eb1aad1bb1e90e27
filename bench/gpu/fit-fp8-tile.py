#!/usr/bin/env python3
"""Fit the kernel model's FP8 GEMM constants (fp8_gemm_eff over K + fp8_tile_k0) to GEMMs
timed at a training run's clocks, and check them on GEMMs timed per shape.

    python3 bench/gpu/fit-fp8-tile.py   (no GPU needed; a few seconds)

Fits on bench/gpu/h100-fp8-layer-gemms.txt (the 24 FP8 GEMMs of two training layers on an
H100 SXM, bench/gpu/fp8-layer-gemms.py) by least absolute relative error over a grid of
efficiencies (0.001 steps) and tile costs (16 steps of K), with the model of
src/core/step/kernel_model.c (sp_kernel_gemm_time: H100's 132 SMs, 128 x 256 tiles and the
three smaller tile shapes, waves, 4 us launch; the operands' HBM time is far below the
math at these sizes). Then prints the mean |error| of both constants and of the flat
rate before them on the per-shape sets bench/gpu/h100-gemm-fp8.csv and h200-gemm-fp8.csv
(GEMMs of at least 50 us), with the mean error per power of two of K.
"""
import collections
import csv
import math
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
PEAK, SMS, TM, TN, LAUNCH = 1978.8e12, 132, 128, 256, 4e-6


def model(m, n, k, eff, k0):
    best = math.inf
    for a, b in ((1, 1), (1, 2), (2, 2), (2, 4)):
        tm, tn = max(1, TM / a), max(1, TN / b)
        waves = math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / SMS)
        best = min(best, waves * 2 * tm * tn * (k + k0) * SMS / (eff * PEAK))
    return best + LAUNCH


layer = []
for line in open(os.path.join(HERE, "h100-fp8-layer-gemms.txt")):
    g = re.match(r"(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+) ms", line)
    if g:
        layer.append((g.group(1), int(g.group(2)), int(g.group(3)), int(g.group(4)), float(g.group(5)) * 1e-3))


def errors(rows, eff, k0):
    return [model(m, n, k, eff, k0) / t - 1 for _, m, n, k, t in rows]


fit = min(((sum(abs(e) for e in errors(layer, e1000 / 1000, k0)), e1000 / 1000, k0)
           for k0 in range(0, 1201, 16) for e1000 in range(550, 800)))
_, eff, k0 = fit
print(f"fit on {len(layer)} layer GEMMs: fp8_gemm_eff {eff:.3f}, fp8_tile_k0 {k0}")
for name, (e, k) in (("fitted", (eff, k0)), ("flat 0.62", (0.62, 0))):
    es = errors(layer, e, k)
    sums = {c: sum(model(m, n, kk, e, k) for cc, m, n, kk, _ in layer if cc == c) /
            sum(t for cc, _, _, _, t in layer if cc == c) - 1 for c in dict.fromkeys(r[0] for r in layer)}
    print(f"  {name:9s} mean |error| {100 * sum(map(abs, es)) / len(es):.1f} %; layer sums " +
          ", ".join(f"{c} {100 * v:+.1f} %" for c, v in sums.items()))
for fn in ("h100-gemm-fp8.csv", "h200-gemm-fp8.csv"):
    rows = [r for r in csv.DictReader(l for l in open(os.path.join(HERE, fn)) if not l.startswith("#"))]
    rows = [("", int(r["m"]), int(r["n"]), int(r["k"]), float(r["seconds"])) for r in rows if float(r["seconds"]) >= 50e-6]
    for name, (e, k) in (("fitted", (eff, k0)), ("flat 0.62", (0.62, 0))):
        es = errors(rows, e, k)
        byk = collections.defaultdict(list)
        for (_, _, _, kk, _), x in zip(rows, es):
            byk[int(math.log2(kk))].append(x)
        print(f"{fn} {name:9s} {len(rows)} GEMMs, mean |error| {100 * sum(map(abs, es)) / len(es):.1f} %; by K: " +
              " ".join(f"2^{b} {100 * sum(v) / len(v):+.0f} %" for b, v in sorted(byk.items())))
