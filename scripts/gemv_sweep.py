"""Sweep the few-row (decode-sized) path against F.linear on a GPU, and print one line per shape.

    python scripts/gemv_sweep.py [--tokens 1,8,16] [--weights 4096x4096,14336x4096,...]
                                 [--variants s1,s1:u4,tc:ws_persistent,...] [--eager | --ncu]

For each weight [N, K] (bf16) and token count M, it times F.linear (cuBLAS), cudasteps.linear
(what the dispatcher runs: gemv_final_step, the split and unroll rules) and forced variants of
the mma step (`gemv:mma:s<splits>:u<unroll>`), as the benchmark's decode rows do: CUDA-graph
replays over input sets that rotate through more than twice the L2, interleaved with torch
(harness.time_many_graphed). Each figure is the time per call and the weight's bytes over that
time as a percentage of the measured copy bandwidth (read + write bytes of a large copy_), the
memory bound of a product that reads its weight once. --variants replaces the forced variants:
`s<n>`/`u<n>` fields of gemv:mma, or any ladder step by name (`tc:ws_persistent:s4`, for token
counts past the few-row path). --eager adds torch's and cudasteps' eager calls timed one by one
(harness.time_many, as the report's `mm` rows are), whose gap to the graph replays is the host's
part of a call.

--ncu runs each implementation once per shape (after a warm-up call) inside an NVTX push/pop
range named `prof`, with no timing, and prints the order, for ncu's counters, e.g.:

    ncu --nvtx --nvtx-include "prof/" --clock-control none --metrics gpu__time_duration.sum,\\
        dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\\
        lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active \\
        python scripts/gemv_sweep.py --ncu --tokens 16 --weights 14336x4096 \\
        --variants tc:ws_persistent:bt16,tc:ws_persistent:bt16:k2

It is how the rules in csrc/gemm/gemv/gemv.cu (split_k for one token, four chunks in flight for
up to 8 tokens and K <= 8192, the split over blocks) were chosen, and on Hopper which decode
products leave the few-row path for the skinny tiles (sm90/scheduler.cuh's decode_skinny_tiles:
`--tokens 2,8,12,16 --variants s1,tc:ws_persistent:bt16,tc:ws_persistent:bt16:k2`); rerun it after
changing them.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cudasteps  # noqa: E402
from cudasteps import gemm as G  # noqa: E402

from benchmarks.harness import Bench  # noqa: E402

DEFAULT_WEIGHTS = "4096x4096,14336x4096,4096x14336,1024x8192"
VARIANTS = ("s1", "s1:u4", "s2:u4", "u4", "")


def ladder(variant):
    """A ladder step by name (`tc:...`, `gemv:...`), else fields of gemv:mma (`s2:u4`; `` = its rules)."""
    name = variant if variant.startswith(("tc:", "gemv:")) else ":".join(filter(None, ("gemv:mma", variant)))
    return name, lambda x, w: G.run_ladder(name, x, w.t())


def run_for_ncu(args) -> int:
    """--ncu: each implementation once per shape in an NVTX range `prof` (after a warm-up call outside
    it, which also takes the dispatcher's one-time device queries), in the order printed."""
    for weight in args.weights.split(","):
        n, k = (int(v) for v in weight.split("x"))
        for m in (int(t) for t in args.tokens.split(",")):
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
            w = torch.randn(n, k, generator=g, device="cuda").to(torch.bfloat16)
            impls = [("torch", F.linear), ("cudasteps", cudasteps.linear)]
            impls += [ladder(v) for v in args.variants.split(",")]
            for impl, fn in impls:
                fn(x, w)
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push("prof")
                fn(x, w)
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()
                print(f"prof: {impl} {m} x ({n}, {k})", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", default="1,8,16", help="comma-separated token counts (M)")
    parser.add_argument("--weights", default=DEFAULT_WEIGHTS, help="comma-separated NxK weights")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated gemv:mma fields or ladder steps"
    )
    parser.add_argument("--eager", action="store_true", help="also time eager calls")
    parser.add_argument("--ncu", action="store_true", help="one call each in an NVTX range `prof`, untimed")
    args = parser.parse_args()
    if not (torch.cuda.is_available() and cudasteps.cuda_available()):
        sys.exit("gemv_sweep: needs a CUDA device and a build with the CUDA kernels")
    if args.ncu:
        return run_for_ncu(args)
    bench = Bench(device=torch.device("cuda"))
    bench.measure_ceilings()
    copy_gbps = bench.ceilings.copy_gbps
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {copy_gbps:.0f} GB/s (read + write)")
    for weight in args.weights.split(","):
        n, k = (int(v) for v in weight.split("x"))
        for m in (int(t) for t in args.tokens.split(",")):

            def make(seed, m=m, n=n, k=k):
                g = torch.Generator(device="cuda").manual_seed(seed)
                x = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
                w = torch.randn(n, k, generator=g, device="cuda").to(torch.bfloat16)
                return x, w

            inputs = bench.rotation(make, 2 * (m * k + n * k))
            impls = [("torch", F.linear), ("cudasteps", cudasteps.linear)]
            impls += [ladder(v) for v in args.variants.split(",")]
            times = bench.time_many_graphed(impls, inputs)
            if args.eager:
                eager = bench.time_many(impls[:2], inputs)
                times.update({f"{impl} eager": ms for impl, ms in eager.items()})
            cells = []
            for impl, ms in times.items():
                pct = 100.0 * (2 * n * k) / (ms * 1e6) / copy_gbps
                cells.append(f"{impl} {ms * 1e3:.1f} us {pct:.0f}%")
            print(f"{m:3d} x ({n}, {k}): " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
