"""Tests for the elementwise family: bias_act (+ backward, and the _amax forms of both), add, mul,
sum_leading, the ladder."""

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, HAS_CUDA, make_tensor, misaligned, rel_err, requires_cuda

ACTS = ["none", "relu", "gelu", "gelu_tanh", "silu"]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# Relative error bounds vs a float64 reference computed from the same (rounded) inputs: the
# kernels compute in fp32 and round once, so the error is about the output dtype's half-ulp.
TOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# Shapes not a multiple of any vector width or tile, plus sizes 0 and 1.
SHAPES = [(1,), (7,), (1, 1), (3, 5), (4, 8), (5, 33), (2, 3, 17), (64, 130), (0, 5), (3, 0)]


def ref_act(z, act):
    if act == "none":
        return z
    if act == "relu":
        return torch.relu(z)
    if act == "gelu":
        return F.gelu(z)
    if act == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    return F.silu(z)


def ref_bias_act(x, bias, act):
    z = x.double() + (bias.double() if bias is not None else 0.0)
    return ref_act(z, act)


def ref_bias_act_grads(grad, x, bias, act):
    xd = x.detach().double().requires_grad_(True)
    bd = bias.detach().double().requires_grad_(True) if bias is not None else None
    y = ref_act(xd + (bd if bd is not None else 0.0), act)
    y.backward(grad.double())
    return xd.grad, (bd.grad if bd is not None else None)


def check_close(out, ref, dtype):
    assert not torch.isnan(out.detach().double()).any()
    assert rel_err(out, ref) <= TOL[dtype], rel_err(out, ref)


