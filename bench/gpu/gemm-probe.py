#!/usr/bin/env python3
"""How a GEMM's speed depends on its operands and on what runs around it, on this GPU.

    python3 bench/gpu/gemm-probe.py OUTDIR   (needs PyTorch and one CUDA GPU; about 15 seconds)

For four BF16 shapes (m, n, k): torch.matmul as hopper-kernels.py times it, F.linear with
random-normal, uniform (nn.Linear's initialisation), scaled, small-integer and zero
operands, one GEMM between 1 GiB copies, and one after 10 ms of idle GPU. Writes
OUTDIR/probe.txt. bench/gpu/h100-gemm-probe.txt holds one run on an H100 SXM.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
log = open(os.path.join(out, "probe.txt"), "w")
def P(*a):
    s = " ".join(str(x) for x in a); print(s); log.write(s + "\n"); log.flush()
def ev(): return torch.cuda.Event(enable_timing=True)
def timed(fn, iters=40, between=None):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    if between is None:
        e0, e1 = ev(), ev(); e0.record()
        for _ in range(iters): fn()
        e1.record(); torch.cuda.synchronize()
        return e0.elapsed_time(e1) / iters * 1e-3
    for _ in range(iters):
        between()
        a, b = ev(), ev(); a.record(); fn(); b.record(); ts.append((a, b))
    torch.cuda.synchronize()
    return sum(x.elapsed_time(y) for x, y in ts) / iters * 1e-3
big = torch.empty(1 << 28, device=dev, dtype=torch.float32); big2 = torch.empty_like(big)
def copy(): big2.copy_(big)
for (m, n, k) in [(16384, 4096, 4096), (16384, 16384, 4096), (16384, 4096, 16384), (8192, 8192, 8192)]:
    fl = 2.0 * m * n * k
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    wr = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    wu = (torch.rand(n, k, device=dev) * 2 - 1).mul_(1 / math.sqrt(k)).to(torch.bfloat16)
    b_nn = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    z = torch.zeros_like(x); wz = torch.zeros_like(wr)
    xs = (x * 0.01)
    xi = torch.randint(-3, 4, (m, k), device=dev).to(torch.bfloat16); wi = torch.randint(-3, 4, (n, k), device=dev).to(torch.bfloat16)
    res = {}
    res["matmul NN randn (bench)"] = timed(lambda: torch.matmul(x, b_nn, out=c))
    res["linear randn x randn W"] = timed(lambda: F.linear(x, wr))
    res["linear randn x uniform W"] = timed(lambda: F.linear(x, wu))
    res["linear 0.01 randn x uniform W"] = timed(lambda: F.linear(xs, wu))
    res["linear small ints"] = timed(lambda: F.linear(xi, wi))
    res["linear zeros"] = timed(lambda: F.linear(z, wz))
    res["linear randn, 1 GiB copy between"] = timed(lambda: F.linear(x, wr), 20, copy)
    res["linear randn, single call after idle"] = timed(lambda: F.linear(x, wr), 10, lambda: torch.cuda._sleep(20000000))
    for name, t in res.items():
        P("%-6d %-6d %-6d %-40s %8.3f ms %6.1f TFLOP/s" % (m, n, k, name, t * 1e3, fl / t / 1e12))
    del x, wr, wu, b_nn, c, z, wz, xs, xi, wi
    torch.cuda.empty_cache()
