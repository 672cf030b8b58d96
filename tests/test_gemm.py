"""Tests for the gemm family: mm, addmm, linear, ladder_mm (csrc/gemm)."""

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import (
    CUDA_SKIP_REASON,
    DEVICES,
    HAS_CUDA,
    make_tensor,
    misaligned,
    poison_allocator,
    rel_err,
    requires_cuda,
)
from cudasteps import gemm as G

# Relative Frobenius error vs a float64 reference. float32 accumulation over K terms grows like
# sqrt(K) * 2^-24 for random data: ~4e-6 at K = 4096.
F32_TOL = 1e-5
F64_TOL = 1e-12


def ref_mm(a, b):
    return a.double().cpu() @ b.double().cpu()


def tol(dtype):
    return F32_TOL if dtype == torch.float32 else F64_TOL


# Reduced-precision outputs are compared with a float64 product of the SAME (rounded) operands, so
# the error measured is the kernel's own: fp32 accumulation (sqrt(K) * 2^-24, negligible) plus one
# rounding of each output to the dtype (half an ulp: 2^-9 bf16, 2^-12 fp16). TF32 also rounds each
# operand to 10 mantissa bits inside the tensor core (relative 2^-11 each; the Hopper instruction
# truncates, 2^-10), so its bound is on the operand rounding.

HALF_DTYPES = [torch.bfloat16, torch.float16]
# Bound on ||out - ref|| / ||ref||: a few units of the dtype's rounding, plus accumulation error.
HALF_EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-10}


def half_tol(dtype, k):
    return 2 * HALF_EPS[dtype] + 4 * (max(k, 1) ** 0.5) * 2.0**-24


def gemm_tol(dtype, k):
    """The bound for a product in `dtype` with inner dimension k (tensor cores for half types)."""
    return half_tol(dtype, k) if dtype in HALF_DTYPES else tol(dtype)


def layout(t, transposed):
    """The same values with column-major storage when ``transposed``."""
    return t.t().contiguous().t() if transposed else t


# ---------------------------------------------------------------- mm: shapes, layouts, dtypes

CPU_SHAPES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (3, 4, 1), (17, 33, 65), (64, 128, 96), (70, 130, 257)]
CUDA_SHAPES = CPU_SHAPES + [
    (127, 129, 131),
    (1000, 1000, 1000),
    (257, 4097, 16),
    (4, 3000, 4096),
    (2048, 64, 2048),
    (128, 256, 4096),
    (513, 515, 4096),
]


# Half types on CUDA also get rows that are not 16-byte aligned (K = 4099: repacked for the
# tensor-core kernels) and a K of exactly one k-tile.
HALF_CUDA_SHAPES = CUDA_SHAPES + [(513, 515, 4099), (300, 520, 64)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64] + HALF_DTYPES)
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
def test_mm_layouts(device, dtype, ta, tb):
    if device == "cpu":
        shapes = CPU_SHAPES
    else:
        shapes = HALF_CUDA_SHAPES if dtype in HALF_DTYPES else CUDA_SHAPES
    for i, (m, n, k) in enumerate(shapes):
        a = layout(make_tensor((m, k), dtype, device, seed=i), ta)
        b = layout(make_tensor((k, n), dtype, device, seed=100 + i), tb)
        out = cudasteps.mm(a, b)
        assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
        err = rel_err(out, ref_mm(a, b))
        assert err < gemm_tol(dtype, k), f"{(m, n, k)} ta={ta} tb={tb}: rel err {err}"


@pytest.mark.parametrize("device", DEVICES)
def test_mm_strided_and_offset_views(device):
    base_a = make_tensor((40, 70), torch.float32, device, seed=1)
    base_b = make_tensor((90, 60), torch.float32, device, seed=2)
    cases = [
        (base_a[3:30, 5:41], base_b[7:43, 2:55]),  # row-major views with ld > cols, offsets
        (base_a[::2, 1:37], base_b[1:37, ::3]),  # non-unit strides both ways: copied
        (base_a[1:37, 2:29].t(), base_b[4:40, 3:50]),  # column-major view with an offset
        (
            misaligned((33, 21), torch.float32, device, seed=3),
            misaligned((21, 19), torch.float32, device, seed=4),
        ),
        (make_tensor((5, 1), device=device).expand(5, 7), make_tensor((7, 6), device=device)),  # stride 0
    ]
    for a, b in cases:
        out = cudasteps.mm(a, b)
        assert rel_err(out, ref_mm(a, b)) < F32_TOL


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mm_empty(device, dtype):
    a = make_tensor((5, 0), dtype, device)
    b = make_tensor((0, 7), dtype, device)
    out = cudasteps.mm(a, b)
    assert out.shape == (5, 7) and torch.equal(out.cpu(), torch.zeros(5, 7, dtype=dtype))
    assert cudasteps.mm(make_tensor((0, 4), dtype, device), make_tensor((4, 3), dtype, device)).shape == (
        0,
        3,
    )
    assert cudasteps.mm(make_tensor((3, 4), dtype, device), make_tensor((4, 0), dtype, device)).shape == (
        3,
        0,
    )


# ---------------------------------------------------------------- addmm and linear


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("self_shape", [(37, 45), (45,), (1, 45), (37, 1), (1,), ()])
def test_addmm(device, dtype, self_shape):
    m, n, k = 37, 45, 70
    a = make_tensor((m, k), dtype, device, seed=1)
    b = make_tensor((k, n), dtype, device, seed=2).t().contiguous().t()
    s = make_tensor(self_shape, dtype, device, seed=3)
    for beta, alpha in [(1, 1), (0.5, -2.0), (0, 3.0)]:
        out = cudasteps.addmm(s, a, b, beta=beta, alpha=alpha)
        ref = torch.addmm(s.double().cpu(), a.double().cpu(), b.double().cpu(), beta=beta, alpha=alpha)
        assert rel_err(out, ref) < tol(dtype), (beta, alpha)


@pytest.mark.parametrize("device", DEVICES)
def test_addmm_beta_zero_ignores_nan_and_k_zero(device):
    s = torch.full((4, 5), float("nan"), device=device)
    a = make_tensor((4, 3), device=device)
    b = make_tensor((3, 5), device=device)
    out = cudasteps.addmm(s, a, b, beta=0, alpha=2)
    assert rel_err(out, 2 * ref_mm(a, b)) < F32_TOL
    s = make_tensor((4, 5), device=device)
    out = cudasteps.addmm(s, make_tensor((4, 0), device=device), make_tensor((0, 5), device=device), beta=3)
    assert rel_err(out, 3 * s.double().cpu()) < F32_TOL


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("in_shape", [(9,), (13, 9), (2, 3, 9), (2, 0, 9), (2, 3, 4, 9)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear(device, dtype, in_shape, with_bias):
    x = make_tensor(in_shape, dtype, device, seed=1)
    w = make_tensor((21, 9), dtype, device, seed=2)
    bias = make_tensor((21,), dtype, device, seed=3) if with_bias else None
    out = cudasteps.linear(x, w, bias)
    ref = F.linear(x.double().cpu(), w.double().cpu(), None if bias is None else bias.double().cpu())
    assert out.shape == ref.shape
    assert rel_err(out, ref) < tol(dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_noncontiguous_input_and_k_zero(device):
    x = make_tensor((3, 9, 5), device=device).transpose(0, 1)  # [9, 3, 5], not contiguous
    w = make_tensor((6, 5), device=device, seed=1)
    assert rel_err(cudasteps.linear(x, w), F.linear(x.double().cpu(), w.double().cpu())) < F32_TOL
    x0 = make_tensor((4, 0), device=device)
    b = make_tensor((6,), device=device)
    out = cudasteps.linear(x0, make_tensor((6, 0), device=device), b)
    assert torch.equal(out.cpu(), b.cpu().expand(4, 6))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    a = make_tensor((3, 4), device=device)
    b = make_tensor((4, 5), device=device)
    with pytest.raises(RuntimeError, match=r"cudasteps.mm: self must be 2-D, got 3-D"):
        cudasteps.mm(a.view(1, 3, 4), b)
    with pytest.raises(RuntimeError, match=r"cudasteps.mm: mat2 must be 2-D, got 1-D"):
        cudasteps.mm(a, b[0])
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: mat2.size\(0\) must equal self.size\(1\) \(4\), got 5"
    ):
        cudasteps.mm(a, make_tensor((5, 2), device=device))
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.mm: mat2 must be float32, float64, float16 or bfloat16, got ComplexFloat "
        r"\(use torch.mm for other dtypes\)",
    ):
        cudasteps.mm(a, b.to(torch.complex64))
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: self must be float32, float64, float16 or bfloat16, got Long"
    ):
        cudasteps.mm(a.long(), b)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: mat2 must have the dtype of self \(Float\), got Half"
    ):
        cudasteps.mm(a, b.half())
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: mat2 must have the dtype of self \(Float\), got Double"
    ):
        cudasteps.mm(a, b.double())
    with pytest.raises(RuntimeError, match=r"cudasteps.addmm: self must be broadcastable to \[3, 5\]"):
        cudasteps.addmm(make_tensor((2, 5), device=device), a, b)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.addmm: mat2 must have the dtype of mat1 \(BFloat16\), got Float"
    ):
        cudasteps.addmm(make_tensor((5,), device=device), a.bfloat16(), b)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.addmm: self must have the dtype of mat1 \(BFloat16\), got Float"
    ):
        cudasteps.addmm(make_tensor((5,), device=device), a.bfloat16(), b.bfloat16())
    with pytest.raises(
        RuntimeError, match=r"cudasteps.linear: weight.size\(1\) must equal input.size\(-1\) \(4\)"
    ):
        cudasteps.linear(a, make_tensor((6, 5), device=device))
    with pytest.raises(RuntimeError, match=r"cudasteps.linear: bias must have shape \[6\]"):
        cudasteps.linear(a, make_tensor((6, 4), device=device), make_tensor((5,), device=device))
    with pytest.raises(RuntimeError, match=r"use torch.nn.functional.linear for other dtypes"):
        cudasteps.linear(a.int(), make_tensor((6, 4), device=device).int())
    with pytest.raises(RuntimeError, match=r"cudasteps.linear: bias must have the dtype of input \(Half\)"):
        cudasteps.linear(
            a.half(), make_tensor((6, 4), device=device).half(), make_tensor((6,), device=device)
        )


