"""Tests for the FP8 MLP's fused hidden path: scaled_mm_range (csrc/gemm/scaled_mm.cpp, the range
taken in the Hopper kernel's epilogue), act_cast_fp8 and act_grad_cast_fp8 (csrc/fp8/act_cast.cpp,
kernels.cu), and linear_act_linear_fp8 (csrc/gemm/linear_act_linear_fp8.cpp), which
cudasteps.nn.MLP(fp8=True) runs.

Each op against its definition built from other ops in Python (bit for bit: the same functions,
the same roundings), on shapes the one-pass CUDA kernels take (multiples of 16) and shapes they do
not (the composite fallback), and the MLP against a float64 reference within FP8 rounding.
"""

import cudasteps
import pytest
import torch
from _helpers import DEVICES, make_tensor

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FMAX = {E4M3: 448.0, E5M2: 57344.0}
ACTS = ["none", "relu", "gelu", "gelu_tanh", "silu"]
# (lobe threshold, lobe depth, largest |act'|): elementwise::ActBounds.
BOUNDS = {
    "none": (None, 0.0, 1.0),
    "relu": (None, 0.0, 1.0),
    "gelu": (-0.75, 0.171875, 1.13),
    "gelu_tanh": (-0.75, 0.171875, 1.13),
    "silu": (-1.25, 0.28125, 1.1),
}


def scales_of(t, dtype):
    """(scale, 1 / scale) of a per-tensor e4m3/e5m2 cast of t from its amax."""
    amax = t.float().abs().max()
    largest = torch.tensor(FMAX[dtype], device=t.device)
    scale = largest.div(amax) if amax > 0 else torch.tensor(1.0, device=t.device)
    return scale.float().reshape(()), (1.0 / scale).float().reshape(())


def fp8_operands(m, n, k, device, seed):
    a = make_tensor((m, k), torch.float32, device, seed=seed)
    w = make_tensor((n, k), torch.float32, device, seed=seed + 1)
    sa, ia = scales_of(a, E4M3)
    sw, iw = scales_of(w, E4M3)
    return (a * sa).to(E4M3), (w * sw).to(E4M3).t(), ia, iw


def range_of(out):
    if out.numel() == 0:
        return torch.zeros(2, device=out.device)
    return torch.stack([out.float().max().clamp_min(0), out.float().min().clamp_max(0)])


def same(a, b):
    if a.dtype in (E4M3, E5M2):
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


