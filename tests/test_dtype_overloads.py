"""Tests for the gemm family's dtype overloads (csrc/gemm: gemm_cpu.cpp, gemm_cuda.cpp,
linear_act.cpp, gemm_autograd.cpp, gemm_autocast.cpp; tc/sm90's launch_layout_f32_out):

* ``mm.dtype(self, mat2, out_dtype)``: as aten's, a float32 output of bf16/fp16 operands (the fp32
  accumulators written unrounded; on Hopper by tc:ws_persistent's kernel, elsewhere from the
  operands widened to float32, whose products are exact there);
* ``linear.dtype(input, weight, bias, dtype)``, ``linear_act.dtype(..., act, dtype)`` (bias as
  given) and ``linear_act_linear.dtype(..., act, dtype)`` (bias1 as given): the arguments cast to
  ``dtype`` first, the gradients back in each argument's own dtype, the float32 ones written by
  the backward's GEMMs (mm.dtype). Autocast runs these for the three ops (so cudasteps.nn.Linear
  and MLP do), where a cast node per parameter would take a pass over each gradient.

References: float64 products of the same (16-bit) operands; the default overloads on the casts.
"""

import cudasteps
import pytest
import torch
from _helpers import DEVICES, make_tensor, poison_allocator, rel_err, requires_cuda
from cudasteps import nn as cnn

HALF = [torch.bfloat16, torch.float16]
_ops = torch.ops.cudasteps


def f32_sum_bound(k: int) -> float:
    # Exact products, float32 sums over k terms (each term's error at most k * 2^-24 of the sum
    # of magnitudes; the operands are random, so the error is far below that bound's worst case).
    return 4 * max(k, 1) ** 0.5 * 2.0**-24 + 2.0**-24


def layouts(a: torch.Tensor, b: torch.Tensor):
    """(a, b) in all four layouts: row-major, or a transposed view of a row-major copy."""
    for ta in (False, True):
        for tb in (False, True):
            aa = a.t().contiguous().t() if ta else a
            bb = b.t().contiguous().t() if tb else b
            yield f"{'T' if ta else 'N'}{'T' if tb else 'N'}", aa, bb


