"""Timing and kernel split shared by torch-layer.py and moe-layer.py: run a layer's
forward and backward on PyTorch's flash attention backend, warm the GPU, time it with
CUDA events and split its kernels by kind with torch.profiler."""
import sys
import time

import torch

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # older PyTorch
    sdpa_kernel = None

PROFILED = 2  # iterations under the profiler; kernel times are per iteration


def kind(name):
    """A kernel's kind from its name: attention, gemm (grouped GEMMs too) or other."""
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if "gemm" in n or "nvjet" in n or "cutlass" in n or "xmma" in n or "cublas" in n or "wgmma" in n or "grouped" in n:
        return "gemm"
    return "other"


def device_us(evt):
    for a in ("self_device_time_total", "device_time_total", "self_cuda_time_total", "cuda_time_total"):
        v = getattr(evt, a, None)
        if v:
            return float(v)
    return 0.0


def time_step(step, warmups, warm, iters=10):
    """Run step() warmups times, then for warm seconds, then time iters of it: the ms per
    iteration (CUDA events), the host's ms to issue one (wall clock before synchronising)
    and a torch.profiler run of PROFILED iterations."""
    ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if sdpa_kernel else torch.backends.cuda.sdp_kernel(
        enable_flash=True, enable_math=False, enable_mem_efficient=False)
    with ctx:
        for _ in range(warmups):
            step()
        torch.cuda.synchronize()
        t_end = time.time() + warm
        while time.time() < t_end:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        h0 = time.perf_counter()
        for _ in range(iters):
            step()
        host = (time.perf_counter() - h0) / iters * 1e3
        e1.record()
        torch.cuda.synchronize()
        ms = e0.elapsed_time(e1) / iters
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED):
                step()
            torch.cuda.synchronize()
    return ms, host, prof


def kernel_split(prof):
    """Per iteration: us by kind ({gemm, attention, other}), the kernels as (us, count,
    kind, name) longest first, and the number of kernels."""
    by = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    rows, count = [], 0
    for evt in prof.key_averages():
        if "CPU" in str(getattr(evt, "device_type", "CUDA")):
            continue
        us = device_us(evt) / PROFILED
        if us <= 0:
            continue
        by[kind(evt.key)] += us
        count += evt.count
        rows.append((us, evt.count // PROFILED, kind(evt.key), evt.key[:110]))
    rows.sort(reverse=True)
    return by, rows, count // PROFILED


def parse_args(argv, usage):
    """OUTDIR [--warm SECONDS] from @p argv (sys.argv[1:]); exits with @p usage otherwise."""
    warm = 0.0
    if len(argv) == 3 and argv[1] == "--warm":
        warm = float(argv[2])
    elif len(argv) != 1:
        sys.exit(usage)
    return argv[0], warm