# ---- bias_act forward -------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
def test_bias_act_forward(device, dtype, act):
    for i, shape in enumerate(SHAPES):
        x = make_tensor(shape, dtype, device, seed=i, low=-3, high=3)
        bias = make_tensor((shape[-1],), dtype, device, seed=100 + i)
        for b in (bias, None):
            out = cudasteps.bias_act(x, b, act)
            assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
            if x.numel():
                check_close(out, ref_bias_act(x, b, act), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bias_act_fp32_bias(device, dtype):
    """Autocast's case: activations in fp16/bf16, an fp32 bias parameter; fp32 math, x's dtype out."""
    x = make_tensor((9, 24), dtype, device, low=-3, high=3)
    bias = make_tensor((24,), torch.float32, device, seed=1)
    out = cudasteps.bias_act(x, bias, "gelu")
    assert out.dtype == dtype
    check_close(out, ref_bias_act(x, bias, "gelu"), dtype)
    grad = make_tensor((9, 24), dtype, device, seed=2)
    gx, gb = cudasteps.bias_act_backward(grad, x, bias, "gelu")
    rgx, rgb = ref_bias_act_grads(grad, x, bias, "gelu")
    assert gx.dtype == dtype and gb.dtype == torch.float32
    check_close(gx, rgx, dtype)
    assert rel_err(gb, rgb) <= 1e-2  # grad_x rounded per element is not what is summed: fp32 sums


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bias_act_layouts(device, dtype):
    """Non-contiguous views, storage offsets (misaligned data pointers), strided bias."""
    base = make_tensor((40, 66), dtype, device, low=-3, high=3)
    bias_base = make_tensor((132,), dtype, device, seed=3)
    views = [
        base.t(),
        base[:, 1:],
        base[::2, ::3],
        misaligned((13, 24), dtype, device, offset=1),
        misaligned((13, 24), dtype, device, offset=3),
    ]
    for x in views:
        n = x.shape[-1]
        for bias in (bias_base[:n], bias_base[1 : n + 1], bias_base[: 2 * n : 2]):
            out = cudasteps.bias_act(x, bias, "silu")
            check_close(out, ref_bias_act(x, bias, "silu"), dtype)
            grad = make_tensor(x.shape, dtype, device, seed=4).t().contiguous().t()  # non-contiguous grad
            gx, gb = cudasteps.bias_act_backward(grad, x, bias, "silu")
            rgx, rgb = ref_bias_act_grads(grad, x, bias, "silu")
            check_close(gx, rgx, dtype)
            assert rel_err(gb, rgb) <= TOL[dtype] * 4


# ---- bias_act backward ------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
def test_bias_act_backward_op(device, dtype, act):
    for i, shape in enumerate(SHAPES):
        x = make_tensor(shape, dtype, device, seed=i, low=-3, high=3)
        grad = make_tensor(shape, dtype, device, seed=50 + i)
        bias = make_tensor((shape[-1],), dtype, device, seed=100 + i)
        gx, gb = cudasteps.bias_act_backward(grad, x, bias, act)
        assert gx.shape == x.shape and gb.shape == bias.shape and gb.dtype == dtype
        gx2, gb2 = cudasteps.bias_act_backward(grad, x, None, act)
        assert gb2 is None
        if x.numel() == 0:
            assert (gb == 0).all()
            continue
        rgx, rgb = ref_bias_act_grads(grad, x, bias, act)
        check_close(gx, rgx, dtype)
        # grad_bias sums fp32 values before rounding: error of order the output rounding.
        if rgb.norm() > 0:
            assert rel_err(gb, rgb) <= TOL[dtype] * 4, rel_err(gb, rgb)
        rgx2, _ = ref_bias_act_grads(grad, x, None, act)
        check_close(gx2, rgx2, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_bias_act_autograd_matches_torch(device, act):
    x = make_tensor((6, 19), torch.float32, device, low=-3, high=3).requires_grad_(True)
    bias = make_tensor((19,), torch.float32, device, seed=1).requires_grad_(True)
    grad = make_tensor((6, 19), torch.float32, device, seed=2)
    cudasteps.bias_act(x, bias, act).backward(grad)
    rgx, rgb = ref_bias_act_grads(grad, x, bias, act)
    assert rel_err(x.grad, rgx) <= 1e-5 and rel_err(bias.grad, rgb) <= 1e-5
    # Only x requires grad; only bias requires grad.
    x2 = x.detach().requires_grad_(True)
    cudasteps.bias_act(x2, bias.detach(), act).backward(grad)
    assert rel_err(x2.grad, rgx) <= 1e-5
    b2 = bias.detach().requires_grad_(True)
    cudasteps.bias_act(x.detach(), b2, act).backward(grad)
    assert rel_err(b2.grad, rgb) <= 1e-5


@pytest.mark.parametrize("act", ACTS)
def test_bias_act_gradcheck(act):
    x = make_tensor((4, 7), torch.float64, low=-2, high=2).requires_grad_(True)
    bias = make_tensor((7,), torch.float64, seed=1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: cudasteps.bias_act(a, b, act), (x, bias))
    assert torch.autograd.gradcheck(lambda a: cudasteps.bias_act(a, None, act), (x,))


def test_bias_act_saves_only_inputs():
    """The forward saves x and bias, no intermediate (x + bias or the activation)."""
    x = make_tensor((8, 16), low=-2, high=2).requires_grad_(True)
    bias = make_tensor((16,), seed=1).requires_grad_(True)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = cudasteps.bias_act(x, bias, "gelu")
    assert len(saved) == 2
    assert all(s is x or s is bias or (s.data_ptr() in (x.data_ptr(), bias.data_ptr())) for s in saved)
    y.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_bias_grad_deterministic(device):
    x = make_tensor((777, 96), torch.float32, device, low=-3, high=3)
    grad = make_tensor((777, 96), torch.float32, device, seed=1)
    bias = make_tensor((96,), torch.float32, device, seed=2)
    gb1 = cudasteps.bias_act_backward(grad, x, bias, "gelu")[1]
    gb2 = cudasteps.bias_act_backward(grad, x, bias, "gelu")[1]
    assert torch.equal(gb1, gb2)


# ---- bias_act_amax / bias_act_backward_amax: the same pass, also max |output| ----------------

# Beside SHAPES: a one-shot forward grid of thousands of blocks (all but a few skip the atomic),
# rows not a multiple of the row kernel's chunk, and columns that leave the 16-byte path.
AMAX_SHAPES = SHAPES + [(4100, 520), (1000, 3, 7)]
AMAX_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def amax_of(t):
    return t.float().abs().max() if t.numel() else torch.zeros((), device=t.device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", AMAX_DTYPES)
@pytest.mark.parametrize("act", ACTS)
def test_bias_act_amax_ops(device, dtype, act):
    """Outputs bit for bit those of bias_act and bias_act_backward, with or without a bias (a
    float32 one for 16-bit x too); the amax exactly max |output| (0 for empty)."""
    for i, shape in enumerate(AMAX_SHAPES):
        x = make_tensor(shape, dtype, device, seed=40 + i, low=-4, high=4)
        grad = make_tensor(shape, dtype, device, seed=60 + i)
        cols = shape[-1]
        for bias in (None, make_tensor((cols,), dtype, device, seed=80 + i),
                     make_tensor((cols,), torch.float32, device, seed=90 + i)):
            if bias is not None and bias.dtype != dtype and dtype == torch.float32:
                continue
            out, amax = cudasteps.bias_act_amax(x, bias, act)
            assert torch.equal(out, cudasteps.bias_act(x, bias, act)), (shape, dtype, act)
            assert amax.dtype == torch.float32 and amax.shape == ()
            assert torch.equal(amax, amax_of(out)), (shape, dtype, act)
            gx, gb, gamax = cudasteps.bias_act_backward_amax(grad, x, bias, act)
            want_gx, want_gb = cudasteps.bias_act_backward(grad, x, bias, act)
            assert torch.equal(gx, want_gx), (shape, dtype, act)
            assert (gb is None) == (bias is None)
            if bias is not None:
                assert torch.equal(gb, want_gb), (shape, dtype, act)
            assert torch.equal(gamax, amax_of(gx)), (shape, dtype, act)


@pytest.mark.parametrize("device", DEVICES)
def test_bias_act_amax_nan_inf_and_views(device):
    """A NaN output anywhere makes the amax NaN, an infinity inf (as cast_fp8's amax); a
    misaligned and a transposed x give what their contiguous copies give."""
    for fill in (float("nan"), float("inf")):
        x = make_tensor((300, 64), torch.bfloat16, device, seed=3)
        x[257, 13] = fill
        _, amax = cudasteps.bias_act_amax(x, None, "none")
        assert torch.allclose(amax.cpu(), torch.tensor(fill), equal_nan=True), fill
        _, _, gamax = cudasteps.bias_act_backward_amax(x, x, None, "relu")
        assert torch.allclose(gamax.cpu(), torch.tensor(fill), equal_nan=True), fill
    bias = make_tensor((64,), torch.float32, device, seed=4)
    views = (misaligned((40, 64), torch.bfloat16, device), make_tensor((64, 40), torch.float32, device).t())
    for view in views:
        got = cudasteps.bias_act_amax(view, bias.to(view.dtype), "gelu")
        want = cudasteps.bias_act_amax(view.contiguous(), bias.to(view.dtype), "gelu")
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("device", DEVICES)
def test_bias_act_amax_errors_and_opcheck(device):
    x = make_tensor((6, 8), torch.float32, device)
    bias = make_tensor((8,), torch.float32, device, seed=1)
    for name, args in (("bias_act_amax", (x,)), ("bias_act_backward_amax", (x, x))):
        op = getattr(torch.ops.cudasteps, name)
        meta = lambda *a: [t.to("meta") if isinstance(t, torch.Tensor) else t for t in a]  # noqa: E731
        cases = [
            ((*args[:-1], args[-1].double(), bias.double(), "gelu"),
             rf"cudasteps.{name}: x must be Float or Half or BFloat16, got Double"),
            ((*args, bias[:5], "gelu"), rf"cudasteps.{name}: bias must have shape \[8\]"),
            ((*args, bias, "tanh"), rf"cudasteps.{name}: act must be one of none, relu, gelu, gelu_tanh, silu"),  # noqa: E501
        ]
        if name == "bias_act_backward_amax":
            cases[0] = ((x.double(), x.double(), bias.double(), "gelu"), cases[0][1])
        for call_args, message in cases:
            with pytest.raises(RuntimeError, match=message):
                op(*call_args)
            with pytest.raises(RuntimeError, match=message):
                op(*meta(*call_args))
        refused = rf"cudasteps.{name}: x or bias requires grad, but {name} is not"
        with pytest.raises(RuntimeError, match=refused):
            op(*args, bias.clone().requires_grad_(), "gelu")
        torch.library.opcheck(op.default, (*args, bias, "silu"))
        torch.library.opcheck(op.default, (*args, None, "gelu"))


# ---- add / mul / sum_leading ---------------------------------------------------------------


def ref_binary(name, a, b, alpha=1.0):
    ad = a.double() if isinstance(a, torch.Tensor) else a
    bd = b.double() if isinstance(b, torch.Tensor) else b
    return ad + alpha * bd if name == "add" else ad * bd


def run_binary(name, a, b, alpha=1):
    return cudasteps.add(a, b, alpha=alpha) if name == "add" else cudasteps.mul(a, b)


def torch_binary(name, a, b, alpha=1):
    return torch.add(a, b, alpha=alpha) if name == "add" else torch.mul(a, b)


# (self shape, other shape): every path of binary.h: same shape (flat), per-feature vector on
# either side (row kernel), 0-dim operands (host value / device scalar) and general broadcasts
# (strided kernel), including the ones the drop-in issue listed.
BROADCASTS = [
    ((3, 5), (3, 5)),
    ((2, 3, 17), (17,)),
    ((17,), (2, 3, 17)),
    ((4, 8), (1, 8)),
    ((5, 1), (5,)),
    ((5, 10, 5), (10, 5)),
    ((10, 1, 5), (1, 10, 5)),
    ((3, 1, 7), (1, 4, 1)),
    ((6, 1), (1, 1, 9)),
    ((3, 5), ()),
    ((), (3, 5)),
    ((), ()),
    ((0, 5), (5,)),
    ((1,), (7,)),
    ((1000003,), (1000003,)),
    ((33, 65), (33, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_broadcast(device, dtype, name):
    for i, (sa, sb) in enumerate(BROADCASTS):
        a = make_tensor(sa, dtype, device, seed=i)
        b = make_tensor(sb, dtype, device, seed=50 + i)
        out = run_binary(name, a, b, alpha=0.75)
        assert out.shape == torch.broadcast_shapes(sa, sb) and out.dtype == dtype
        assert out.is_contiguous() and out.device == a.device
        if out.numel():
            check_close(out, ref_binary(name, a, b, 0.75), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_integer_and_bool(device, name):
    """Integer dtypes wrap around as torch's do; bool add is or, bool mul is and."""
    for dtype in [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]:
        for i, (sa, sb) in enumerate(BROADCASTS[:12]):
            a = make_tensor(sa, dtype, device, seed=i)
            b = make_tensor(sb, dtype, device, seed=50 + i)
            alpha = True if dtype == torch.bool else 3
            out = run_binary(name, a, b, alpha=alpha)
            assert out.dtype == dtype
            assert torch.equal(out, torch_binary(name, a, b, alpha)), (dtype, sa, sb)
    big = torch.full((5,), 120, dtype=torch.int8, device=device)
    assert torch.equal(run_binary(name, big, big, alpha=2), torch_binary(name, big, big, 2))  # wraps
    big64 = torch.full((5,), 2**62, dtype=torch.int64, device=device)
    assert torch.equal(run_binary(name, big64, big64, alpha=3), torch_binary(name, big64, big64, 3))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_type_promotion(device, name):
    """The result dtype is torch.result_type(self, other), values as torch's."""
    f16 = make_tensor((4, 6), torch.float16, device)
    bf16 = make_tensor((4, 6), torch.bfloat16, device, seed=1)
    f32 = make_tensor((4, 6), torch.float32, device, seed=2)
    i32 = make_tensor((4, 6), torch.int32, device, seed=3)
    u8 = make_tensor((6,), torch.uint8, device, seed=4)
    boolean = make_tensor((4, 6), torch.bool, device, seed=5)
    cases = [
        (f16, f32[0]),  # fp16 + fp32 vector -> fp32
        (f16, bf16),  # -> fp32
        (i32, f16),  # int + half -> half
        (i32, u8),  # -> int32
        (boolean, i32),  # -> int32
        (u8, torch.tensor(-3, dtype=torch.int8, device=device)),  # a 0-dim tensor does not promote
        (f16, torch.tensor(2.5, dtype=torch.float64, device=device)),  # -> fp16
        (i32, torch.tensor(2.5, dtype=torch.float64, device=device)),  # category wins -> fp32
        (f16, 2.5),
        (i32, 2.5),  # Python float with an int tensor -> fp32
        (i32, 7),
        (boolean, 3),  # -> int64
        (boolean, True),
        (u8, -1),
        (f32, True),
    ]
    for a, b in cases:
        want = torch_binary(name, a, b)
        got = run_binary(name, a, b, alpha=1)
        assert got.dtype == want.dtype == torch.result_type(a, b), (a.dtype, b, got.dtype, want.dtype)
        assert got.shape == want.shape
        if want.dtype.is_floating_point:
            tol = TOL[want.dtype]
            assert rel_err(got, want) <= tol, (a.dtype, b)
        else:
            assert torch.equal(got, want), (a.dtype, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_scalar_overloads(device, name):
    x = make_tensor((7, 9), torch.float32, device)
    ops = torch.ops.cudasteps
    scalar_op = ops.add.Scalar if name == "add" else ops.mul.Scalar
    args = (x, 1.5, 2) if name == "add" else (x, 1.5)
    check_close(scalar_op(*args), ref_binary(name, x, 1.5, 2 if name == "add" else 1.0), torch.float32)
    check_close(run_binary(name, x, -0.25, alpha=3), ref_binary(name, x, -0.25, 3), torch.float32)
    # A Python number wider than the tensor's integer type is refused, as torch refuses it.
    with pytest.raises(RuntimeError, match="cannot be converted to type"):
        run_binary(name, torch.ones(3, dtype=torch.int8, device=device), 300)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_binary_layouts(device, name):
    """Non-contiguous, expanded and misaligned operands are read in place (strided path)."""
    base = make_tensor((30, 42), torch.float16, device)
    other_base = make_tensor((30, 42), torch.float16, device, seed=1)
    for a, b in [
        (base.t(), other_base.t()),
        (base[:, 3:], other_base[:, :-3]),
        (
            misaligned((7, 9), torch.float16, device),
            misaligned((7, 9), torch.float16, device, seed=2, offset=5),
        ),
        (base[1:, 2:], other_base[0, 1:-1]),
        (base[:, :5], other_base[0, ::8][:5]),  # a strided per-feature vector
        (base[::3, ::2], other_base[:10, :1]),
        (base.t()[:5], other_base[:, :1].expand(30, 30)[:5]),
        (base.unsqueeze(0).expand(3, 30, 42), other_base[:, :1]),
        (base[:, 0], 2.5),  # a strided tensor and a host value
    ]:
        check_close(run_binary(name, a, b, 2.0), ref_binary(name, a, b, 2.0), torch.float16)
        if isinstance(b, torch.Tensor):
            check_close(run_binary(name, b, a, 2.0), ref_binary(name, b, a, 2.0), torch.float16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "mul"])
@pytest.mark.parametrize("shapes", [((5, 3, 11), (5, 3, 11)), ((5, 3, 11), (11,)), ((11,), (5, 3, 11)),
                                    ((5, 1, 11), (3, 1)), ((5, 3, 11), ()), ((4, 1), (1, 6))])  # fmt: skip
def test_binary_autograd(device, name, shapes):
    """Each operand's gradient is reduced to its shape, as torch's (float64 reference)."""
    a = make_tensor(shapes[0], torch.float32, device).requires_grad_(True)
    b = make_tensor(shapes[1], torch.float32, device, seed=1).requires_grad_(True)
    out = run_binary(name, a, b, alpha=-1.5)
    grad = make_tensor(out.shape, torch.float32, device, seed=2)
    out.backward(grad)
    ad, bd = a.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    ref_binary(name, ad, bd, -1.5).backward(grad.double())
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert rel_err(a.grad, ad.grad) <= 1e-6 and rel_err(b.grad, bd.grad) <= 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_binary_autograd_mixed_dtypes_and_scalars(device):
    """Gradients come back in each operand's dtype; Scalar overloads differentiate self."""
    a = make_tensor((6, 8), torch.bfloat16, device).requires_grad_(True)
    b = make_tensor((8,), torch.float32, device, seed=1).requires_grad_(True)
    out = cudasteps.mul(a, b)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert a.grad.dtype == torch.bfloat16 and b.grad.dtype == torch.float32
    assert rel_err(b.grad, a.detach().double().sum(0)) <= 1e-6
    assert rel_err(a.grad, b.detach().double().expand(6, 8)) <= TOL[torch.bfloat16]
    x = make_tensor((3, 4), torch.float64, device).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: cudasteps.mul(t, -2.5), (x,))
    assert torch.autograd.gradcheck(lambda t: cudasteps.add(t, 4, alpha=3), (x,))


@pytest.mark.parametrize("name", ["add", "mul"])
@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((4, 6), (6,)), ((4, 1, 6), (3, 1)), ((4, 6), ())])
def test_binary_gradcheck(name, shapes):
    a = make_tensor(shapes[0], torch.float64).requires_grad_(True)
    b = make_tensor(shapes[1], torch.float64, seed=1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, q: run_binary(name, p, q, alpha=0.5), (a, b))


def test_mul_double_backward():
    a = make_tensor((3, 4), torch.float64).requires_grad_(True)
    b = make_tensor((3, 4), torch.float64, seed=1).requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda p, q: cudasteps.mul(p, q), (a, b))
    v = make_tensor((4,), torch.float64, seed=2).requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda p, q: cudasteps.mul(p, q), (a, v))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_leading(device, dtype):
    for i, shape in enumerate([(1,), (5,), (3, 7), (2, 9, 40), (300, 17), (0, 4)]):
        a = make_tensor(shape, dtype, device, seed=i)
        b = make_tensor(shape, dtype, device, seed=10 + i)
        lead = tuple(range(len(shape) - 1))
        for other in (b, None):
            ref = a.double() * (other.double() if other is not None else 1.0)
            ref = (ref.sum(dim=lead) if lead else ref) * 0.5
            out = cudasteps.sum_leading(a, other, alpha=0.5, dtype=torch.float32)
            assert out.shape == (shape[-1],) and out.dtype == torch.float32
            assert rel_err(out, ref) <= 1e-5 or ref.numel() == 0 or ref.norm() == 0
        assert cudasteps.sum_leading(a).dtype == dtype


# ---- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = make_tensor((4, 6), torch.float32, device)
    b = make_tensor((6,), torch.float32, device)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.bias_act: x must be Float or Half or BFloat16 or Double, got Int"
    ):
        cudasteps.bias_act(x.int(), b, "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act: act must be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'",
    ):
        cudasteps.bias_act(x, b, "tanh")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act: bias must have shape \[6\] \(the last dimension of x\), got \[5\]",
    ):
        cudasteps.bias_act(x, b[:5], "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act: bias must have shape \[6\] \(the last dimension of x\), got \[1, 6\]",
    ):
        cudasteps.bias_act(x, b[None], "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act: bias must have the dtype of x \(BFloat16\) or Float, got Half",
    ):
        cudasteps.bias_act(x.bfloat16(), b.half(), "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act: x must have at least 1 dimension when bias is given, got a 0-D tensor",
    ):
        cudasteps.bias_act(x[0, 0], b[:1], "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act_backward: grad must have the shape of x \[4, 6\], got \[4, 5\]",
    ):
        cudasteps.bias_act_backward(x[:, :5], x, b, "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.bias_act_backward: grad must have the dtype of x \(Float\), got Double",
    ):
        cudasteps.bias_act_backward(x.double(), x, b, "gelu")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.add: self \[4, 6\] and other \[4\] are not broadcastable: "
        r"sizes 6 and 4 at dimension -1",
    ):
        cudasteps.add(x, x[:, 0])
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.mul: the result dtype \(torch.result_type\(self, other\)\) must be Float, Double, "
        r"Half, BFloat16, Byte, Char, Short, Int, Long or Bool, got ComplexFloat",
    ):
        cudasteps.mul(x, torch.ones(6, dtype=torch.complex64, device=device))
    with pytest.raises(RuntimeError, match=r"cudasteps.add: the result dtype .* got ComplexDouble"):
        cudasteps.add(x.double(), 1j)
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.add: alpha must be an integer for integer results \(as in torch.add\), got 2.5 "
        r"for a Long result",
    ):
        cudasteps.add(x.long(), x.long(), alpha=2.5)
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.add: a boolean alpha is only supported for Bool results, got a Float result",
    ):
        cudasteps.add(x, x, alpha=True)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.sum_leading: other must have the shape of self \[4, 6\], got \[6\]"
    ):
        cudasteps.sum_leading(x, b)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.sum_leading: self must have at least 1 dimensions, got 0-D"
    ):
        cudasteps.sum_leading(x[0, 0])
    if device == "cuda":
        with pytest.raises(
            RuntimeError, match=r"cudasteps.bias_act: bias must be on x's device \(cuda:0\), got cpu"
        ):
            cudasteps.bias_act(x, b.cpu(), "gelu")
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.mul: self and other must be on the same device \(or one of them a 0-dim CPU "
            r"tensor\), got cuda:0 and cpu",
        ):
            cudasteps.mul(x, b.cpu())
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.ladder_bias_act: variant must be one of unfused, fused_scalar, fused_vec16, got 'fast'",  # noqa: E501
        ):
            cudasteps.ladder.run("elementwise", "fast", x, b, "gelu")