# M, K, N: no multiple of any tile; K long enough that float32 sums matter; sizes 0 and 1; few
# rows (the few-row path is not taken for a float32 output); an output under one wave (split-K);
# one whose tiles are 128 x 64 on a Hopper GPU (300 x 260).
SHAPES = [
    (1037, 520, 2056),
    (300, 333, 260),
    (300, 4104, 64),
    (1, 33, 17),
    (17, 1, 9),
    (0, 8, 16),
    (8, 0, 16),
    (8, 16, 0),
    (256, 8192, 256),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mm_dtype_float32_out(device, dtype, shape):
    m, k, n = shape
    a = make_tensor((m, k), dtype, device, seed=1, low=-2, high=2)
    b = make_tensor((k, n), dtype, device, seed=2, low=-2, high=2)
    ref = a.double().cpu() @ b.double().cpu()
    scale = (a.double().abs().cpu() @ b.double().abs().cpu()).clamp_min(1e-30)
    for name, aa, bb in layouts(a, b):
        if device == "cuda":
            poison_allocator(m * n, torch.float32)
        out = _ops.mm(aa, bb, torch.float32)
        assert out.dtype == torch.float32 and out.shape == (m, n) and out.is_contiguous(), name
        assert torch.isfinite(out).all(), name
        err = ((out.double().cpu() - ref).abs() / scale).max().item() if out.numel() else 0.0
        assert err <= f32_sum_bound(k), (name, err)
        # More accurate than the 16-bit output rounded to float32 (where rounding shows).
        if out.numel() and k > 1:
            rounded = cudasteps.mm(aa, bb).double().cpu()
            assert (out.double().cpu() - ref).abs().max() <= (rounded - ref).abs().max(), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_mm_dtype_misaligned_and_strided(device, dtype):
    # Views whose base or rows are off 16 bytes (repacked first), and a sliced column view.
    base_a = make_tensor((301 * 131 + 1,), dtype, device, seed=3)
    a = base_a[1:].view(301, 131)
    b = make_tensor((131, 2 * 77), dtype, device, seed=4)[:, ::2]
    out = _ops.mm(a, b, torch.float32)
    ref = a.double().cpu() @ b.double().cpu()
    assert rel_err(out.double().cpu(), ref) <= f32_sum_bound(131)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_mm_dtype_same_dtype_is_mm(device, dtype):
    a = make_tensor((65, 40), dtype, device, seed=5)
    b = make_tensor((40, 33), dtype, device, seed=6)
    assert torch.equal(_ops.mm(a, b, dtype), cudasteps.mm(a, b))


@requires_cuda
@pytest.mark.parametrize("dtype", HALF)
def test_mm_dtype_deterministic(dtype):
    # Split-K (a small output, long K) and the tail split add their parts in a fixed order; on a
    # Hopper GPU the weight-gradient shapes 1024^2 x 8192 and 512 x 1024 x 8192 run 128 x 64 tiles,
    # the second with the tail split.
    for m, k, n in ((256, 8192, 256), (1536, 4096, 1024), (1024, 8192, 1024), (512, 8192, 1024)):
        a = make_tensor((k, m), dtype, "cuda", seed=7).t()
        b = make_tensor((k, n), dtype, "cuda", seed=8)
        first = _ops.mm(a, b, torch.float32)
        for _ in range(3):
            assert torch.equal(_ops.mm(a, b, torch.float32), first)


@pytest.mark.parametrize("device", DEVICES + ["meta"])
def test_mm_dtype_errors(device):
    a = torch.ones(4, 3, dtype=torch.bfloat16, device=device)
    b = torch.ones(3, 5, dtype=torch.bfloat16, device=device)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: out_dtype must be self's dtype \(BFloat16\).*got Half"
    ):
        _ops.mm(a, b, torch.float16)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.mm: out_dtype must be self's dtype \(Float\).*got Double"
    ):
        _ops.mm(a.float(), b.float(), torch.float64)
    with pytest.raises(RuntimeError, match=r"cudasteps.mm: mat2 must have the dtype of self"):
        _ops.mm(a, b.half(), torch.float32)
    with pytest.raises(RuntimeError, match=r"cudasteps.mm: mat2.size\(0\) must equal self.size\(1\)"):
        _ops.mm(a, b.t(), torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_mm_dtype_autograd(device):
    a = make_tensor((37, 29), torch.bfloat16, device, seed=9).requires_grad_()
    b = make_tensor((29, 23), torch.bfloat16, device, seed=10).requires_grad_()
    out = _ops.mm(a, b, torch.float32)
    g = make_tensor((37, 23), torch.float32, device, seed=11)
    out.backward(g)
    gb = g.to(torch.bfloat16)
    assert a.grad.dtype == torch.bfloat16 and b.grad.dtype == torch.bfloat16
    assert torch.equal(a.grad, cudasteps.mm(gb, b.detach().t()))
    assert torch.equal(b.grad, cudasteps.mm(a.detach().t(), gb))
    # float64 (out_dtype the operands'): gradcheck.
    a64 = make_tensor((6, 5), torch.float64, device, seed=12).requires_grad_()
    b64 = make_tensor((5, 4), torch.float64, device, seed=13).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: _ops.mm(x, y, torch.float64), (a64, b64))


# ---- linear.dtype and linear_act_linear.dtype ----


def linear_args(m, k, n, device, seed, bias=True, in_dtype=torch.float32):
    x = make_tensor((m, k), in_dtype, device, seed=seed, low=-2, high=2)
    w = make_tensor((n, k), torch.float32, device, seed=seed + 1) / k**0.5
    b = make_tensor((n,), torch.float32, device, seed=seed + 2) if bias else None
    return x, w, b


