"""Tests for the gemm family's few-row path (csrc/gemm/gemv): decode-sized bf16/fp16 products,
output with at most 16 rows (or columns), every ladder step, through the ladder op and through
mm / addmm / linear, which take it for such products."""

import cudasteps
import pytest
import torch
from _helpers import make_tensor, misaligned, poison_allocator, rel_err, requires_cuda
from cudasteps import gemm as G

HALF_DTYPES = [torch.bfloat16, torch.float16]
# Half an ulp of the output dtype, relative: the one rounding of each output.
OUT_ROUNDING = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}

# (tokens, rows, K): one token and one row; rows and K that are no multiple of any tile (K = 13
# and 1003: the last group of 8 read element by element); a K shorter than one 64-wide chunk; the
# token buckets' edges (1, 2, 3, 7, 8, 9, 16).
SHAPES = [
    (1, 1, 8),
    (2, 33, 13),
    (3, 17, 24),
    (7, 1000, 1003),
    (8, 129, 520),
    (9, 300, 4104),
    (16, 2049, 64),
    (16, 77, 8200),
]


def _gemv_reason() -> str:
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return f"the few-row path needs compute capability 8.0 or newer (mma.sync), got {major}.{minor}"
    return ""


requires_gemv = pytest.mark.skipif(bool(_gemv_reason()), reason=_gemv_reason() or "unused")


def rows_k_contiguous(rows, k, dtype, seed):
    """[rows, k] with every row 16-byte aligned: a view into rows padded to a multiple of 8."""
    padded = -(-k // 8) * 8
    return make_tensor((rows, padded), dtype, "cuda", seed=seed)[:, :k]


def assert_product(out, a, b, dtype, what):
    """Against a float64 product of the same operands: each element within one output rounding
    plus fp32 accumulation error, which grows with K."""
    ref = a.double() @ b.double()
    k = a.shape[1]
    assert out.shape == ref.shape and out.dtype == dtype, what
    assert not torch.isnan(out).any(), f"{what}: unwritten (NaN) outputs"
    scale = a.double().abs() @ b.double().abs()
    bound = OUT_ROUNDING[dtype] * ref.abs() + k * 2.0**-23 * scale + 1e-30
    excess = ((out.double() - ref).abs() - bound).max().item()
    assert excess <= 0, f"{what}: error exceeds the bound by {excess}"


def operands(tokens, rows, k, dtype, swapped, seed):
    """(a, b) of a few-row product: linear's x @ W^T (tokens on M), or swapped, W @ x^T (tokens on
    N). Both K-major, rows 16-byte aligned."""
    x = rows_k_contiguous(tokens, k, dtype, seed)
    w = rows_k_contiguous(rows, k, dtype, seed + 1)
    return (w, x.t()) if swapped else (x, w.t())


@requires_cuda
@requires_gemv
@pytest.mark.parametrize("variant", G.GEMV_LADDER)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("swapped", [False, True], ids=["x_wT", "w_xT"])
def test_gemv_ladder_step(variant, dtype, swapped):
    if dtype == torch.float16 and variant in G.GEMV_BF16_ONLY_STEPS:
        # Built for bf16 alone (csrc/gemm/gemv/ladder_steps.cu): refused by name, never run.
        a, b = operands(2, 64, 64, dtype, swapped, seed=1)
        refused = r"cudasteps.ladder_mm: .* built for bfloat16 only, got float16"
        with pytest.raises(RuntimeError, match=refused):
            G.run_ladder(variant, a, b)
        return
    for i, (tokens, rows, k) in enumerate(SHAPES):
        a, b = operands(tokens, rows, k, dtype, swapped, seed=10 * i)
        poison_allocator(tokens * rows, dtype)
        out = G.run_ladder(variant, a, b)
        assert_product(out, a, b, dtype, f"{variant} {dtype} tokens={tokens} rows={rows} K={k}")


@requires_cuda
@requires_gemv
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["bf16", "fp16"])
def test_gemv_mma_splits(dtype):
    """K shared by several blocks (partial sums added in order by a second kernel): every forced
    split, including more splits than K has chunks (clamped) and a last split with no chunk, with
    two and four chunks in flight per warp."""
    for tokens, rows, k in [(4, 100, 4096), (16, 33, 1000), (1, 5, 64 * 7)]:
        a, b = operands(tokens, rows, k, dtype, False, seed=3)
        for splits in (1, 2, 3, 5, 8, 64):
            for unroll in (2, 4):
                poison_allocator(tokens * rows, dtype)
                out = G.run_ladder(f"gemv:mma:s{splits}:u{unroll}", a, b)
                assert_product(out, a, b, dtype, f"s{splits} u{unroll} tokens={tokens} rows={rows} K={k}")


