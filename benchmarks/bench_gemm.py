"""gemm: cudasteps.mm / linear against torch.mm / F.linear, the ladders, the configs.

flops = 2 * M * N * K for every case. fp32 (TF32 off): the shape grid, every SGEMM ladder step at
4096^3 (the slow naive steps at 2048^3), and every entry of the config table (``cfg:<name>``) at
4096^3 and on the skinny shapes, so one run shows which config wins where. Tensor cores: bf16 and
fp16 square, odd and skinny shapes, the FFN's forward and backward GEMMs in the layouts autograd
gives them, TF32 (switch on for both sides), and every tensor-core ladder step at 4096^3 bf16.
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


_SHORT = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _mm_inputs(m, n, k, device, dtype=F32, ta=False, tb=False):
    """Seeded A [m, k] and B [k, n]; ``ta`` / ``tb`` store them column-major (``x.t()`` views)."""

    def make(seed):
        g = torch.Generator(device=device).manual_seed(seed)
        a = (
            torch.randn(k, m, generator=g, device=device).t()
            if ta
            else torch.randn(m, k, generator=g, device=device)
        )
        b = (
            torch.randn(n, k, generator=g, device=device).t()
            if tb
            else torch.randn(k, n, generator=g, device=device)
        )
        return (a.to(dtype), b.to(dtype))

    return make


def _case(m, n, k, dtype=F32, label=""):
    return f"{m}x{n}x{k} {_SHORT[dtype]}" + (f" {label}" if label else "")


def _mm(bench, m, n, k, impls, dtype=F32, label="", ta=False, tb=False):
    elem = torch.tensor([], dtype=dtype).element_size()
    inputs = bench.rotation(_mm_inputs(m, n, k, bench.device, dtype, ta, tb), elem * (m * k + k * n))
    for impl, ms in bench.time_many(impls, inputs).items():
        bench.record(
            op="mm",
            case=_case(m, n, k, dtype, label),
            impl=impl,
            dtype=dtype,
            shape=[m, n, k],
            ms=ms,
            flops=2 * m * n * k,
        )


class _tf32:
    """TF32 on for the block (both torch and cudasteps read the same switch), restored after."""

    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.saved


# (M, N, K) of the FFN 2048 -> 8192 -> 2048 on 8192 rows, as autograd runs them, with the layouts
# ("NT": B is linear's weight.t(), "NN": B row-major weight, "TN": A is grad.t()).
FFN_GEMMS = [
    ("fwd linear1 x @ W1^T", 8192, 8192, 2048, False, True),
    ("fwd linear2 h @ W2^T", 8192, 2048, 8192, False, True),
    ("bwd grad_h = g @ W2", 8192, 8192, 2048, False, False),
    ("bwd grad_W2 = g^T @ h", 2048, 8192, 8192, True, False),
    ("bwd grad_x = g1 @ W1", 8192, 2048, 8192, False, False),
    ("bwd grad_W1 = g1^T @ x", 8192, 2048, 8192, True, False),
]


# Weight gradients of real layers, grad_W = g^T @ x: a small output (out_features x in_features)
# and a long K (the tokens of the batch), A a transposed view as autograd passes it (TN). The
# output fills few tiles, so the GPU is full only when K is split. (M, N, K, dtype).
WEIGHT_GRADIENTS = [
    (512, 512, 32768, torch.bfloat16),
    (1024, 1024, 8192, torch.bfloat16),
    (3072, 1024, 8192, torch.bfloat16),
    (4096, 1024, 32768, torch.bfloat16),
    (1024, 1024, 8192, F32),
    (4096, 1024, 16384, F32),
]


def _schedule_sweep(fields=("ts0", "ts1", "s2")):
    """The Hopper persistent kernel with its schedule forced: `ts0` without the tail split
    (split-K where its rule splits, sm90 choose_splits), `ts1` with it (the last wave's tiles cut
    into k ranges, one CTA each), `s<n>` split-K by n. What the rules that pick them leave on the
    table for a shape."""
    return [
        (f"ladder:tc:ws_persistent:{f}", lambda a, b, f=f: G.run_ladder(f"tc:ws_persistent:{f}", a, b))
        for f in fields
    ]


def run_weight_gradients(bench):
    pair = [("torch", torch.mm), ("cudasteps", cudasteps.mm)]
    cases = WEIGHT_GRADIENTS[1:3] if bench.quick else WEIGHT_GRADIENTS
    hopper = bench.is_cuda and torch.cuda.get_device_capability(bench.device) == (9, 0)
    for m, n, k, dtype in cases:
        # bf16 on Hopper: also the schedules side by side (3072 x 1024 is 192 tiles of 128 x 128,
        # 1.45 waves on 132 SMs: the tail split's case; 512 x 512 is 16 tiles).
        sweep = _schedule_sweep() if hopper and dtype == torch.bfloat16 else []
        _mm(bench, m, n, k, pair + sweep, dtype, label="wgrad g^T @ x", ta=True)
    # The forward of a linear with few rows against a long K and a small output (1024 rows,
    # 4096 -> 1024), fp32 with TF32 off.
    _mm(bench, 1024, 1024, 4096, pair, F32, label="linear", tb=True)
    if not bench.quick:
        # The 1024-row FFN's other products (examples/train_ddp.py's 1024 -> 4096 -> 1024 step):
        # 128 tiles of 256 x 128, seven eighths of an H100's SMs; and 1024 -> 4608, one wave and a
        # thin tail of 12 tiles (the stream-K tail's case).
        _mm(bench, 1024, 4096, 1024, pair, F32, label="linear", tb=True)
        _mm(bench, 4096, 1024, 1024, pair, F32, label="wgrad g^T @ x", ta=True)
        _mm(bench, 1024, 4608, 1024, pair, F32, label="linear", tb=True)
    bench.section(
        "gemm (small outputs, long K)",
        "Weight-gradient products `g^T @ x` (output out_features x in_features, K = the batch's "
        "tokens; `g^T` a transposed view, as autograd passes it) and a 1024-row fp32 linear "
        "4096 -> 1024, against torch.mm (cuBLAS; TF32 off for the fp32 rows). Their outputs fill "
        "a few dozen tiles, so the GPU is full only where K is shared over blocks. The fp32 rows "
        "with K = 1024 are the 1024-row FFN of the DDP example (1024 -> 4096 and its weight "
        "gradient: 128 tiles of 256 x 128, seven eighths of an H100's SMs, run unsplit) and a "
        "1024 -> 4608 linear (a wave and a thin tail of 12 tiles, shared over the SMs by the "
        "stream-K tail). The bf16 rows' "
        "`ladder:tc:ws_persistent:<schedule>` force the Hopper kernel's schedule: `ts0` no tail "
        "split (split-K where its rule splits), `ts1` the tail split (the last wave's tiles cut "
        "into k ranges, one SM each, a cut tile summed in k order by the last part to arrive), "
        "`s2` split-K by 2 (what the rules pick is the `cudasteps` row).",
    )


def _torch_mm_f32_out(device):
    """torch's float32 output of a bf16 product: torch.mm(..., out_dtype=float32) where this torch
    has it (cuBLAS writes its fp32 sums), else mm then a cast."""
    try:
        one = torch.ones(1, 1, dtype=torch.bfloat16, device=device)
        torch.mm(one, one, out_dtype=torch.float32)
        return "torch", lambda a, b: torch.mm(a, b, out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        return "torch", lambda a, b: torch.mm(a, b).float()


def run_mm_dtype(bench):
    """mm.dtype's float32 output of bf16 operands on the FFN step's backward products (what
    autocast's linears write for float32 parameters and inputs) and a small weight gradient."""
    torch_impl = _torch_mm_f32_out(bench.device)
    impls = [
        torch_impl,
        ("torch mm, then cast", lambda a, b: torch.mm(a, b).float()),
        ("cudasteps", lambda a, b: cudasteps.mm(a, b, out_dtype=torch.float32)),
    ]
    cases = [FFN_GEMMS[3], FFN_GEMMS[4], FFN_GEMMS[5], ("wgrad g^T @ x", 1024, 1024, 8192, True, False)]
    for label, m, n, k, ta, tb in cases[:1] if bench.quick else cases:
        _mm(bench, m, n, k, impls, torch.bfloat16, label=f"{label}, fp32 out", ta=ta, tb=tb)
    bench.section(
        "gemm (float32 output of bf16 operands)",
        "`cudasteps.mm(a, b, out_dtype=torch.float32)` (the op `mm.dtype`: the fp32 sums written "
        "unrounded by the Hopper kernel's epilogue) against `torch.mm(a, b, out_dtype=torch."
        "float32)` (cuBLAS; `torch.mm(a, b).float()` where torch has no `out_dtype`) and against "
        "the bf16 product then a cast, what a float32 parameter's gradient costs under autocast "
        "with torch.nn (the cast node's backward). Shapes: the FFN step's weight and input "
        "gradients (8192 rows, 2048 -> 8192 -> 2048) and a 1024 x 1024 weight gradient over 8192 "
        "tokens.",
    )


# linear + bias + GELU (tanh form, what cuBLASLt's GELU epilogue computes) on the FFN's first GEMM
# and a LLaMA-sized up projection: (M, K -> N), bf16.
LINEAR_ACT_SHAPES = [(8192, 2048, 8192), (4096, 4096, 11008)]


def _linear_act_step(variant):
    return lambda x, w, b: G.run_linear_act_ladder(variant, x, w, b, "gelu_tanh")[0]


def run_linear_act(bench):
    """The fused forward against what a user would otherwise run: torch's linear then GELU (eager
    and compiled: inductor fuses the bias add and GELU into one kernel after cuBLAS), cuBLASLt's
    own GELU epilogue (torch._addmm_activation), and the ladder of cudasteps' own forms. CUDA only
    (bf16 GEMMs of these sizes are not a CPU's job)."""
    if not bench.is_cuda:
        return
    dtype = torch.bfloat16
    compiled = torch.compile(lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"))
    impls = [
        ("torch", lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh")),
        ("torch._addmm_activation", lambda x, w, b: torch._addmm_activation(b, x, w.t(), use_gelu=True)),
        ("torch.compile", compiled),
        ("cudasteps", lambda x, w, b: cudasteps.linear_act(x, w, b, "gelu_tanh")),
    ]
    # The ladder: two passes (linear, then bias_act), then the fused epilogues (Hopper only).
    steps = G.LINEAR_ACT_LADDER if torch.cuda.get_device_capability(bench.device) == (9, 0) else ("two_pass",)
    impls += [(f"ladder:{v}", _linear_act_step(v)) for v in steps]
    shapes = LINEAR_ACT_SHAPES[:1] if bench.quick else LINEAR_ACT_SHAPES
    for m, k, n in shapes:

        def make(seed, m=m, k=k, n=n):
            g = torch.Generator(device=bench.device).manual_seed(seed)
            x = (torch.randn(m, k, generator=g, device=bench.device) / k**0.5).to(dtype)
            w = torch.randn(n, k, generator=g, device=bench.device).to(dtype)
            b = torch.randn(n, generator=g, device=bench.device).to(dtype)
            return (x, w, b)

        inputs = bench.rotation(make, 2 * (m * k + n * k + n))
        for impl, ms in bench.time_many(impls, inputs).items():
            bench.record(
                op="linear_act",
                case=f"{m} x ({k} -> {n}) + bias + gelu_tanh bf16",
                impl=impl,
                dtype=dtype,
                shape=[m, n, k],
                ms=ms,
                flops=2 * m * n * k,
            )
    bench.section(
        "linear_act (fused epilogue)",
        "`cudasteps.linear_act(x, w, b, \"gelu_tanh\")` (on Hopper the bias and GELU in the GEMM's "
        "epilogue, elsewhere the GEMM, then bias + GELU in one pass: the same bits) against torch's "
        "`F.gelu(F.linear(x, w, b), approximate=\"tanh\")` (eager, and under torch.compile, which "
        "fuses the bias and GELU into one kernel after cuBLAS) and cuBLASLt's own GELU epilogue, "
        "`torch._addmm_activation(b, x, w.t(), use_gelu=True)`. `ladder:` rows "
        "(`cudasteps.gemm.run_linear_act_ladder`, which also writes the product a backward reads, "
        "as training's forward does): `two_pass` (linear, then bias_act: what training's forward "
        "runs, faster inside a training step than the fused kernel writing the product), `fused` "
        "(the bias and GELU in the Hopper GEMM's epilogue, tc:ws_persistent: both consumer "
        "warpgroups leave the main loop for it), `fused_pingpong` (the same in tc:ws_pingpong, "
        "where one warpgroup's epilogue runs under the other's main loop: what linear_act runs, "
        "without the product, "
        "in the `cudasteps` row).",
    )


# The hidden gradient of the FFN's backward, grad_h = (grad_y @ W2) * gelu'(h_pre) with the bias
# gradient, and of a LLaMA-sized down projection: (tokens, D -> H), bf16.
MM_BIAS_ACT_BACKWARD_SHAPES = [(8192, 2048, 8192), (4096, 4096, 11008)]


def _torch_mm_gelu_backward(g, w, x, b):
    # What eager torch runs for this step of an FFN's backward: the GEMM, GELU's backward on the
    # pre-activation (x + b, which autograd keeps), then the bias gradient's column sums.
    grad = torch.ops.aten.gelu_backward(g @ w, x + b, approximate="tanh")
    return grad, grad.sum(0)


def _mm_bias_act_backward_step(variant):
    return lambda g, w, x, b: G.run_mm_bias_act_backward_ladder(variant, g, w, x, b, "gelu_tanh")


def run_mm_bias_act_backward(bench):
    """mm_bias_act_backward (an FFN's hidden gradient and its bias gradient) against torch eager
    (mm, gelu_backward, sum) and torch.compile of the same (inductor fuses the derivative and the
    column sums into its kernels after cuBLAS), with its ladder: the two passes (what it runs),
    then the fused epilogue (Hopper). CUDA only."""
    if not bench.is_cuda:
        return
    dtype = torch.bfloat16
    compiled = torch.compile(_torch_mm_gelu_backward)
    impls = [
        ("torch", _torch_mm_gelu_backward),
        ("torch.compile", compiled),
        ("cudasteps", lambda g, w, x, b: cudasteps.mm_bias_act_backward(g, w, x, b, "gelu_tanh")),
    ]
    hopper = torch.cuda.get_device_capability(bench.device) == (9, 0)
    steps = G.MM_BIAS_ACT_BACKWARD_LADDER if hopper else ("two_pass",)
    impls += [(f"ladder:{v}", _mm_bias_act_backward_step(v)) for v in steps]
    shapes = MM_BIAS_ACT_BACKWARD_SHAPES[:1] if bench.quick else MM_BIAS_ACT_BACKWARD_SHAPES
    for m, d, n in shapes:

        def make(seed, m=m, d=d, n=n):
            gen = torch.Generator(device=bench.device).manual_seed(seed)
            g = (torch.randn(m, d, generator=gen, device=bench.device) / d**0.5).to(dtype)
            w = torch.randn(d, n, generator=gen, device=bench.device).to(dtype)
            x = torch.randn(m, n, generator=gen, device=bench.device).to(dtype)
            b = torch.randn(n, generator=gen, device=bench.device).to(dtype)
            return (g, w, x, b)

        inputs = bench.rotation(make, 2 * (m * d + d * n + m * n + n))
        for impl, ms in bench.time_many(impls, inputs).items():
            bench.record(
                op="mm_bias_act_backward",
                case=f"{m} x ({d} -> {n}) gelu_tanh' + bias grad bf16",
                impl=impl,
                dtype=dtype,
                shape=[m, n, d],
                ms=ms,
                flops=2 * m * n * d,
            )
    bench.section(
        "mm_bias_act_backward (the hidden gradient of an FFN's backward)",
        "`cudasteps.mm_bias_act_backward(g, w, x, b, \"gelu_tanh\")`: the hidden gradient of an "
        "FFN's backward, `(g @ w) * gelu'(x + b)`, and its bias gradient (the column sums), as "
        "`cudasteps.nn.MLP`'s backward runs it (`linear_act_linear`), against torch eager (`g @ "
        "w`, `aten.gelu_backward`, `.sum(0)`) and torch.compile of the same (inductor's kernels "
        "after cuBLAS). `ladder:` rows (`cudasteps.gemm.run_mm_bias_act_backward_ladder`): "
        "`two_pass` (`mm`, then `bias_act_backward`: what the op runs), `fused` (Hopper: one GEMM, "
        "tc:ws_persistent's, whose epilogue applies the derivative to the product as mm writes it "
        "and sums the values it wrote per 32 rows, a deterministic second pass adding those up; "
        "slower, its instructions exposed while both consumer warpgroups leave the main loop). "
        "TFLOP/s counts the GEMM.",
    )


# The scaled FP8 GEMM's shapes (M, N, K): squares, the FFN's forward and backward shapes (as
# torch._scaled_mm's anchors), and one torch._scaled_mm refuses (K not a multiple of 16).
SCALED_MM_SHAPES = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 8192, 2048),
    (8192, 2048, 8192),
    (4096, 11008, 4096),
    (4096, 4096, 11008),
    (4096, 4096, 4099),
]


def run_scaled_mm(bench):
    """cudasteps.scaled_mm (e4m3 x e4m3, per-tensor scales, bf16 out) against torch._scaled_mm
    (cuBLASLt's FP8 GEMM) and, beside them, torch.mm on the same values in bf16: what FP8 buys.
    CUDA only; torch._scaled_mm rows only where it runs (a GPU of compute capability 8.9+, K and N
    multiples of 16)."""
    if not bench.is_cuda:
        return
    fp8_gpu = torch.cuda.get_device_capability(bench.device) >= (8, 9)
    hopper = torch.cuda.get_device_capability(bench.device) == (9, 0)
    shapes = SCALED_MM_SHAPES[:1] + SCALED_MM_SHAPES[-1:] if bench.quick else SCALED_MM_SHAPES
    for m, n, k in shapes:

        def make_fp8(seed, m=m, n=n, k=k):
            g = torch.Generator(device=bench.device).manual_seed(seed)
            a = torch.randn(m, k, generator=g, device=bench.device).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, generator=g, device=bench.device).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=bench.device)
            return (a, b, one, one, g)

        def make(seed, make_fp8=make_fp8):
            a, b, sa, sb, _ = make_fp8(seed)
            return (a, b, sa, sb, a.bfloat16(), b.bfloat16())

        impls = [("torch.mm bf16", lambda a, b, sa, sb, a16, b16: torch.mm(a16, b16))]
        if fp8_gpu and k % 16 == 0 and n % 16 == 0:
            impls.append(
                (
                    "torch",
                    lambda a, b, sa, sb, a16, b16: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
                )
            )
        impls.append(("cudasteps", lambda a, b, sa, sb, a16, b16: cudasteps.scaled_mm(a, b, sa, sb)))
        for v in G.SCALED_MM_LADDER if hopper else G.SCALED_MM_LADDER[:1]:  # fp8_ws*: Hopper only

            def step(a, b, sa, sb, a16, b16, v=v):
                return G.run_scaled_mm_ladder(v, a, b, sa, sb)

            impls.append((f"ladder:{v}", step))
        cases = [("", impls, bench.rotation(make, 3 * (m * k + k * n)))]
        if fp8_gpu and k % 16 == 0 and n % 16 == 0:
            # With a bias row (bf16, what a linear layer adds), both sides in their epilogues.
            with_bias = [
                (
                    "torch",
                    lambda a, b, sa, sb, bias: torch._scaled_mm(
                        a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16
                    ),
                ),
                ("cudasteps", lambda a, b, sa, sb, bias: cudasteps.scaled_mm(a, b, sa, sb, bias=bias)),
            ]

            def make_with_bias(seed, make_fp8=make_fp8, n=n):
                a, b, sa, sb, g = make_fp8(seed)
                return (a, b, sa, sb, torch.randn(n, generator=g, device=bench.device).bfloat16())

            # (Operands rotated by what both sides read.)
            cases.append((", bias", with_bias, bench.rotation(make_with_bias, m * k + k * n + 2 * n)))
        for suffix, case_impls, inputs in cases:
            for impl, ms in bench.time_many(case_impls, inputs).items():
                bench.record(
                    op="scaled_mm",
                    case=f"{m}x{n}x{k} e4m3 per-tensor, bf16 out{suffix}",
                    impl=impl,
                    dtype=torch.float8_e4m3fn,
                    shape=[m, n, k],
                    ms=ms,
                    flops=2 * m * n * k,
                )
    bench.section(
        "scaled_mm (FP8)",
        "`cudasteps.scaled_mm(a, b, scale_a, scale_b)` (e4m3 operands, per-tensor scales, bf16 "
        "output) against `torch._scaled_mm` (cuBLASLt's FP8 GEMM; absent where it refuses the "
        "shape: K not a multiple of 16) and `torch.mm` on the same values in bf16; `, bias` rows add "
        "a bf16 bias row on both sides, in their epilogues (ours read when a tile's work begins). "
        "cudasteps' "
        "kernel on Hopper is tc:fp8_ws (FP8 wgmmas, TMA, warp specialization, 128 x 128 tiles, "
        "each k-tile's sums promoted into fp32 registers, two sets alternating; its outputs equal "
        "torch._scaled_mm's). `ladder:` rows are `cudasteps.gemm.run_scaled_mm_ladder`: "
        "`widen_tf32`, the ladder's first form and what scaled_mm runs where tc:fp8_ws cannot (the "
        "operands widened to fp32 on the TF32 tensor cores, then the scales), `fp8_ws` (Hopper), "
        "`fp8_multicast` (Hopper: the same in clusters of two CTAs on vertically adjacent tiles "
        "that share their B tile by TMA multicast: a quarter less L2 traffic, but a stage is "
        "refilled only once both CTAs' consumers are done with it) and `fp8_ws256` (Hopper: "
        "256 x 128 tiles, each consumer warpgroup 128 rows in two 64-row halves, one set of "
        "k-tile sums waited for per half: a quarter less L2 traffic per product and half as many "
        "epilogues).",
    )


