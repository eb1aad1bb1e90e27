#!/usr/bin/env python3
"""Time one transformer layer's forward and backward in eager PyTorch on this GPU, split by kernel kind.

    python3 bench/gpu/torch-layer.py OUTDIR [--warm SECONDS]   (PyTorch, one CUDA GPU; about 1 minute)

The layers are those of the published runs spsim is validated on, written as their
frameworks write them, in BF16, one GPU, no parallelism, no activation checkpointing:
- te-gpt: Transformer Engine's getting-started GPT layer shape (hidden 4096, 32 heads, FFN
  16384, GeLU, LayerNorm), batch 8, sequence 2048, in plain PyTorch (nn.Linear, nn.LayerNorm,
  F.gelu) with scaled_dot_product_attention on the flash backend;
- llama3-8b-eager: one Llama 3 8B block (hidden 4096, 32 heads, 8 KV heads, FFN 14336,
  SwiGLU) as torchtitan writes it without torch.compile: RMSNorm in FP32 (x.float(), pow,
  mean, rsqrt, type_as, weight product), rotary embedding as an FP32 complex product,
  repeat_kv by expand and reshape, flash attention; sequence 8192, batch 1 and 2.

Writes OUTDIR/layer.csv (config, batch, seq, ms per layer forward + backward, and the ms of
its GEMM, attention and other kernels from torch.profiler), OUTDIR/layer-kernels.txt (each
configuration's kernels, longest first) and OUTDIR/stream.csv (copy, scale, add and triad
over 1 GiB arrays, BabelStream's kernels as PyTorch ops, GB/s). With --warm S each
configuration first runs for S seconds, so that it is timed at the clocks a GPU holds
through a training run (a Hopper GPU under GEMM load reaches its power limit within a
second and lowers its SM clock), and the files are named layer-warm.csv and
layer-warm-kernels.txt; stream.csv is not rewritten.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from layer_timing import kernel_split, parse_args, time_step


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope(x, freqs):
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(3).type_as(x)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.kv = c["hidden"], c["heads"], c["kv_heads"]
        self.hd = h // self.nh
        self.swiglu, self.llama = c["mlp"] == "swiglu", c["norm"] == "rmsnorm"
        self.wq = nn.Linear(h, self.nh * self.hd, bias=False)
        self.wk = nn.Linear(h, self.kv * self.hd, bias=False)
        self.wv = nn.Linear(h, self.kv * self.hd, bias=False)
        self.wo = nn.Linear(self.nh * self.hd, h, bias=False)
        self.w1 = nn.Linear(h, c["ffn"], bias=False)
        self.w2 = nn.Linear(c["ffn"], h, bias=False)
        self.w3 = nn.Linear(h, c["ffn"], bias=False) if self.swiglu else None
        norm = RMSNorm if self.llama else nn.LayerNorm
        self.n1, self.n2 = norm(h), norm(h)

    def forward(self, x, freqs):
        b, t, h = x.shape
        y = self.n1(x)
        q = self.wq(y).view(b, t, self.nh, self.hd)
        k = self.wk(y).view(b, t, self.kv, self.hd)
        v = self.wv(y).view(b, t, self.kv, self.hd)
        if self.llama:
            q, k = rope(q, freqs), rope(k, freqs)
        if self.kv < self.nh:
            r = self.nh // self.kv
            k = k[:, :, :, None, :].expand(b, t, self.kv, r, self.hd).reshape(b, t, self.nh, self.hd)
            v = v[:, :, :, None, :].expand(b, t, self.kv, r, self.hd).reshape(b, t, self.nh, self.hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, h))
        y = self.n2(x)
        m = self.w2(F.silu(self.w1(y)) * self.w3(y)) if self.swiglu else self.w2(F.gelu(self.w1(y)))
        return x + m


CONFIGS = [
    ("te-gpt", dict(hidden=4096, heads=32, kv_heads=32, ffn=16384, mlp="gelu", norm="layernorm"), 8, 2048),
    ("llama3-8b-eager", dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, mlp="swiglu", norm="rmsnorm"), 1, 8192),
    ("llama3-8b-eager", dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, mlp="swiglu", norm="rmsnorm"), 2, 8192),
]


def gemm_flop(c, b, t):
    h, hd, f = c["hidden"], c["hidden"] // c["heads"], c["ffn"]
    per_token = h * c["heads"] * hd * 2 + 2 * h * c["kv_heads"] * hd + (3 if c["mlp"] == "swiglu" else 2) * h * f
    return 3 * 2.0 * b * t * per_token  # forward, and backward's two products


def run(name, c, b, t, csv, log, warm):
    torch.manual_seed(0)
    blk = Block(c).cuda().to(torch.bfloat16)
    hd = c["hidden"] // c["heads"]
    inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device="cuda").float() / hd))
    freqs = torch.polar(torch.ones(t, hd // 2, device="cuda"), torch.outer(torch.arange(t, device="cuda").float(), inv))
    freqs = freqs.view(1, t, 1, hd // 2)
    x = torch.randn(b, t, c["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn_like(x)

    def step():
        for p in blk.parameters():
            p.grad = None
        x.grad = None
        blk(x, freqs).backward(g)

    ms, _, prof = time_step(step, 5, warm)
    by, rows, _ = kernel_split(prof)
    fl = gemm_flop(c, b, t)
    csv.write("%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.1f\n" % (name, b, t, ms, by["gemm"] / 1e3, by["attention"] / 1e3,
                                                       by["other"] / 1e3, fl / (by["gemm"] * 1e-6) / 1e12 if by["gemm"] else 0))
    csv.flush()
    log.write("## %s batch %d seq %d: %.3f ms per layer forward+backward; GEMM %.3f ms (%.3g FLOP), attention %.3f ms, other %.3f ms\n"
              % (name, b, t, ms, by["gemm"] / 1e3, fl, by["attention"] / 1e3, by["other"] / 1e3))
    for us, n, k, key in rows[:40]:
        log.write("%10.1f us %4d x %-9s %s\n" % (us, n, k, key))
    log.flush()
    del blk, x, g
    torch.cuda.empty_cache()


def stream(out):
    n = (1 << 30) // 4
    a, b, c = (torch.full((n,), v, device="cuda", dtype=torch.float32) for v in (0.1, 0.2, 0.0))
    kernels = [("copy", 2, lambda: c.copy_(a)), ("scale", 2, lambda: torch.mul(c, 0.4, out=b)),
               ("add", 3, lambda: torch.add(a, b, out=c)), ("triad", 3, lambda: torch.add(b, c, alpha=0.4, out=a))]
    with open(os.path.join(out, "stream.csv"), "w") as f:
        f.write("# %s; PyTorch %s; 1 GiB FP32 arrays; BabelStream's bytes per kernel\nkernel,GB_per_s\n"
                % (torch.cuda.get_device_name(0), torch.__version__))
        for name, arrays, fn in kernels:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(20):
                fn()
            e1.record()
            torch.cuda.synchronize()
            s = e0.elapsed_time(e1) / 20 / 1e3
            f.write("%s,%.1f\n" % (name, arrays * n * 4 / s / 1e9))


def main(out, warm):
    os.makedirs(out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    if not warm:
        stream(out)
    tag = "layer-warm" if warm else "layer"
    with open(os.path.join(out, tag + ".csv"), "w") as csv, open(os.path.join(out, tag + "-kernels.txt"), "w") as log:
        csv.write("# %s (%d SMs), PyTorch %s, CUDA %s; one layer forward+backward, BF16, eager; kernel ms from torch.profiler%s\n"
                  "config,batch,seq,ms,gemm_ms,attention_ms,other_ms,gemm_tflops\n"
                  % (p.name, p.multi_processor_count, torch.__version__, torch.version.cuda,
                     "; after %g s of running the layer" % warm if warm else ""))
        for name, c, b, t in CONFIGS:
            try:
                run(name, c, b, t, csv, log, warm)
            except Exception as e:  # one configuration's failure must not lose the others
                log.write("## %s batch %d seq %d failed: %r\n" % (name, b, t, e))
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(*parse_args(sys.argv[1:], __doc__))