# Multiples of 16 (the one-pass kernels, and on Hopper the range from the epilogue: N a multiple of
# 8), then odd shapes (the fallbacks), and tiles across the matrix edge (200 rows of 128-row tiles).
SHAPES = [(256, 128, 64), (200, 264, 96), (64, 48, 32), (33, 70, 129), (1, 1, 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_scaled_mm_range_is_the_output_and_its_range(device, out_dtype):
    for i, (m, n, k) in enumerate(SHAPES):
        a, b, ia, ib = fp8_operands(m, n, k, device, 10 * i)
        biases = (None, make_tensor((n,), out_dtype, device, seed=i), torch.ones(n, device=device))
        for bias in biases:
            out, r = cudasteps.scaled_mm_range(a, b, ia, ib, bias, out_dtype)
            assert same(out, cudasteps.scaled_mm(a, b, ia, ib, bias, out_dtype)), ((m, n, k), out_dtype)
            assert r.dtype == torch.float32 and r.shape == (2,)
            assert torch.equal(r, range_of(out)), ((m, n, k), out_dtype, bias is None, r, range_of(out))


@pytest.mark.parametrize("device", DEVICES)
def test_scaled_mm_range_leaves_out_rows_past_the_matrix(device):
    """The epilogue computes the rows of a tile past M (zeros plus the bias) but stores none of them:
    they must not enter the range. Column 0's products are all negative and its bias is the largest
    value anywhere, so a range that took those rows would say max = bias[0]; likewise for the min."""
    m, n, k = 200, 136, 64
    a = make_tensor((m, k), torch.float32, device, seed=1).abs()
    w = make_tensor((n, k), torch.float32, device, seed=2) * 0.1
    w[0] = -w[0].abs()
    w[1] = w[1].abs()
    sa, ia = scales_of(a, E4M3)
    sw, iw = scales_of(w, E4M3)
    a8, b8 = (a * sa).to(E4M3), (w * sw).to(E4M3).t()
    bias = torch.zeros(n, device=device, dtype=torch.bfloat16)
    bias[0], bias[1] = 8.0, -8.0
    out, r = cudasteps.scaled_mm_range(a8, b8, ia, iw, bias)
    assert out[:, 0].float().max() < 8.0 and out[:, 1].float().min() > -8.0
    assert torch.equal(r, range_of(out))


@pytest.mark.parametrize("device", DEVICES)
def test_scaled_mm_range_propagates_nan(device):
    a, b, ia, ib = fp8_operands(128, 64, 32, device, 3)
    a[5, 7] = float("nan")
    out, r = cudasteps.scaled_mm_range(a, b, ia, ib)
    assert out.isnan().any() and r.isnan().all()


def act_bound(x_range, act, dtype):
    """The amax bound act_cast_fp8 takes from x's range (act_cast.cpp's header)."""
    h = cudasteps.bias_act(x_range.to(dtype), None, act).float().abs().max()
    below, depth, _ = BOUNDS[act]
    if below is not None and x_range[1] < below:
        h = torch.maximum(h, torch.tensor(depth, device=h.device))
    return h


def cast_with(h, bound, dtype):
    """fp8.h's recipe: scale = fmax / bound (a true division), 1 where the bound is 0 or NaN."""
    largest = torch.tensor(FMAX[dtype], device=h.device)
    scale = largest.div(bound).float() if bound > 0 else torch.tensor(1.0, device=h.device)
    out = (h.float() * scale).clamp(-FMAX[dtype], FMAX[dtype]).to(dtype)
    return out, out.t().contiguous(), 1.0 / scale


CAST_SHAPES = [(256, 384), (128, 16), (48, 80), (33, 70), (1, 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("act", ACTS)
def test_act_cast_fp8_is_its_definition(device, dtype, act):
    for i, shape in enumerate(CAST_SHAPES):
        x = make_tensor(shape, dtype, device, seed=i, low=-4, high=3)
        x_range = range_of(x)
        out, out_t, scale_inv = cudasteps.fp8.act_cast_fp8(x, x_range, act)
        h = cudasteps.bias_act(x, None, act)
        bound = act_bound(x_range, act, dtype)
        want, want_t, want_inv = cast_with(h, bound, E4M3)
        assert out.dtype == E4M3 and out_t.shape == (shape[1], shape[0])
        assert same(out, want) and same(out_t, want_t), (shape, dtype, act)
        assert torch.equal(scale_inv, want_inv.reshape(())), (shape, dtype, act)
        # The bound is an upper bound of max |h|, and max |h| itself where the largest |h| lies
        # above the negative lobe (here: x up to 3, far above it).
        amax = h.float().abs().max()
        assert bound >= amax and (act == "none" or torch.equal(bound, amax)), (bound, amax)
    # e5m2 takes the composite on every device: the same definition.
    x = make_tensor((64, 32), dtype, device, seed=9)
    out, _, scale_inv = cudasteps.fp8.act_cast_fp8(x, range_of(x), act, E5M2)
    want, _, want_inv = cast_with(cudasteps.bias_act(x, None, act), act_bound(range_of(x), act, dtype), E5M2)
    assert same(out, want) and torch.equal(scale_inv, want_inv.reshape(()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("act", ACTS)
def test_act_grad_cast_fp8_is_its_definition(device, dtype, act):
    for i, shape in enumerate(CAST_SHAPES + [(300, 144)]):
        grad = make_tensor(shape, dtype, device, seed=i + 20)
        x = make_tensor(shape, dtype, device, seed=i + 40, low=-4, high=3)
        g_range = range_of(grad)
        out, out_t, scale_inv, grad_bias = cudasteps.fp8.act_grad_cast_fp8(grad, g_range, x, act)
        g = cudasteps.bias_act_backward(grad, x, None, act)[0]
        bound = (g_range.abs().max() * BOUNDS[act][2]).to(dtype).float()
        want, want_t, want_inv = cast_with(g, bound, E5M2)
        assert out.dtype == E5M2 and same(out, want) and same(out_t, want_t), (shape, dtype, act)
        assert torch.equal(scale_inv, want_inv.reshape(()))
        assert bound >= g.float().abs().max()
        col = g.double().sum(0)
        assert grad_bias.dtype == torch.float32 and grad_bias.shape == (shape[1],)
        assert ((grad_bias.double() - col).abs() <= 1e-5 * (1 + g.double().abs().sum(0))).all()
        again = cudasteps.fp8.act_grad_cast_fp8(grad, g_range, x, act)
        assert torch.equal(again[3], grad_bias)  # the same sums on every run
        assert cudasteps.fp8.act_grad_cast_fp8(grad, g_range, x, act, bias_grad=False)[3] is None


# ---- linear_act_linear_fp8 ------------------------------------------------------------------


def mlp_by_ops(x, w1, b1, w2, b2, act, out_dtype, gy):
    """The op's forward and backward spelled out with the ops it runs (no autograd)."""
    ops = torch.ops.cudasteps
    x2 = x.reshape(-1, x.shape[-1])
    x8, x8_t, ix, _ = ops.cast_fp8_dynamic(x2, E4M3, True)
    w1_8, w1_8_t, iw1, _ = ops.cast_fp8_dynamic(w1, E4M3, True)
    w2_8, w2_8_t, iw2, _ = ops.cast_fp8_dynamic(w2, E4M3, True)
    z, z_range = ops.scaled_mm_range(x8, w1_8.t(), ix, iw1, b1.to(out_dtype), out_dtype)
    h8, h8_t, ih = ops.act_cast_fp8(z, z_range, act, E4M3)
    y = ops.scaled_mm(h8, w2_8.t(), ih, iw2, b2.to(out_dtype), out_dtype)
    gy2 = gy.reshape(-1, gy.shape[-1])
    gy8, gy8_t, igy, _ = ops.cast_fp8_dynamic(gy2, E5M2, True)
    gh, gh_range = ops.scaled_mm_range(gy8, w2_8_t.t(), igy, iw2, None, out_dtype)
    gz8, gz8_t, igz, gb1 = ops.act_grad_cast_fp8(gh, gh_range, z, act, E5M2, True)
    grads = (
        ops.scaled_mm(gz8, w1_8_t.t(), igz, iw1, None, x.dtype).reshape(x.shape),
        ops.scaled_mm(gz8_t, x8_t.t(), igz, ix, None, w1.dtype),
        gb1.to(b1.dtype),
        ops.scaled_mm(gy8_t, h8_t.t(), igy, ih, None, w2.dtype),
        ops.sum(gy2, [0], dtype=torch.float32).to(b2.dtype),
    )
    return y.reshape(*x.shape[:-1], w2.shape[0]), grads


MLP_SHAPES = [(256, 64, 128, 48), (2 * 65, 48, 80, 32), (33, 20, 40, 8), (1, 1, 1, 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ["gelu", "relu", "silu"])
def test_linear_act_linear_fp8_is_its_ops(device, act):
    """Forward and all five gradients bit for bit the ops the header lists, under bf16 autocast
    (float32 parameters, bf16 hidden tensor and output) and in float32; close to a float64 MLP."""
    for i, (m, k, n1, n2) in enumerate(MLP_SHAPES):
        for autocast in (True, False):
            x = make_tensor((m, k), torch.float32, device, seed=i)
            params = [
                make_tensor((n1, k), torch.float32, device, seed=i + 1),
                make_tensor((n1,), torch.float32, device, seed=i + 2),
                make_tensor((n2, n1), torch.float32, device, seed=i + 3),
                make_tensor((n2,), torch.float32, device, seed=i + 4),
            ]
            leaves = [t.clone().requires_grad_() for t in [x] + params]
            out_dtype = torch.bfloat16 if autocast else torch.float32
            with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                y = cudasteps.linear_act_linear_fp8(*leaves, act)
            assert y.dtype == out_dtype and y.shape == (m, n2)
            gy = make_tensor((m, n2), out_dtype, device, seed=i + 5)
            y.backward(gy)
            want_y, want_grads = mlp_by_ops(x, *params, act, out_dtype, gy)
            assert torch.equal(y.detach(), want_y), ("out", (m, k, n1, n2), autocast)
            names = ("input", "weight1", "bias1", "weight2", "bias2")
            for leaf, want, name in zip(leaves, want_grads, names):
                assert leaf.grad.dtype == want.dtype and torch.equal(leaf.grad, want), (name, (m, k, n1, n2))
            # Within FP8 rounding of the exact MLP (float64).
            acts = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "silu": torch.nn.functional.silu}
            x64, (w1, b1, w2, b2) = x.double().cpu(), [p.double().cpu() for p in params]
            exact = acts[act](x64 @ w1.t() + b1) @ w2.t() + b2
            err = (y.double().cpu() - exact).norm() / exact.norm()
            assert err < 0.08, (err, (m, k, n1, n2), act)


@pytest.mark.parametrize("device", DEVICES)
def test_input_amax_is_the_one_pass_cast(device):
    """Given its input's amax, the same output and gradients as without it (the amax is exact); a
    different amax changes the input's scale (it is used, not measured again)."""
    x = make_tensor((48, 32), torch.bfloat16, device, seed=1)
    shapes = [(64, 32), (64,), (16, 64), (16,)]
    params = [make_tensor(s, torch.float32, device, seed=i + 2) for i, s in enumerate(shapes)]
    amax = x.float().abs().max()
    xg, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = cudasteps.linear_act_linear_fp8(xg, *params, "gelu", input_amax=amax)
    ref = cudasteps.linear_act_linear_fp8(xr, *params, "gelu")
    assert torch.equal(out, ref)
    g = make_tensor(out.shape, torch.bfloat16, device, seed=9)
    out.backward(g)
    ref.backward(g)
    assert torch.equal(xg.grad, xr.grad)
    assert not torch.equal(cudasteps.linear_act_linear_fp8(x, *params, "gelu", input_amax=amax * 3), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_mlp_fp8_runs_the_fused_block_and_compiles(device):
    mlp = cudasteps.nn.MLP([24, 48, 16], "gelu", fp8=True).to(device)
    x = make_tensor((3, 5, 24), torch.float32, device, seed=1)
    (w1, b1), (w2, b2) = mlp.linear_params()
    assert torch.equal(mlp(x), cudasteps.linear_act_linear_fp8(x, w1, b1, w2, b2, "gelu"))

    def f(x):
        with torch.autocast(device, dtype=torch.bfloat16):
            return mlp(x)

    # The op's own outputs and gradients compared (a loss reduced inside the compiled graph would
    # be summed by inductor's own kernel, in another order than eager's).
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    assert torch.equal(compiled(x), f(x))
    gy = make_tensor((3, 5, 16), torch.bfloat16, device, seed=2)
    xg, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(xg).backward(gy)
    f(xr).backward(gy)
    assert torch.equal(xg.grad, xr.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_errors_and_opcheck(device):
    x = make_tensor((32, 16), torch.bfloat16, device, seed=1)
    r = range_of(x)
    a, b, ia, ib = fp8_operands(16, 16, 16, device, 2)
    cast, grad_cast = "act_cast_fp8", "act_grad_cast_fp8"
    cast_cases = [
        ((cast, x.double(), r, "gelu", E4M3), rf"{cast}: x must be Float or BFloat16 or Half, got Double"),
        ((cast, x[None], r, "gelu", E4M3), rf"{cast}: x must be 2-D, got 3-D"),
        ((cast, x, r.double(), "gelu", E4M3), rf"{cast}: x_range must be float32, got Double"),
        ((cast, x, r[:1], "gelu", E4M3), rf"{cast}: x_range must have shape \[2\]"),
        ((cast, x, r, "tanh", E4M3), rf"{cast}: act must be one of none, relu, gelu, gelu_tanh, silu, got"),
        ((cast, x, r, "gelu", torch.bfloat16), rf"{cast}: dtype must be Float8_e4m3fn or Float8_e5m2, got"),
        ((grad_cast, x, r, x.float(), "gelu", E5M2, True), rf"{grad_cast}: x must have the dtype of grad"),
        ((grad_cast, x, r, x[:4], "gelu", E5M2, True), rf"{grad_cast}: x must have the shape of grad"),
        ((grad_cast, x, r[:1], x, "gelu", E5M2, True), rf"{grad_cast}: grad_range must have shape \[2\]"),
        (("scaled_mm_range", a, b, ia.double(), ib), r"scaled_mm_range: scale_a must be float32, got Double"),
        (("scaled_mm_range", a.float(), b, ia, ib), r"scaled_mm_range: a must be Float8_e4m3fn or Float8"),
    ]
    for (name, *args), message in cast_cases:
        for dev in (device, "meta"):
            moved = [t.to(dev) if isinstance(t, torch.Tensor) else t for t in args]
            with pytest.raises(RuntimeError, match=message):
                getattr(torch.ops.cudasteps, name)(*moved)
    w1 = make_tensor((20, 16), torch.float32, device, seed=3)
    w2 = make_tensor((8, 20), torch.float32, device, seed=4)
    b1, b2 = torch.zeros(20, device=device), torch.zeros(8, device=device)
    op = "cudasteps.linear_act_linear_fp8"
    mlp_cases = [
        ((x.double(), w1, b1, w2, b2), rf"{op}: input must be Float or BFloat16 or Half, got Double"),
        ((x, w1, b1, w2[:, :5], b2), rf"{op}: weight2.size\(1\) must equal weight1.size\(0\) \(20\), got 5"),
        ((x, w1, b1, w2, b2[:3]), rf"{op}: bias2 must have shape \[8\], got shape \[3\]"),
        ((x, w1, b1, w2, b2, "tanh"), rf"{op}: act must be one of none, relu, gelu, gelu_tanh, silu, got"),
        ((x, w1, b1, w2, b2, "gelu", None, r.double()[:1]), rf"{op}: input_amax must be float32, got Double"),
        ((x, w1, b1, w2, b2, "gelu", None, r), rf"{op}: input_amax must have one element \(input's amax\)"),
    ]
    for args, message in mlp_cases:
        *args, amax = args if len(args) == 8 else (*args, None)
        for grad in (False, True):
            call = (args[0], args[1].clone().requires_grad_(grad), *args[2:])
            with pytest.raises(RuntimeError, match=message):
                torch.ops.cudasteps.linear_act_linear_fp8(*call, input_amax=amax)
        meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in args]
        with pytest.raises(RuntimeError, match=message):
            meta_amax = None if amax is None else amax.to("meta")
            torch.ops.cudasteps.linear_act_linear_fp8(*meta, input_amax=meta_amax)
    with pytest.raises(RuntimeError, match=r"scaled_mm_range: scale_a requires grad, but scaled_mm_range"):
        torch.ops.cudasteps.scaled_mm_range(a, b, ia.clone().requires_grad_(), ib)
    with pytest.raises(RuntimeError, match=r"act_cast_fp8: x requires grad, but act_cast_fp8 is not"):
        torch.ops.cudasteps.act_cast_fp8(x.clone().requires_grad_(), r, "gelu", E4M3)
    # Every check but test_schema for FP8 inputs and outputs: torch's schema check compares tensors
    # with arithmetic float8 tensors do not have (as tests/test_scaled_mm.py says).
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.cudasteps.scaled_mm_range.default, (a, b, ia, ib), test_utils=utils)
    torch.library.opcheck(torch.ops.cudasteps.act_cast_fp8.default, (x, r, "gelu", E4M3), test_utils=utils)
    args = (x, r, x, "silu", E5M2, True)
    torch.library.opcheck(torch.ops.cudasteps.act_grad_cast_fp8.default, args, test_utils=utils)
    leaves = [t.clone().requires_grad_() for t in (x.float(), w1, b1, w2, b2)]
    mlp_op = torch.ops.cudasteps.linear_act_linear_fp8.default
    torch.library.opcheck(mlp_op, (*leaves, "gelu", torch.bfloat16), test_utils=utils)
    amax = x.float().abs().max()
    torch.library.opcheck(mlp_op, (*leaves, "silu"), {"input_amax": amax}, test_utils=utils)