def test_fake_errors_match():
    """The fake kernels reject the same inputs with the same messages (torch.compile runs only them)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 6)
        b = torch.empty(6)
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.bias_act: bias must have shape \[6\] \(the last dimension of x\), got \[5\]",
        ):
            torch.ops.cudasteps.bias_act(x, b[:5], "gelu")
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.bias_act: act must be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'",
        ):
            torch.ops.cudasteps.bias_act(x, b, "tanh")
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.add: self \[4, 6\] and other \[4\] are not broadcastable: "
            r"sizes 6 and 4 at dimension -1",
        ):
            torch.ops.cudasteps.add(x, x[:, 0])
        with pytest.raises(RuntimeError, match=r"cudasteps.mul: the result dtype .* got ComplexFloat"):
            torch.ops.cudasteps.mul(x, torch.empty(6, dtype=torch.complex64))
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.add: alpha must be an integer for integer results \(as in torch.add\), got 2.5 "
            r"for a Long result",
        ):
            torch.ops.cudasteps.add.Scalar(x.long(), 3, 2.5)
        with pytest.raises(
            RuntimeError,
            match=r"cudasteps.add: a boolean alpha is only supported for Bool results, got a Float result",
        ):
            torch.ops.cudasteps.add(x, x, alpha=True)
        assert torch.ops.cudasteps.mul(x.half(), b).dtype == torch.float32
        assert torch.ops.cudasteps.add(x[:, :1], b).shape == (4, 6)
        with pytest.raises(
            RuntimeError, match=r"cudasteps.sum_leading: self must have at least 1 dimensions, got 0-D"
        ):
            torch.ops.cudasteps.sum_leading(x[0, 0])


# ---- opcheck / compile ------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    x = make_tensor((5, 12), torch.float32, device, low=-2, high=2).requires_grad_(requires_grad)
    b = make_tensor((12,), torch.float32, device, seed=1).requires_grad_(requires_grad)
    xb = make_tensor((5, 12), torch.bfloat16, device).requires_grad_(requires_grad)
    ops = torch.ops.cudasteps
    torch.library.opcheck(ops.bias_act, (x, b, "gelu"))
    torch.library.opcheck(ops.bias_act, (x, None, "silu"))
    torch.library.opcheck(ops.bias_act, (xb, b, "gelu_tanh"))
    torch.library.opcheck(ops.add.default, (x, b), {"alpha": 2})
    torch.library.opcheck(ops.add.default, (x, x.detach() * 2))
    torch.library.opcheck(ops.mul.default, (x, b))
    torch.library.opcheck(ops.mul.default, (xb, b))
    torch.library.opcheck(ops.mul.default, (x[:, :1], b[None]))
    torch.library.opcheck(ops.add.Scalar, (x, 2.5, 3))
    torch.library.opcheck(ops.mul.Scalar, (xb, -1.5))
    torch.library.opcheck(ops.add.default, (x, torch.tensor(0.5)))
    torch.library.opcheck(ops.mul.default, (x.detach().long(), x.detach().int()))
    g = make_tensor((5, 12), torch.float32, device, seed=3)
    torch.library.opcheck(ops.bias_act_backward, (g, x.detach(), b.detach(), "gelu"))
    torch.library.opcheck(ops.bias_act_backward, (g, x.detach(), None, "relu"))
    torch.library.opcheck(ops.sum_leading, (g, x.detach()), {"alpha": 0.5, "dtype": torch.float32})
    if device == "cuda":
        torch.library.opcheck(ops.ladder_bias_act, (x.detach(), b.detach(), "gelu", "unfused"))


def test_compile_fullgraph_cpu():
    """torch.compile(fullgraph=True) traces bias_act and add forward and backward (fake kernels)."""
    torch._dynamo.reset()

    def f(x, b, v):
        return cudasteps.add(cudasteps.bias_act(x, b, "gelu"), v, alpha=2).sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = make_tensor((6, 10), low=-2, high=2).requires_grad_(True)
    b = make_tensor((10,), seed=1).requires_grad_(True)
    v = make_tensor((10,), seed=2).requires_grad_(True)
    out = compiled(x, b, v)
    out.backward()
    grads = [t.grad.clone() for t in (x, b, v)]
    for t in (x, b, v):
        t.grad = None
    f(x, b, v).backward()
    for got, t in zip(grads, (x, b, v)):
        assert torch.allclose(got, t.grad)


# ---- CUDA-only: big shapes, ladder, gradients vs torch ------------------------------------------


@requires_cuda
@pytest.mark.parametrize("variant", cudasteps.ladder.variants("elementwise") if HAS_CUDA else ["unfused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ladder_variants(variant, dtype):
    for shape in [(1,), (3, 5), (257, 1000), (64, 8192), (5, 7, 33)]:
        x = make_tensor(shape, dtype, "cuda", low=-3, high=3)
        b = make_tensor((shape[-1],), dtype, "cuda", seed=1)
        for act in ACTS:
            out = cudasteps.ladder.run("elementwise", variant, x, b, act)
            check_close(out, ref_bias_act(x, b, act), dtype)
        check_close(
            cudasteps.ladder.run("elementwise", variant, x, None, "gelu"),
            ref_bias_act(x, None, "gelu"),
            dtype,
        )


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2048, 8192), (1, 100000), (100000, 3), (4097, 1025), (33, 65537)])
def test_cuda_big_vs_torch(dtype, shape):
    """Gradients vs PyTorch's on CUDA, on shapes that hit every grid/vector path."""
    x = make_tensor(shape, dtype, "cuda", low=-3, high=3).requires_grad_(True)
    b = make_tensor((shape[-1],), dtype, "cuda", seed=1).requires_grad_(True)
    grad = make_tensor(shape, dtype, "cuda", seed=2)
    y = cudasteps.bias_act(x, b, "gelu")
    y.backward(grad)
    xr = x.detach().double().requires_grad_(True)
    br = b.detach().double().requires_grad_(True)
    F.gelu(xr + br).backward(grad.double())
    check_close(y, F.gelu(xr + br), dtype)
    check_close(x.grad, xr.grad, dtype)
    assert rel_err(b.grad, br.grad) <= TOL[dtype] * 4
    # Bitwise reproducible bias gradient.
    gb = cudasteps.bias_act_backward(grad, x.detach(), b.detach(), "gelu")[1]
    assert torch.equal(gb, cudasteps.bias_act_backward(grad, x.detach(), b.detach(), "gelu")[1])


