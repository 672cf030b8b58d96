"""Where the time of the e2e FFN training step goes: torch.profiler over a few steps of the
``ffn_step`` benchmark (benchmarks/bench_e2e.py), torch.nn and cudasteps.nn side by side, kernels
sorted by their total GPU time per step.

    python scripts/profile_e2e.py [--precision "bf16 autocast"|fp32] [--batch 8192] [--top 25]
    python scripts/profile_e2e.py --fp8     (the fp8 rows' models: torch.nn bf16, torchao, cudasteps)
    python scripts/profile_e2e.py --timeline

--timeline prints instead one step's kernels in launch order with their durations, and how long
the GPU sat idle between them: which product of the step is which kernel, side by side with
torch's (inside a step the GEMMs run on warm operands and a cooler GPU, about 20% faster than in
the benchmark's GEMM rows on an H100, so a step is where to compare them), and whether the host
keeps the GPU fed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import bench_e2e as E  # noqa: E402  (the benchmark's own models and step)


def print_timeline(impl: str, step, args: tuple) -> None:
    """One profiled step's kernels (and memsets/copies) in launch order: start offset, duration, own
    time (the duration less its overlap with the kernels before it: a programmatic dependent launch
    starts a kernel under the tail of the one before, where it waits; E.own_durations) and the gap
    before each, then the step's span, busy time and idle time."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")), key=lambda e: e["ts"]
    )
    if not kernels:
        print(f"\n== {impl}: no kernels recorded ==")
        return
    t0, end, busy = kernels[0]["ts"], kernels[0]["ts"], 0.0
    own = E.own_durations([(k["ts"], k["dur"]) for k in kernels])
    print(f"\n== {impl}: one step, kernels in launch order (us: start, duration, own, gap before) ==")
    for k, own_us in zip(kernels, own):
        gap = max(0.0, k["ts"] - end)
        print(f"{k['ts'] - t0:9.1f} {k['dur']:8.1f} {own_us:8.1f} {gap:7.1f}  {k['name'][:110]}")
        end = max(end, k["ts"] + k["dur"])
        busy += own_us
    span = end - t0
    print(f"span {span / 1e3:.3f} ms, kernels {busy / 1e3:.3f} ms, idle {(span - busy) / 1e3:.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="bf16 autocast", choices=sorted(E._PRECISIONS))
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--h", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--fp8", action="store_true", help="the FP8 step's models (bf16 autocast)")
    ap.add_argument("--timeline", action="store_true", help="one step's kernels in launch order")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("profile_e2e: needs a CUDA device")
    dev = torch.device("cuda")
    amp_dtype = torch.bfloat16 if args.fp8 else E._PRECISIONS[args.precision]
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(args.batch, args.d, device=dev).requires_grad_(True)
    target = torch.randn(args.batch, args.d, device=dev)
    models = E.fp8_models(dev, args.d, args.h) if args.fp8 else E._models(dev, args.d, args.h)
    for impl, model in models.items():
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        step = E._train_step(model, opt, dev, amp_dtype)
        for _ in range(E._WARMUP_STEPS):
            step(x, target)
        torch.cuda.synchronize()
        if args.timeline:
            print_timeline(impl, step, (x, target))
            continue
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                step(x, target)
            torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if e.device_time_total > 0]
        events.sort(key=lambda e: e.device_time_total, reverse=True)
        total = sum(e.device_time_total for e in events) / args.steps / 1000
        print(f"\n== {impl}, {'fp8' if args.fp8 else args.precision}: {total:.3f} ms of kernels per step ==")
        for e in events[: args.top]:
            per_step = e.device_time_total / args.steps / 1000
            print(f"{per_step:8.3f} ms  {e.count // args.steps:3d}x  {e.key[:110]}")


if __name__ == "__main__":
    main()
