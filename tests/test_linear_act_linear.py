"""Tests for mm_bias_act_backward and linear_act_linear (csrc/gemm/linear_act.cpp, gemm_cuda.cpp,
gemm_autograd.cpp) and cudasteps.nn.MLP, which runs its last hidden layer and its output layer as
one linear_act_linear.

mm_bias_act_backward(grad, weight, x, bias, act) is bias_act_backward(grad @ weight, x, bias, act),
and runs those two ops; its ladder's `fused` step (Hopper: bf16/fp16, N a multiple of 8, an output
of at least half a wave of 128 x 128 tiles) is one GEMM whose epilogue applies the derivative to
the product as mm writes it and writes the bias gradient's column sums per 32 rows. The reference
is the float64 function of the same (rounded) inputs.
"""

import itertools

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, HAS_CUDA, make_tensor, rel_err, requires_cuda
from cudasteps import gemm as G
from cudasteps import nn as cnn

# linear_act's tests' activations, float64 reference functions, dtype epsilons and GPU check: the
# same family's.
from test_linear_act import ACTS, EPS, act64, hopper


def fused_runs(grad, weight, x, bias) -> bool:
    """Whether the ladder's fused step takes these operands (gemm_cuda.cpp,
    mm_bias_act_backward_fuses)."""
    m = grad.numel() // max(grad.shape[-1], 1)
    d, n = weight.shape
    aligned = bias is None or (
        bias.dtype in (x.dtype, torch.float32)
        and bias.stride(0) == 1
        and bias.data_ptr() % (2 * bias.element_size()) == 0
    )
    sms = torch.cuda.get_device_properties(grad.device).multi_processor_count if grad.is_cuda else 0
    return (
        grad.is_cuda
        and hopper()
        and x.dtype in (torch.bfloat16, torch.float16)
        and m > 16
        and n > 16
        and d > 0
        and n % 8 == 0
        and x.is_contiguous()
        and aligned
        and -(-m // 128) * -(-n // 128) * 2 > sms
    )


def reference(grad, weight, x, bias, act):
    """(grad_x, grad_bias) in float64 on the CPU."""
    g = grad.double().cpu() @ weight.double().cpu()
    z = x.double().cpu().clone()  # (x itself where it is float64 on the CPU)
    if bias is not None:
        z = z + bias.double().cpu()
    z.requires_grad_()
    act64(z, act).backward(g)
    gx = z.grad
    return gx, gx.reshape(-1, gx.shape[-1]).sum(0)


def tol(dtype, k, rows=1):
    # The product's rounding to the dtype and the derivative's value rounded again, fp32 sums over
    # K; the bias gradient adds `rows` of those in fp32.
    return 8 * EPS[dtype] + 4 * (max(k, 1) ** 0.5 + max(rows, 1) ** 0.5) * 2.0**-24


def operands(m, d, n, dtype, device, seed, bias=True, bias_dtype=None):
    grad = make_tensor((m, d), dtype, device, seed=seed, low=-2, high=2) / max(d, 1) ** 0.5
    weight = make_tensor((d, n), dtype, device, seed=seed + 1, low=-2, high=2)
    x = make_tensor((m, n), dtype, device, seed=seed + 2, low=-3, high=3)
    b = make_tensor((n,), bias_dtype or dtype, device, seed=seed + 3) if bias else None
    return grad, weight, x, b


def two_pass(grad, weight, x, bias, act):
    product = cudasteps.mm(grad.reshape(-1, weight.shape[0]), weight).view(x.shape)
    return cudasteps.bias_act_backward(product, x, bias, act)


def forms(grad, weight, x, bias):
    """(name, fn(grad, weight, x, bias, act)) for every form that takes these operands: the op,
    the ladder's two_pass step on CUDA, and its fused step where it runs."""
    out = [("op", cudasteps.mm_bias_act_backward)]
    if grad.is_cuda:
        out.append(("two_pass", lambda *a: G.run_mm_bias_act_backward_ladder("two_pass", *a)))
    if fused_runs(grad, weight, x, bias):
        out.append(("fused", lambda *a: G.run_mm_bias_act_backward_ladder("fused", *a)))
    return out


# Odd sizes (no multiple of any tile), 1, and on CUDA sizes the fused GEMM takes on Hopper (N a
# multiple of 8, enough tiles) with partial edge tiles in both directions: 1037 rows (the last
# 32-row group of the bias gradient's partial sums has 13 rows), 4100 x 1032.
SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 65), (70, 130, 257), (131, 31, 264)]
CUDA_SHAPES = SHAPES + [(1037, 520, 2056), (4100, 300, 1032), (2048, 512, 2048)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_mm_bias_act_backward_matches_float64_reference(device, act):
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
    shapes = CUDA_SHAPES if device == "cuda" else SHAPES
    for dtype, (m, d, n), has_bias in itertools.product(dtypes, shapes, (True, False)):
        if device == "cpu" and dtype in (torch.bfloat16, torch.float16) and m * n > 100000:
            continue
        grad, weight, x, b = operands(m, d, n, dtype, device, seed=10, bias=has_bias)
        ref_gx, ref_gb = reference(grad, weight, x, b, act)
        for name, fn in forms(grad, weight, x, b):
            gx, gb = fn(grad, weight, x, b, act)
            assert gx.dtype == dtype and gx.shape == x.shape and gx.is_contiguous()
            err = rel_err(gx, ref_gx)
            assert err < tol(dtype, d), (name, dtype, m, d, n, act, err)
            if has_bias:
                assert gb.dtype == dtype and gb.shape == b.shape
                err = rel_err(gb, ref_gb)
                assert err < tol(dtype, d, m), (name, dtype, m, d, n, act, err)
            else:
                assert gb is None


@pytest.mark.parametrize("device", DEVICES)
def test_fp32_bias_leading_dims_views_and_empty(device):
    """A float32 bias of 16-bit operands (autocast's), leading dims, non-contiguous and misaligned
    views (transposed grad and weight, a sliced x, a bias one element in: the fused GEMM repacks or
    the two-pass form runs), and sizes 0."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    m, d, n = (1037, 520, 2056) if device == "cuda" else (37, 20, 56)
    grad, weight, x, b = operands(m, d, n, dtype, device, seed=20)
    b32 = make_tensor((n,), torch.float32, device, seed=24)
    ref_gx, ref_gb = reference(grad, weight, x, b32, "gelu")
    for name, fn in forms(grad, weight, x, b32):
        gx, gb = fn(grad, weight, x, b32, "gelu")
        assert gb.dtype == torch.float32, name
        assert rel_err(gx, ref_gx) < tol(dtype, d) and rel_err(gb, ref_gb) < tol(dtype, d, m), name
    # Leading dims: [a, b, d] against [a, b, n].
    g3, x3 = grad[: 6 * (m // 6)].reshape(6, m // 6, d), x[: 6 * (m // 6)].reshape(6, m // 6, n)
    gx3, gb3 = cudasteps.mm_bias_act_backward(g3, weight, x3, b, "silu")
    ref_gx3, ref_gb3 = reference(g3, weight, x3, b, "silu")
    assert gx3.shape == x3.shape
    assert rel_err(gx3, ref_gx3) < tol(dtype, d) and rel_err(gb3, ref_gb3) < tol(dtype, d, m)
    # Views: grad and weight as transposes of their transposes, x a column slice of a wider
    # matrix, the bias misaligned.
    grad_t = grad.t().contiguous().t()
    weight_t = weight.t().contiguous().t()
    wide = make_tensor((m, n + 8), dtype, device, seed=25, low=-3, high=3)
    x_view = wide[:, 8:]
    b_store = make_tensor((n + 1,), dtype, device, seed=26)
    b_mis = b_store[1:]
    gxv, gbv = cudasteps.mm_bias_act_backward(grad_t, weight_t, x_view, b_mis, "gelu_tanh")
    ref_gxv, ref_gbv = reference(grad_t, weight_t, x_view, b_mis, "gelu_tanh")
    assert rel_err(gxv, ref_gxv) < tol(dtype, d) and rel_err(gbv, ref_gbv) < tol(dtype, d, m)
    # Sizes 0: no rows (zero bias gradient), D = 0 (a zero product: zero gradients), N = 0.
    for mm_, dd, nn_ in [(0, d, n), (m, 0, n), (m, d, 0)]:
        g0, w0, x0, b0 = operands(mm_, dd, nn_, dtype, device, seed=27)
        gx0, gb0 = cudasteps.mm_bias_act_backward(g0, w0, x0, b0, "gelu")
        assert gx0.shape == x0.shape and gb0.shape == b0.shape
        assert not gx0.any() and not gb0.any(), (mm_, dd, nn_)


@pytest.mark.skipif(not hopper(), reason="the fused GEMM runs on a compute capability 9.0 GPU")
def test_fused_agrees_with_two_pass_and_reproduces():
    """The fused step's epilogue applies bias_act_backward's own functor to the product as mm
    writes it: where the fused GEMM runs the tiles mm runs (2048 x 512 x 2048: 128 x 256 tiles,
    unsplit, either way), its grad_x is the two passes' bit for bit; elsewhere within the dtype's
    rounding. The bias gradient sums grad_x as written per 32 rows, then those in order: within
    the dtype's rounding of bias_act_backward's sums of the unrounded values, and the same bits on
    every run."""
    fused = lambda *a: G.run_mm_bias_act_backward_ladder("fused", *a)  # noqa: E731
    for dtype, act, (m, d, n), bias_dtype in itertools.product(
        (torch.bfloat16, torch.float16),
        ACTS,
        [(2048, 512, 2048), (1037, 520, 2056), (4100, 300, 1032)],
        ("same", torch.float32),
    ):
        grad, weight, x, b = operands(
            m, d, n, dtype, "cuda", seed=30, bias_dtype=dtype if bias_dtype == "same" else bias_dtype
        )
        assert fused_runs(grad, weight, x, b)
        gx, gb = fused(grad, weight, x, b, act)
        ref_gx, ref_gb = two_pass(grad, weight, x, b, act)
        assert all(torch.equal(u, v) for u, v in zip(cudasteps.mm_bias_act_backward(grad, weight, x, b, act),
                                                    (ref_gx, ref_gb))), (dtype, act, m, d, n)
        if (m, d, n) == (2048, 512, 2048):
            assert torch.equal(gx, ref_gx), (dtype, act, bias_dtype)
        else:
            assert rel_err(gx, ref_gx) < 2 * tol(dtype, d), (dtype, act, m, d, n)
        assert rel_err(gb, ref_gb) < tol(dtype, d, m), (dtype, act, m, d, n, rel_err(gb, ref_gb))
        again = fused(grad, weight, x, b, act)
        assert torch.equal(gx, again[0]) and torch.equal(gb, again[1]), (dtype, act, m, d, n)


@requires_cuda
def test_poisoned_memory_never_shows():
    """Every element of grad_x and of the bias gradient's partial sums is written: outputs
    allocated where NaN-filled blocks were just freed (the caching allocator hands them out again)
    hold no NaN."""
    for dtype in (torch.bfloat16, torch.float16):
        for m, d, n in [(1037, 520, 2056), (4100, 300, 1032), (131, 31, 264)]:
            grad, weight, x, b = operands(m, d, n, dtype, "cuda", seed=40)
            for name, fn in forms(grad, weight, x, b):
                for _ in range(4):
                    torch.full((m * n + 4096,), float("nan"), dtype=torch.float32, device="cuda")
                gx, gb = fn(grad, weight, x, b, "gelu")
                assert not gx.isnan().any() and not gb.isnan().any(), (name, dtype, m, d, n)


@pytest.mark.parametrize("device", DEVICES)
def test_mm_bias_act_backward_errors(device):
    """Each bad argument gets the op's message naming it, the same from the CPU and CUDA kernels and
    the fake kernel (meta tensors); an input that requires grad is refused (it is a backward)."""
    op = cudasteps.mm_bias_act_backward
    grad, weight, x, b = operands(5, 4, 6, torch.float32, device, seed=50)
    cases = [
        ((grad[0, 0], weight, x, b, "gelu"), r"grad must have at least 1 dimensions"),
        ((grad, weight[0], x, b, "gelu"), r"weight must be 2-D"),
        ((grad.int(), weight, x, b, "gelu"), r"grad must be float32, float64, float16 or bfloat16"),
        ((grad, weight.double(), x, b, "gelu"), r"weight must have the dtype of grad"),
        ((grad, weight, x.double(), b, "gelu"), r"x must have the dtype of grad"),
        ((grad, weight[:3], x, b, "gelu"), r"weight.size\(0\) must equal grad.size\(-1\) \(4\), got 3"),
        ((grad, weight, x[:, :5], b, "gelu"), r"x must have shape \[5, 6\]"),
        ((grad, weight, x, b[:5], "gelu"), r"bias must have shape \[6\]"),
        ((grad, weight, x, b.double(), "gelu"), r"bias must have the dtype of x \(Float\) or Float"),
        ((grad, weight, x, b, "tanh"), r"act must be one of none, relu, gelu, gelu_tanh, silu"),
    ]
    for args, message in cases:
        for convert in (lambda t: t, lambda t: t.to("meta")):
            conv = [convert(a) if isinstance(a, torch.Tensor) else a for a in args]
            with pytest.raises(RuntimeError, match=r"cudasteps.mm_bias_act_backward: " + message):
                op(*conv)
    with pytest.raises(RuntimeError, match=r"mm_bias_act_backward: an input requires grad"):
        op(grad, weight.requires_grad_(), x, b, "gelu")
    ladder = G.run_mm_bias_act_backward_ladder
    bad_variant = r"cudasteps.ladder_mm_bias_act_backward: variant must be one of two_pass, fused, got 'nope'"
    with pytest.raises(RuntimeError, match=bad_variant):
        ladder("nope", *(t.to("meta") for t in (grad, weight.detach(), x, b)), "gelu")
    if device == "cuda":
        with pytest.raises(RuntimeError, match=bad_variant):
            ladder("nope", grad, weight.detach(), x, b, "gelu")
        # Too few rows and fp32 operands: the fused step is refused, not run.
        with pytest.raises(RuntimeError, match=r"ladder_mm_bias_act_backward: the fused backward needs"):
            ladder("fused", grad, weight.detach(), x, b, "gelu")
    if device == "cuda":
        with pytest.raises(RuntimeError, match=r"mm_bias_act_backward: x must be on grad's device"):
            op(grad, weight.detach(), x.cpu(), b, "gelu")


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for dtype in (torch.float32, torch.bfloat16):
        grad, weight, x, b = operands(10, 4, 8, dtype, device, seed=60)
        torch.library.opcheck(torch.ops.cudasteps.mm_bias_act_backward, (grad, weight, x, b, "gelu"))
        torch.library.opcheck(torch.ops.cudasteps.mm_bias_act_backward, (grad, weight, x, None, "relu"))
        inp = make_tensor((2, 5, 6), dtype, device, seed=61).requires_grad_()
        w1 = make_tensor((8, 6), dtype, device, seed=62).requires_grad_()
        b1 = make_tensor((8,), dtype, device, seed=63).requires_grad_()
        w2 = make_tensor((3, 8), dtype, device, seed=64).requires_grad_()
        b2 = make_tensor((3,), dtype, device, seed=65).requires_grad_()
        op = torch.ops.cudasteps.linear_act_linear.default
        torch.library.opcheck(op, (inp, w1, b1, w2, b2, "gelu"))
        torch.library.opcheck(op, (inp, w1, None, w2, None, "silu"))


# ---- linear_act_linear ----


def block_operands(m, k, h, d, dtype, device, seed, lead=()):
    x = make_tensor((*lead, m, k), dtype, device, seed=seed, low=-2, high=2) / max(k, 1) ** 0.5
    w1 = make_tensor((h, k), dtype, device, seed=seed + 1, low=-2, high=2)
    b1 = make_tensor((h,), dtype, device, seed=seed + 2)
    w2 = make_tensor((d, h), dtype, device, seed=seed + 3, low=-2, high=2) / max(h, 1) ** 0.5
    b2 = make_tensor((d,), dtype, device, seed=seed + 4)
    return x, w1, b1, w2, b2


def block64(x, w1, b1, w2, b2, act):
    return F.linear(act64(F.linear(x, w1, b1), act), w2, b2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_linear_act_linear_matches_float64_reference(device, act):
    """Output and all five gradients against the float64 block, for fp32 and bf16 (on Hopper the
    bf16 case at 1037 rows runs the fused backward GEMM)."""
    shapes = [(70, 33, 130, 17), (1037, 96, 1032, 72)] if device == "cuda" else [(70, 33, 130, 17)]
    for dtype, (m, k, h, d) in itertools.product((torch.float32, torch.bfloat16), shapes):
        leaves = [t.requires_grad_() for t in block_operands(m, k, h, d, dtype, device, seed=70)]
        out = cudasteps.linear_act_linear(*leaves, act)
        g = make_tensor(out.shape, dtype, device, seed=75)
        out.backward(g)
        refs = [t.detach().double().cpu().requires_grad_() for t in leaves]
        ref = block64(*refs, act)
        ref.backward(g.double().cpu())
        bound = 4 * tol(dtype, max(k, h), m)
        assert rel_err(out, ref) < bound, (dtype, act, m, rel_err(out, ref))
        for name, mine, theirs in zip(("input", "weight1", "bias1", "weight2", "bias2"), leaves, refs):
            err = rel_err(mine.grad, theirs.grad)
            assert err < bound, (dtype, act, m, name, err)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_act_linear_gradcheck_float64(device):
    for act in ACTS:
        args = [t.requires_grad_() for t in block_operands(5, 4, 7, 3, torch.float64, device, seed=80)]
        assert torch.autograd.gradcheck(lambda *a, act=act: cudasteps.linear_act_linear(*a, act), args)
        x, w1, _, w2, _ = args
        assert torch.autograd.gradcheck(
            lambda a, c, e, act=act: cudasteps.linear_act_linear(a, c, None, e, None, act), (x, w1, w2)
        )


@pytest.mark.parametrize("device", DEVICES)
def test_linear_act_linear_is_the_two_ops(device):
    """Forward: linear(linear_act(...)), bit for bit, with and without autograd recording and under
    bf16 autocast, which casts input, weight1, weight2 and bias2 as linear_act and linear do and
    leaves bias1 in float32 (its gradient comes back in float32)."""
    x, w1, b1, w2, b2 = block_operands(70, 33, 136, 24, torch.float32, device, seed=90)
    for dtype in (torch.float32, torch.bfloat16):
        args = [t.to(dtype) for t in (x, w1, b1, w2, b2)]
        expect = cudasteps.linear(cudasteps.linear_act(*args[:3], "gelu"), *args[3:])
        assert torch.equal(cudasteps.linear_act_linear(*args, "gelu"), expect)
        leaves = [t.detach().requires_grad_() for t in args]
        assert torch.equal(cudasteps.linear_act_linear(*leaves, "gelu"), expect)
    leaves = [t.detach().requires_grad_() for t in (x, w1, b1, w2, b2)]
    with torch.autocast(device, dtype=torch.bfloat16):
        out = cudasteps.linear_act_linear(*leaves, "gelu")
        expect = cudasteps.linear(cudasteps.linear_act(*leaves[:3], "gelu"), *leaves[3:])
    assert out.dtype == torch.bfloat16 and torch.equal(out, expect)
    out.float().sum().backward()
    assert all(t.grad is not None and t.grad.dtype == torch.float32 for t in leaves)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_act_linear_errors(device):
    op = cudasteps.linear_act_linear
    x, w1, b1, w2, b2 = block_operands(5, 4, 6, 3, torch.float32, device, seed=100)
    cases = [
        ((x, w1[:, :3], b1, w2, b2, "gelu"), r"weight.size\(1\) must equal input.size\(-1\) \(4\)"),
        ((x, w1, b1[:5], w2, b2, "gelu"), r"bias must have shape \[6\]"),
        ((x, w1, b1, w2, b2, "tanh"), r"act must be one of"),
        ((x, w1, b1, w2[0], b2, "gelu"), r"weight2 must be 2-D"),
        ((x, w1, b1, w2.double(), b2, "gelu"), r"weight2 must have the dtype of input"),
        ((x, w1, b1, w2[:, :5], b2, "gelu"), r"weight2.size\(1\) must equal weight1.size\(0\) \(6\), got 5"),
        ((x, w1, b1, w2, b2.double(), "gelu"), r"bias2 must have the dtype of input"),
        ((x, w1, b1, w2, b2[:2], "gelu"), r"bias2 must have shape \[3\]"),
    ]
    for args, message in cases:
        for convert in (lambda t: t, lambda t: t.to("meta"), lambda t: t.detach().requires_grad_()):
            conv = [convert(a) if isinstance(a, torch.Tensor) else a for a in args]
            with pytest.raises(RuntimeError, match=r"cudasteps.linear_act_linear: " + message):
                op(*conv)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_matches_eager(device):
    """linear_act_linear under torch.compile(fullgraph=True), forward and backward (the op's fake
    kernel traces it, its C++ autograd node runs the backward), against eager."""
    x, w1, b1, w2, b2 = block_operands(40, 24, 64, 16, torch.float32, device, seed=110)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(
        lambda *a: cudasteps.linear_act_linear(*a, "gelu_tanh"), fullgraph=True, backend=backend
    )
    results = []
    for fn in (lambda *a: cudasteps.linear_act_linear(*a, "gelu_tanh"), compiled):
        leaves = [t.detach().requires_grad_() for t in (x, w1, b1, w2, b2)]
        out = fn(*leaves)
        out.square().sum().backward()
        results.append([out] + [t.grad for t in leaves])
    for e, c in zip(*results):
        assert torch.allclose(c, e, rtol=1e-5, atol=1e-6)


# ---- cudasteps.nn.MLP ----


def _mlp_pair(dims, dtype, device, seed):
    torch.manual_seed(seed)
    fused = cnn.MLP(dims, "gelu", device=device, dtype=dtype)
    layered = cnn.MLP(dims, "gelu", device=device, dtype=dtype)
    layered.load_state_dict(fused.state_dict())
    return fused, layered


def _kernel_ops(fn) -> list:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if HAS_CUDA else [])
    with profile(activities=activities) as prof:
        fn()
    return [e.key for e in prof.key_averages()]


@pytest.mark.parametrize("device", DEVICES)
def test_mlp_runs_the_block_op_and_matches_its_layers(device):
    """MLP runs its last hidden layer and its output layer as one linear_act_linear: the same
    output and gradients as calling the layers, bit for bit (its backward runs mm_bias_act_backward,
    the same kernels as the layers' nodes). A hook on a layer keeps the layers separate calls
    (FSDP2 unshards parameters in one)."""
    dims = [48, 1032, 1032, 40] if device == "cuda" else [12, 24, 32, 8]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    fused, layered = _mlp_pair(dims, dtype, device, seed=120)
    x = make_tensor((1100 if device == "cuda" else 30, dims[0]), dtype, device, seed=121)
    out = fused(x)
    assert "cudasteps::linear_act_linear" in _kernel_ops(lambda: fused(x))
    ref = layered.layers(x)
    assert torch.equal(out, ref)
    g = make_tensor(out.shape, dtype, device, seed=122)
    out.backward(g)
    ref.backward(g)
    for (name, p), q in zip(fused.named_parameters(), layered.parameters()):
        assert torch.equal(p.grad, q.grad), name
    names = _kernel_ops(lambda: fused(x).backward(g))
    assert "cudasteps::mm_bias_act_backward" in names
    # With a hook on the output layer the layers are called one by one: no linear_act_linear.
    handle = fused.layers[-1].register_forward_pre_hook(lambda module, args: None)
    try:
        assert "cudasteps::linear_act_linear" not in _kernel_ops(lambda: fused(x))
        assert torch.equal(fused(x), ref)
    finally:
        handle.remove()