@requires_cuda
def test_cuda_add_mul_large():
    a = make_tensor((3, 1 << 22), torch.float32, "cuda")
    b = make_tensor((3, 1 << 22), torch.float32, "cuda", seed=1)
    assert torch.equal(cudasteps.add(a, b, alpha=1), a + b)
    assert torch.equal(cudasteps.mul(a, b), a * b)
    v = make_tensor((1 << 22,), torch.float32, "cuda", seed=2)
    assert torch.equal(cudasteps.mul(a, v), a * v)


@requires_cuda
def test_cuda_broadcast_rows():
    """General broadcasts with a last (merged) dim of 128 or more take the row kernel: the last
    dim's strides 0, 1 and large, rows beyond one grid's 65535, a 0-dim CUDA operand, sliced and
    transposed views; every element equal to torch's in float, bf16 and integer dtypes."""
    for dtype in (torch.float32, torch.bfloat16, torch.int64):

        def t(shape, seed, dtype=dtype):
            return make_tensor(shape, dtype, "cuda", seed=seed)

        cases = [
            (t((300, 1), 1), t((257,), 2)),
            (t((4, 130, 300), 3), t((130, 300), 4)),
            (t((200, 300), 5).t(), t((300, 200), 6)),
            (t((), 7), t((1000, 500), 8)),
            (t((70000, 1), 9), t((129,), 10)),
            (t((64, 260), 11)[:, 1:-3], t((256,), 12)),
        ]
        for a, b in cases:
            what = (dtype, tuple(a.shape), a.stride(), tuple(b.shape))
            assert torch.equal(cudasteps.mul(a, b), a * b), what
            assert torch.equal(cudasteps.add(a, b, alpha=2), torch.add(a, b, alpha=2)), what
            assert torch.equal(cudasteps.mul(b, a), b * a), what


