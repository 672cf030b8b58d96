"""Where the time of the e2e FFN training step goes: torch.profiler over a few steps of the
``ffn_step`` benchmark (benchmarks/bench_e2e.py), torch.nn and cudasteps.nn side by side, kernels
sorted by their total GPU time per step.

    python scripts/profile_e2e.py [--precision "bf16 autocast"|fp32] [--batch 8192] [--top 25]
    python scripts/profile_e2e.py --fp8     (the fp8 rows' models: torch.nn bf16, torchao, cudasteps)
    python scripts/profile_e2e.py --timeline

    python scripts/profile_e2e.py --host --example   (examples/train_ddp.py's default MLP, one GPU)

--host prints instead where each step's host time goes: the wall time of a step, the CUDA runtime
calls it makes (kernel launches, memsets, allocations) and, per top-level op (the forward's ops,
the autograd engine's backward functions, the optimizer), its host time and the launches under
it. The example's small MLP (--example: 32 -> 256 -> 256 -> 10, 128 rows, cross-entropy, SGD with
momentum, as the two-GPU DDP rows train it, without DDP) is bound by that time, not the GPU's.

--timeline prints instead one step's kernels in launch order with their durations, and how long
the GPU sat idle between them: which product of the step is which kernel, side by side with
torch's (inside a step the GEMMs run on warm operands and a cooler GPU, about 20% faster than in
the benchmark's GEMM rows on an H100, so a step is where to compare them), and whether the host
keeps the GPU fed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
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


# CUDA runtime and driver calls as torch.profiler names them: kernel launches, then the others a
# step's host time may spend on.
_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
_RUNTIME_PREFIX = "cu"  # cuda* (runtime) and cu* (driver); cudasteps' ops are excluded by name


def print_host(impl: str, step, args: tuple, steps: int, top: int) -> None:
    """The host side of `steps` steps, per step: wall time, runtime calls by name, and the
    top-level ops (no profiled parent on their thread) by host time, with the launches below each."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step(*args)
    sync()
    wall_us = (time.perf_counter() - start) * 1e6 / steps
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(*args)
        sync()
    runtime = collections.Counter()
    ops = collections.defaultdict(lambda: [0.0, 0, 0])  # root op: host us, calls, launches
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue
        root = e
        while root.cpu_parent is not None:
            root = root.cpu_parent
        if e.cpu_parent is None:
            ops[e.name][0] += e.cpu_time_total
            ops[e.name][1] += 1
        if e.name.startswith(_RUNTIME_PREFIX) and not e.name.startswith("cudasteps"):
            runtime[e.name] += 1
            if e.name in _LAUNCHES:
                ops[root.name][2] += 1
    launches = sum(runtime[n] for n in _LAUNCHES)
    print(f"\n== {impl}: {wall_us:.1f} us of wall time per step, {launches / steps:.1f} launches ==")
    print("runtime calls per step: " + ", ".join(f"{n} {c / steps:.1f}" for n, c in runtime.most_common()))
    print(f"{'host us':>9s} {'calls':>6s} {'launches':>8s}  top-level op (per step)")
    for name, (us, calls, n) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{us / steps:9.1f} {calls / steps:6.1f} {n / steps:8.1f}  {name[:100]}")


def _example_steps(dev: torch.device) -> dict:
    """examples/train_ddp.py's default model and step (without DDP), per impl: (step, args)."""
    import train_ddp  # examples/ is on the path through bench_e2e

    x = torch.randn(128, 32, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)
    steps = {}
    for impl in ("torch", "cudasteps"):
        model = train_ddp.build_model(impl, [32, 256, 256, 10]).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(xb, yb, model=model, opt=opt):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(xb), yb).backward()
            opt.step()

        steps[impl] = (step, (x, y))
    return steps


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
    ap.add_argument("--host", action="store_true", help="each step's host time, op by op")
    ap.add_argument("--example", action="store_true", help="with --host: train_ddp.py's default MLP")
    args = ap.parse_args()
    if args.host and args.example:
        # The one mode that also runs on the CPU (its op-by-op host time, without launches).
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        for impl, (step, step_args) in _example_steps(dev).items():
            for _ in range(E._WARMUP_STEPS):
                step(*step_args)
            print_host(impl, step, step_args, args.steps, args.top)
        return
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
        if args.host:
            print_host(impl, step, (x, target), args.steps, args.top)
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