def grads_of(fn, tensors, grad_out):
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in tensors]
    out = fn(*leaves)
    out.backward(grad_out)
    return out, [t.grad if t is not None else None for t in leaves]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", [(1037, 520, 2056), (3, 33, 17), (0, 16, 8)], ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_dtype(device, dtype, shape, bias):
    m, k, n = shape
    x, w, b = linear_args(m, k, n, device, seed=20, bias=bias)
    g = make_tensor((m, n), dtype, device, seed=23)
    out, (gx, gw, gb) = grads_of(lambda x, w, b: _ops.linear(x, w, b, dtype), (x, w, b), g)
    # Forward: bit for bit linear on the casts (what autocast's cached casts gave).
    xc, wc = x.to(dtype), w.to(dtype)
    bc = b.to(dtype) if bias else None
    assert out.dtype == dtype and torch.equal(out, cudasteps.linear(xc, wc, bc))
    # Gradients: in the arguments' dtypes, the float32 sums of the exact products of the 16-bit
    # gradient and the casts.
    assert gx.dtype == torch.float32 and gw.dtype == torch.float32
    ref_gx = g.double().cpu() @ wc.double().cpu()
    ref_gw = g.double().cpu().t() @ xc.double().cpu()
    tol_x, tol_w = f32_sum_bound(n), f32_sum_bound(m)
    if m:
        scale_x = (g.double().abs().cpu() @ wc.double().abs().cpu()).clamp_min(1e-30)
        scale_w = (g.double().abs().cpu().t() @ xc.double().abs().cpu()).clamp_min(1e-30)
        assert ((gx.double().cpu() - ref_gx).abs() / scale_x).max() <= tol_x
        assert ((gw.double().cpu() - ref_gw).abs() / scale_w).max() <= tol_w
    else:
        assert gx.shape == x.shape and (gw == 0).all()
    if bias:
        assert gb.dtype == torch.float32
        ref_gb = g.double().cpu().sum(0)
        assert (gb.double().cpu() - ref_gb).abs().max() <= f32_sum_bound(m) * max(1.0, g.abs().sum().item())


@pytest.mark.parametrize("device", DEVICES)
def test_linear_dtype_bf16_input_and_leading_dims(device):
    # An input already in dtype (a previous layer's output) and leading dims: only the weight and
    # bias are cast; the input's gradient stays bf16.
    x = make_tensor((2, 5, 48), torch.bfloat16, device, seed=30)
    _, w, b = linear_args(1, 48, 24, device, seed=31)
    g = make_tensor((2, 5, 24), torch.bfloat16, device, seed=34)
    out, (gx, gw, gb) = grads_of(lambda x, w, b: _ops.linear(x, w, b, torch.bfloat16), (x, w, b), g)
    _, (rx, rw, rb) = grads_of(
        lambda x, w, b: cudasteps.linear(x, w.to(torch.bfloat16), b.to(torch.bfloat16)), (x, w, b), g
    )
    assert gx.dtype == torch.bfloat16 and torch.equal(gx, rx)
    assert gw.dtype == torch.float32 and rel_err(gw.double(), rw.double()) <= 2**-7
    assert gb.dtype == torch.float32 and rel_err(gb.double(), rb.double()) <= 2**-7


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("biases", [(True, True), (False, True), (True, False)], ids=str)
def test_linear_act_linear_dtype(device, dtype, biases):
    m, d, h = 300, 72, 200
    x = make_tensor((m, d), torch.float32, device, seed=40, low=-2, high=2)
    w1 = make_tensor((h, d), torch.float32, device, seed=41) / d**0.5
    b1 = make_tensor((h,), torch.float32, device, seed=42) if biases[0] else None
    w2 = make_tensor((d, h), torch.float32, device, seed=43) / h**0.5
    b2 = make_tensor((d,), torch.float32, device, seed=44) if biases[1] else None
    g = make_tensor((m, d), dtype, device, seed=45)

    def fused(x, w1, b1, w2, b2):
        return _ops.linear_act_linear(x, w1, b1, w2, b2, "gelu", dtype)

    def casts(x, w1, b1, w2, b2):  # what autocast gave before: cast nodes, then the default overload
        cb2 = None if b2 is None else b2.to(dtype)
        return cudasteps.linear_act_linear(x.to(dtype), w1.to(dtype), b1, w2.to(dtype), cb2, "gelu")

    out, grads = grads_of(fused, (x, w1, b1, w2, b2), g)
    ref_out, ref_grads = grads_of(casts, (x, w1, b1, w2, b2), g)
    assert out.dtype == dtype and torch.equal(out, ref_out)
    for name, got, ref in zip(("input", "weight1", "bias1", "weight2", "bias2"), grads, ref_grads):
        if ref is None:
            assert got is None, name
            continue
        assert got.dtype == torch.float32, name
        # The reference rounded each gradient to the 16-bit dtype before its cast back.
        assert rel_err(got.double(), ref.double()) <= 2 * (2**-8 if dtype == torch.bfloat16 else 2**-11), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "act, bias_dtype",
    [("gelu", torch.float32), ("silu", None), ("none", torch.float32), ("none", "dtype")],
    ids=str,
)
def test_linear_act_dtype(device, dtype, act, bias_dtype):
    m, k, n = 257, 72, 136
    x = make_tensor((m, k), torch.float32, device, seed=80, low=-2, high=2)
    w = make_tensor((n, k), torch.float32, device, seed=81) / k**0.5
    b = None if bias_dtype is None else make_tensor((n,), torch.float32, device, seed=82)
    if bias_dtype == "dtype":  # act none with a bias of dtype: linear.dtype's node
        b = b.to(dtype)
    g = make_tensor((m, n), dtype, device, seed=83)
    out, grads = grads_of(lambda x, w, b: _ops.linear_act(x, w, b, act, dtype), (x, w, b), g)
    ref, ref_grads = grads_of(
        lambda x, w, b: cudasteps.linear_act(x.to(dtype), w.to(dtype), b, act), (x, w, b), g
    )
    assert out.dtype == dtype and torch.equal(out, ref)
    for name, got, want in zip(("input", "weight", "bias"), grads, ref_grads):
        if want is None:
            assert got is None, name
            continue
        # The bias keeps its own dtype and path; input and weight come back in float32 from the
        # GEMMs, where the reference rounded them to the 16-bit dtype first.
        assert got.dtype == want.dtype == (torch.float32 if name != "bias" else b.dtype), name
        assert rel_err(got.double(), want.double()) <= 2 * (2**-8 if dtype == torch.bfloat16 else 2**-11), (
            name
        )


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_deep_mlp_has_no_cast_nodes(device):
    # Three hidden layers: linear_act.dtype for the first two, linear_act_linear.dtype for the
    # last and the output layer; every parameter's gradient float32, no ToCopyBackward in the graph.
    mlp = cnn.MLP([32, 64, 64, 48, 16], "gelu").to(device)
    x = make_tensor((40, 32), torch.float32, device, seed=84).requires_grad_()
    with torch.autocast(device, dtype=torch.bfloat16):
        out = mlp(x)
    names, stack, seen = [], [out.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.append(fn.name())
        stack.extend(f for f, _ in fn.next_functions)
    assert not any("ToCopy" in n for n in names), names
    out.float().sum().backward()
    assert x.grad.dtype == torch.float32
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in mlp.parameters())