@requires_cuda
def test_cuda_stream_and_autocast():
    s = torch.cuda.Stream()
    x = make_tensor((300, 520), torch.float32, "cuda", low=-2, high=2)
    b = make_tensor((520,), torch.float32, "cuda", seed=1)
    ref = cudasteps.bias_act(x, b, "gelu")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = cudasteps.bias_act(x, b, "gelu")
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(out, ref)
    w = make_tensor((520, 520), torch.float32, "cuda", seed=2)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = x @ w  # bf16 under autocast, the bias stays fp32
        y = cudasteps.bias_act(h, b, "gelu")
    assert y.dtype == torch.bfloat16
    check_close(y, ref_bias_act(h, b, "gelu"), torch.bfloat16)


@requires_cuda
@pytest.mark.parametrize("name", ["add", "mul"])
def test_cuda_binary_matches_torch_bitwise(name):
    """fp32 on CUDA: every path gives torch's bits (one rounding of the same expression)."""
    x = make_tensor((300, 520), torch.float32, "cuda")
    cases = [
        make_tensor((300, 520), torch.float32, "cuda", seed=1),  # flat
        make_tensor((520,), torch.float32, "cuda", seed=2),  # row vector
        make_tensor((300, 1), torch.float32, "cuda", seed=3),  # strided (broadcast column)
        torch.tensor(1.25),  # a 0-dim CPU tensor with a CUDA tensor: a host value
        torch.tensor(-0.5, device="cuda"),  # a 0-dim CUDA tensor: the flat pass, read once
        make_tensor((520, 300), torch.float32, "cuda", seed=4).t(),  # transposed: strided
    ]
    for b in cases:
        assert torch.equal(run_binary(name, x, b), torch_binary(name, x, b)), b.shape
        assert torch.equal(run_binary(name, b, x), torch_binary(name, b, x)), b.shape
    assert torch.equal(run_binary(name, x, 0.3), torch_binary(name, x, 0.3))
    out = run_binary(name, torch.tensor(3.0), x)
    assert out.device == x.device
    for dtype in (torch.int32, torch.uint8, torch.bool):
        a = make_tensor((77, 130), dtype, "cuda", seed=5)
        v = make_tensor((130,), dtype, "cuda", seed=6)
        assert torch.equal(run_binary(name, a, v), torch_binary(name, a, v))
        assert torch.equal(run_binary(name, a, a.t().contiguous().t()), torch_binary(name, a, a))


