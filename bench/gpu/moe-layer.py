#!/usr/bin/env python3
"""Time one MoE transformer layer's forward and backward on this GPU, as one rank of an
expert-parallel run computes it, split by kernel kind, with the host's issue time beside it.

    python3 bench/gpu/moe-layer.py OUTDIR [--warm SECONDS]   (PyTorch >= 2.8, one Hopper GPU)

Each configuration is one rank's share of a layer of a published MoE run: attention over
its micro-batch of T tokens, the router over them, and its local experts over the tokens
the dispatch brings them. Routing is force-balanced, as in Megatron-Bridge's MoE
benchmarks ("we force-balance the token distribution among experts"), so every local
expert gets T x top-k / local-experts rows: the rank's own routed copies stand in for
those the all-to-all would bring from its peers (same count, same shapes; the all-to-all
itself is not run). BF16, no recomputation, one GPU. Element-wise work is eager PyTorch:
the KV heads copied to every query head, the permutation as index_select and its
inverse as index_add_ (atomic adds in the backward), SiLU, the gate product and the
probability weighting as separate kernels, where Megatron-Core fuses the permutation
with the weighting (moe_permute_fusion) and shares KV heads inside the attention
kernel; the "other" column is therefore an upper bound for a fused implementation.

Two implementations of the experts' MLP, as Megatron-Core offers them:
- grouped: one grouped GEMM per projection (torch._grouped_mm, a CUTLASS grouped kernel,
  as Megatron's GroupedMLP / TE's GroupedLinear issue one kernel for all local experts);
- loop: one GEMM per expert and projection (Megatron's SequentialMLP).

Writes OUTDIR/moe-layer.csv: config, implementation, tokens, local experts, rows per
expert, ms per layer forward + backward (CUDA events over 10 iterations), the host's
time to issue one iteration (wall clock before synchronising: when it is close to the ms,
the layer is bound by the host's launches), kernels per iteration, and the ms of its
GEMM, attention and other kernels (torch.profiler); OUTDIR/moe-layer-kernels.txt lists
each configuration's kernels, longest first.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from layer_timing import kernel_split, parse_args, time_step

# Shapes from the models' config.json (bench/validation/models/gpt-oss-120b.json,
# models/qwen3-30b-a3b.json); local experts and tokens from the runs' layouts
# (docs/validation.md: Qwen3-30B-A3B EP 16 on 16 GPUs, GPT OSS 120B EP 8; micro-batch 1, s 4096).
QWEN3_30B = dict(hidden=2048, heads=32, kv_heads=4, head_dim=128, experts=128, topk=8, expert_ffn=768)
GPT_OSS = dict(hidden=2880, heads=64, kv_heads=8, head_dim=64, experts=128, topk=4, expert_ffn=2880)
CONFIGS = [
    # name, model, local experts, tokens, implementation
    ("qwen3-30b-a3b-ep16", QWEN3_30B, 8, 4096, "grouped"),
    ("qwen3-30b-a3b-ep16", QWEN3_30B, 8, 4096, "loop"),
    ("gpt-oss-120b-ep8", GPT_OSS, 16, 4096, "grouped"),
    ("gpt-oss-120b-ep8", GPT_OSS, 16, 4096, "loop"),
    ("qwen3-30b-a3b-ep1", QWEN3_30B, 128, 4096, "grouped"),
    ("qwen3-30b-a3b-ep1", QWEN3_30B, 128, 4096, "loop"),
]


class MoEBlock(nn.Module):
    def __init__(self, c, local, impl):
        super().__init__()
        h, nh, kv, hd, f = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["expert_ffn"]
        self.nh, self.kv, self.hd, self.E, self.k, self.local, self.impl = nh, kv, hd, c["experts"], c["topk"], local, impl
        self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
        self.wqkv = nn.Linear(h, (nh + 2 * kv) * hd, bias=False)
        self.wo = nn.Linear(nh * hd, h, bias=False)
        self.router = nn.Linear(h, self.E, bias=False)
        # (experts, N, K), as nn.Linear keeps a weight; transposed views are the right
        # operands (column-major, as torch._grouped_mm wants them)
        self.w13 = nn.Parameter(torch.randn(local, 2 * f, h) * 0.02)
        self.w2 = nn.Parameter(torch.randn(local, h, f) * 0.02)

    def experts(self, xs, offs):
        if self.impl == "grouped":
            a = torch._grouped_mm(xs, self.w13.transpose(-2, -1), offs=offs)
            g, u = a.chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(g) * u, self.w2.transpose(-2, -1), offs=offs)
        # slices of xs: autograd gives each slice's gradient the full size of xs, which most
        # of the loop's other-kernel time is (Megatron's SequentialMLP splits with
        # torch.split, whose backward concatenates)
        outs, lo = [], 0
        for i, hi in enumerate(self.offs_host):  # the host knows the split, as Megatron's dispatcher does
            a = F.linear(xs[lo:hi], self.w13[i])
            g, u = a.chunk(2, dim=-1)
            outs.append(F.linear(F.silu(g) * u, self.w2[i]))
            lo = hi
        return torch.cat(outs)

    def forward(self, x, route, offs):
        b, t, h = x.shape
        y = self.n1(x)
        qkv = self.wqkv(y).view(b, t, self.nh + 2 * self.kv, self.hd)
        q, k, v = qkv.split([self.nh, self.kv, self.kv], dim=2)
        r = self.nh // self.kv  # the KV heads copied to every query head, as eager PyTorch models do
        k = k[:, :, :, None, :].expand(b, t, self.kv, r, self.hd).reshape(b, t, self.nh, self.hd)
        v = v[:, :, :, None, :].expand(b, t, self.kv, r, self.hd).reshape(b, t, self.nh, self.hd)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, self.nh * self.hd))
        y = self.n2(x).view(b * t, h)
        # router: softmax over the experts, top-k probabilities; the indices force-balanced
        probs, _ = torch.topk(torch.softmax(self.router(y).float(), dim=-1), self.k, dim=-1)
        probs = (probs / probs.sum(-1, keepdim=True)).to(y.dtype).view(-1)
        tok, order = route
        xs = y.index_select(0, tok[order])                      # permute: rows grouped by local expert
        ys = self.experts(xs, offs) * probs[order, None]
        out = torch.zeros_like(y).index_add_(0, tok[order], ys)  # unpermute: weighted sum per token
        return x + out.view(b, t, h)


def run(name, c, local, t, impl, csv, log, warm):
    torch.manual_seed(0)
    blk = MoEBlock(c, local, impl).cuda().to(torch.bfloat16)
    n = t * c["topk"]
    # force-balanced routing: token j's i-th copy goes to expert (j k + i) mod E, that expert
    # is local expert e mod local (its peers' tokens stand in), rows sorted by local expert
    tok = torch.arange(t, device="cuda").repeat_interleave(c["topk"])
    loc = (torch.arange(n, device="cuda") % c["experts"]) % local
    order = torch.argsort(loc, stable=True)
    offs = torch.cumsum(torch.bincount(loc, minlength=local), 0).to(torch.int32)
    blk.offs_host = offs.tolist()
    x = torch.randn(1, t, c["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn_like(x)

    def step():
        for p in blk.parameters():
            p.grad = None
        x.grad = None
        blk(x, (tok, order), offs).backward(g)

    ms, host, prof = time_step(step, 3, warm)
    by, rows, count = kernel_split(prof)
    csv.write("%s,%s,%d,%d,%d,%.3f,%.3f,%d,%.3f,%.3f,%.3f\n" % (
        name, impl, t, local, n // local, ms, host, count, by["gemm"] / 1e3, by["attention"] / 1e3, by["other"] / 1e3))
    csv.flush()
    log.write("## %s %s: %d tokens, %d local experts of %d rows: %.3f ms per layer forward+backward, host issue %.3f ms, "
              "%d kernels; GEMM %.3f ms, attention %.3f ms, other %.3f ms\n" % (
                  name, impl, t, local, n // local, ms, host, count, by["gemm"] / 1e3, by["attention"] / 1e3,
                  by["other"] / 1e3))
    for us, cnt, k, key in rows[:30]:
        log.write("%10.1f us %4d x %-9s %s\n" % (us, cnt, k, key))
    log.flush()
    del blk, x, g
    torch.cuda.empty_cache()


def main(out, warm):
    os.makedirs(out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    with open(os.path.join(out, "moe-layer.csv"), "w") as csv, open(os.path.join(out, "moe-layer-kernels.txt"), "w") as log:
        csv.write("# %s (%d SMs), PyTorch %s, CUDA %s; one MoE layer forward+backward, BF16, eager, one rank's share; "
                  "kernel ms from torch.profiler%s\n"
                  "config,impl,tokens,local_experts,rows_per_expert,ms,host_ms,kernels,gemm_ms,attention_ms,other_ms\n"
                  % (p.name, p.multi_processor_count, torch.__version__, torch.version.cuda,
                     "; after %g s of running each" % warm if warm else ""))
        for name, c, local, t, impl in CONFIGS:
            try:
                run(name, c, local, t, impl, csv, log, warm)
            except Exception as e:  # one configuration's failure must not lose the others
                log.write("## %s %s failed: %r\n" % (name, impl, e))
                log.flush()
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(*parse_args(sys.argv[1:], __doc__))
