#!/usr/bin/env python3
"""Measure BF16 GEMM and fused-attention throughput on this GPU, for the kernel model.

    python3 bench/gpu/hopper-kernels.py OUTDIR [--fp8]   (needs PyTorch and one CUDA GPU; about 1 minute)

Writes OUTDIR/gemm.csv (m,n,k,dtype,seconds,tflops: usable as spsim --gemm-table),
OUTDIR/gemm-transposed.csv (the two transposed layouts of the backward pass) and
OUTDIR/attention.csv (torch.nn.functional.scaled_dot_product_attention, batch 1);
with --fp8 instead OUTDIR/gemm-fp8.csv (torch._scaled_mm: FP8 e4m3 operands with
per-tensor scales, BF16 out; a GPU with FP8 tensor cores).
Each time is the mean of back-to-back calls after two warm-ups, timed with CUDA
events. bench/gpu/h200-*.csv hold one run on an NVIDIA H200; tests/test-kernel-model.c
holds spsim's GEMM model to it.
"""
import os
import sys

import torch
import torch.nn.functional as F


def timeit(fn, iters):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters / 1e3


def iters_for(flop, budget):
    return max(3, min(50, int(budget / flop)))


def fp8(out):
    os.makedirs(out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    sizes = [1024, 2048, 4096, 8192, 16384, 28672]
    with open(os.path.join(out, "gemm-fp8.csv"), "w") as f:
        f.write("# %s (%d SMs), PyTorch %s, CUDA %s; FP8 e4m3 x e4m3 -> BF16 with per-tensor scales "
                "(torch._scaled_mm, cuBLAS)\nm,n,k,dtype,seconds,tflops\n"
                % (p.name, p.multi_processor_count, torch.__version__, torch.version.cuda))
        one = torch.tensor(1.0, device="cuda")
        for m in [2048, 8192, 16384]:
            for n in sizes:
                for k in sizes:
                    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
                    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
                    flop = 2.0 * m * n * k
                    t = timeit(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                               iters_for(flop, 4e13))
                    f.write("%d,%d,%d,fp8,%.6e,%.1f\n" % (m, n, k, t, flop / t / 1e12))
                    del a, b


def main(out):
    os.makedirs(out, exist_ok=True)
    dev = torch.device("cuda")
    p = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    head = "# %s (%d SMs), PyTorch %s, CUDA %s; BF16, TF32 off\n" % (p.name, p.multi_processor_count,
                                                                   torch.__version__, torch.version.cuda)
    sizes = [256, 512, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 12288, 16384, 28672]
    big = 28672
    a_buf = torch.randn(16384 * big, device=dev, dtype=torch.bfloat16)
    b_buf = torch.randn(big * big, device=dev, dtype=torch.bfloat16)
    c_buf = torch.empty(16384 * big, device=dev, dtype=torch.bfloat16)
    with open(os.path.join(out, "gemm.csv"), "w") as f:
        f.write(head + "# C[m,n] = A[m,k] B[k,n]\nm,n,k,dtype,seconds,tflops\n")
        for m in [512, 1024, 2048, 4096, 8192, 16384]:
            for n in sizes:
                for k in sizes:
                    a, b, c = a_buf[:m * k].view(m, k), b_buf[:k * n].view(k, n), c_buf[:m * n].view(m, n)
                    flop = 2.0 * m * n * k
                    t = timeit(lambda: torch.matmul(a, b, out=c), iters_for(flop, 2e13))
                    f.write("%d,%d,%d,bf16,%.6e,%.1f\n" % (m, n, k, t, flop / t / 1e12))
    with open(os.path.join(out, "gemm-transposed.csv"), "w") as f:
        f.write(head + "# tn: A stored k x m (weight gradient), nt: B stored n x k (data gradient)\n"
                "layout,m,n,k,dtype,seconds,tflops\n")
        for m in [2048, 8192]:
            for n in [1024, 4096, 8192, 28672]:
                for k in [1024, 4096, 8192]:
                    flop = 2.0 * m * n * k
                    c = c_buf[:m * n].view(m, n)
                    for layout, a, b in (("tn", a_buf[:m * k].view(k, m).t(), b_buf[:k * n].view(k, n)),
                                         ("nt", a_buf[:m * k].view(m, k), b_buf[:k * n].view(n, k).t())):
                        t = timeit(lambda: torch.matmul(a, b, out=c), iters_for(flop, 2e13))
                        f.write("%s,%d,%d,%d,bf16,%.6e,%.1f\n" % (layout, m, n, k, t, flop / t / 1e12))
    del a_buf, b_buf, c_buf
    torch.cuda.empty_cache()
    with open(os.path.join(out, "attention.csv"), "w") as f:
        f.write(head + "# batch 1; FLOP 4 h s^2 d forward (half of it causal), backward 2.5 times the forward\n"
                "pass,causal,heads,seq,head_dim,seconds,tflops\n")
        for d in [64, 128]:
            for heads in [8, 16, 32, 64]:
                for s in [1024, 2048, 4096, 8192, 16384, 32768]:
                    for causal in (True, False):
                        q = torch.randn(1, heads, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                        k = torch.randn_like(q, requires_grad=True)
                        v = torch.randn_like(q, requires_grad=True)
                        flop = 4.0 * heads * s * s * d * (0.5 if causal else 1.0)
                        n = iters_for(flop, 1e13)
                        tf = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), n)
                        g = torch.randn_like(q)

                        def fwd_bwd():
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)
                        tb = timeit(fwd_bwd, n) - tf
                        f.write("fwd,%d,%d,%d,%d,%.6e,%.1f\n" % (causal, heads, s, d, tf, flop / tf / 1e12))
                        f.write("bwd,%d,%d,%d,%d,%.6e,%.1f\n" % (causal, heads, s, d, tb, 2.5 * flop / tb / 1e12))
                        del q, k, v, g


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--fp8"]
    if len(args) != 1 or not torch.cuda.is_available():
        sys.exit("usage: hopper-kernels.py OUTDIR [--fp8]   (needs PyTorch with one CUDA GPU)")
    fp8(args[0]) if "--fp8" in sys.argv[1:] else main(args[0])