@requires_cuda
@pytest.mark.parametrize("name", ["add", "mul"])
def test_cuda_one_element_operand(name):
    """A 0-dim or one-element CUDA operand with a dense tensor of the result shape runs the flat
    pass, each thread reading the element once (kFlatDeviceOther / kFlatDeviceSelf): torch's bits
    with the element on either side, in float, bf16, integer and bool dtypes, on a misaligned dense
    operand (the one-element-per-thread kernel) and with an element of another dtype (converted
    to the result's first; a 0-dim one does not promote)."""
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        dense = make_tensor((3, 1000, 37), dtype, "cuda", seed=1)
        misaligned = make_tensor((1, 100004), dtype, "cuda", seed=2)[:, 1:]
        assert misaligned.is_contiguous()
        one = make_tensor((1,), dtype, "cuda", seed=3)
        elements = [one[0], one, one.view(1, 1, 1), torch.tensor(2.5, dtype=torch.float64, device="cuda")]
        for x in (dense, misaligned):
            for s in elements:
                if s.dim() > x.dim():
                    continue
                what = (dtype, tuple(x.shape), tuple(s.shape), s.dtype)
                assert torch.equal(run_binary(name, x, s), torch_binary(name, x, s)), what
                assert torch.equal(run_binary(name, s, x), torch_binary(name, s, x)), what


