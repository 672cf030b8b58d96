"""Tensor-core GEMM sweep: every tc ladder step (and every cp.async config) on a grid of shapes,
dtypes and layouts, with its error against a float64 reference and its TFLOP/s next to torch.mm's.

One call on the GPU checks and times everything the dispatcher could pick, so a tuning round costs
one build. Prints a table; --json writes the rows.

    python scripts/tc_sweep.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from cudasteps import gemm as G

SHAPES = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 8192, 2048),
    (8192, 2048, 8192),
    (2048, 8192, 8192),
    (4097, 4095, 4099),
    (128, 4096, 4096),
    (16, 4096, 4096),
]
QUICK_SHAPES = [(4096, 4096, 4096), (4097, 4095, 4099), (128, 4096, 4096)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}


def cuda_ms(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def rel_err(out, ref) -> float:
    o = out.double()
    if torch.isnan(o).any():
        return float("inf")
    return ((o - ref).norm() / ref.norm()).item()


def sweep_case(steps, name, dtype, m, n, k, layout, rows) -> None:
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(dtype)
    b = torch.randn(k, n, device="cuda", generator=g).to(dtype)
    if layout == "TN":
        a = a.t().contiguous().t()
    if layout == "NT":
        b = b.t().contiguous().t()
    ref = a.double() @ b.double()
    flops = 2 * m * n * k
    torch.backends.cuda.matmul.allow_tf32 = dtype == torch.float32
    t_ms = cuda_ms(lambda: torch.mm(a, b))
    for v in steps:
        if v in G.TC_HOPPER_NN_STEPS and (dtype != torch.bfloat16 or layout != "NN"):
            continue  # built for bf16 NN alone: other dtypes are refused, other layouts transposed
        try:
            err = rel_err(G.run_ladder(v, a, b), ref)
            ms = cuda_ms(lambda v=v: G.run_ladder(v, a, b))
        except RuntimeError as exc:  # report and go on: one broken step must not hide the rest
            print(f"{v:28s} {name:5s} {layout:6s} {m}x{n}x{k}: ERROR {str(exc).splitlines()[0]}")
            continue
        row = dict(
            variant=v,
            dtype=name,
            layout=layout,
            shape=[m, n, k],
            err=err,
            tflops=flops / ms / 1e9,
            torch_tflops=flops / t_ms / 1e9,
        )
        rows.append(row)
        shape = f"{m}x{n}x{k}"
        print(
            f"{v:28s} {name:5s} {layout:6s} {shape:18s} {err:9.2e} {row['tflops']:8.1f} "
            f"{row['torch_tflops']:8.1f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--dtypes", default="bf16,fp16,tf32")
    ap.add_argument("--steps", default="", help="comma-separated tc ladder steps (default: all)")
    args = ap.parse_args()
    hopper = torch.cuda.get_device_capability() == (9, 0)
    steps = [v for v in G.TC_LADDER if hopper or v not in G.TC_HOPPER_STEPS]
    if args.steps:
        steps = [v for v in steps if v in args.steps.split(",")]
    rows = []
    print(f"cudasteps tensor-core sweep on {torch.cuda.get_device_name()}")
    header = ["variant".ljust(28), "dtype", "layout", "M x N x K".ljust(18), "rel err".rjust(9)]
    print(" ".join(header + ["TFLOP/s".rjust(8), "torch".rjust(8)]))
    for name in args.dtypes.split(","):
        for m, n, k in QUICK_SHAPES if args.quick else SHAPES:
            for layout in ("NN", "NT", "TN"):
                sweep_case(steps, name, DTYPES[name], m, n, k, layout, rows)
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
