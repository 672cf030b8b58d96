"""Run some of the benchmark suite's case functions, not whole families: the same harness and
timing (interleaved with torch), printed as a table, optionally saved as JSON. For a measurement
round on the GPU that needs a few sections of a family, not the whole report.

    python scripts/bench_cases.py gemm.run_linear_act e2e.run [--quick] [--sections] [--json out.json]

Each argument is <module>.<function> with <module> a benchmarks/bench_<module>.py and <function>
one taking the harness's Bench (e.g. gemm.run_weight_gradients, gemm.run_decode, e2e.run).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.harness import Bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="<module>.<function>, e.g. gemm.run_linear_act")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--sections", action="store_true", help="also print the cases' report sections")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # as the report: TF32 off unless a case sets it
    bench = Bench(device=device, quick=args.quick)
    for spec in args.cases:
        module, _, function = spec.partition(".")
        bench.family = module
        getattr(importlib.import_module(f"benchmarks.bench_{module}"), function)(bench)
    rows = [dataclasses.asdict(r) for r in bench.records]
    base = {}
    for r in rows:
        if r["impl"] == "torch":
            base[(r["op"], r["case"])] = r["ms"]
    print(f"{'op':12s} {'case':60s} {'impl':28s} {'ms':>9s} {'vs torch':>8s} {'TFLOP/s':>8s}")
    for r in rows:
        ref = base.get((r["op"], r["case"]))
        ratio = f"{ref / r['ms']:.2f}x" if ref else ""
        tflops = f"{r['tflops']:.1f}" if r["tflops"] else ""
        print(
            f"{r['op']:12s} {r['case'][:60]:60s} {r['impl'][:28]:28s} {r['ms']:9.4f} {ratio:>8s} {tflops:>8s}"
        )
    if args.sections:
        for family, sections in bench.sections.items():
            for title, text in sections:
                print(f"\n### {family}: {title}\n\n{text.strip()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