def test_compile_fullgraph_broadcast_and_numbers():
    """torch.compile traces broadcasting add/mul and the Scalar overloads (fake kernels) both ways."""
    torch._dynamo.reset()

    def f(x, col, s):
        return cudasteps.mul(cudasteps.add(x, col, alpha=2), 0.5).add(cudasteps.mul(x, s)).sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = make_tensor((6, 10), low=-2, high=2).requires_grad_(True)
    col = make_tensor((6, 1), seed=1).requires_grad_(True)
    s = make_tensor((), seed=2).requires_grad_(True)
    compiled(x, col, s).backward()
    grads = [t.grad.clone() for t in (x, col, s)]
    for t in (x, col, s):
        t.grad = None
    f(x, col, s).backward()
    for got, t in zip(grads, (x, col, s)):
        assert got.shape == t.shape and torch.allclose(got, t.grad)


def test_compile_dynamic_batch_stays_symbolic():
    """A dynamic batch stays symbolic through add/mul forward and backward: the fake kernels and
    the C++ autograd (saved operand sizes, the broadcast-dim sums, the per-feature test) compare
    symbolic sizes without pinning the batch, so another batch size reuses the compiled graph."""
    torch._dynamo.reset()

    def f(x, v, m, col, s):
        y = cudasteps.add(x, v, alpha=0.5)  # [B, 3, N] + [N]: a per-feature operand
        y = cudasteps.mul(y, m)  # * [3, 1]: a broadcast column of a middle dim
        y = cudasteps.add(y, col)  # + [B, 1, 1]: its batch dim is the dynamic one
        y = cudasteps.mul(cudasteps.mul(y, s), 1.5)  # a 0-dim operand, then the Scalar overload
        return cudasteps.mul(y, y).sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    n = 10
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch, seed in ((6, 0), (9, 10)):
            x = make_tensor((batch, 3, n), low=-2, high=2, seed=seed)
            col = make_tensor((batch, 1, 1), seed=seed + 1)
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(col, 0)
            args = [
                x,
                make_tensor((n,), seed=seed + 2),
                make_tensor((3, 1), seed=seed + 3),
                col,
                make_tensor((), seed=seed + 4),
            ]
            args = [a.requires_grad_(True) for a in args]
            out = compiled(*args)
            out.backward()
            got = [a.grad.clone() for a in args]
            for a in args:
                a.grad = None
            want = f(*args)
            want.backward()
            assert rel_err(out, want) < 1e-6
            for g, a in zip(got, args):
                assert g.shape == a.shape and rel_err(g, a.grad) < 1e-6, (batch, tuple(a.shape))


