"""Tests for linear_act / linear_act_aux / ladder_linear_act (csrc/gemm/linear_act.cpp,
gemm_cuda.cpp) and cudasteps.nn.LinearAct: act(input @ weight.T + bias), as linear then bias_act
(the ops), or with the bias and the activation in the GEMM's epilogue (the ladder's fused steps,
Hopper only: "fused" in tc:ws_persistent's kernel, "fused_pingpong" in tc:ws_pingpong's).

The reference is the float64 function of the same (rounded) inputs. The fused epilogue applies the
activation to the fp32 product and rounds once; the two-pass form rounds the product first, then
the activation's output: both are within a few units of the dtype's rounding of the reference.
"""

import itertools

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, HAS_CUDA, make_tensor, rel_err, requires_cuda
from cudasteps import gemm as G
from cudasteps import nn as cnn

ACTS = ["none", "relu", "gelu", "gelu_tanh", "silu"]
EPS = {torch.float32: 2.0**-23, torch.float64: 2.0**-52, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def hopper() -> bool:
    return HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)


def fused_runs(x, w, b) -> bool:
    """Whether the ladder's fused steps take these operands (gemm_cuda.cpp, linear_act_fuses)."""
    m = x.numel() // max(x.shape[-1], 1)
    n, k = w.shape
    aligned = b is None or (
        b.dtype in (x.dtype, torch.float32)
        and b.stride(0) == 1
        and b.data_ptr() % (2 * b.element_size()) == 0
    )
    return (
        x.is_cuda
        and hopper()
        and x.dtype in (torch.bfloat16, torch.float16)
        and m > 16
        and n > 16
        and k > 0
        and (n * x.element_size()) % 16 == 0
        and aligned
    )


def forms(x, w, b):
    """(name, fn(x, w, b, act) -> out) for every form that takes these operands: the op, the
    ladder's two_pass step on CUDA, and its fused steps where they run."""
    out = [("linear_act", lambda *a: cudasteps.linear_act(*a))]
    if x.is_cuda:
        out.append(("two_pass", lambda *a: G.run_linear_act_ladder("two_pass", *a)[0]))
    if fused_runs(x, w, b):
        for v in FUSED_STEPS:
            out.append((v, lambda *a, v=v: G.run_linear_act_ladder(v, *a)[0]))
    return out


FUSED_STEPS = [v for v in G.LINEAR_ACT_LADDER if v.startswith("fused")]


def steps_for(x, w, b):
    """The ladder's steps that take these operands (all of them where the fused ones run)."""
    return [v for v in G.LINEAR_ACT_LADDER if v not in FUSED_STEPS or fused_runs(x, w, b)]


def act64(z, act):
    return {
        "none": lambda v: v,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
        "silu": F.silu,
    }[act](z)


def reference(x, w, b, act):
    z = x.double().cpu() @ w.double().cpu().t()
    if b is not None:
        z = z + b.double().cpu()
    return act64(z, act)


def tol(dtype, k):
    # A few roundings of the output (and, two-pass, of the product) plus fp32 accumulation; TF32
    # operands (float32 on CUDA with the switch on) are not used here: the switch stays off.
    return 6 * EPS[dtype] + 4 * (max(k, 1) ** 0.5) * 2.0**-24


def bound(x, w, b, act, ref):
    """tol(), or, where the activation itself loses more (fp32 gelu's 1 + erf(z / sqrt(2))
    cancels for negative z), twice what torch's own F.linear + activation loses on these inputs."""
    torch_out = act64(F.linear(x, w, b), act)
    return max(tol(x.dtype, x.shape[-1]), 2 * rel_err(torch_out, ref))


def operands(m, n, k, dtype, device, seed, bias=True, lead=()):
    x = make_tensor((*lead, m, k), dtype, device, seed=seed, low=-2, high=2) / max(k, 1) ** 0.5
    w = make_tensor((n, k), dtype, device, seed=seed + 1, low=-2, high=2)
    b = make_tensor((n,), dtype, device, seed=seed + 2) if bias else None
    return x, w, b