@pytest.mark.parametrize("device", DEVICES + ["meta"])
def test_dtype_overload_errors(device):
    x = torch.ones(4, 3, device=device)
    w = torch.ones(5, 3, device=device)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.linear: dtype must be float32, float64, float16 or bfloat16, got Int"
    ):
        _ops.linear(x, w, None, torch.int32)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.linear: input must be float32, float64, float16 or bfloat16, got Int"
    ):
        _ops.linear(x.int(), w, None, torch.bfloat16)
    with pytest.raises(
        RuntimeError, match=r"cudasteps.linear: bias must be float32, float64, float16 or bfloat16, got Long"
    ):
        _ops.linear(x, w, torch.ones(5, dtype=torch.long, device=device), torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear: weight.size\(1\) must equal input.size\(-1\)"):
        _ops.linear(x, w.t(), None, torch.bfloat16)
    w2 = torch.ones(3, 5, device=device)
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps.linear_act_linear: weight2 must be float32, float64, float16 or bfloat16, got Int",
    ):
        _ops.linear_act_linear(x, w, None, w2.int(), None, "gelu", torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act: weight must be float32.*got Int"):
        _ops.linear_act(x, w.int(), None, "gelu", torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act: dtype must be.*got Int"):
        _ops.linear_act(x, w, None, "gelu", torch.int32)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act: act must be one of"):
        _ops.linear_act(x, w, None, "tanh", torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act_linear: act must be one of"):
        _ops.linear_act_linear(x, w, None, w2, None, "tanh", torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act_linear: dtype must be"):
        _ops.linear_act_linear(x, w, None, w2, None, "gelu", torch.bool)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    a = make_tensor((33, 20), torch.bfloat16, device, seed=50)
    b = make_tensor((20, 17), torch.bfloat16, device, seed=51)
    torch.library.opcheck(_ops.mm.dtype, (a, b, torch.float32))
    x, w, bias = linear_args(9, 20, 12, device, seed=52)
    x.requires_grad_()
    w.requires_grad_()
    torch.library.opcheck(_ops.linear.dtype, (x, w, bias, torch.bfloat16))
    torch.library.opcheck(_ops.linear_act.dtype, (x, w, bias, "gelu", torch.bfloat16))
    w2 = make_tensor((20, 12), torch.float32, device, seed=55).requires_grad_()
    torch.library.opcheck(_ops.linear_act_linear.dtype, (x, w, bias, w2, None, "gelu", torch.bfloat16))


# ---- autocast runs the overloads ----


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_takes_the_dtype_overloads(device):
    amp = torch.bfloat16
    lin = cnn.Linear(48, 40).to(device)
    x = make_tensor((2, 7, 48), torch.float32, device, seed=60).requires_grad_()
    with torch.autocast(device, dtype=amp):
        y = lin(x)
    assert y.dtype == amp
    # One node for the linear, no cast node between it and the float32 parameters.
    assert "Linear" in y.grad_fn.name()
    assert all(fn is None or "AccumulateGrad" in fn.name() for fn, _ in y.grad_fn.next_functions)
    y.float().square().sum().backward()
    assert lin.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    # The same forward as the casts the default overload ran before.
    with torch.no_grad():
        ref = cudasteps.linear(x.to(amp), lin.weight.to(amp), lin.bias.to(amp))
    assert torch.equal(y.detach(), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_mlp_against_torch(device):
    torch.manual_seed(0)
    seq = torch.nn.Sequential(torch.nn.Linear(64, 192), torch.nn.GELU(), torch.nn.Linear(192, 64)).to(device)
    mlp = cnn.MLP([64, 192, 64], "gelu").to(device)
    with torch.no_grad():
        for ours, theirs in zip([p for p in mlp.parameters()], [p for p in seq.parameters()]):
            ours.copy_(theirs)
    x = make_tensor((130, 64), torch.float32, device, seed=61)
    outs, grads = {}, {}
    for name, model in (("torch", seq), ("cudasteps", mlp)):
        xi = x.clone().requires_grad_()
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(xi)
        out.float().square().mean().backward()
        outs[name] = out.float()
        grads[name] = [xi.grad] + [p.grad for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    assert rel_err(outs["cudasteps"].double(), outs["torch"].double()) <= 2e-2
    for ours, theirs in zip(grads["cudasteps"], grads["torch"]):
        assert ours.dtype == torch.float32
        assert rel_err(ours.double(), theirs.double()) <= 3e-2


@requires_cuda
def test_autocast_compiled_mlp():
    torch.manual_seed(0)
    mlp = cnn.MLP([64, 192, 64], "gelu").cuda()
    x = make_tensor((130, 64), torch.float32, "cuda", seed=62)

    def forward(model, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(x)

    def step(fwd):
        xi = x.clone().requires_grad_()
        out = fwd(mlp, xi)
        out.float().square().mean().backward()
        grads = [xi.grad] + [p.grad for p in mlp.parameters()]
        mlp.zero_grad(set_to_none=True)
        return out, grads

    eager, eager_grads = step(forward)
    compiled, compiled_grads = step(torch.compile(forward, fullgraph=True))
    assert torch.equal(compiled, eager)
    for got, ref in zip(compiled_grads, eager_grads):
        assert got.dtype == torch.float32 and torch.equal(got, ref)


def test_python_wrappers():
    a = make_tensor((5, 4), torch.bfloat16, "cpu", seed=70)
    b = make_tensor((4, 3), torch.bfloat16, "cpu", seed=71)
    assert torch.equal(cudasteps.mm(a, b, out_dtype=torch.float32), _ops.mm(a, b, torch.float32))
    x, w, bias = linear_args(3, 4, 6, "cpu", seed=72)
    assert torch.equal(
        cudasteps.linear(x, w, bias, dtype=torch.bfloat16), _ops.linear(x, w, bias, torch.bfloat16)
    )
