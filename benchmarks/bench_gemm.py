"""gemm: cudasteps.mm / linear against torch.mm / F.linear (fp32, TF32 off), the ladder, the configs.

flops = 2 * M * N * K for every case. The shape grid is the issue's (#5); every ladder step runs at
4096^3 (the slow naive steps at 2048^3), and every entry of the config table (``cfg:<name>``) at
4096^3 and on the skinny shapes, so one run shows which config wins where.
"""

import cudasteps
import torch
import torch.nn.functional as F
from cudasteps import gemm as G

F32 = torch.float32

# (M, N, K)
GRID = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4097, 4095, 4099),
    (1000, 1000, 1000),
    (128, 8192, 8192),
    (8192, 128, 8192),
    (8192, 8192, 128),
]
SKINNY = [(128, 8192, 8192), (8192, 128, 8192), (8192, 8192, 128), (1024, 1024, 1024)]
SLOW_LADDER = ("naive", "coalesced", "smem_tile", "blocktile_1d")


def _mm_inputs(m, n, k, device):
    def make(seed):
        g = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn(m, k, generator=g, device=device, dtype=F32)
        b = torch.randn(k, n, generator=g, device=device, dtype=F32)
        return (a, b)

    return make


def _case(m, n, k):
    return f"{m}x{n}x{k} fp32"


def _mm(bench, m, n, k, impls):
    inputs = bench.rotation(_mm_inputs(m, n, k, bench.device), 4 * (m * k + k * n))
    for impl, fn in impls:
        ms = bench.time(fn, inputs)
        bench.record(
            op="mm", case=_case(m, n, k), impl=impl, dtype=F32, shape=[m, n, k], ms=ms, flops=2 * m * n * k
        )


def run(bench):
    torch.backends.cuda.matmul.allow_tf32 = False
    if not bench.is_cuda:
        for m, n, k in [(256, 256, 256), (512, 512, 512)]:
            _mm(bench, m, n, k, [("torch", torch.mm), ("cudasteps", cudasteps.mm)])
        return

    grid = GRID[:3] + GRID[6:] if bench.quick else GRID
    for m, n, k in grid:
        _mm(bench, m, n, k, [("torch", torch.mm), ("cudasteps", cudasteps.mm)])

    # linear: (32, 512, 4096) x (4096, 4096)^T + bias, against F.linear.
    bsz, seq, k_in, n_out = 32, 512, 4096, 4096

    def make_linear(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        x = torch.randn(bsz, seq, k_in, generator=g, device=bench.device, dtype=F32)
        w = torch.randn(n_out, k_in, generator=g, device=bench.device, dtype=F32)
        b = torch.randn(n_out, generator=g, device=bench.device, dtype=F32)
        return (x, w, b)

    inputs = bench.rotation(make_linear, 4 * (bsz * seq * k_in + n_out * k_in + n_out))
    case = f"linear ({bsz}, {seq}, {k_in}) x ({n_out}, {k_in}) + bias fp32"
    m = bsz * seq
    for impl, fn in (("torch", F.linear), ("cudasteps", cudasteps.linear)):
        ms = bench.time(fn, inputs)
        bench.record(
            op="linear",
            case=case,
            impl=impl,
            dtype=F32,
            shape=[m, n_out, k_in],
            ms=ms,
            flops=2 * m * n_out * k_in,
        )

    # The ladder: naive steps at 2048^3 (each is seconds at 4096^3), the rest at 4096^3.
    for size, variants in ((2048, G.LADDER), (4096, tuple(v for v in G.LADDER if v not in SLOW_LADDER))):
        if bench.quick and size == 4096:
            variants = variants[-3:]
        impls = [("torch", torch.mm)] + [
            (f"ladder:{v}", lambda a, b, v=v: G.run_ladder(v, a, b)) for v in variants
        ]
        _mm(bench, size, size, size, impls)

    # Every config of the final kernel, at 4096^3 and on the skinny shapes (sweep for the dispatcher).
    shapes = [(4096, 4096, 4096)] + ([] if bench.quick else SKINNY)
    for m, n, k in shapes:
        impls = [(f"ladder:{v}", lambda a, b, v=v: G.run_ladder(v, a, b)) for v in G.CONFIG_VARIANTS]
        _mm(bench, m, n, k, impls)

    # Layouts: a.t() / b.t() read in place (NT, TN) at 4096^3.
    n = 4096
    inputs = bench.rotation(_mm_inputs(n, n, n, bench.device), 3 * 4 * n * n)
    for label, fa, fb in (("NT", False, True), ("TN", True, False)):
        case = f"{n}x{n}x{n} fp32 {label}"
        for impl, op in (("torch", torch.mm), ("cudasteps", cudasteps.mm)):
            fn = lambda a, b, op=op, fa=fa, fb=fb: op(a.t() if fa else a, b.t() if fb else b)  # noqa: E731
            ms = bench.time(fn, inputs)
            bench.record(op="mm", case=case, impl=impl, dtype=F32, shape=[n, n, n], ms=ms, flops=2 * n**3)

    bench.section(
        "gemm",
        "fp32 SGEMM, TF32 off for torch. `ladder:cfg:<name>` rows run one config of the final kernel's "
        "table by name (`:s<S>` = split-K by S); the dispatcher (`cudasteps`) picks by shape. "
        "FP32 FFMA peak of the H100 SXM: 66.9 TFLOP/s.",
    )
