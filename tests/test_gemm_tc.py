"""Tests for the sm_80+ tensor-core GEMM kernels (csrc/gemm/tc/sm80/) through ladder_mm:

  tc:mma                      mma.sync, shared tiles filled by scalar loads: any layout and alignment
  tc:ldmatrix_cp_async        cp.async ring + ldmatrix, config chosen by shape
  tc:cp_async_cfg:<name>      one config of that kernel by name

bfloat16, float16, and float32 (computed in TF32 by these steps whatever torch's switch says).
The operands are random values of the dtype itself, and the reference is those exact values in
float64, so the error measured is the kernel's own: fp32 accumulation (about sqrt(K) * 2^-24,
negligible) plus one rounding of each output to the dtype (at most half an ulp: 2^-9 bf16, 2^-12
fp16); TF32 adds the rounding of each fp32 operand to 10 mantissa bits (2^-11 relative each).
The op-level tests (mm / addmm / linear, autocast, the TF32 switch) are in test_gemm.py.
"""

import pytest
import torch
from _helpers import CUDA_SKIP_REASON, HAS_CUDA, make_tensor, misaligned, rel_err
from cudasteps import gemm as G


def _skip_reason() -> str:
    if not HAS_CUDA:
        return CUDA_SKIP_REASON
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return f"mma.sync needs compute capability 8.0 or newer, this GPU is {major}.{minor}"
    return ""


requires_sm80 = pytest.mark.skipif(bool(_skip_reason()), reason=_skip_reason() or "unused")

# The config table of tc:ldmatrix_cp_async, in the order of kConfigNames in csrc/gemm/tc/sm80/cp_async.cuh
# (test_cp_async_config_names checks that the op lists exactly these).
CP_ASYNC_CONFIGS = (
    "128x128x32_s4_w2x2",
    "128x256x32_s3_w2x4",
    "128x128x32_s4_w2x4",
    "64x128x32_s4_w2x2",
    "64x64x32_s4_w2x2",
)
STEPS = ("tc:mma", "tc:ldmatrix_cp_async")
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
DTYPE_IDS = ["bf16", "fp16", "tf32"]
LAYOUT_IDS = {"ta": ["aN", "aT"], "tb": ["bN", "bT"]}

# Bounds on ||out - ref|| / ||ref||: a few times the expected error (see the module docstring).
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 2e-3}


def tol(dtype, k):
    return TOL[dtype] + 4 * (max(k, 1) ** 0.5) * 2.0**-24


def ref_mm(a, b):
    """The exact product of the operands' values, in float64 (on the GPU: cuBLAS DGEMM)."""
    return a.double() @ b.double()


def layout(t, transposed):
    """The same values stored column-major when ``transposed``."""
    return t.t().contiguous().t() if transposed else t


def operands(m, n, k, dtype, ta, tb, seed):
    a = layout(make_tensor((m, k), dtype, "cuda", seed=seed), ta)
    b = layout(make_tensor((k, n), dtype, "cuda", seed=seed + 1000), tb)
    return a, b


def check(variant, a, b, what=""):
    out = G.run_ladder(variant, a, b)
    m, k = a.shape
    n = b.shape[1]
    assert out.shape == (m, n) and out.dtype == a.dtype and out.is_contiguous(), what
    assert torch.isfinite(out).all(), f"{variant} {what}: non-finite output"
    err = rel_err(out, ref_mm(a, b))
    assert err < tol(a.dtype, k), f"{variant} {a.dtype} {what} (M, N, K)={(m, n, k)}: rel err {err}"


# Not multiples of any tile (128, 256, 64, 16, 8) or of BK (32 for 16-bit types, 16 for TF32) or
# of a 16-byte chunk (8 or 4 elements), down to 1; K = 1; K below one chunk; one long K.
SHAPES = [
    (1, 1, 1),
    (1, 37, 9),
    (45, 1, 30),
    (64, 48, 1),
    (17, 33, 65),
    (33, 65, 3),
    (127, 129, 131),
    (130, 70, 40),
    (257, 4097, 24),
    (1000, 1000, 1000),
    (96, 80, 4099),
]