# Decode-sized bf16 linears: M tokens against an [N, K] weight (out_features, in_features), as a
# decode step of a 4096-wide model with a 14336-wide MLP runs them.
DECODE_WEIGHTS = [(4096, 4096), (14336, 4096), (4096, 14336)]
DECODE_TOKENS = (1, 8, 16)
# Few-row linears past the few-row path (17-128 rows: a prefill chunk, a small batch, speculative
# decoding): still memory-bound on the weight, so timed the same way as the decode rows.
FEW_ROW_TOKENS = (32, 64, 128)
# Small weights that leave SMs idle under few rows: a grouped-query attention's K or V projection
# (4096 -> 1024) and a 2560-wide model's projection (4096 -> 2560).
FEW_ROW_SMALL_WEIGHTS = [(1024, 4096), (2560, 4096)]
FEW_ROW_SMALL_TOKENS = (64, 96, 128)


def _decode(bench, m, n, k, impls, label="decode"):
    """F.linear-style x [m, k] @ W [n, k]^T, bf16. The weight is read once and dominates the
    bytes: rows record GB/s on the weight's bytes (the fraction of the copy bandwidth) beside
    TFLOP/s."""
    dtype = torch.bfloat16

    def make(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        x = torch.randn(m, k, generator=g, device=bench.device).to(dtype)
        w = torch.randn(n, k, generator=g, device=bench.device).to(dtype)
        return (x, w)

    inputs = bench.rotation(make, 2 * (m * k + n * k))
    for impl, ms in bench.time_many_graphed(impls, inputs).items():
        bench.record(
            op="linear",
            case=f"{label} {m} x ({n}, {k}) bf16",
            impl=impl,
            dtype=dtype,
            shape=[m, n, k],
            ms=ms,
            bytes=2 * n * k,
            flops=2 * m * n * k,
        )


def run_decode(bench):
    """Decode-sized linears against torch, and the few-row ladder (its steps, then its split
    sweep) on the 14336 -> 4096 weight."""
    pair = [("torch", F.linear), ("cudasteps", cudasteps.linear)]
    tokens = DECODE_TOKENS[1:2] if bench.quick else DECODE_TOKENS
    for n, k in DECODE_WEIGHTS:
        for m in tokens:
            _decode(bench, m, n, k, pair)
    for n, k in DECODE_WEIGHTS if not bench.quick else DECODE_WEIGHTS[:1]:
        for m in FEW_ROW_TOKENS if not bench.quick else FEW_ROW_TOKENS[1:2]:
            _decode(bench, m, n, k, pair, label="few-row")
    if not bench.quick:
        for n, k in FEW_ROW_SMALL_WEIGHTS:
            for m in FEW_ROW_SMALL_TOKENS:
                _decode(bench, m, n, k, pair, label="few-row")
    if torch.cuda.get_device_capability(bench.device) < (8, 0):
        return
    for m in (1, 16) if not bench.quick else (16,):
        impls = [("torch", F.linear)] + [
            (f"ladder:{v}", lambda x, w, v=v: G.run_ladder(v, x, w.t())) for v in G.GEMV_LADDER
        ]
        _decode(bench, m, 4096, 14336, impls, label="decode ladder")
    if not bench.quick:
        sweep = ("s1", "s2", "s4", "s1:u4", "s2:u4")
        impls = [(f"ladder:gemv:mma:{t}", lambda x, w, t=t: G.run_ladder(f"gemv:mma:{t}", x, w.t()))
                 for t in sweep]
        for n, k in DECODE_WEIGHTS:
            _decode(bench, 8, n, k, impls, label="decode splits")
    bench.section(
        "gemm (decode-sized linears)",
        "bf16 `linear` with 1-16 rows against a weight, as a decode step runs it, and `few-row` "
        "rows with 32-128 (past the few-row path: the tiled tensor-core kernels run them; against "
        "the 1024- and 2560-row weights too few tiles for the SMs, split along K in clusters of "
        "two CTAs where that fills them), against F.linear (cuBLAS). Memory-bound: GB/s counts "
        "the weight's bytes over the time, so the percentage is the fraction of the copy "
        "bandwidth. `ladder:gemv:*` rows are the few-row "
        "ladder: a warp per weight row with 2-byte loads, + 16-byte loads, + four rows per warp "
        "with eight loads in flight, + K split over the eight warps of a block (combined in "
        "order in shared memory), + the products on the tensor cores (mma.sync fed straight from "
        "the 16-byte loads); `gemv:final` is what linear runs (split_k for one token, mma for more). "
        "`gemv:mma:s<n>[:u4]` rows force n blocks per row group to share K (partial sums added "
        "in order by a second kernel), and four 64-wide chunks of K in flight per warp instead of "
        "two. Every row of this section is timed as CUDA-graph replays over rotating inputs (as a "
        "decode loop runs them; each call finds its weight out of L2): the GPU's time, not the "
        "host's launch path, which for a 10-40 us kernel would be most of an eager call.",
    )


def run_tensor_cores(bench):
    """bf16 / fp16 / TF32 GEMMs against torch.mm on the same layouts."""
    pair = [("torch", torch.mm), ("cudasteps", cudasteps.mm)]
    squares = [(4096, 4096, 4096)] + ([] if bench.quick else [(8192, 8192, 8192)])
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in squares:
            _mm(bench, m, n, k, pair, dtype)
    for name, m, n, k, ta, tb in FFN_GEMMS if not bench.quick else FFN_GEMMS[:2]:
        _mm(bench, m, n, k, pair, torch.bfloat16, label=f"FFN {name}", ta=ta, tb=tb)
    # Odd shapes (K or N not a multiple of 8: rows not 16-byte aligned) and skinny activations
    # against 4096 x 4096 weights (linear's layout).
    odd = [(4097, 4095, 4099), (4096, 4096, 4100), (4096, 4097, 4096)]
    for dtype in (torch.bfloat16,) if bench.quick else (torch.bfloat16, torch.float16):
        for m, n, k in odd:
            _mm(bench, m, n, k, pair, dtype)
    hopper = torch.cuda.get_device_capability(bench.device) == (9, 0)
    for m in (16, 64, 128):
        # 128 rows: 32 tiles of 128 x 128, split-K's or the tail split's (the schedules side by side).
        sweep = _schedule_sweep() if hopper and m == 128 else []
        _mm(bench, m, 4096, 4096, pair + sweep, torch.bfloat16, label="linear", tb=True)
    from cudasteps import gemm as G

    tf32_errors = []
    with _tf32():
        for m, n, k in squares + [(4097, 4095, 4099)]:
            _mm(bench, m, n, k, pair, F32, label="TF32")
            tf32_errors.append(_tf32_error_row(bench, m, n, k, pair))
        if hopper:
            # TF32 NN: tc:ws_persistent reads B only after it is transposed (TF32 wgmma reads
            # shared memory K-major), tc:ws_tf32_rs loads it in place into registers.
            steps = ("tc:ws_persistent",) + G.TC_TF32_STEPS + ("tc:final",)
            impls = [("torch", torch.mm)] + [
                (f"ladder:{v}", lambda a, b, v=v: G.run_ladder(v, a, b)) for v in steps
            ]
            _mm(bench, 4096, 4096, 4096, impls, F32, label="TF32 ladder")
    # The tensor-core ladder at 4096^3 bf16, NN (the layout the Hopper ladder-only kernels are built
    # for: G.TC_HOPPER_NN_STEPS).
    steps = G.TC_LADDER
    if not hopper:
        steps = tuple(v for v in steps if v not in G.TC_HOPPER_STEPS)
    impls = [("torch", torch.mm)] + [(f"ladder:{v}", lambda a, b, v=v: G.run_ladder(v, a, b)) for v in steps]
    _mm(bench, 4096, 4096, 4096, impls, torch.bfloat16, label="ladder")
    bench.section(
        "gemm (tensor cores)",
        "bf16 / fp16 / TF32 on tensor cores, fp32 accumulation, against torch.mm (cuBLAS) on the same "
        "inputs and layouts. `TF32` rows turn torch's TF32 switch on for both sides. FFN rows are the "
        "six GEMMs of one training step of a 2048 -> 8192 -> 2048 FFN on 8192 rows, in the layouts "
        "autograd passes them (`^T` operands are transposed views). `ladder:tc:*` rows are the "
        "tensor-core ladder: mma.sync, + ldmatrix/cp.async pipeline, Hopper wgmma, + TMA, + warp "
        "specialization and persistent tiles, + 2-CTA clusters sharing the B tile by TMA multicast "
        "(not faster on an H100, so not chosen), a tile per consumer warpgroup taking turns (ping-pong; "
        "not consistently faster either); `tc:final` is the dispatcher's choice.\n\n"
        "TF32 error: the largest |out - ref| over max |ref|, ref the float64 product of the same "
        "float32 operands (the rows' first input set). TF32 keeps 10 of float32's 23 mantissa bits; "
        "both sides round each operand to nearest (truncating, as the tensor cores do on their own, "
        "biases every product toward zero and roughly triples the error at these K).\n\n"
        "| case | torch | cudasteps |\n|---|---|---|\n" + "\n".join(tf32_errors),
    )


def _tf32_error_row(bench, m, n, k, pair) -> str:
    """A markdown row: each impl's TF32 error on the case's first input set (TF32 on)."""
    a, b = _mm_inputs(m, n, k, bench.device)(0)
    ref = torch.mm(a.double(), b.double())
    scale = ref.abs().max().item()
    errs = {impl: (fn(a, b).double() - ref).abs().max().item() / scale for impl, fn in pair}
    return f"| {_case(m, n, k, F32, 'TF32')} | {errs['torch']:.2e} | {errs['cudasteps']:.2e} |"


def run(bench):
    torch.backends.cuda.matmul.allow_tf32 = False
    if not bench.is_cuda:
        for m, n, k in [(256, 256, 256), (512, 512, 512)]:
            _mm(bench, m, n, k, [("torch", torch.mm), ("cudasteps", cudasteps.mm)])
        _mm(bench, 256, 256, 256, [("torch", torch.mm), ("cudasteps", cudasteps.mm)], torch.bfloat16)
        return

    run_tensor_cores(bench)
    run_linear_act(bench)
    run_mm_bias_act_backward(bench)
    run_scaled_mm(bench)
    run_decode(bench)
    run_weight_gradients(bench)
    run_mm_dtype(bench)

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
    for impl, ms in bench.time_many([("torch", F.linear), ("cudasteps", cudasteps.linear)], inputs).items():
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
        fns = [
            (impl, lambda a, b, op=op, fa=fa, fb=fb: op(a.t() if fa else a, b.t() if fb else b))
            for impl, op in (("torch", torch.mm), ("cudasteps", cudasteps.mm))
        ]
        for impl, ms in bench.time_many(fns, inputs).items():
            bench.record(op="mm", case=case, impl=impl, dtype=F32, shape=[n, n, n], ms=ms, flops=2 * n**3)

    bench.section(
        "gemm",
        "fp32 SGEMM, TF32 off for torch. Ladder steps after `double_buffer`: a multistage cp.async "
        "ring (`cp_async_multistage`), + register double-buffered fragments, + shared-memory staged "
        "epilogue, + grouped tile order (`swizzled_raster`); then `cp_async_kmajor`: the tile kernel's "
        "cp.async ring, k-major tiles filled by 4-byte copies that transpose A, the copies spread over "
        "the slice; `grouped_copies`: that ring on the 256 x 128 tile, copies a few per k step, no "
        "per-copy edge predicates; `stream_k_tail`: + the last, partial wave of tiles shared over all "
        "SMs by K iterations (stream-K, a fixed-order fix-up); `serpentine_fma`: + each k step's FFMAs "
        "in serpentine order where that measured faster (same sums, fewer register-bank conflicts; "
        "NN changes only the stream-K kernel); `swap_nn`: + NN products run as C^T = B^T A^T (both "
        "operands column-major: A's 128 rows of the tile are transposed by 4-byte copies instead of "
        "256; the same sums); `blocked_sum`: + the sums over K in blocks of 1024 through a running "
        "total in shared memory (half the rounding error of one straight sum at K = 4096). "
        "`ladder:cfg:<name>` rows run one config "
        "of the final kernel's table by name (`cp<stages>_*`: the multistage kernel, `ring<stages>_*`: "
        "the k-major ring; `:s<S>` = split-K "
        "by S, `:sk<S>` = split-K by S added up in the stream-K kernel); the dispatcher "
        "(`cudasteps`) picks by shape from the measured table. "
        "FP32 FFMA peak of the H100 SXM: 66.9 TFLOP/s.",
    )