# Odd sizes (no multiple of any tile), 1, few rows (the few-row path), K = 1, and sizes the fused
# epilogue takes (on Hopper: more than 16 rows and columns, rows of a 16-byte multiple) with
# partial edge tiles in both directions, split-K included (long K).
SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 65), (70, 130, 257), (131, 257, 31)]
CUDA_SHAPES = SHAPES + [
    (16, 300, 200),
    (300, 17, 100),
    (33, 24, 100),
    (257, 520, 1030),
    (131, 264, 31),
    (129, 384, 8192),
    (1000, 1000, 64),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_matches_float64_reference(device, act):
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
    shapes = CUDA_SHAPES if device == "cuda" else SHAPES
    for dtype in dtypes:
        for i, (m, n, k) in enumerate(shapes):
            for bias in (True, False):
                x, w, b = operands(m, n, k, dtype, device, seed=10 * i, bias=bias)
                ref = reference(x, w, b, act)
                for name, fn in forms(x, w, b):
                    out = fn(x, w, b, act)
                    assert out.shape == (m, n) and out.dtype == dtype and out.device == x.device
                    err = rel_err(out, ref)
                    assert err < bound(x, w, b, act, ref), (name, dtype, act, (m, n, k), bias, err)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_fp32_bias_of_16_bit_operands(device, act):
    """A float32 bias of bf16/fp16 operands (autocast leaves linear_act's bias in float32): added
    in fp32 by every form, the fused epilogue's included (it reads the bias as float32 pairs)."""
    shapes = CUDA_SHAPES if device == "cuda" else SHAPES
    for dtype in (torch.bfloat16, torch.float16):
        for i, (m, n, k) in enumerate(shapes):
            x, w, b = operands(m, n, k, dtype, device, seed=10 * i + 5)
            b32 = make_tensor((n,), torch.float32, device, seed=10 * i + 6)
            ref = reference(x, w, b32, act)
            for name, fn in forms(x, w, b32):
                out = fn(x, w, b32, act)
                assert out.dtype == dtype, name
                err = rel_err(out, ref)
                # torch's F.linear takes no fp32 bias of 16-bit operands: its bound with the bias
                # rounded to the dtype.
                assert err < bound(x, w, b32.to(dtype), act, ref), (name, dtype, act, (m, n, k), err)


@pytest.mark.parametrize("device", DEVICES)
def test_leading_dims_empty_and_views(device):
    for dtype in (torch.float32, torch.bfloat16):
        x, w, b = operands(20, 24, 40, dtype, device, seed=3, lead=(2, 3))
        out = cudasteps.linear_act(x, w, b, "silu")
        assert out.shape == (2, 3, 20, 24)
        assert rel_err(out, reference(x.reshape(-1, 40), w, b, "silu").view(2, 3, 20, 24)) < tol(dtype, 40)
        # A transposed input and a sliced weight (not contiguous).
        xt = make_tensor((40, 33), dtype, device, seed=4).t()
        wt = make_tensor((24, 80), dtype, device, seed=5)[:, ::2]
        assert rel_err(cudasteps.linear_act(xt, wt, b, "gelu"), reference(xt, wt, b, "gelu")) < tol(dtype, 40)
        # A bias that is a misaligned view (one element past an allocation: the fused step, which
        # reads aligned pairs, would refuse it) and a strided one.
        for bv in (
            make_tensor((25,), dtype, device, seed=6)[1:],
            make_tensor((48,), dtype, device, seed=7)[::2],
        ):
            assert rel_err(
                cudasteps.linear_act(x, w, bv, "relu"),
                reference(x.reshape(-1, 40), w, bv, "relu").view(2, 3, 20, 24),
            ) < tol(dtype, 40)
        # An fp32 bias with a bf16 input (as under autocast): added in fp32, its gradient fp32.
        if dtype == torch.bfloat16:
            b32 = b.float().requires_grad_()
            out = cudasteps.linear_act(x, w, b32, "gelu")
            ref = reference(x.reshape(-1, 40), w, b32, "gelu").view(2, 3, 20, 24)
            assert out.dtype == dtype and rel_err(out, ref) < tol(dtype, 40)
            out.float().sum().backward()
            assert b32.grad.dtype == torch.float32
            # act "none" with that bias (linear takes no fp32 bias of a bf16 input): with and
            # without a gradient to record, and the same values either way.
            b32.grad = None
            out = cudasteps.linear_act(x, w, b32, "none")
            ref = reference(x.reshape(-1, 40), w, b32, "none").view(2, 3, 20, 24)
            assert out.dtype == dtype and rel_err(out, ref) < tol(dtype, 40)
            with torch.no_grad():
                assert torch.equal(cudasteps.linear_act(x, w, b32, "none"), out)
            out.float().sum().backward()
            assert b32.grad.dtype == torch.float32
        # Empty products: no rows, no features, K = 0 (act(bias) for every row).
        assert cudasteps.linear_act(x[..., :0, :], w, b).shape == (2, 3, 0, 24)
        assert cudasteps.linear_act(x, w[:0], b[:0]).shape == (2, 3, 20, 0)
        out = cudasteps.linear_act(x[..., :0], w[:, :0], b, "gelu")
        assert rel_err(out, F.gelu(b.double().cpu()).expand(2, 3, 20, 24)) < tol(dtype, 1)


# (32, 512, 4096): a 32-row product whose tiles sm90/scheduler.cuh's few_rows_split_k splits along
# K on a Hopper GPU, in linear and in every fused step alike; (48, 4104, 520): skinny tiles there
# (skinny_tiles), the fused stage's output staged through shared memory and its aux stored element
# by element (store_accumulators_transposed); (100, 4104, 520): the same in two token tiles
# per weight tile; (48, 1000, 520): in clusters of two CTAs splitting K.
AUX_SHAPES = [
    (17, 33, 65),
    (300, 520, 72),
    (129, 384, 8192),
    (131, 264, 31),
    (32, 512, 4096),
    (48, 4104, 520),
    (100, 4104, 520),
    (48, 1000, 520),
]


@pytest.mark.parametrize("device", DEVICES)
def test_aux_is_the_product_and_results_reproduce(device):
    """linear_act_aux's second output, and the product every ladder step returns, is
    input @ weight.T without the bias: bitwise what linear computes (the fused step's epilogue
    writes it from the same GEMM kernel), and every output is bitwise the same run to run."""
    for dtype in [torch.float32, torch.bfloat16, torch.float16]:
        for i, (m, n, k) in enumerate(AUX_SHAPES):
            x, w, b = operands(m, n, k, dtype, device, seed=20 + i)
            plain = cudasteps.linear(x, w)
            out, product = torch.ops.cudasteps.linear_act_aux(x, w, b, "gelu")
            assert torch.equal(product, plain), (dtype, m, n, k)
            assert torch.equal(out, cudasteps.linear_act(x, w, b, "gelu"))
            out2, product2 = torch.ops.cudasteps.linear_act_aux(x, w, b, "gelu")
            assert torch.equal(out, out2) and torch.equal(product, product2)
            steps = steps_for(x, w, b) if device == "cuda" else []
            for v in steps:
                out, product = G.run_linear_act_ladder(v, x, w, b, "silu")
                if v == "fused_pingpong" and (m, n, k) == (129, 384, 8192):
                    # 6 tiles: tc:ws_persistent's kernel (linear's) cuts them into 16 k ranges
                    # (the tail split), tc:ws_pingpong's splits K in 3 instead: other fp32 sums.
                    assert rel_err(product, plain.double().cpu()) < tol(dtype, k), (v, dtype, m, n, k)
                else:
                    assert torch.equal(product, plain), (v, dtype, m, n, k)
                again = G.run_linear_act_ladder(v, x, w, b, "silu")
                assert torch.equal(out, again[0]) and torch.equal(product, again[1]), (v, dtype, m, n, k)


@pytest.mark.skipif(not hopper(), reason="the fused epilogue runs on a compute capability 9.0 GPU")
def test_fused_and_two_pass_agree():
    """The fused epilogue applies the activation to the product as linear writes it, so linear_act
    (fused where it runs) gives the bits of linear followed by bias_act, what its training forward
    (linear_act_aux) runs: a model's outputs are the same with and without autograd recording.
    The ladder's fused steps split K their own way (other fp32 sums): within a few units of the
    dtype's rounding. Act none is linear's single rounding of product + bias in every mode.
    48 x 4104 x 520: a few-row product in skinny tiles, whose fused stage is staged through shared
    memory (sm90/scheduler.cuh's skinny_tiles); 100 x 4104 x 520 the same in two token tiles per
    weight tile, 48 x 1000 x 520 in clusters of two splitting K."""
    for dtype, act, (m, n, k) in itertools.product(
        (torch.bfloat16, torch.float16),
        ACTS,
        [(257, 520, 1030), (48, 4104, 520), (100, 4104, 520), (48, 1000, 520)],
    ):
        x, w, b = operands(m, n, k, dtype, "cuda", seed=30)
        assert fused_runs(x, w, b)
        two_pass = cudasteps.bias_act(cudasteps.linear(x, w), b, act)
        out = cudasteps.linear_act(x, w, b, act)
        trained = torch.ops.cudasteps.linear_act_aux(x, w, b, act)[0]
        assert torch.equal(out, trained), (dtype, act)
        if act != "none":
            assert torch.equal(out, two_pass), (dtype, act)
            # An fp32 bias (autocast's) alike.
            b32 = b.float()
            assert torch.equal(
                cudasteps.linear_act(x, w, b32, act), cudasteps.bias_act(cudasteps.linear(x, w), b32, act)
            ), (dtype, act)
        for v in FUSED_STEPS:
            fused = G.run_linear_act_ladder(v, x, w, b, act)[0]
            assert rel_err(fused, two_pass) < 2 * tol(dtype, k), (v, dtype, act)


@requires_cuda
def test_poisoned_memory_never_shows():
    """Every step writes every element of out and of the product: outputs allocated where
    NaN-filled blocks were just freed (the caching allocator hands them out again) hold no NaN."""
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in [(131, 264, 31), (257, 520, 1030), (129, 384, 8192), (48, 4104, 520)]:
            x, w, b = operands(m, n, k, dtype, "cuda", seed=40)
            for v in steps_for(x, w, b):
                for _ in range(4):
                    torch.full((m * n + 4096,), float("nan"), dtype=dtype, device="cuda")
                out, product = G.run_linear_act_ladder(v, x, w, b, "gelu")
                assert not out.isnan().any() and not product.isnan().any(), (v, dtype, m, n, k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ACTS)
def test_gradients_match_torch(device, act):
    """Gradients of input, weight and bias against torch's F.linear + activation in float64, for
    fp32 and bf16 (the fused path on Hopper)."""
    for dtype in (torch.float32, torch.bfloat16):
        x, w, b = operands(70, 130, 257, dtype, device, seed=50)
        g = make_tensor((70, 130), dtype, device, seed=53)
        leaves = [t.detach().requires_grad_() for t in (x, w, b)]
        cudasteps.linear_act(*leaves, act).backward(g)
        refs = [t.detach().double().cpu().requires_grad_() for t in (x, w, b)]
        act64(F.linear(*refs), act).backward(g.double().cpu())
        for name, mine, ref in zip(("input", "weight", "bias"), leaves, refs):
            err = rel_err(mine.grad, ref.grad)
            assert err < 4 * tol(dtype, 257), (dtype, act, name, err)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device):
    aux = torch.ops.cudasteps.linear_act_aux
    for act in ACTS:
        x, w, b = (t.requires_grad_() for t in operands(5, 7, 6, torch.float64, device, seed=60))
        assert torch.autograd.gradcheck(lambda *a, act=act: cudasteps.linear_act(*a, act), (x, w, b))
        # Both outputs of linear_act_aux are differentiable (the product's gradient adds in).
        assert torch.autograd.gradcheck(lambda *a, act=act: aux(*a, act), (x, w, b))
        assert torch.autograd.gradcheck(lambda a, c, act=act: cudasteps.linear_act(a, c, None, act), (x, w))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for dtype in (torch.float32, torch.bfloat16):
        x, w, b = (t.requires_grad_() for t in operands(5, 7, 6, dtype, device, seed=70, lead=(2,)))
        torch.library.opcheck(torch.ops.cudasteps.linear_act.default, (x, w, b, "gelu"))
        torch.library.opcheck(torch.ops.cudasteps.linear_act.default, (x, w, None, "relu"))
        torch.library.opcheck(torch.ops.cudasteps.linear_act_aux, (x, w, b, "silu"))


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_casts_like_linear(device):
    dtype = torch.bfloat16
    layer = cnn.LinearAct(64, 96, act="gelu").to(device)
    x = make_tensor((40, 64), torch.float32, device, seed=80)
    with torch.autocast(device, dtype=dtype):
        out = layer(x)
    assert out.dtype == dtype
    out.float().sum().backward()
    w, b = layer[0].weight, layer[0].bias
    assert w.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
    # The bias stays fp32 (as bias_act's; nn.Linear's would be cast): the reference adds it as is.
    ref = reference(x.to(dtype), w.to(dtype), b, "gelu")
    assert rel_err(out, ref) < tol(dtype, 64)


