"""ncu's view of the tensor-core GEMMs at the FFN shapes, ours next to cuBLAS's: one warm-up call of
each, then the profiled calls between cudaProfilerStart/Stop.

    ncu --profile-from-start off --clock-control none --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        python scripts/profile_tc.py [--shapes ffn|square] [--dtype bf16|fp16]

Add `--set full --import-source yes` for per-line stall samples (the build passes -lineinfo).
`--step tc:<step>` profiles that ladder step in place of mm's own choice.
"""

from __future__ import annotations

import argparse

import cudasteps
import torch

# (label, M, N, K, A transposed, B transposed): the FFN's K = 2048 GEMMs and one K = 8192 one.
SHAPES = {
    "ffn": [
        ("x @ W1^T", 8192, 8192, 2048, False, True),
        ("g @ W2", 8192, 8192, 2048, False, False),
        ("h @ W2^T", 8192, 2048, 8192, False, True),
    ],
    "square": [("4096^3", 4096, 4096, 4096, False, False)],
}


def operands(m, n, k, ta, tb, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (
        torch.randn(k, m, generator=g, device="cuda").to(dtype).t()
        if ta
        else torch.randn(m, k, generator=g, device="cuda").to(dtype)
    )
    b = (
        torch.randn(n, k, generator=g, device="cuda").to(dtype).t()
        if tb
        else torch.randn(k, n, generator=g, device="cuda").to(dtype)
    )
    return a, b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="ffn", choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--step", default="", help="a tensor-core ladder step (default: what mm runs)")
    args = ap.parse_args()
    ours = (lambda a, b: cudasteps.ladder.run("gemm", args.step, a, b)) if args.step else cudasteps.mm
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    cases = [(label, operands(m, n, k, ta, tb, dtype)) for label, m, n, k, ta, tb in SHAPES[args.shapes]]
    for _, (a, b) in cases:  # warm-up: TMA descriptors, occupancy queries, cuBLAS heuristics
        torch.mm(a, b)
        ours(a, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _, (a, b) in cases:
        torch.mm(a, b)
        ours(a, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled:", ", ".join(label for label, _ in cases))


if __name__ == "__main__":
    main()
