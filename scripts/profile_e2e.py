"""Where the time of the e2e FFN training step goes: torch.profiler over a few steps of the
``ffn_step`` benchmark (benchmarks/bench_e2e.py), torch.nn and cudasteps.nn side by side, kernels
sorted by their total GPU time per step.

    python scripts/profile_e2e.py [--precision "bf16 autocast"|fp32] [--batch 8192] [--top 25]
    python scripts/profile_e2e.py --fp8     (the fp8 rows' models: torch.nn bf16, torchao, cudasteps)
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import bench_e2e as E  # noqa: E402  (the benchmark's own models and step)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="bf16 autocast", choices=sorted(E._PRECISIONS))
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--h", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--fp8", action="store_true", help="the FP8 step's models (bf16 autocast)")
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