def test_linear_act_module_is_a_drop_in_for_sequential():
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.GELU(approximate="tanh"))
    torch.manual_seed(1)
    mine = cnn.LinearAct(12, 20, act="gelu_tanh")
    assert list(mine.state_dict()) == list(ref.state_dict()) == ["0.weight", "0.bias"]
    assert torch.equal(mine[0].weight, ref[0].weight) and torch.equal(mine[0].bias, ref[0].bias)
    x = make_tensor((5, 12), seed=90)
    assert rel_err(mine(x), ref(x).double()) < tol(torch.float32, 12)
    ref2 = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.GELU(approximate="tanh"))
    ref2.load_state_dict(mine.state_dict())
    mine2 = cnn.LinearAct(12, 20, act="gelu_tanh")
    mine2.load_state_dict(ref2.state_dict())
    assert torch.equal(mine2(x), mine(x))
    assert cnn.LinearAct(4, 3, bias=False)[0].bias is None
    with pytest.raises(ValueError, match="act must be one of relu, gelu, gelu_tanh, silu, got 'tanh'"):
        cnn.LinearAct(4, 3, act="tanh")


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_matches_eager(device):
    torch.manual_seed(2)
    eager = cnn.MLP([32, 64, 16], "silu").to(device)
    compiled_model = cnn.MLP([32, 64, 16], "silu").to(device)
    compiled_model.load_state_dict(eager.state_dict())
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(compiled_model, fullgraph=True, backend=backend)
    x = make_tensor((24, 32), torch.float32, device, seed=100)
    out_e, out_c = eager(x), compiled(x)
    assert torch.equal(out_e, out_c)
    out_e.square().sum().backward()
    out_c.square().sum().backward()
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6), name