@requires_sm80
@pytest.mark.parametrize("variant", STEPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("ta", [False, True], ids=LAYOUT_IDS["ta"])
@pytest.mark.parametrize("tb", [False, True], ids=LAYOUT_IDS["tb"])
def test_step_shapes_layouts(variant, dtype, ta, tb):
    for i, (m, n, k) in enumerate(SHAPES):
        a, b = operands(m, n, k, dtype, ta, tb, seed=i)
        check(variant, a, b, f"ta={ta} tb={tb}")


# Ragged shapes that exercise every edge of a config's tile and of its K ring.
CONFIG_SHAPES = [(1, 1, 1), (127, 129, 131), (300, 520, 72), (513, 257, 1030)]


@requires_sm80
@pytest.mark.parametrize("config", CP_ASYNC_CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("ta", [False, True], ids=LAYOUT_IDS["ta"])
@pytest.mark.parametrize("tb", [False, True], ids=LAYOUT_IDS["tb"])
def test_cp_async_config(config, dtype, ta, tb):
    for i, (m, n, k) in enumerate(CONFIG_SHAPES):
        a, b = operands(m, n, k, dtype, ta, tb, seed=10 + i)
        check(f"tc:cp_async_cfg:{config}", a, b, f"ta={ta} tb={tb}")


@requires_sm80
def test_cp_async_config_names():
    a = make_tensor((8, 8), torch.bfloat16, "cuda")
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: cp.async config must be one of") as info:
        G.run_ladder("tc:cp_async_cfg:no_such_config", a, a)
    listed = str(info.value).split("must be one of ")[1].split(", got")[0].split(", ")
    assert tuple(listed) == CP_ASYNC_CONFIGS


def nan_padded(rows, cols, dtype, seed):
    """A [rows, cols] view of a buffer whose rows are padded with NaN to the next multiple of 16
    bytes (at least one NaN each): the view's leading dimension is 16-byte aligned, and a kernel
    that reads past the end of a row instead of zero-filling turns the output into NaN."""
    per16 = 16 // torch.tensor([], dtype=dtype).element_size()
    ld = (cols // per16 + 1) * per16
    buf = torch.full((rows, ld), float("nan"), dtype=dtype, device="cuda")
    buf[:, :cols] = make_tensor((rows, cols), dtype, "cuda", seed=seed)
    return buf[:, :cols]


@requires_sm80
@pytest.mark.parametrize("variant", STEPS + tuple(f"tc:cp_async_cfg:{c}" for c in CP_ASYNC_CONFIGS[:1]))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("ta", [False, True], ids=LAYOUT_IDS["ta"])
@pytest.mark.parametrize("tb", [False, True], ids=LAYOUT_IDS["tb"])
def test_ragged_edges_read_in_place(variant, dtype, ta, tb):
    # Leading dimensions padded to 16 bytes (so the cp.async kernel reads these views in place)
    # while M, N and K are not multiples of a 16-byte chunk: the last chunk of each row straddles
    # the end of the matrix and its tail, NaN here, must never enter the sum.
    for i, (m, n, k) in enumerate([(37, 29, 13), (130, 70, 41), (259, 131, 517), (5, 3, 1)]):
        # A [m, k]: rows of k (row-major), or columns of m (column-major).
        a = nan_padded(k, m, dtype, i).t() if ta else nan_padded(m, k, dtype, i)
        # B [k, n]: rows of n (row-major), or columns of k (column-major).
        b = nan_padded(n, k, dtype, 50 + i).t() if tb else nan_padded(k, n, dtype, 50 + i)
        check(variant, a, b, f"ta={ta} tb={tb} NaN-padded rows")


@requires_sm80
@pytest.mark.parametrize("variant", STEPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_misaligned_and_odd_strides(variant, dtype):
    # tc:mma reads these in place (scalar loads); tc:ldmatrix_cp_async gets repacked copies.
    cases = [
        (misaligned((45, 77), dtype, "cuda", seed=1), misaligned((77, 39), dtype, "cuda", seed=2)),
        (misaligned((77, 45), dtype, "cuda", seed=3).t(), misaligned((39, 77), dtype, "cuda", seed=4).t()),
        # Odd leading dimensions: every row starts at a different alignment.
        (
            make_tensor((130, 67), dtype, "cuda", seed=5)[:, 1:66],
            make_tensor((65, 141), dtype, "cuda", seed=6)[:, 3:140],
        ),
        (
            make_tensor((67, 130), dtype, "cuda", seed=7)[1:66, :].t(),
            make_tensor((141, 65), dtype, "cuda", seed=8)[3:140, :].t(),
        ),
    ]
    for i, (a, b) in enumerate(cases):
        check(variant, a, b, f"case {i}")


@requires_sm80
@pytest.mark.parametrize("variant", STEPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_long_k(variant, dtype):
    # Many trips around the cp.async ring (and many single-stage tiles for tc:mma).
    a, b = operands(200, 136, 16384, dtype, False, True, seed=3)
    check(variant, a, b, "long K")


@requires_sm80
@pytest.mark.parametrize("variant", STEPS)
def test_tf32_rounds_operands(variant):
    # Operands with bits below TF32's 10-bit mantissa: the product must be that of the operands
    # rounded to nearest TF32 (cvt.rna), not truncated. 1 + 3 * 2^-12 rounds to 1 + 2^-10 (nearest)
    # but truncates to 1; summed over K = 512 terms, the two differ by 512 * 2^-10 = 0.5.
    k = 512
    a = torch.full((16, k), 1 + 3 * 2.0**-12, dtype=torch.float32, device="cuda")
    b = torch.ones((k, 8), dtype=torch.float32, device="cuda")
    out = G.run_ladder(variant, a, b)
    expected = torch.full_like(out, k * (1 + 2.0**-10))
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=0)


@requires_sm80
def test_steps_agree_bitwise_on_exact_products():
    # Small integers: every product and partial sum is exact in fp32, so both kernels (any config,
    # any accumulation order) must give exactly the float64 result.
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-8, 9, (300, 200), generator=gen).to("cuda", torch.bfloat16)
    b = torch.randint(-8, 9, (200, 260), generator=gen).to("cuda", torch.bfloat16)
    ref = (a.double() @ b.double()).to(torch.bfloat16)
    for variant in STEPS + tuple(f"tc:cp_async_cfg:{c}" for c in CP_ASYNC_CONFIGS):
        assert torch.equal(G.run_ladder(variant, a, b), ref), variant
