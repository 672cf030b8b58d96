"""Sweep the Hopper persistent kernel's tile shapes against torch.mm on a GPU, one line per shape.

    python scripts/tile_sweep.py [--shapes 3072x1024x8192:TN,1024x4096x1024:NT,...]
                                 [--variants bn64,bn128,bn256,bm192] [--dtype bf16|fp16|tf32]
                                 [--out-dtype same|float32] [--graph]

For each M x N x K product (`:NN`, `:NT` as linear's x @ weight.t(), `:TN` as a weight gradient
g.t() @ x, `:TT` both operands transposed views), it times torch.mm (cuBLAS), cudasteps.mm (what
the dispatcher runs: the tile width and rows that sm90/scheduler.cuh's persistent_bn and
persistent_bm pick) and tc:ws_persistent with its tiles forced (`tc:ws_persistent:<variant>`:
bn64, bn128, bn256 for 128 x 64/128/256 tiles, bm192 for 192 x 128; any of the ladder's tuning
fields, e.g. `bn64:ts0`; or a whole ladder name such as `tc:ws_multicast:s2`), as the
benchmark's `mm` rows time them: interleaved with torch (harness.time_many), over input sets that
rotate through more than twice the L2. Each figure is us per call and the ratio torch / it; the
last column is the largest error of any of them against the float64 product, relative to its
largest magnitude.

It is how kHalfTileCost, kHalfMaxKRanges and kTallTileCost (sm90/scheduler.cuh) were chosen; rerun
it after changing them. --warm times the operands warm in L2, as a training step meets them (its
GEMMs ran 16-23% faster there than in the report's rows, H100). With --graph, how skinny_tiles'
tiles were (variants bt32, bt64:k2, bt64:c2, ...). --dtype tf32 runs float32 operands with torch's
TF32 switch on for both sides: with variants such as tc:ws_tf32_rs against what tc:final picks for
an MN-major operand (hopper.cu's tc_hopper_tf32_rs_wanted), e.g. --shapes
64x4096x4096:NN,4096x64x4096:TT --variants tc:ws_tf32_rs.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cudasteps  # noqa: E402
from cudasteps import gemm as G  # noqa: E402

from benchmarks.harness import Bench  # noqa: E402

DEFAULT_SHAPES = (
    "512x512x32768:TN,1024x1024x8192:TN,3072x1024x8192:TN,2048x1024x8192:TN,4096x1024x32768:TN,"
    "6144x512x8192:TN,3072x1024x8192:NT,1024x1024x4096:NT,128x4096x4096:NT,256x4096x4096:NT,"
    "1536x2048x4096:NT,128x8192x8192:NT,8192x128x8192:NT,1000x1000x1000:NN"
)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}


def parse_shape(text: str) -> tuple[int, int, int, str]:
    dims, _, layout = text.partition(":")
    m, n, k = (int(v) for v in dims.split("x"))
    layout = layout or "NN"
    if layout not in ("NN", "NT", "TN", "TT"):
        raise SystemExit(f"tile_sweep: layout must be NN, NT, TN or TT, got '{layout}' in '{text}'")
    return m, n, k, layout


def inputs_for(m, n, k, layout, dtype):
    """make(seed) -> (a, b) in the layout: TN's a is a transposed view, NT's b, TT's both."""

    def make(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)

        def randn(rows, cols, transposed):  # values of a rows x cols operand, stored transposed
            shape = (cols, rows) if transposed else (rows, cols)
            t = torch.randn(shape, generator=g, device="cuda", dtype=dtype)
            return t.t() if transposed else t

        return (randn(m, k, layout in ("TN", "TT")) / k**0.5, randn(k, n, layout in ("NT", "TT")))

    return make


def ladder_variant(v: str) -> str:
    """A --variants entry as run_ladder's name: tuning fields of tc:ws_persistent, or a whole name."""
    return v if v.startswith("tc:") else f"tc:ws_persistent:{v}"


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES)
    parser.add_argument("--variants", default="bn64,bn128,bn256,bm192")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument(
        "--graph",
        action="store_true",
        help="time CUDA-graph replays (harness.time_many_graphed, as the report's decode and "
        "few-row rows) instead of eager calls: for few-row shapes, whose eager calls are host time",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="one input set for every call, so the operands stay in L2 as far as they fit (as "
        "inside a training step, where the op before has just written them), instead of sets "
        "rotated out of it (the report's rows)",
    )
    parser.add_argument(
        "--out-dtype",
        choices=["same", "float32"],
        default="same",
        help="float32: time mm.dtype's float32 output of the 16-bit operands (cudasteps.mm with "
        "out_dtype, whose tiles the launcher picks; ladder variants cannot take it) against "
        "torch.mm(out_dtype=float32)",
    )
    args = parser.parse_args()
    shapes = [parse_shape(text) for text in args.shapes.split(",")]
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("tile_sweep: needs a compute capability 9.0 GPU (the Hopper kernels)")
    dtype = DTYPES[args.dtype]
    # float32 operands as TF32 on both sides (cudasteps.mm follows torch's switch).
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    bench = Bench(device=torch.device("cuda"))
    variants = [v for v in args.variants.split(",") if v]
    for m, n, k, layout in shapes:
        if args.out_dtype == "float32":
            impls = [
                ("torch", lambda a, b: torch.mm(a, b, out_dtype=torch.float32)),
                ("cudasteps", lambda a, b: cudasteps.mm(a, b, out_dtype=torch.float32)),
            ]
        else:
            impls = [("torch", torch.mm), ("cudasteps", cudasteps.mm)]
            impls += [(v, lambda a, b, v=v: G.run_ladder(ladder_variant(v), a, b)) for v in variants]
        make = inputs_for(m, n, k, layout, dtype)
        inputs = [make(0)] if args.warm else bench.rotation(make, dtype.itemsize * (m * k + k * n))
        a, b = inputs[0]
        ref = a.double() @ b.double()
        scale = ref.abs().max().item()
        errs, refused = [], {}
        for impl, f in impls:
            try:
                errs.append((f(a, b).double() - ref).abs().max().item() / scale)
            except RuntimeError as e:  # a variant that does not take this layout (its message says)
                refused[impl] = str(e).splitlines()[0][:80]
        impls = [(i, f) for i, f in impls if i not in refused]
        err = max(errs)
        times = (bench.time_many_graphed if args.graph else bench.time_many)(impls, inputs)
        cells = "  ".join(
            [f"{i} {ms * 1e3:.1f} ({times['torch'] / ms:.2f}x)" for i, ms in times.items()]
            + [f"{i} n/a ({why})" for i, why in refused.items()]
        )
        out = " -> float32" if args.out_dtype == "float32" else ""
        print(f"{m}x{n}x{k} {layout} {args.dtype}{out}: {cells}  max err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