def _gelu_tail_inputs(dtype, device, n):
    """z spread over [-10, 10] (both tails of Phi, where relative accuracy is hardest), plus 0."""
    z = torch.linspace(-10.0, 10.0, n, dtype=torch.float64)
    z[n // 2] = 0.0
    return z.to(dtype).to(device)


def _fast_act_reference(z, act):
    """gelu / gelu_tanh / silu of float64 z and their derivatives, in forms that do not cancel in
    the lower tail (0.5 * (1 + erf) and 0.5 * (1 + tanh) do, even in float64), and the two terms'
    magnitude of each derivative (it crosses zero, near z = -0.75 for gelu, where only an absolute
    slack of that size makes sense)."""
    if act == "silu":
        s, one_minus_s = torch.sigmoid(z), torch.sigmoid(-z)
        return z * s, s + z * s * one_minus_s, s + (z * s * one_minus_s).abs()
    if act == "gelu":
        cdf = 0.5 * torch.special.erfc(-z / 2**0.5)
        pdf = torch.exp(-0.5 * z * z) / (2 * torch.pi) ** 0.5
        return z * cdf, cdf + z * pdf, cdf + z.abs() * pdf
    beta, kappa = (2 / torch.pi) ** 0.5, 0.044715
    two_u = 2 * beta * (z + kappa * z**3)
    s, one_minus_s = torch.sigmoid(two_u), torch.sigmoid(-two_u)
    slope = z * s * one_minus_s * 2 * beta * (1 + 3 * kappa * z * z)
    return z * s, s + slope, s + slope.abs()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_fast_activations_accuracy_in_the_tails(device, dtype, act):
    """Every element, not only the norm: the fp16/bf16 gelu, gelu_tanh and silu and their
    derivatives (FastGelu, the Mills-ratio fit; FastGeluTanh, z * sigmoid(2u); FastSilu, exp2 and
    a reciprocal) stay within the output rounding of a float64 reference in both tails, where
    gelu's are tiny and torch's 0.5 * (1 + erf(...)) or 0.5 * (1 + tanh(...)) in fp32 would cancel
    to nothing."""
    rtol = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}[dtype]
    # fp16's subnormal spacing; bf16 has fp32's range, so its tail values keep full precision
    # (gelu_tanh's down to 1e-33, z > -10: below, its exp2 and reciprocal leave fp32's normal
    # range and flush to 0, as torch's formula does from z < -5.6 on).
    tiny = {torch.float16: 2.0**-24, torch.bfloat16: 1e-33 if act == "gelu_tanh" else 1e-38}[dtype]
    n = 4001
    flat = _gelu_tail_inputs(dtype, device, n).view(1, n)
    # Three kernels: no bias (the flat kernel), and a bias over 8 rows of 496 (the row kernel's
    # 16-byte path) and of 1 row of 4001 (its one-element path), z = x + bias summed in fp32.
    x8 = flat[:, : 8 * 496].reshape(8, 496)
    cases = [
        (flat, None),
        (x8, make_tensor((496,), dtype, device, seed=5, low=-0.5, high=0.5)),
        (flat, make_tensor((n,), dtype, device, seed=6, low=-0.5, high=0.5)),
    ]
    for x, bias in cases:
        z = x.double().cpu() + (bias.double().cpu() if bias is not None else 0.0)
        ref_y, ref_gx, terms = _fast_act_reference(z, act)
        # An absolute slack for the derivative in units of its two terms' magnitude (fp32 math
        # keeps ~1e-7 of it), relative everywhere else.
        deriv_slack = 1e-6 * terms
        y = cudasteps.bias_act(x, bias, act)
        gx, _ = cudasteps.bias_act_backward(torch.ones_like(x), x, bias, act)
        for out, r, slack in ((y, ref_y, 0.0), (gx, ref_gx, deriv_slack)):
            o = out.double().cpu()
            bad = (o - r).abs() > rtol * r.abs() + tiny + slack
            assert not bad.any(), (dtype, tuple(x.shape), z[bad][:5], o[bad][:5], r[bad][:5])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gelu_backward_row_paths(device, dtype):
    """bias_act gelu forward and backward (grad_x and the column sums of grad_bias) over the row
    kernel's paths: 16-byte vectors (N a multiple of 8), ragged N, many rows (several chunks per
    block), a single row, a misaligned x (storage offset 1: the one-element path) and fp32 bias."""
    cases = [(4100, 520), (3000, 37), (20000, 16), (1, 4104), (257, 1000)]
    for i, (m, n) in enumerate(cases):
        x = make_tensor((m, n), dtype, device, seed=i, low=-4, high=4)
        grad = make_tensor((m, n), dtype, device, seed=10 + i)
        views = [x]
        if i == 0:
            flat = make_tensor((m * n + 1,), dtype, device, seed=20, low=-4, high=4)
            views.append(flat[1:].view(m, n))
        for xv in views:
            for bias in (
                make_tensor((n,), dtype, device, seed=30 + i),
                make_tensor((n,), torch.float32, device, seed=40),
            ):
                gx, gb = cudasteps.bias_act_backward(grad, xv, bias, "gelu")
                rgx, rgb = ref_bias_act_grads(grad, xv, bias, "gelu")
                check_close(gx, rgx, dtype)
                assert gb.dtype == bias.dtype
                assert rel_err(gb, rgb) <= TOL[dtype] * 4, (m, n, rel_err(gb, rgb))
                check_close(cudasteps.bias_act(xv, bias, "gelu"), ref_bias_act(xv, bias, "gelu"), dtype)
