"""float32 SGEMM sweep: every config of the table (``cfg:<name>``, both kernels), and split-K
factors on shapes whose tiles leave SMs idle (a partial-sum pass, ``:s<S>``; for the ring configs
also the in-kernel fix-up, ``:sk<S>``), over a grid of shapes and layouts, each checked against a
float64 reference and timed next to torch.mm (TF32 off) and the dispatcher (cudasteps.mm), in one
process.

    python scripts/sgemm_sweep.py [--quick | --shapes 1024x1024x8192:TN,...] [--json out.json] [--emit]

Timing is the benchmark report's (benchmarks/harness.py): calls back to back over a rotation of
input sets larger than L2, every candidate of a shape interleaved with torch.mm in rounds, median
of CUDA-event times. So a 60-microsecond case is chosen under the conditions it is reported in (a
timer that synchronizes after every call adds the launch gap, which is most of the difference
between candidates there).

--emit writes the dispatcher's table, csrc/gemm/sgemm/table.inc (per shape and layout the fastest
correct config and split count; choose_config in csrc/gemm/sgemm/dispatch.cpp reads it at build
time, so the choice is committed and the same in every run), and the sweep's rows beside it in
csrc/gemm/sgemm/sweep.json. Rebuild the extension after --emit.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import sys

import cudasteps
import torch
from cudasteps import gemm as G

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.harness import Bench  # noqa: E402  (the report's timer)

TABLE = ROOT / "csrc" / "gemm" / "sgemm" / "table.inc"
SWEEP_JSON = ROOT / "csrc" / "gemm" / "sgemm" / "sweep.json"

# (label, M, N, K, layout): layout "NN" row-major A and B; "NT": B = W.t() (linear's x @ W^T);
# "TN": A = g.t() (a weight gradient g^T @ x).
SHAPES = [
    ("square", 1024, 1024, 1024, "NN"),
    ("square", 2048, 2048, 2048, "NN"),
    ("square", 4096, 4096, 4096, "NN"),
    ("square", 8192, 8192, 8192, "NN"),
    ("odd", 4097, 4095, 4099, "NN"),
    ("skinny M", 128, 8192, 8192, "NN"),
    ("skinny N", 8192, 128, 8192, "NN"),
    ("short K", 8192, 8192, 128, "NN"),
    ("square NT", 4096, 4096, 4096, "NT"),
    ("square TN", 4096, 4096, 4096, "TN"),
    ("linear x @ W^T", 16384, 4096, 4096, "NT"),
    # The FFN 2048 -> 8192 -> 2048 on 8192 rows: forward and backward GEMMs as autograd runs them.
    ("FFN fwd x @ W1^T", 8192, 8192, 2048, "NT"),
    ("FFN fwd h @ W2^T", 8192, 2048, 8192, "NT"),
    ("FFN bwd g @ W2", 8192, 8192, 2048, "NN"),
    ("FFN bwd g^T @ h", 2048, 8192, 8192, "TN"),
    ("FFN bwd g1 @ W1", 8192, 2048, 8192, "NN"),
    ("FFN bwd g1^T @ x", 8192, 2048, 8192, "TN"),
]
QUICK = [s for s in SHAPES if s[1:4] in ((4096, 4096, 4096), (128, 8192, 8192), (16384, 4096, 4096))]
SPLITS = (2, 3, 4, 6, 8)
# A config is accepted only with a relative error (sampled rows vs float64) below this, or below
# twice cuBLAS's on the same inputs (fp32 accumulation error grows like sqrt(K): ~5e-6 at K = 8192).
TOL = 1e-5


def accepted(err, torch_err) -> bool:
    return err < max(TOL, 2 * torch_err)


def make_inputs(m, n, k, lay):
    """seed -> (a, b): random operands in the layout (T = a column-major view)."""

    def make(seed):
        g = torch.Generator(device="cuda").manual_seed(m * 31 + n * 7 + k + 1000003 * seed)
        a = (
            torch.randn(k, m, device="cuda", generator=g).t()
            if lay[0] == "T"
            else torch.randn(m, k, device="cuda", generator=g)
        )
        b = (
            torch.randn(n, k, device="cuda", generator=g).t()
            if lay[1] == "T"
            else torch.randn(k, n, device="cuda", generator=g)
        )
        return a, b

    return make


def sampled_err(out, a, b, rows) -> float:
    ref = a[rows].double() @ b.double()
    o = out[rows].double()
    if not torch.isfinite(o).all():
        return float("inf")
    return ((o - ref).norm() / ref.norm()).item()


def candidates(m, n, k):
    """(variant, config, splits, fixup): every config as mm would run it (a ring config with the
    stream-K tail where its rule applies), and split-K where its tiles leave SMs idle: by a
    partial-sum pass (:s<S>), and for the ring configs by the in-kernel fix-up (:sk<S>, as long
    as the blocks fit the fix-up's limit of 8 per SM)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = []
    for c in G.CONFIGS:
        out.append((f"cfg:{c}", c, 1, False))
        tile = next(part for part in c.split("_") if part.count("x") == 2)  # BMxBNxBK
        bm, bn = (int(x) for x in tile.split("x")[:2])
        tiles = -(-m // bm) * -(-n // bn)
        if tiles < sms and k >= 1024:
            for s in SPLITS:
                if k // s < 256:
                    continue
                out.append((f"cfg:{c}:s{s}", c, s, False))
                if c in G.RING_CONFIGS and tiles * s <= 8 * sms:
                    out.append((f"cfg:{c}:sk{s}", c, s, True))
    return out


def sweep_shape(bench, label, m, n, k, lay, rows_out):
    flops = 2 * m * n * k
    inputs = bench.rotation(make_inputs(m, n, k, lay), 4 * (m * k + k * n))
    a, b = inputs[0]
    rows = torch.randperm(m, generator=torch.Generator().manual_seed(0))[:64].to("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch_err = sampled_err(torch.mm(a, b), a, b, rows)
    disp_err = sampled_err(cudasteps.mm(a, b), a, b, rows)
    fns = [("torch.mm", torch.mm), ("cudasteps.mm", cudasteps.mm)]
    errs = {}
    variants = candidates(m, n, k)
    for variant, *_ in variants:
        fn = functools.partial(G.run_ladder, variant)
        try:
            errs[variant] = sampled_err(fn(a, b), a, b, rows)
        except RuntimeError as exc:  # report and go on: one broken config must not hide the rest
            print(f"    {variant:44s} ERROR {str(exc).splitlines()[0]}")
            continue
        fns.append((variant, fn))
    ms = bench.time_many(fns, inputs)
    torch_ms, disp_ms = ms["torch.mm"], ms["cudasteps.mm"]
    shape = f"{m}x{n}x{k}"
    print(
        f"{label:18s} {lay} {shape:16s} torch.mm {flops / torch_ms / 1e9:7.1f} TFLOP/s "
        f"(err {torch_err:.2e})  "
        f"cudasteps.mm {flops / disp_ms / 1e9:7.1f} ({torch_ms / disp_ms:.2f}x, err {disp_err:.2e})",
        flush=True,
    )
    for variant, config, splits, fixup in variants:
        if variant not in errs:
            continue
        err = errs[variant]
        rows_out.append(
            dict(
                label=label,
                shape=[m, n, k],
                layout=lay,
                variant=variant,
                config=config,
                splits=splits,
                fixup=fixup,
                ms=ms[variant],
                tflops=flops / ms[variant] / 1e9,
                err=err,
                torch_ms=torch_ms,
                torch_err=torch_err,
                dispatcher_ms=disp_ms,
            )
        )
        flag = "" if accepted(err, torch_err) else "  <-- WRONG"
        print(
            f"    {variant:44s} {ms[variant]:8.4f} ms {flops / ms[variant] / 1e9:7.1f} TFLOP/s "
            f"{torch_ms / ms[variant]:5.2f}x  err {err:.2e}{flag}",
            flush=True,
        )


def best_per_shape(rows):
    """(M, N, K, layout) -> the fastest correct row; ties go to the earlier config (table order).
    The ``_rowfma`` twins are timed (the sweep shows what the FFMA order buys per shape) but never
    chosen: where their kernels are the same as the table config's, the choice would be noise (and
    they are built for row-major operands alone: other layouts time a copy into it too).
    For the same reason a ``_swapnn`` config is chosen for NN shapes only: in other layouts it runs
    its base config's kernels."""
    best = {}
    for r in rows:
        if not accepted(r["err"], r["torch_err"]) or r["config"].endswith("_rowfma"):
            continue
        if r["config"].endswith("_swapnn") and r["layout"] != "NN":
            continue
        key = (*r["shape"], r["layout"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    return best


def emit(rows, device_name, table=TABLE, sweep_json=SWEEP_JSON):
    best = best_per_shape(rows)
    lines = [
        "// The float32 SGEMM dispatch table read by choose_config (sgemm/dispatch.cpp): per measured",
        "// shape and layout the fastest config and split-K factor. Written by",
        "// `python scripts/sgemm_sweep.py --emit`",
        "// from a measured sweep (numbers beside it in csrc/gemm/sgemm/sweep.json); the choice is",
        "// committed, so it is the same in every run.",
        f"// Measured on: {device_name}, torch {torch.__version__}, TF32 off.",
        "//",
        "// {M, N, K, layout (A then B, N = row-major, T = column-major), config, splits, fixup (the splits",
        "// added up in the GEMM kernel: split-K with the in-kernel fix-up)}",
    ]
    for (m, n, k, lay), r in best.items():
        fixup = "true" if r.get("fixup") else "false"
        lines.append(f'{{{m}, {n}, {k}, "{lay}", "{r["config"]}", {r["splits"]}, {fixup}}},')
        print(
            f"table: {m}x{n}x{k} {lay}: {r['variant']} {r['tflops']:.1f} TFLOP/s "
            f"({r['torch_ms'] / r['ms']:.2f}x torch.mm)"
        )
    table.write_text("\n".join(lines) + "\n")
    sweep_json.write_text(
        json.dumps(dict(device=device_name, torch=torch.__version__, rows=rows), indent=1) + "\n"
    )
    print(f"wrote {table} and {sweep_json}; rebuild the extension to use the new table")


def parse_shape(text: str) -> tuple[str, int, int, int, str]:
    """'MxNxK:LAY' -> a SHAPES entry labelled "asked"."""
    dims, _, lay = text.partition(":")
    lay = lay or "NN"
    if lay not in ("NN", "NT", "TN"):
        raise SystemExit(f"sgemm_sweep: layout must be NN, NT or TN, got '{lay}' in '{text}'")
    m, n, k = (int(v) for v in dims.split("x"))
    return ("asked", m, n, k, lay)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="3 shapes only (no --emit)")
    ap.add_argument(
        "--shapes",
        help="sweep these instead of the grid (no --emit): MxNxK:<NN|NT|TN>, comma-separated, "
        "e.g. 1024x1024x8192:TN for a weight gradient",
    )
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument(
        "--emit", action="store_true", help="write csrc/gemm/sgemm/table.inc and sgemm_sweep.json"
    )
    args = ap.parse_args()
    if args.emit and (args.quick or args.shapes):
        ap.error("--emit needs the full grid")
    shapes = QUICK if args.quick else SHAPES
    if args.shapes:
        shapes = [parse_shape(text) for text in args.shapes.split(",")]
    name = torch.cuda.get_device_name()
    print(
        f"cudasteps SGEMM sweep on {name} ({torch.cuda.get_device_properties(0).multi_processor_count} SMs), "
        "TF32 off"
    )
    bench = Bench(torch.device("cuda"))
    rows = []
    for label, m, n, k, lay in shapes:
        sweep_shape(bench, label, m, n, k, lay, rows)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.emit:
        emit(rows, name)


if __name__ == "__main__":
    main()
