"""Sweep scaled_mm's Hopper forms against torch._scaled_mm on a GPU, one line per shape.

    python scripts/fp8_sweep.py [--shapes 4096x4096x4096,8192x8192x2048,...]
                                [--variants fp8_ws,fp8_ws:st1,fp8_ws:st2,fp8_ws:st3,fp8_ws:st4]

For each M x N x K product (e4m3 operands, A row-major, B column-major as a weight's transpose,
per-tensor scales, bf16 output, no bias: the report's scaled_mm rows) it times torch._scaled_mm
(cuBLASLt, default accumulation), cudasteps.scaled_mm (what the dispatcher runs) and each ladder
form (cudasteps.gemm.run_scaled_mm_ladder: the report's SCALED_MM_LADDER and the sweep-only
SCALED_MM_SWEEP, e.g. fp8_ws:st<L>, the consumer warpgroups L k-tiles apart), as the benchmark
times them: interleaved in rounds over input sets that rotate through more than twice the L2.
Each figure is us per call and the ratio torch / it. Every form must give fp8_ws's bits (the
same sums in the same order); a line says where one does not.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cudasteps  # noqa: E402
from cudasteps import gemm as G  # noqa: E402

from benchmarks.harness import Bench  # noqa: E402

DEFAULT_SHAPES = "4096x4096x4096,8192x8192x8192,8192x8192x2048,8192x2048x8192,4096x11008x4096,4096x4096x11008"
E4M3 = torch.float8_e4m3fn


def inputs_for(m: int, n: int, k: int):
    """make(seed) -> (a, b, scale_a, scale_b): e4m3 operands of unit-range values and scales."""

    def make(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = (torch.rand(m, k, generator=g, device="cuda") * 2 - 1).to(E4M3)
        b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).to(E4M3).t()
        scale_a = torch.tensor(0.5, device="cuda")
        scale_b = torch.tensor(2.0**-6, device="cuda")
        return a, b, scale_a, scale_b

    return make


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES)
    parser.add_argument("--variants", default="fp8_ws," + ",".join(G.SCALED_MM_SWEEP))
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("fp8_sweep: needs a compute capability 9.0 GPU (the Hopper FP8 kernel)")
    bench = Bench(device=torch.device("cuda"))
    variants = [v for v in args.variants.split(",") if v]
    for text in args.shapes.split(","):
        m, n, k = (int(v) for v in text.split("x"))

        def torch_scaled_mm(a, b, sa, sb):
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        impls = [("torch", torch_scaled_mm), ("cudasteps", cudasteps.scaled_mm)]
        impls += [(v, lambda a, b, sa, sb, v=v: G.run_scaled_mm_ladder(v, a, b, sa, sb)) for v in variants]
        make = inputs_for(m, n, k)
        inputs = bench.rotation(make, m * k + k * n)
        first = inputs[0]
        base = G.run_scaled_mm_ladder("fp8_ws", *first)
        differ = [v for v, f in impls[1:] if not torch.equal(f(*first), base)]
        times = bench.time_many(impls, inputs)
        cells = "  ".join(f"{i} {ms * 1e3:.1f} ({times['torch'] / ms:.3f}x)" for i, ms in times.items())
        note = f"  NOT fp8_ws's bits: {', '.join(differ)}" if differ else ""
        print(f"{m}x{n}x{k}: {cells}{note}", flush=True)


if __name__ == "__main__":
    main()
