#!/usr/bin/env python3
"""FP8 GEMMs of two training layers, timed at the clocks a training run holds.

    python3 bench/gpu/fp8-layer-gemms.py OUTDIR   (needs PyTorch and one CUDA GPU with FP8; about 40 seconds)

For a Llama 3 70B layer at TP 4 (8192 tokens per rank) and a Llama 3.1 405B layer at TP 8
and CP 2 (4096 tokens per rank): the 12 GEMMs of its four linears (QKV, output projection,
the SwiGLU up projections, the down projection; forward, data gradient, weight gradient)
as torch._scaled_mm with FP8 e4m3 operands, per-tensor scales and BF16 output, run in a
loop for 15 s, then each timed with CUDA events over 20 rounds. Writes OUTDIR/fp8layer.txt.
bench/gpu/h100-fp8-layer-gemms.txt holds one run on an H100 SXM; the kernel model's
fp8_gemm_eff comes from it (src/core/step/kernel_model.c).
"""
import os
import sys
import time

import torch

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
f = open(os.path.join(out, "fp8layer.txt"), "w")
def P(s): print(s); f.write(s + "\n"); f.flush()
one = torch.tensor(1.0, device="cuda")
cases = {
 "70b-tp4": (8192, [(2560, 8192), (8192, 2048), (14336, 8192), (8192, 7168)]),
 "405b-tp8-cp2": (4096, [(2304, 16384), (16384, 2048), (13312, 16384), (16384, 6656)]),
}
P("# %s; torch._scaled_mm FP8 e4m3 -> bf16, per-tensor scales; each layer's 12 GEMMs (fwd, dgrad, wgrad) run in a loop for 15 s, then timed" % torch.cuda.get_device_name(0))
for name, (M, lins) in cases.items():
    gem = []
    for (N, K) in lins:
        for (m, n, k) in ((M, N, K), (M, K, N), (N, K, M)):
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
            gem.append((m, n, k, a, b))
    def run_all():
        for (m, n, k, a, b) in gem:
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    t_end = time.time() + 15
    while time.time() < t_end:
        for _ in range(5): run_all()
        torch.cuda.synchronize()
    evs = [[torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)] for _ in gem]
    tot = [0.0] * len(gem)
    for rep in range(20):
        for i, (m, n, k, a, b) in enumerate(gem):
            evs[i][0].record(); torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16); evs[i][1].record()
        torch.cuda.synchronize()
        for i in range(len(gem)): tot[i] += evs[i][0].elapsed_time(evs[i][1]) / 20
    fl = 0; t = 0
    for i, (m, n, k, a, b) in enumerate(gem):
        g = 2.0 * m * n * k; fl += g; t += tot[i] * 1e-3
        P("%-14s %6d %6d %6d %8.3f ms %7.1f TFLOP/s %.3f of 1979" % (name, m, n, k, tot[i], g / (tot[i] * 1e-3) / 1e12, g / (tot[i] * 1e-3) / 1979e12))
    P("%-14s layer GEMMs %.3f ms, %.1f TFLOP/s, %.3f of the FP8 peak" % (name, t * 1e3, fl / t / 1e12, fl / t / 1979e12))
    del gem; torch.cuda.empty_cache()