@requires_cuda
@requires_gemv
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["bf16", "fp16"])
def test_decode_linear_addmm(dtype):
    """What a decode step calls: linear with bias (2-D and 3-D inputs), addmm with beta and alpha,
    mm both ways round; each 1-16 rows against a weight."""
    w = make_tensor((1000, 520), dtype, "cuda", seed=1)
    bias = make_tensor((1000,), dtype, "cuda", seed=2)
    for tokens in (1, 2, 5, 8, 11, 16):
        x = make_tensor((tokens, 520), dtype, "cuda", seed=3 + tokens)
        poison_allocator(tokens * 1000, dtype)
        out = cudasteps.linear(x, w, bias)
        ref = x.double() @ w.double().t() + bias.double()
        assert rel_err(out, ref) < 2 * OUT_ROUNDING[dtype], tokens
        s = make_tensor((tokens, 1000), dtype, "cuda", seed=4)
        out = cudasteps.addmm(s, x, w.t(), beta=0.5, alpha=-2.0)
        ref = 0.5 * s.double() - 2.0 * (x.double() @ w.double().t())
        assert rel_err(out, ref) < 2 * OUT_ROUNDING[dtype], tokens
        assert_product(cudasteps.mm(w, x.t()), w, x.t(), dtype, f"mm(w, x.t()) tokens={tokens}")
    x3 = make_tensor((2, 4, 520), dtype, "cuda", seed=9)
    ref = x3.double() @ w.double().t() + bias.double()
    assert rel_err(cudasteps.linear(x3, w, bias), ref) < 2 * OUT_ROUNDING[dtype]


@requires_cuda
@requires_gemv
def test_decode_misaligned_and_strided():
    """Operands the few-row kernels cannot read with 16-byte loads (a misaligned base, K = 4099,
    a row-major weight) are repacked, or take the tiled kernels: still the exact product."""
    dtype = torch.bfloat16
    def mk(shape, seed):
        return make_tensor(shape, dtype, "cuda", seed=seed)

    cases = [
        (misaligned((4, 512), dtype, "cuda", seed=1), mk((300, 512), 2).t()),
        (mk((4, 512), 3), misaligned((300, 512), dtype, "cuda", seed=4).t()),
        (mk((3, 4099), 5), mk((64, 4099), 6).t()),
        (mk((8, 256), 7), mk((256, 300), 8)),
        (mk((256, 8), 9).t(), mk((300, 256), 10).t()),
    ]
    for i, (a, b) in enumerate(cases):
        poison_allocator(a.shape[0] * b.shape[1], dtype)
        assert_product(cudasteps.mm(a, b), a, b, dtype, f"case {i}")


@requires_cuda
@requires_gemv
def test_decode_bitwise_reproducible():
    """The split over blocks adds its partial sums in a fixed order: the same bits every run."""
    x = make_tensor((16, 8192), torch.bfloat16, "cuda", seed=1)
    w = make_tensor((1024, 8192), torch.bfloat16, "cuda", seed=2)
    first = cudasteps.linear(x, w)
    for _ in range(3):
        assert torch.equal(cudasteps.linear(x, w), first)
    for variant in G.GEMV_LADDER:
        out = G.run_ladder(variant, x, w.t())
        assert torch.equal(G.run_ladder(variant, x, w.t()), out), variant


@requires_cuda
@requires_gemv
def test_gemv_ladder_errors():
    w = make_tensor((64, 32), torch.bfloat16, "cuda")
    x17 = make_tensor((17, 32), torch.bfloat16, "cuda")
    takes = r"cudasteps.ladder_mm: the gemv steps take bf16/fp16 products with at most 16"
    with pytest.raises(RuntimeError, match=takes):
        G.run_ladder("gemv:mma", x17, w.t())
    with pytest.raises(RuntimeError, match=takes + r".* both operands K-major"):
        G.run_ladder("gemv:vec16", x17[:4], w.t().contiguous())
    dtype_msg = r"cudasteps.ladder_mm: self must be bfloat16 or float16 for variant 'gemv:mma'"
    with pytest.raises(RuntimeError, match=dtype_msg):
        G.run_ladder("gemv:mma", x17.float(), w.t().float())
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: variant must be one of"):
        G.run_ladder("gemv:nope", x17[:4], w.t())
    bad_fields = ("s0", "x", "s", "u3", "bn128", "", "pdl2")
    for bad in (f"gemv:mma:{field}" for field in bad_fields):
        field = bad.split(":")[-1]
        with pytest.raises(
            RuntimeError,
            match=rf"cudasteps.ladder_mm: tuning fields of '{bad}' must be s<splits> \(splits >= 1\), "
            rf"u2 or u4 and pdl0 or pdl1, got '{field}'",
        ):
            G.run_ladder(bad, x17[:4], w.t())