BAD_VARIANT = (
    r"cudasteps.ladder_linear_act: variant must be one of two_pass, fused, fused_pingpong, got 'nope'"
)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x, w, b = operands(4, 5, 6, torch.float32, device, seed=110)
    cases = [
        (
            (x, w, b, "tanh"),
            r"cudasteps.linear_act: act must be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'",
        ),
        ((x, w, b[:1].view(()), "gelu"), r"cudasteps.linear_act: bias must have shape \[5\], got shape \[\]"),
        (
            (x, w, b.double(), "gelu"),
            r"cudasteps.linear_act: bias must have the dtype of input \(Float\) or Float, got Double",
        ),
        (
            (x, w[:, :5], b, "gelu"),
            r"cudasteps.linear_act: weight.size\(1\) must equal input.size\(-1\) \(6\)",
        ),
        (
            (x.int(), w, b, "gelu"),
            r"cudasteps.linear_act: input must be float32, float64, float16 or bfloat16",
        ),
        ((x, w.half(), b, "gelu"), r"cudasteps.linear_act: weight must have the dtype of input"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.linear_act(*args)
        # The fake kernel (torch.compile, torch.export) raises the same.
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.linear_act(*meta)
    with pytest.raises(RuntimeError, match=r"cudasteps.linear_act_aux: act must be one of"):
        torch.ops.cudasteps.linear_act_aux(x, w, b, "nope")
    if device == "cuda":
        with pytest.raises(RuntimeError, match=BAD_VARIANT):
            G.run_linear_act_ladder("nope", x, w, b, "gelu")
        # Too few rows for the fused epilogue (and, off Hopper, no Hopper GPU): refused, not run.
        for v in FUSED_STEPS:
            with pytest.raises(RuntimeError, match=r"cudasteps.ladder_linear_act: the fused epilogue needs"):
                G.run_linear_act_ladder(v, x.bfloat16(), w.bfloat16(), b.bfloat16(), "gelu")
    meta = [t.to("meta") for t in (x, w, b)]
    with pytest.raises(RuntimeError, match=BAD_VARIANT):
        G.run_linear_act_ladder("nope", *meta, "gelu")


def _kernel_names(fn) -> list:
    """Names of the CUDA kernels (and ops) torch.profiler records while fn runs."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.key for e in prof.key_averages()]


@pytest.mark.skipif(not hopper(), reason="the fused epilogue runs on a compute capability 9.0 GPU")
def test_fused_epilogue_runs_on_hopper():
    """The fused steps, and linear_act without autograd recording, run the bias and activation in
    the GEMM's epilogue: no bias_act op and no elementwise kernel after the GEMM, where the
    two-pass step and the training forward (linear_act_aux) run one."""
    x, w, b = operands(257, 520, 1030, torch.bfloat16, "cuda", seed=120)

    def elementwise(names):
        return [n for n in names if "elementwise::" in n or n == "cudasteps::bias_act"]

    for v in FUSED_STEPS:
        assert not elementwise(_kernel_names(lambda v=v: G.run_linear_act_ladder(v, x, w, b, "gelu"))), v
    assert not elementwise(_kernel_names(lambda: cudasteps.linear_act(x, w, b, "gelu")))
    assert elementwise(_kernel_names(lambda: G.run_linear_act_ladder("two_pass", x, w, b, "gelu")))
    assert elementwise(_kernel_names(lambda: torch.ops.cudasteps.linear_act_aux(x, w, b, "gelu")))
