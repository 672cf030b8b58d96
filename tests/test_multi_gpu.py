"""Every op on the second GPU (cuda:1), and cross-device arguments rejected with a clear error.

A kernel that launched on the current device instead of its tensors' device (a missing device
guard), or on the default stream instead of the current one, would fail here.
"""

import copy

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import make_tensor, rel_err, requires_two_gpus

pytestmark = requires_two_gpus

DEV = "cuda:1"


def _fp8(t):
    return t.to(torch.float8_e4m3fn)


# The FP8 tensor cores (Hopper) add a k-tile's products with fewer bits than float32 (about 2^-14.6
# of the magnitude, torch._scaled_mm's too: tests/test_scaled_mm.py): scaled_mm's bound allows
# 2^-13 of it; every other op here is within float32 rounding.
# linear.dtype's output is bf16 (one rounding of the float32 sum).
TOLERANCE = {"scaled_mm": 2.0**-13, "linear.dtype": 2.0**-8}


def _bf16(t):
    return t.to(torch.bfloat16)


def _cases():
    x = make_tensor((67, 45), torch.float32, "cpu", seed=1)
    y = make_tensor((45, 33), torch.float32, "cpu", seed=2)
    b = make_tensor((45,), torch.float32, "cpu", seed=3)
    c = make_tensor((33,), torch.float32, "cpu", seed=4)
    w2 = make_tensor((7, 33), torch.float32, "cpu", seed=5)  # linear_act_linear's second layer
    b2 = make_tensor((7,), torch.float32, "cpu", seed=6)
    return [
        ("copy", lambda t: cudasteps.copy(t[0].t()), lambda t: t[0].t().contiguous(), (x,)),
        ("transpose", lambda t: cudasteps.transpose(t[0]), lambda t: t[0].t(), (x,)),
        ("sum", lambda t: cudasteps.sum(t[0], 0), lambda t: t[0].sum(0), (x,)),
        ("sum all", lambda t: cudasteps.sum(t[0]), lambda t: t[0].sum(), (x,)),
        ("mm", lambda t: cudasteps.mm(t[0], t[1]), lambda t: t[0] @ t[1], (x, y)),
        ("linear", lambda t: cudasteps.linear(t[0], t[1].t(), None), lambda t: t[0] @ t[1], (x, y)),
        (
            # A float32 output of bf16 operands (the Hopper kernel's epilogue on cuda:1).
            "mm.dtype",
            lambda t: cudasteps.mm(_bf16(t[0]), _bf16(t[1]), out_dtype=torch.float32),
            lambda t: _bf16(t[0]).double() @ _bf16(t[1]).double(),
            (x, y),
        ),
        (
            # What autocast runs: the casts on cuda:1, then linear there.
            "linear.dtype",
            lambda t: cudasteps.linear(t[0], t[1].t(), t[2], dtype=torch.bfloat16),
            lambda t: _bf16(t[0]).double() @ _bf16(t[1]).double() + _bf16(t[2]).double(),
            (x, y, c),
        ),
        (
            "linear_act",
            lambda t: cudasteps.linear_act(t[0], t[1].t(), t[2], "silu"),
            lambda t: F.silu(t[0] @ t[1] + t[2]),
            (x, y, c),
        ),
        (
            # FP8 operands (rounded from x, y), per-tensor scales; the reference scales the same
            # FP8 values.
            "scaled_mm",
            lambda t: cudasteps.scaled_mm(_fp8(t[0]), _fp8(t[1]), t[3], t[3], out_dtype=torch.float32),
            lambda t: (_fp8(t[0].float()).double() @ _fp8(t[1].float()).double()) * t[3] ** 2,
            (x, y, c, torch.tensor(0.5)),
        ),
        (
            "linear_act_linear",
            lambda t: cudasteps.linear_act_linear(t[0], t[1].t(), t[2], t[3], t[4], "gelu"),
            lambda t: F.linear(F.gelu(t[0] @ t[1] + t[2]), t[3], t[4]),
            (x, y, c, w2, b2),
        ),
        (
            "mm_bias_act_backward",
            lambda t: cudasteps.mm_bias_act_backward(t[0], t[1], t[2], t[3], "silu")[0],
            lambda t: torch.ops.aten.silu_backward(t[0] @ t[1], t[2] + t[3]),
            (x, y, make_tensor((67, 33), torch.float32, "cpu", seed=7), c),
        ),
        ("bias_act", lambda t: cudasteps.bias_act(t[0], t[1], "gelu"), lambda t: F.gelu(t[0] + t[1]), (x, b)),
        (
            # The amax taken in the pass (the kernel's atomic fold on cuda:1's word).
            "bias_act_amax",
            lambda t: cudasteps.bias_act_amax(t[0], t[1], "gelu")[1],
            lambda t: F.gelu(t[0] + t[1]).abs().max(),
            (x, b),
        ),
        (
            # The one-pass cast's dequantization scale, from the amax given on cuda:1.
            "cast_fp8_dynamic amax",
            lambda t: cudasteps.cast_fp8_dynamic(t[0], torch.float8_e4m3fn, True, t[0].abs().max())[2],
            lambda t: t[0].abs().max() / 448,
            (x,),
        ),
        ("add", lambda t: cudasteps.add(t[0], t[1], alpha=2), lambda t: t[0] + 2 * t[1], (x, b)),
        ("mul", lambda t: cudasteps.mul(t[0], t[1]), lambda t: t[0] * t[1], (x, b)),
    ]