@requires_cuda
def test_errors_device():
    a = make_tensor((3, 4), device="cuda")
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: mat2 must be on self's device \(cuda:0\), got cpu"
    ):
        cudasteps.mm(a, make_tensor((4, 5)))
    with pytest.raises(RuntimeError, match=r"cudasteps.linear: weight must be on input's device"):
        cudasteps.linear(a, make_tensor((5, 4)))
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: variant must be one of"):
        G.run_ladder("nope", a, make_tensor((4, 5), device="cuda"))
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: config must be one of"):
        G.run_ladder("cfg:1x1x1", a, make_tensor((4, 5), device="cuda"))


# ---------------------------------------------------------------- autograd


def test_gradcheck_cpu():
    a = make_tensor((5, 7), torch.float64, seed=1).requires_grad_()
    b = make_tensor((7, 4), torch.float64, seed=2).t().contiguous().t().requires_grad_()
    s = make_tensor((4,), torch.float64, seed=3).requires_grad_()
    assert torch.autograd.gradcheck(cudasteps.mm, (a, b))
    assert torch.autograd.gradcheck(lambda s, a, b: cudasteps.addmm(s, a, b, beta=0.5, alpha=-1.5), (s, a, b))
    x = make_tensor((2, 3, 7), torch.float64, seed=4).requires_grad_()
    w = make_tensor((4, 7), torch.float64, seed=5).requires_grad_()
    bias = make_tensor((4,), torch.float64, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(cudasteps.linear, (x, w, bias))
    assert torch.autograd.gradcheck(lambda x, w: cudasteps.linear(x, w), (x, w))


@pytest.mark.parametrize("self_shape", [(5, 4), (1, 4), (5, 1), (1,), ()])
def test_gradcheck_broadcast_self_and_bias(self_shape):
    a = make_tensor((5, 3), torch.float64, seed=1).requires_grad_()
    b = make_tensor((3, 4), torch.float64, seed=2).requires_grad_()
    s = make_tensor(self_shape, torch.float64, seed=3).requires_grad_()
    assert torch.autograd.gradcheck(lambda s, a, b: cudasteps.addmm(s, a, b, beta=2.0), (s, a, b))
    if len(self_shape) <= 1:
        bias = make_tensor((4,) if self_shape == (5, 1) else self_shape, torch.float64, seed=4)
        bias = bias.requires_grad_()
        w = make_tensor((4, 3), torch.float64, seed=5).requires_grad_()
        assert torch.autograd.gradcheck(cudasteps.linear, (a, w, bias))


@requires_cuda
def test_grads_vs_torch_cuda():
    torch.backends.cuda.matmul.allow_tf32 = False
    x = make_tensor((4, 33, 130), device="cuda", seed=1).requires_grad_()
    w = make_tensor((70, 130), device="cuda", seed=2).requires_grad_()
    bias = make_tensor((70,), device="cuda", seed=3).requires_grad_()
    g = make_tensor((4, 33, 70), device="cuda", seed=4)
    cudasteps.linear(x, w, bias).backward(g)
    ours = [t.grad.clone() for t in (x, w, bias)]
    for t in (x, w, bias):
        t.grad = None
    F.linear(x, w, bias).backward(g)
    for o, t in zip(ours, (x, w, bias)):
        assert rel_err(o, t.grad) < F32_TOL

    s = make_tensor((1, 50), device="cuda", seed=5).requires_grad_()
    a = make_tensor((40, 60), device="cuda", seed=6).requires_grad_()
    b = make_tensor((60, 50), device="cuda", seed=7).requires_grad_()
    g = make_tensor((40, 50), device="cuda", seed=8)
    cudasteps.addmm(s, a, b, beta=2.0, alpha=0.5).backward(g)
    ours = [t.grad.clone() for t in (s, a, b)]
    for t in (s, a, b):
        t.grad = None
    torch.addmm(s, a, b, beta=2.0, alpha=0.5).backward(g)
    for o, t in zip(ours, (s, a, b)):
        assert rel_err(o, t.grad) < F32_TOL


# ---------------------------------------------------------------- opcheck, compile


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    def mk(shape, seed):
        return make_tensor(shape, torch.float32, device, seed=seed).requires_grad_(requires_grad)

    torch.library.opcheck(torch.ops.cudasteps.mm.default, (mk((5, 6), 1), mk((6, 7), 2)))
    torch.library.opcheck(
        torch.ops.cudasteps.addmm, (mk((7,), 3), mk((5, 6), 1), mk((6, 7), 2)), {"beta": 0.5, "alpha": 2.0}
    )
    torch.library.opcheck(torch.ops.cudasteps.linear.default, (mk((2, 5, 6), 1), mk((7, 6), 2), mk((7,), 3)))
    torch.library.opcheck(torch.ops.cudasteps.linear.default, (mk((5, 6), 1), mk((7, 6), 2), None))


@requires_cuda
def test_opcheck_ladder():
    a = make_tensor((5, 6), device="cuda")
    b = make_tensor((6, 7), device="cuda", seed=1)
    torch.library.opcheck(torch.ops.cudasteps.ladder_mm, (a, b, "final"))


@pytest.mark.parametrize("device", DEVICES)
def test_compile(device):
    torch._dynamo.reset()

    def f(x, w, bias, s):
        h = cudasteps.linear(x, w, bias)
        return cudasteps.addmm(s, h, w, beta=0.5) + cudasteps.mm(h, w)

    x = make_tensor((3, 8), device=device, seed=1)
    w = make_tensor((8, 8), device=device, seed=2)
    bias = make_tensor((8,), device=device, seed=3)
    s = make_tensor((8,), device=device, seed=4)
    compiled = torch.compile(f, fullgraph=True)
    assert rel_err(compiled(x, w, bias, s), f(x, w, bias, s)) < 1e-6


# ---------------------------------------------------------------- ladder and configs (CUDA)

LADDER_SHAPES = [
    (1, 1, 1),
    (67, 33, 5),
    (128, 128, 128),
    (259, 131, 517),
    (1000, 1000, 1000),
    (64, 2048, 4096),
]


@requires_cuda
@pytest.mark.parametrize("variant", G.LADDER + G.CONFIG_VARIANTS)
def test_ladder_variant(variant):
    for i, (m, n, k) in enumerate(LADDER_SHAPES):
        a = make_tensor((m, k), device="cuda", seed=i)
        b = make_tensor((k, n), device="cuda", seed=50 + i)
        out = G.run_ladder(variant, a, b)
        assert rel_err(out, ref_mm(a, b)) < F32_TOL, f"{variant} {(m, n, k)}"
    # unaligned sizes (the scalar-load instantiations for the tile kernels)
    a = misaligned((45, 77), device="cuda", seed=7).contiguous()
    b = make_tensor((77, 39), device="cuda", seed=8)
    assert rel_err(G.run_ladder(variant, a, b), ref_mm(a, b)) < F32_TOL


@requires_cuda
@pytest.mark.parametrize("variant", G.CONFIG_VARIANTS)
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
@pytest.mark.parametrize("misalign", [False, True], ids=["aligned", "misaligned"])
def test_configs_layouts(variant, ta, tb, misalign):
    m, n, k = 261, 199, 1031
    if misalign:
        a = layout(misaligned((m, k), device="cuda", seed=1), ta)
        b = layout(misaligned((k, n), device="cuda", seed=2), tb)
    else:
        a = layout(make_tensor((m, k), device="cuda", seed=1), ta)
        b = layout(make_tensor((k, n), device="cuda", seed=2), tb)
    assert rel_err(G.run_ladder(variant, a, b), ref_mm(a, b)) < F32_TOL


@requires_cuda
@pytest.mark.parametrize(
    "shape", [(128, 8192, 4096), (8192, 128, 4096), (4096, 4096, 128), (4097, 4095, 4099)]
)
def test_mm_big_shapes_cuda(shape):
    m, n, k = shape
    a = make_tensor((m, k), device="cuda", seed=1)
    b = make_tensor((k, n), device="cuda", seed=2)
    ref = a.double() @ b.double()
    assert rel_err(cudasteps.mm(a, b), ref) < F32_TOL
    assert rel_err(cudasteps.mm(b.t(), a.t()), ref.t()) < F32_TOL


@requires_cuda
def test_64bit_offsets_cuda():
    # 2^31 + elements in the output: the epilogue and loader offsets must be 64-bit.
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs ~20 GiB of GPU memory")
    m, n, k = 2**16 + 3, 2**15 + 1, 4
    a = make_tensor((m, k), device="cuda", seed=1)
    b = make_tensor((k, n), device="cuda", seed=2)
    out = cudasteps.mm(a, b)
    rows = torch.tensor([0, 1, m // 2, m - 1], device="cuda")
    ref = a[rows].double() @ b.double()
    assert rel_err(out[rows], ref) < F32_TOL
    del out


def test_ladder_module_lists_gemm():
    assert cudasteps.ladder.variants("gemm") == G.LADDER
    assert G.LADDER[0] == "naive" and G.LADDER[-1] == "final"


# ---------------------------------------------------------------- bf16 / fp16 / TF32 (tensor cores)
# (The tolerances are at the top of the file; the layout test above covers the half types too.)


class tf32_mode:
    """Sets torch's TF32 switch for float32 matmuls inside a ``with`` block, restoring it after."""

    def __init__(self, allow: bool):
        self.allow = allow

    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.allow

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.saved


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_mm_half_views(device, dtype):
    """Misaligned (2-byte offset) and strided views: repacked for the 16-byte-load kernels."""
    base_a = make_tensor((90, 140), dtype, device, seed=1)
    base_b = make_tensor((150, 120), dtype, device, seed=2)
    cases = [
        (base_a[3:80, 5:137], base_b[7:139, 2:115]),  # row-major views, odd ld and offsets
        (base_a[::2, 1:37], base_b[1:37, ::3]),  # non-unit strides both ways: copied
        (base_a[1:37, 2:129].t(), base_b[4:40, 3:50]),  # column-major view with an offset
        (misaligned((65, 33), dtype, device, seed=3), misaligned((33, 47), dtype, device, seed=4)),
        (make_tensor((5, 1), dtype, device).expand(5, 40), make_tensor((40, 6), dtype, device)),
    ]
    for a, b in cases:
        out = cudasteps.mm(a, b)
        assert rel_err(out, ref_mm(a, b)) < half_tol(dtype, a.shape[1]), (a.shape, a.stride())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_addmm_linear_half(device, dtype):
    m, n, k = 37, 45, 70
    a = make_tensor((m, k), dtype, device, seed=1)
    b = make_tensor((k, n), dtype, device, seed=2).t().contiguous().t()
    for shape in [(m, n), (n,), (m, 1), ()]:
        s = make_tensor(shape, dtype, device, seed=3)
        for beta, alpha in [(1, 1), (0.5, -2.0), (0, 3.0)]:
            out = cudasteps.addmm(s, a, b, beta=beta, alpha=alpha)
            assert out.dtype == dtype
            ref = torch.addmm(s.double().cpu(), a.double().cpu(), b.double().cpu(), beta=beta, alpha=alpha)
            assert rel_err(out, ref) < half_tol(dtype, k), (shape, beta, alpha)
    x = make_tensor((2, 33, k), dtype, device, seed=4)
    w = make_tensor((n, k), dtype, device, seed=5)
    bias = make_tensor((n,), dtype, device, seed=6)
    out = cudasteps.linear(x, w, bias)
    assert out.dtype == dtype and out.shape == (2, 33, n)
    ref = F.linear(x.double().cpu(), w.double().cpu(), bias.double().cpu())
    assert rel_err(out, ref) < half_tol(dtype, k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_half_empty_and_k_zero(device, dtype):
    assert cudasteps.mm(make_tensor((0, 4), dtype, device), make_tensor((4, 3), dtype, device)).shape == (
        0,
        3,
    )
    out = cudasteps.mm(make_tensor((5, 0), dtype, device), make_tensor((0, 7), dtype, device))
    assert out.dtype == dtype and torch.equal(out.cpu(), torch.zeros(5, 7, dtype=dtype))
    s = make_tensor((5, 7), dtype, device)
    out = cudasteps.addmm(s, make_tensor((5, 0), dtype, device), make_tensor((0, 7), dtype, device), beta=2)
    assert torch.equal(out.cpu(), (2 * s.float()).to(dtype).cpu())


@requires_cuda
def test_mm_half_big_shapes_cuda():
    """The shapes of the benchmark's odd and FFN cases, in every layout the FFN step uses."""
    for dtype in HALF_DTYPES:
        for m, n, k in [(4097, 4095, 4099), (2048, 8192, 2048), (128, 4096, 4096), (16, 4096, 4096)]:
            a = make_tensor((m, k), dtype, "cuda", seed=1)
            b = make_tensor((k, n), dtype, "cuda", seed=2)
            ref = a.double() @ b.double()
            tol_k = half_tol(dtype, k)
            assert rel_err(cudasteps.mm(a, b), ref) < tol_k, (dtype, m, n, k)
            assert rel_err(cudasteps.mm(b.t(), a.t()), ref.t()) < tol_k, (dtype, m, n, k, "T")
            assert rel_err(cudasteps.mm(a, b.t().contiguous().t()), ref) < tol_k, (dtype, m, n, k, "NT")


@requires_cuda
def test_tf32_switch():
    """float32 follows torch's TF32 switch: exact SGEMM when off, TF32 tensor cores when on (an
    error of TF32's size, far above fp32's), and set_float32_matmul_precision("high") turns it on."""
    m, n, k = 256, 384, 2048
    a = make_tensor((m, k), device="cuda", seed=1)
    b = make_tensor((k, n), device="cuda", seed=2)
    ref = ref_mm(a, b)
    with tf32_mode(False):
        exact = rel_err(cudasteps.mm(a, b), ref)
    with tf32_mode(True):
        tf32 = rel_err(cudasteps.mm(a, b), ref)
        torch_tf32 = rel_err(torch.mm(a, b), ref)
        lin = rel_err(cudasteps.linear(a, b.t()), ref)
    assert exact < F32_TOL
    assert 1e-5 < tf32 < half_tol(torch.float32, k), (tf32, torch_tf32)
    assert 1e-5 < lin < half_tol(torch.float32, k)
    saved = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert rel_err(cudasteps.mm(a, b), ref) > 1e-5
        torch.set_float32_matmul_precision("highest")
        assert rel_err(cudasteps.mm(a, b), ref) < F32_TOL
    finally:
        torch.set_float32_matmul_precision(saved)


@requires_cuda
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
def test_tf32_layouts_and_views(ta, tb):
    """TF32 reads K-major operands: the other layouts go through cudasteps.transpose first."""
    with tf32_mode(True):
        for i, (m, n, k) in enumerate([(1, 1, 1), (127, 129, 131), (513, 515, 1027), (64, 300, 4)]):
            a = layout(make_tensor((m, k), device="cuda", seed=i), ta)
            b = layout(make_tensor((k, n), device="cuda", seed=50 + i), tb)
            err = rel_err(cudasteps.mm(a, b), ref_mm(a, b))
            assert err < half_tol(torch.float32, k), ((m, n, k), err)
        a = misaligned((45, 77), device="cuda", seed=7)
        b = misaligned((77, 39), device="cuda", seed=8)
        assert rel_err(cudasteps.mm(a, b), ref_mm(a, b)) < half_tol(torch.float32, 77)


@requires_cuda
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
def test_tf32_rounds_operands_to_nearest(ta, tb):
    """TF32 operands are rounded to nearest, as cuBLAS's are, not truncated, as the tensor cores
    would on their own: 1 + 3 * 2^-12 rounds to 1 + 2^-10 but truncates to 1, so a row of it times
    ones sums to K (1 + 2^-10) exactly (every partial sum is exact in fp32) only if it was rounded.
    Shapes: a tiny one, tiles with edges, and a small output with a long K (split-K)."""
    with tf32_mode(True):
        for m, n, k in [(16, 8, 512), (300, 260, 2048), (128, 128, 8192)]:
            a = layout(torch.full((m, k), 1 + 3 * 2.0**-12, device="cuda"), ta)
            b = layout(torch.ones((k, n), device="cuda"), tb)
            out = cudasteps.mm(a, b)
            assert torch.equal(out, torch.full_like(out, k * (1 + 2.0**-10))), ((m, n, k), out[0, 0].item())


@requires_cuda
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
def test_tf32_error_no_worse_than_torch(ta, tb):
    """On random data the TF32 product's error against float64 (relative, in norm) is torch's: both
    round the operands to nearest (truncated operands gave about three times torch's)."""
    with tf32_mode(True):
        for i, (m, n, k) in enumerate([(2048, 2048, 2048), (1000, 1100, 1200)]):
            a = layout(make_tensor((m, k), device="cuda", seed=10 + i), ta)
            b = layout(make_tensor((k, n), device="cuda", seed=20 + i), tb)
            ref = ref_mm(a, b)
            ours, theirs = rel_err(cudasteps.mm(a, b), ref), rel_err(torch.mm(a, b), ref)
            assert ours <= 1.1 * theirs, ((m, n, k), ours, theirs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("amp_dtype", HALF_DTYPES)
def test_autocast(device, amp_dtype):
    """Under autocast the three ops cast like aten's mm / addmm / linear: floating tensors to the
    autocast dtype (outputs in it), float64 left alone, and gradients reach fp32 leaves in fp32."""
    if device == "cpu" and amp_dtype == torch.float16 and not torch.amp.is_autocast_available("cpu"):
        pytest.skip("CPU autocast is not available in this torch build")
    a = make_tensor((9, 16), device=device, seed=1).requires_grad_()
    b = make_tensor((16, 12), device=device, seed=2).requires_grad_()
    s = make_tensor((12,), device=device, seed=3)
    w = make_tensor((12, 16), device=device, seed=4).requires_grad_()
    bias = make_tensor((12,), device=device, seed=5).requires_grad_()
    with torch.autocast(device, dtype=amp_dtype):
        outs = {
            "mm": (cudasteps.mm(a, b), torch.mm(a, b)),
            "addmm": (cudasteps.addmm(s, a, b, beta=0.5), torch.addmm(s, a, b, beta=0.5)),
            "linear": (cudasteps.linear(a, w, bias), F.linear(a, w, bias)),
        }
        f64 = cudasteps.mm(a.double(), b.double())
    assert f64.dtype == torch.float64
    for name, (ours, theirs) in outs.items():
        assert ours.dtype == theirs.dtype == amp_dtype, name
        assert rel_err(ours, theirs.float()) < half_tol(amp_dtype, 16), name
    outs["linear"][0].float().sum().backward()
    assert w.grad.dtype == torch.float32 and bias.grad.dtype == torch.float32
    grads = [t.grad.clone() for t in (a, w, bias)]
    for t in (a, w, bias):
        t.grad = None
    with torch.autocast(device, dtype=amp_dtype):
        F.linear(a, w, bias).float().sum().backward()
    for g, t in zip(grads, (a, w, bias)):
        assert rel_err(g, t.grad) < 4 * HALF_EPS[amp_dtype]


@requires_cuda
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_grads_half_vs_torch_cuda(dtype):
    """The backward GEMMs run in the same dtype on the same kernels: gradients match torch's."""
    x = make_tensor((4, 33, 130), dtype, "cuda", seed=1).requires_grad_()
    w = make_tensor((70, 130), dtype, "cuda", seed=2).requires_grad_()
    bias = make_tensor((70,), dtype, "cuda", seed=3).requires_grad_()
    g = make_tensor((4, 33, 70), dtype, "cuda", seed=4)
    cudasteps.linear(x, w, bias).backward(g)
    ours = [t.grad.clone() for t in (x, w, bias)]
    for t in (x, w, bias):
        assert t.grad.dtype == dtype
        t.grad = None
    F.linear(x, w, bias).backward(g)
    for o, t in zip(ours, (x, w, bias)):
        assert rel_err(o, t.grad) < 2 * half_tol(dtype, 132), dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_opcheck_half(device, dtype):
    def mk(shape, seed):
        return make_tensor(shape, dtype, device, seed=seed).requires_grad_()

    torch.library.opcheck(torch.ops.cudasteps.mm.default, (mk((5, 6), 1), mk((6, 7), 2)))
    torch.library.opcheck(torch.ops.cudasteps.addmm, (mk((7,), 3), mk((5, 6), 1), mk((6, 7), 2)))
    torch.library.opcheck(torch.ops.cudasteps.linear.default, (mk((2, 5, 6), 1), mk((7, 6), 2), mk((7,), 3)))


# Every tensor-core ladder step, every dtype, every layout, odd shapes.
TC_LADDER_SHAPES = [(1, 1, 1), (67, 33, 5), (128, 256, 64), (259, 131, 517), (1000, 1000, 1000)]


def _tc_step_reason(variant: str) -> str:
    if not HAS_CUDA:
        return CUDA_SKIP_REASON
    major, minor = torch.cuda.get_device_capability()
    if variant in G.TC_HOPPER_STEPS and (major, minor) != (9, 0):
        return f"{variant} needs a compute capability 9.0 GPU, this one is {major}.{minor}"
    if major < 8:
        return f"tensor-core GEMM needs compute capability 8.0 or newer, this GPU is {major}.{minor}"
    return ""


@requires_cuda
@pytest.mark.parametrize("variant", G.TC_LADDER)
@pytest.mark.parametrize("dtype", G.TC_DTYPES, ids=["bf16", "fp16", "tf32"])
@pytest.mark.parametrize("ta", [False, True], ids=["aN", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["bN", "bT"])
def test_tc_ladder_step(variant, dtype, ta, tb):
    if _tc_step_reason(variant):
        pytest.skip(_tc_step_reason(variant))
    fp16_built = dtype == torch.float16 and variant in G.TC_HOPPER_FP16_STEPS
    if dtype != torch.bfloat16 and variant in G.TC_HOPPER_NN_STEPS and not fp16_built:
        # Built for bf16 alone (launch.cuh, ladder_kernels_built): refused by name.
        a = layout(make_tensor((67, 5), dtype, "cuda", seed=1), ta)
        b = layout(make_tensor((5, 33), dtype, "cuda", seed=2), tb)
        refused = rf"cudasteps.ladder_mm: {variant} is built for bfloat16 only"
        with pytest.raises(RuntimeError, match=refused):
            G.run_ladder(variant, a, b)
        return
    for i, (m, n, k) in enumerate(TC_LADDER_SHAPES):
        a = layout(make_tensor((m, k), dtype, "cuda", seed=i), ta)
        b = layout(make_tensor((k, n), dtype, "cuda", seed=50 + i), tb)
        out = G.run_ladder(variant, a, b)
        assert out.dtype == dtype and out.shape == (m, n)
        err = rel_err(out, ref_mm(a, b))
        assert err < half_tol(dtype, k), f"{variant} {dtype} {(m, n, k)} ta={ta} tb={tb}: {err}"
    a = misaligned((45, 77), dtype, "cuda", seed=7)
    b = misaligned((77, 39), dtype, "cuda", seed=8)
    assert rel_err(G.run_ladder(variant, a, b), ref_mm(a, b)) < half_tol(dtype, 77), variant


@requires_cuda
def test_tc_ladder_errors():
    a = make_tensor((4, 8), torch.float64, "cuda")
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: self must be bfloat16, float16 or float32"):
        G.run_ladder("tc:mma", a, a.t())
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: variant must be one of"):
        G.run_ladder("tc:nope", a.float(), a.t().float())


@requires_cuda
def test_split_k_epilogues_cuda():
    """Small outputs with long K split K across CTAs (fp32 partial sums, then a reduce kernel that
    adds them in a fixed order and applies the epilogue). Shapes the dispatcher splits 8, 3 and 4
    ways on an H100 (132 SMs; 16, 3 and 4 in TF32, whose k-tiles are half as deep), a last tile
    row that is partly outside M, addmm's beta * self and linear's bias in the epilogue, in every
    tensor-core dtype, through the op and through the persistent ladder steps."""
    shapes = [(1, 256, 4096), (130, 384, 8192), (67, 1000, 4800)]
    for dtype in HALF_DTYPES + [torch.float32]:
        with tf32_mode(True):
            for i, (m, n, k) in enumerate(shapes):
                a = make_tensor((m, k), dtype, "cuda", seed=10 + i) / k**0.5
                w = make_tensor((n, k), dtype, "cuda", seed=20 + i)
                s = make_tensor((m, n), dtype, "cuda", seed=30 + i)
                bias = make_tensor((n,), dtype, "cuda", seed=40 + i)
                bound = half_tol(dtype, k)
                ref = ref_mm(a, w.t())
                out = cudasteps.addmm(s, a, w.t(), beta=0.5, alpha=-2.0)
                assert rel_err(out, 0.5 * s.double().cpu() - 2.0 * ref) < bound, (dtype, m, n, k)
                out = cudasteps.linear(a, w, bias)
                assert rel_err(out, ref + bias.double().cpu()) < bound, (dtype, m, n, k)
                if torch.cuda.get_device_capability() == (9, 0):
                    # tc:ws_multicast is built for bf16 alone, tc:ws_pingpong for bf16 and fp16.
                    ladder_only = {torch.bfloat16: ("tc:ws_multicast", "tc:ws_pingpong"),
                                   torch.float16: ("tc:ws_pingpong",)}.get(dtype, ())
                    for step in ("tc:ws_persistent",) + ladder_only:
                        out = G.run_ladder(step, a, w.t())
                        assert rel_err(out, ref) < bound, (step, dtype, m, n, k)


_WS_REASON = _tc_step_reason("tc:ws_persistent")


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
def test_ws_persistent_tuning_variants():
    """tc:ws_persistent:bn<64|128|256>:bm<128|192>:s<splits> forces the tile width and rows and
    split-K (for sweeps), tc:ws_multicast:bn<128|256>:s<splits> the cluster kernel's: every forced
    combination is still the exact product, and malformed fields are refused (bn64 and bm192, the
    128 x 64 and 192 x 128 tiles, for float32 and for the cluster kernel by name)."""
    for dtype in G.TC_DTYPES:
        half = dtype != torch.float32
        with tf32_mode(True):
            for i, (m, n, k) in enumerate([(130, 384, 2048), (64, 300, 4096), (257, 129, 100)]):
                a = make_tensor((m, k), dtype, "cuda", seed=60 + i) / k**0.5
                b = make_tensor((n, k), dtype, "cuda", seed=70 + i).t()
                ref = ref_mm(a, b)
                fields_list = ["bn128", "bn256", "s1", "s3", "bn128:s5", "bn256:s16", "s16:bn128"]
                if half:
                    fields_list += ["bn64", "bn64:s7", "bn64:ts1", "bm192", "bm192:s3", "bm192:bn128"]
                for fields in fields_list:
                    out = G.run_ladder(f"tc:ws_persistent:{fields}", a, b)
                    assert rel_err(out, ref) < half_tol(dtype, k), (fields, dtype, m, n, k)
                if dtype == torch.bfloat16:  # tc:ws_multicast is built for bf16 alone
                    for fields in ("s3", "bn256:s2", "bn128"):
                        out = G.run_ladder(f"tc:ws_multicast:{fields}", a, b)
                        assert rel_err(out, ref) < half_tol(dtype, k), (fields, m, n, k)
    f32 = make_tensor((8, 8), torch.float32, "cuda")
    for fields in ("bn64", "bm192"):
        with pytest.raises(RuntimeError, match=rf"'tc:ws_persistent:{fields}': 128 x 64 and 192 x 128 tiles"):
            G.run_ladder(f"tc:ws_persistent:{fields}", f32, f32)
    a = make_tensor((8, 8), torch.bfloat16, "cuda")
    wide_tall = r"'tc:ws_persistent:bm192:bn256': 192-row tiles \(bm192\) are 128 wide"
    with pytest.raises(RuntimeError, match=wide_tall):
        G.run_ladder("tc:ws_persistent:bm192:bn256", a, a)
    for bad in ("bn32", "bm64", "s0", "x2", "s", "bn", "s1:", "s1000", "ts2", "ts", "pdl2"):
        with pytest.raises(RuntimeError, match="tuning fields of 'tc:ws_persistent:"):
            G.run_ladder(f"tc:ws_persistent:{bad}", a, a)
    for bad in ("bn64", "bm192", "ts1", "s2:ts0"):
        with pytest.raises(RuntimeError, match=rf"'tc:ws_multicast:{bad}': tc:ws_multicast takes bn128"):
            G.run_ladder(f"tc:ws_multicast:{bad}", a, a)


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
@pytest.mark.parametrize("ta", [False, True], ids=["a_rowmajor", "a_transposed"])
@pytest.mark.parametrize("tb", [False, True], ids=["b_rowmajor", "b_transposed"])
def test_ws_tall_tiles(ta, tb):
    """tc:ws_persistent:bm192 (192 x 128 tiles, three consumer warpgroups) in every layout: within
    the dtype's bound of the float64 product, and bitwise the 128 x 128 tiles' product where
    neither splits K (each output element gets the same wgmmas in the same k order): a 3072 x 1024
    output (the weight-gradient shape the launcher gives these tiles), odd edges with a tile
    row's last warpgroups below M, and one tile row taller than M."""
    for dtype in (torch.bfloat16, torch.float16):
        for i, (m, n, k) in enumerate([(3072, 1024, 1000), (700, 260, 333), (100, 136, 64)]):
            a = layout(make_tensor((m, k), dtype, "cuda", seed=300 + i) / k**0.5, ta)
            b = layout(make_tensor((k, n), dtype, "cuda", seed=310 + i), tb)
            tall = G.run_ladder("tc:ws_persistent:bm192", a, b)
            assert rel_err(tall, ref_mm(a, b)) < half_tol(dtype, k), (dtype, m, n, k)
            assert torch.equal(tall, G.run_ladder("tc:ws_persistent:bn128:ts0", a, b)), (dtype, m, n, k)


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
def test_ws_skinny_tiles():
    """tc:ws_persistent:bt<16|32|64>[:c2|:k2|:w4|:h1|:g8], the skinny tiles of few-row linears (the
    swapped product W x^T in 64 x bt tiles, stored transposed; c2: in pairs sharing the weight
    tile; w4 (bf16): in clusters of 4 weight tiles sharing the token tile, with c2 both (4 x 2
    clusters of 8 CTAs); k2: in pairs splitting each tile's K, the halves added in the first CTA's
    shared memory; h1: the loads with L2 cache hints; g8: the raster before group 1): within the
    dtype's bound of the float64 product, every element written (poisoned output), for token
    counts below, at and above a tile (a cluster's tiles past the tokens and past the weight's rows
    too), K no multiple of a k-tile and of one k-tile (k2's second half empty), feature counts no
    multiple of 64; the clusters sharing tiles, h1 and g8 bitwise the unclustered tiles' product
    (each tile's sums in the same order), k2 the same bits run to run; and refused by name where
    not built."""
    for dtype in (torch.bfloat16, torch.float16):
        shapes = [
            (32, 4096, 4096),
            (17, 300, 1000),
            (64, 1000, 4104),
            (5, 130, 64),
            (100, 64, 520),
            (128, 200, 1032),
        ]
        for i, (m, n, k) in enumerate(shapes):
            x = make_tensor((m, k), dtype, "cuda", seed=600 + i) / k**0.5
            w = make_tensor((n, k), dtype, "cuda", seed=610 + i)
            alone = {}
            clusters = ("bt32:w4", "bt64:w4", "w4:c2:bt32", "bt64:w4:c2") if dtype == torch.bfloat16 else ()
            for fields in ("bt16", "bt32", "bt64", "bt16:c2", "bt32:c2", "c2:bt64", *clusters, "bt16:k2",
                           "bt32:k2", "k2:bt64", "bt32:h1", "bt64:h1", "bt64:g8", "bt32:g8"):
                poison_allocator(m * n, dtype)
                out = G.run_ladder(f"tc:ws_persistent:{fields}", x, w.t())
                assert rel_err(out, ref_mm(x, w.t())) < half_tol(dtype, k), (fields, dtype, m, n, k)
                bt = next(f for f in fields.split(":") if f.startswith("bt"))
                if fields == bt:
                    alone[bt] = out
                elif "k2" in fields:
                    again = G.run_ladder(f"tc:ws_persistent:{fields}", x, w.t())
                    assert torch.equal(out, again), (fields, dtype, m, n, k)
                else:
                    assert torch.equal(out, alone[bt]), (fields, dtype, m, n, k)
    x = make_tensor((8, 64), torch.bfloat16, "cuda")
    with pytest.raises(RuntimeError, match=r"'tc:ws_persistent:bt16:bn64': the skinny tiles"):
        G.run_ladder("tc:ws_persistent:bt16:bn64", x, x.t())
    with pytest.raises(RuntimeError, match=r"'tc:ws_persistent:bn64:c2': clusters of two CTAs \(c2\)"):
        G.run_ladder("tc:ws_persistent:bn64:c2", x, x.t())
    with pytest.raises(RuntimeError, match=r"'tc:ws_persistent:bn64:k2': the split along K in clusters"):
        G.run_ladder("tc:ws_persistent:bn64:k2", x, x.t())
    for fields in ("bt32:c2:k2", "bt64:w4:k2"):
        with pytest.raises(RuntimeError, match=rf"'tc:ws_persistent:{fields}': the skinny tiles split"):
            G.run_ladder(f"tc:ws_persistent:{fields}", x, x.t())
    with pytest.raises(RuntimeError, match=r"'tc:ws_persistent:bn64:w4': clusters sharing the token"):
        G.run_ladder("tc:ws_persistent:bn64:w4", x, x.t())
    for fields, operand in (("bt16:w4", x), ("bt32:w4", x.half())):
        refused = rf"'tc:ws_persistent:{fields}': .* bfloat16 in bt32 and bt64 only"
        with pytest.raises(RuntimeError, match=refused):
            G.run_ladder(f"tc:ws_persistent:{fields}", operand, operand.t())
    with pytest.raises(RuntimeError, match=r"'tc:ws_persistent:bt64:c2:h1': the skinny tiles' L2 hints"):
        G.run_ladder("tc:ws_persistent:bt64:c2:h1", x, x.t())
    for fields in ("bt32:w2", "bt32:w8"):
        with pytest.raises(RuntimeError, match=rf"tuning fields of 'tc:ws_persistent:{fields}'"):
            G.run_ladder(f"tc:ws_persistent:{fields}", x, x.t())
    fp32_refused = r"'tc:ws_persistent:bt32': the skinny tiles .* bfloat16 and float16"
    with pytest.raises(RuntimeError, match=fp32_refused):
        G.run_ladder("tc:ws_persistent:bt32", x.float(), x.float().t())
    with pytest.raises(RuntimeError, match=r"tuning fields of 'tc:ws_persistent:bt8'"):
        G.run_ladder("tc:ws_persistent:bt8", x, x.t())


def dram_bytes_per_s_per_sm():
    """common/device.cpp's dram_bytes_per_s_per_sm for device 0: its peak DRAM bandwidth per SM
    (the memory clock, two transfers a clock, times the bus width, over the SMs)."""
    props = torch.cuda.get_device_properties(0)
    if not hasattr(props, "memory_clock_rate"):
        pytest.skip(f"torch {torch.__version__} does not report the memory clock the rule reads")
    return 2e3 * props.memory_clock_rate * props.memory_bus_width / 8 / props.multi_processor_count


FAST_DRAM_PER_SM = 30e9  # sm90/scheduler.cuh's kFastDramPerSm


def split_fills_waves(units, sms):
    """sm90/scheduler.cuh's split_fills_waves: the halves of `units` fill the waves better by a
    tenth or more."""
    r1, r2 = -(-units // sms), -(-2 * units // sms)
    return 20 * units * r1 >= 10 * units * r2 + r1 * r2 * sms


def decode_skinny_tiles(m, n, k, sms, dram_per_sm):
    """sm90/scheduler.cuh's decode_skinny_tiles: the ladder fields (``bt16`` or ``bt16:k2``) of the
    skinny tiles a linear of 2-16 tokens runs in ("": the few-row path, gemv/)."""
    weight_tiles = -(-n // 64)
    if m < 2 or m > 16 or 5 * weight_tiles < 2 * sms:
        return ""
    if 2 * weight_tiles <= sms and k >= 8192:
        return "bt16:k2"
    if dram_per_sm >= FAST_DRAM_PER_SM and m >= 8:
        return "bt16:k2" if split_fills_waves(weight_tiles, sms) else "bt16"
    if m <= 8:
        return ""

    def last_wave_full_enough(units):
        return 20 * (units - (-(-units // sms) - 1) * sms) >= 9 * sms

    if last_wave_full_enough(weight_tiles):
        return "bt16"
    return "bt16:k2" if last_wave_full_enough(2 * weight_tiles) else ""


def skinny_tiles(m, n, k, sms, dram_per_sm):
    """sm90/scheduler.cuh's skinny_tiles: the ladder fields (``bt<n>`` or ``bt<n>:k2``) of the
    skinny tiles a linear of m tokens and n output features runs in ("": none)."""
    weight_tiles = -(-n // 64)
    if m <= 16:
        return decode_skinny_tiles(m, n, k, sms, dram_per_sm)
    if m > 128 or weight_tiles * 9 < sms:
        return ""
    bt32_tiles = weight_tiles * -(-m // 32)
    small_weight = weight_tiles * 3 <= sms
    if small_weight and 2 * bt32_tiles <= sms:
        return "bt32:k2"
    if dram_per_sm >= FAST_DRAM_PER_SM and m <= 64:
        bt = 32 if m <= 32 else 64
        return f"bt{bt}:k2" if split_fills_waves(weight_tiles * -(-m // bt), sms) else f"bt{bt}"
    if 32 < m <= 64 and 8 * bt32_tiles <= 7 * sms:
        return "bt32"
    if small_weight:
        half_empty = m > 64 and 0 < m % 64 <= 32
        if 2 * weight_tiles * -(-m // 64) <= sms and not half_empty:
            return "bt64:k2"
        if bt32_tiles <= sms:
            return "bt32"
    if m <= 64:
        return "bt32" if m <= 32 else "bt64"
    if 2 * weight_tiles > sms or (dram_per_sm >= FAST_DRAM_PER_SM and k >= 8192):
        return ""
    return "bt64"


def few_rows_bn128(m, n, sms, dram_per_sm):
    """sm90/scheduler.cuh's few_rows_bn128: 65-128 tokens past the skinny tiles in 128 x 128 tiles."""
    return dram_per_sm >= FAST_DRAM_PER_SM and 64 < m <= 128 and 9 * -(-n // 64) >= sms


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
def test_few_rows_rules():
    """Linears of 17-128 tokens: in the layout x @ weight^T the skinny tiles where
    sm90/scheduler.cuh's skinny_tiles says (bitwise tc:ws_persistent:bt<32|64>[:k2]'s output),
    else, for at most 64 rows whose 128 x 128 tiles leave half the SMs idle, those tiles in
    split-K's k ranges (few_rows_split_k: bitwise tc:ws_persistent:bn128:ts0's output, the same
    tiles and ranges), and with fast DRAM per SM 65-128 rows in 128 x 128 tiles (few_rows_bn128:
    bitwise tc:ws_persistent:bn128's output); x @ weight with the weight stored K x N takes the
    split-K rule only. Every output within the bound of the float64 product (poisoned output).
    Odd token counts, K no multiple of a k-tile, a weight with a partial last tile, for this GPU's
    SM count and DRAM bandwidth per SM."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dram_per_sm = dram_bytes_per_s_per_sm()
    for dtype in (torch.bfloat16, torch.float16):
        shapes = [(17, 4096, 4096), (32, 4096, 1000), (64, 2000, 4104), (40, 300, 8192),
                  (48, 4100, 520), (100, 4096, 1000), (128, 3000, 300), (120, 14336, 256),
                  (100, 2000, 1000), (70, 1100, 264), (128, 520, 4104), (48, 1000, 520),
                  (64, 2560, 1000), (96, 2560, 1000), (128, 1000, 4100), (96, 2000, 1000),
                  (80, 4096, 8200)]
        for i, (m, n, k) in enumerate(shapes):
            x = make_tensor((m, k), dtype, "cuda", seed=400 + i) / k**0.5
            w = make_tensor((n, k), dtype, "cuda", seed=410 + i)
            w_kn = w.t().contiguous()  # the same weight stored K x N: B is not K-major
            few_rows = m <= 64 and -(-n // 128) * 2 <= sms
            for b, fields in ((w.t(), skinny_tiles(m, n, k, sms, dram_per_sm)), (w_kn, "")):
                poison_allocator(m * n, dtype)
                out = cudasteps.mm(x, b)
                assert rel_err(out, ref_mm(x, w.t())) < half_tol(dtype, k), (dtype, m, n, k)
                if fields:
                    assert torch.equal(out, G.run_ladder(f"tc:ws_persistent:{fields}", x, b)), (m, n, k)
                elif few_rows:
                    same_tiles = G.run_ladder("tc:ws_persistent:bn128:ts0", x, b)
                    assert torch.equal(out, same_tiles), (dtype, m, n, k)
                elif few_rows_bn128(m, n, sms, dram_per_sm) and b is not w_kn:
                    same_tiles = G.run_ladder("tc:ws_persistent:bn128", x, b)
                    assert torch.equal(out, same_tiles), (dtype, m, n, k)


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
def test_decode_skinny_rule():
    """Linears of 2-16 tokens in the layout x @ weight^T: the skinny tiles with 16 tokens a tile
    where sm90/scheduler.cuh's decode_skinny_tiles says (bitwise tc:ws_persistent:bt16[:k2]'s
    output), else the few-row path (bitwise gemv:mma's); the swapped product w @ x^T always the
    latter. Token counts of a partial tile, K no multiple of a k-tile, weights of a partial last
    tile, each side of the rule's bounds for this GPU's SM count and DRAM bandwidth per SM; every
    output within the bound of the float64 product (poisoned output)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dram_per_sm = dram_bytes_per_s_per_sm()
    rows_for = {"two_fifths": -(-2 * sms // 5) * 64, "half": (sms // 2) * 64}
    # Weights whose tiles leave a short last wave: of a quarter of the SMs (their halves' fills
    # half), of a sixteenth (neither fills 9/20: the few-row path).
    rows_for["quarter_tail"] = (sms + sms // 4) * 64 - 10
    rows_for["short_tail"] = (sms + sms // 16) * 64
    shapes = [(16, 4096, 1000), (9, rows_for["two_fifths"] - 30, 520), (12, 8200, 264),
              (2, rows_for["half"], 8200), (5, rows_for["two_fifths"], 8192),
              (16, rows_for["half"] + 4, 9000), (8, 14336, 256), (16, 2560, 4096),
              (3, rows_for["half"] + 128, 8192), (7, 4096, 8184),
              (16, rows_for["quarter_tail"], 4096), (11, rows_for["short_tail"], 520)]
    for dtype in (torch.bfloat16, torch.float16):
        for i, (m, n, k) in enumerate(shapes):
            x = make_tensor((m, k), dtype, "cuda", seed=500 + i) / k**0.5
            w = make_tensor((n, k), dtype, "cuda", seed=520 + i)
            poison_allocator(m * n, dtype)
            out = cudasteps.mm(x, w.t())
            assert rel_err(out, ref_mm(x, w.t())) < half_tol(dtype, k), (dtype, m, n, k)
            fields = decode_skinny_tiles(m, n, k, sms, dram_per_sm)
            same = G.run_ladder(f"tc:ws_persistent:{fields}" if fields else "gemv:mma", x, w.t())
            assert torch.equal(out, same), (dtype, m, n, k, fields)
            swapped = cudasteps.mm(w, x.t())
            assert torch.equal(swapped, G.run_ladder("gemv:mma", w, x.t())), (dtype, m, n, k)
    # The rule's edges here: the shapes above take each branch at least once.
    taken = {decode_skinny_tiles(m, n, k, sms, dram_per_sm) for m, n, k in shapes}
    assert taken == {"", "bt16", "bt16:k2"}, taken
    # linear's bias and addmm's beta * C go through the skinny tiles' transposed store too (a 3-D
    # input; 12 tokens against three fifths of the SMs' tiles in bt16, 2 tokens against long K
    # split along K).
    for m, k, fields in ((12, 1000, "bt16"), (2, 8200, "bt16:k2")):
        n = -(-3 * sms // 5) * 64 if m > 8 else rows_for["half"]
        assert decode_skinny_tiles(m, n, k, sms, dram_per_sm) == fields, (m, n, k)
        for dtype in (torch.bfloat16, torch.float16):
            x = make_tensor((m, k), dtype, "cuda", seed=540) / k**0.5
            w = make_tensor((n, k), dtype, "cuda", seed=541)
            bias = make_tensor((n,), dtype, "cuda", seed=542)
            poison_allocator(m * n, dtype)
            out = cudasteps.linear(x.view(2, m // 2, k), w, bias)
            ref = ref_mm(x, w.t()) + bias.double().cpu()
            assert rel_err(out.reshape(m, n), ref) < half_tol(dtype, k), (dtype, m, n, k)
            c = make_tensor((m, n), dtype, "cuda", seed=543)
            out = cudasteps.addmm(c, x, w.t(), beta=0.5, alpha=-2.0)
            ref = 0.5 * c.double().cpu() - 2.0 * ref_mm(x, w.t())
            assert rel_err(out, ref) < half_tol(dtype, k), (dtype, m, n, k)


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
def test_programmatic_dependent_launch():
    """The persistent kernels start under the tail of the kernel before them (programmatic
    dependent launch) and wait for it before touching memory: a chain of products, each reading
    the one before it (and the allocator handing the freed inputs to later outputs), eagerly and
    replayed from a CUDA graph, gives bitwise the chain computed with a device synchronisation
    between its steps; and the ladder's pdl0 (an ordinary launch) the same bits as the default.
    The few-row path (8 tokens: its mma kernel and the combine of its split), skinny tiles, split-K
    with its reduce, the tail split, one and two waves of tiles."""
    def chain(x, ws, sync=False):
        for w in ws:
            x = cudasteps.linear(x, w)
            if sync:
                torch.cuda.synchronize()
        return x

    for m, n in [(8, 4096), (48, 4096), (1024, 1024), (3000, 2000), (300, 260)]:
        ws = [make_tensor((n, n), torch.bfloat16, "cuda", seed=700 + i) / n**0.5 for i in range(6)]
        x0 = make_tensor((m, n), torch.bfloat16, "cuda", seed=710)
        expected = chain(x0, ws, sync=True)
        assert torch.equal(chain(x0, ws), expected), (m, n)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = chain(x0, ws)
        graph.replay()
        assert torch.equal(out, expected), (m, n)
        plain = G.run_ladder("tc:ws_persistent", x0, ws[0].t())
        for fields in ("pdl0", "pdl1"):
            assert torch.equal(G.run_ladder(f"tc:ws_persistent:{fields}", x0, ws[0].t()), plain), (m, n)
        if m <= 16:  # the few-row path's mma kernel and its combine
            plain = G.run_ladder("gemv:mma:s4", x0, ws[0].t())
            assert torch.equal(G.run_ladder("gemv:mma:s4:pdl0", x0, ws[0].t()), plain), (m, n)


# Tail-split shapes on an H100's 132 SMs: fewer tiles than SMs (each cut into up to 16 k ranges),
# one to two waves (the partial wave's tiles cut), K no multiple of a k-tile, and a 2 x 2-tile
# output against a long K (8 ranges of 8 k-tiles).
TAIL_SPLIT_SHAPES = [
    (300, 260, 5000),
    (1664, 1536, 1000),
    (2200, 2100, 2000),
    (129, 131, 4099),
    (1024, 1024, 8192),
]


@pytest.mark.skipif(bool(_WS_REASON), reason=_WS_REASON or "unused")
@pytest.mark.parametrize("ta", [False, True], ids=["a_rowmajor", "a_transposed"])
def test_ws_tail_split(ta):
    """tc:ws_persistent:ts1 (the tail split forced): the last wave's tiles cut into k ranges, one
    CTA each, are summed by the last part to arrive, in k order, so the product is the exact one
    within the dtype's bound, close to the uncut kernel's (ts0), and bitwise the same on every run
    and in a CUDA graph's replays (the arrival counts are zeroed by each launch)."""
    for dtype in G.TC_DTYPES:
        with tf32_mode(True):
            for i, (m, n, k) in enumerate(TAIL_SPLIT_SHAPES):
                a = layout(make_tensor((m, k), dtype, "cuda", seed=80 + i) / k**0.5, ta)
                b = make_tensor((n, k), dtype, "cuda", seed=90 + i).t()
                ref = ref_mm(a, b)
                cut = G.run_ladder("tc:ws_persistent:ts1", a, b)
                whole = G.run_ladder("tc:ws_persistent:ts0", a, b)
                assert rel_err(cut, ref) < half_tol(dtype, k), (dtype, m, n, k)
                assert rel_err(cut, whole.double().cpu()) < half_tol(dtype, k), (dtype, m, n, k)
                for _ in range(2):
                    assert torch.equal(G.run_ladder("tc:ws_persistent:ts1", a, b), cut), (dtype, m, n, k)
            # The rule cuts 1024 x 1024 x 8192 (64 tiles on 132 SMs): mm gives ts1's bits.
            if dtype == torch.bfloat16 and torch.cuda.get_device_properties(0).multi_processor_count >= 100:
                assert torch.equal(cudasteps.mm(a, b), cut)
    a = make_tensor((1664, 1000), torch.bfloat16, "cuda", seed=7)
    b = make_tensor((1536, 1000), torch.bfloat16, "cuda", seed=8).t()
    eager = G.run_ladder("tc:ws_persistent:ts1", a, b)
    out = torch.full_like(eager, float("nan"))
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        out.copy_(G.run_ladder("tc:ws_persistent:ts1", a, b))
    for _ in range(3):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)


_PINGPONG_REASON = _tc_step_reason("tc:ws_pingpong")


@pytest.mark.skipif(bool(_PINGPONG_REASON), reason=_PINGPONG_REASON or "unused")
def test_ws_pingpong_many_tiles():
    """tc:ws_pingpong hands a CTA's tiles to its two consumer warpgroups in turn, each walking the
    shared ring past the other's stages: outputs with several tiles per SM (so both warpgroups
    take turns, some CTAs one tile more than others), K of one k-tile and of many, partial edge
    tiles, every layout, bf16 and fp16 (the dtypes it is built for)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    side = 128 * int((3 * sms) ** 0.5 + 1)  # >= 3 tiles per SM
    shapes = [(side + 37, side - 51, 64), (side, side, 1000), (1100, 2200, 7)]
    for dtype in HALF_DTYPES:
        with tf32_mode(True):
            for i, (m, n, k) in enumerate(shapes):
                a = make_tensor((m, k), dtype, "cuda", seed=80 + i) / k**0.5
                b = make_tensor((k, n), dtype, "cuda", seed=90 + i)
                ref = ref_mm(a, b)
                for ta in (False, True):
                    for tb in (False, True):
                        out = G.run_ladder("tc:ws_pingpong", layout(a, ta), layout(b, tb))
                        err = rel_err(out, ref)
                        assert err < half_tol(dtype, k), (dtype, m, n, k, ta, tb, err)


_RS_REASON = _tc_step_reason("tc:ws_tf32_rs")


@pytest.mark.skipif(bool(_RS_REASON), reason=_RS_REASON or "unused")
def test_ws_tf32_rs():
    """tc:ws_tf32_rs loads its MN-major operand from shared memory into wgmma's register operand,
    the tile's rows renumbered so each lane's two rows are neighbours: row-major a @ row-major b
    (b in registers, the output stored transposed), column-major a @ column-major b (a in
    registers), and both MN-major (b transposed first). Shapes with several tiles per SM and both
    tile widths (128 x 256 when the wide tiles fill the SMs), ragged edges in M, N and K, one
    k-tile and many, misaligned views; tc:final (which runs it for one MN-major operand where the
    tiles fill half the SMs or the transpose would cost more than the idle SMs, and transposes
    elsewhere) with addmm's full and broadcast addend (the epilogue's checked stores) and without
    one (its unchecked stores for tiles inside the output, checked ones at the edges), bitwise
    equal to the ladder step; and the layouts and dtypes it refuses."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    side = 256 * int((sms) ** 0.5 + 1)  # >= sms tiles of 128 x 256
    shapes = [
        (side + 37, side - 51, 200),
        (1000, 1000, 1000),
        (67, 45, 33),
        (1, 1, 1),
        (130, 260, 7),
        (300, 129, 4099),
    ]
    for i, (m, n, k) in enumerate(shapes):
        a = make_tensor((m, k), torch.float32, "cuda", seed=100 + i) / k**0.5
        b = make_tensor((k, n), torch.float32, "cuda", seed=110 + i)
        ref = ref_mm(a, b)
        for ta, tb in ((False, False), (True, True), (True, False)):
            out = G.run_ladder("tc:ws_tf32_rs", layout(a, ta), layout(b, tb))
            err = rel_err(out, ref)
            assert out.shape == (m, n) and err < half_tol(torch.float32, k), (m, n, k, ta, tb, err)
    a = misaligned((45, 77), torch.float32, "cuda", seed=7)
    b = misaligned((77, 39), torch.float32, "cuda", seed=8)
    assert rel_err(G.run_ladder("tc:ws_tf32_rs", a, b), ref_mm(a, b)) < half_tol(torch.float32, 77)
    # tc:final: with one MN-major operand, those whose tiles fill half the SMs run tc:ws_tf32_rs
    # (bitwise the ladder step's); too few tiles with a narrow operand (1000^3, 300 x 129 on 132
    # SMs) transpose it first, as do the addmm products below with both MN-major.
    shapes = [(side, side + 3, 1000), (1000, 1000, 1000), (300, 129, 4099), (1000, 1500, 300),
              (1500, 1000, 300)]
    with tf32_mode(True):
        for i, (m, n, k) in enumerate(shapes):
            a = make_tensor((m, k), torch.float32, "cuda", seed=120 + i) / k**0.5
            b = make_tensor((k, n), torch.float32, "cuda", seed=130 + i)
            ref = ref_mm(a, b)
            for ta, tb in ((False, False), (True, True)):
                out = cudasteps.mm(layout(a, ta), layout(b, tb))
                assert rel_err(out, ref) < half_tol(torch.float32, k), (m, n, k, ta, tb)
                if -(-m // 128) * -(-n // 128) * 2 >= sms:
                    step = G.run_ladder("tc:ws_tf32_rs", layout(a, ta), layout(b, tb))
                    assert torch.equal(out, step), (m, n, k, ta, tb)
            for s in (
                make_tensor((m, n), torch.float32, "cuda", seed=140 + i),
                make_tensor((n,), torch.float32, "cuda", seed=150 + i),
            ):
                for ta, tb in ((False, False), (True, False), (True, True)):
                    out = cudasteps.addmm(s, layout(a, ta), layout(b, tb), beta=0.5, alpha=-2.0)
                    err = rel_err(out, 0.5 * s.double().cpu() - 2.0 * ref)
                    assert err < half_tol(torch.float32, k), (m, n, k, s.dim(), ta, tb, err)
    # Few rows against a wide row-major b (32 tiles, b 4096 wide): tc:final runs tc:ws_tf32_rs
    # (bitwise its output) where the transpose would outlast the product on this GPU's SMs
    # (hopper.cu's tc_hopper_tf32_rs_wanted); 512 x 512 x 2048 (16 tiles, b 512 wide) transposes.
    with tf32_mode(True):
        for i, (m, n, k) in enumerate([(64, 4096, 1000), (200, 4100, 520), (512, 512, 2048)]):
            a = make_tensor((m, k), torch.float32, "cuda", seed=160 + i) / k**0.5
            b = make_tensor((k, n), torch.float32, "cuda", seed=170 + i)
            out = cudasteps.mm(a, b)
            assert rel_err(out, ref_mm(a, b)) < half_tol(torch.float32, k), (m, n, k)
            tiles = -(-m // 128) * -(-n // 128)
            if 2 * tiles >= sms or 34 * (sms - tiles) <= n:
                assert torch.equal(out, G.run_ladder("tc:ws_tf32_rs", a, b)), (m, n, k)
            else:
                assert torch.equal(out, cudasteps.mm(a, b.t().contiguous().t())), (m, n, k)
    a = make_tensor((64, 32), torch.float32, "cuda")
    w = make_tensor((48, 32), torch.float32, "cuda", seed=1)
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: tc:ws_tf32_rs reads one operand MN-major"):
        G.run_ladder("tc:ws_tf32_rs", a, w.t())  # both K-major: tc:ws_persistent's layout
    with pytest.raises(RuntimeError, match=r"cudasteps.ladder_mm: self must be float32 \(run as TF32\)"):
        G.run_ladder("tc:ws_tf32_rs", a.bfloat16(), w.t().bfloat16())