@pytest.mark.parametrize("name, op, ref, args", _cases(), ids=[c[0] for c in _cases()])
def test_op_runs_on_cuda1_from_cuda0_context(name, op, ref, args):
    # The current device stays cuda:0: the op must follow its tensors to cuda:1.
    torch.cuda.set_device(0)
    moved = tuple(a.to(DEV) for a in args)
    out = op(moved)
    assert out.device == torch.device(DEV)
    want = ref(tuple(a.double() for a in args))
    assert rel_err(out, want) < TOLERANCE.get(name, 1e-5), name


def test_fp8_mlp_on_cuda1_from_cuda0_context():
    """cudasteps.nn.MLP(fp8=True) with two hidden layers on cuda:1 (linear_act_fp8 handing its amax
    to linear_act_linear_fp8, whose hidden tensor and its gradient exist only in FP8, and the
    backwards' amax passes and casts) while cuda:0 is current: the output and every gradient equal,
    bit for bit, those of the same model run with cuda:1 current; and the output is the float32
    model's within FP8's rounding."""
    torch.manual_seed(0)
    mlp = cudasteps.nn.MLP([45, 64, 40, 33], "gelu", fp8=True).to(DEV)
    twin = copy.deepcopy(mlp)
    x = make_tensor((67, 45), torch.float32, DEV, seed=5)
    g = make_tensor((67, 33), torch.float32, DEV, seed=6)

    def step(model, current):
        torch.cuda.set_device(current)
        xi = x.clone().requires_grad_()
        out = model(xi)
        out.backward(g)
        return [out, xi.grad] + [p.grad for p in model.parameters()]

    try:
        got = step(mlp, 0)
        want = step(twin, 1)
    finally:
        torch.cuda.set_device(0)
    assert all(t.device == torch.device(DEV) for t in got)
    for i, (a, b) in enumerate(zip(got, want)):
        assert torch.equal(a, b), i
    exact = copy.deepcopy(mlp)
    for m in exact.modules():
        if isinstance(m, cudasteps.nn.Linear):
            m.fp8 = False
    # e4m3 keeps 3 mantissa bits (each operand within 2^-4 of itself); over K the errors average
    # out: 0.018 on the CPU.
    assert rel_err(got[0], exact(x).double()) < 0.05


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="the fused GEMM of mm_bias_act_backward's ladder runs on a compute capability 9.0 GPU",
)
def test_mm_bias_act_backward_fused_on_cuda1_from_cuda0_context():
    """The ladder's fused step (the derivative and the bias gradient's column sums in the Hopper
    GEMM's epilogue) on cuda:1 while cuda:0 is current: grad_x equals the two passes' on cuda:1
    (within bf16 rounding: the tiles may differ), the bias gradient within its rounding."""
    torch.cuda.set_device(0)
    grad = make_tensor((1037, 520), torch.bfloat16, DEV, seed=8) / 520**0.5
    weight = make_tensor((520, 2056), torch.bfloat16, DEV, seed=9)
    x = make_tensor((1037, 2056), torch.bfloat16, DEV, seed=10, low=-3, high=3)
    b = make_tensor((2056,), torch.bfloat16, DEV, seed=11)
    gx, gb = cudasteps.gemm.run_mm_bias_act_backward_ladder("fused", grad, weight, x, b, "gelu")
    rx, rb = cudasteps.gemm.run_mm_bias_act_backward_ladder("two_pass", grad, weight, x, b, "gelu")
    assert gx.device == torch.device(DEV) and gb.device == torch.device(DEV)
    assert rel_err(gx, rx) < 2.0**-7 and rel_err(gb, rb) < 2.0**-6


def test_op_on_cuda1_side_stream():
    x = make_tensor((1 << 20,), torch.float32, DEV)
    with torch.cuda.device(1):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = cudasteps.copy(x)
            total = cudasteps.sum(y)
        s.synchronize()
    assert torch.equal(y, x)
    assert rel_err(total, x.double().sum()) < 1e-5


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, b: cudasteps.mm(a, b.t()), r"cudasteps\.mm: .*cuda:1"),
        (lambda a, b: cudasteps.add(a, b), r"cudasteps\.add: .*cuda:1"),
        (
            lambda a, b: cudasteps.copy_(a, b),
            r"cudasteps\.copy_: src must be on out's device \(cuda:0\), got cuda:1",
        ),
    ],
    ids=["mm", "add", "copy_"],
)
def test_cross_device_arguments_are_rejected(call, message):
    a = make_tensor((8, 8), torch.float32, "cuda:0")
    b = make_tensor((8, 8), torch.float32, DEV)
    with pytest.raises(RuntimeError, match=message):
        call(a, b)
