"""elementwise family: fused bias + activation, add, mul (csrc/elementwise).

``bias_act(x, bias, act)`` computes ``act(x + bias)`` in one pass; its backward is one fused pass
too (grad_x and the bias gradient's column sum together), and the forward saves only ``x`` and
``bias``. It takes float32, float16 and bfloat16 (and float64), computes in float32 (float64 for
float64 inputs) and returns a contiguous tensor of ``x``'s dtype; the bias may be float32 while
``x`` is float16/bfloat16 (fp32 parameters under autocast).

``add`` and ``mul`` follow ``torch.add`` / ``torch.mul``: broadcasting to any rank, 0-dim and
Python-number operands, ``torch.result_type`` promotion, every floating, integer and bool dtype
(complex refused), and a 0-dim CPU tensor may combine with a tensor on any device.
"""

import numbers
from typing import Optional, Union

import torch

from . import _checks

try:
    from torch.fx.experimental.symbolic_shapes import guard_or_false as _guard_or_false
except ImportError:  # older torch: the size-oblivious guard answers "is this size 1" the same way
    from torch.fx.experimental.symbolic_shapes import guard_size_oblivious as _guard_or_false

_ops = torch.ops.cudasteps
# The hot ops' overloads, bound once: calling an OpOverload skips the packet's overload lookup.
_bias_act, _add, _mul = _ops.bias_act.default, _ops.add.default, _ops.mul.default

# The optimization ladder of bias_act, naive first; the last entry is what bias_act() runs.
LADDER = ("unfused", "fused_scalar", "fused_vec16")

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def bias_act(x: torch.Tensor, bias: Optional[torch.Tensor] = None, act: str = "none") -> torch.Tensor:
    """Return ``act(x + bias)``, with ``bias`` (shape ``[x.shape[-1]]``) broadcast over the rows.

    ``act`` is ``"none"``, ``"relu"``, ``"gelu"`` (erf form, as ``F.gelu``), ``"gelu_tanh"`` (as
    ``F.gelu(approximate="tanh")``) or ``"silu"``. ``bias=None`` applies the activation alone.
    Equals ``F.gelu(x + bias)`` etc. up to rounding, but in one kernel (no intermediate tensor),
    with fp32 math for fp16/bf16 and one rounding at the end. ``bias`` may be float32 while ``x``
    is float16/bfloat16; the result has ``x``'s dtype and is always contiguous. Differentiable in
    ``x`` and ``bias``: the backward (``bias_act_backward``) is one fused pass, and only ``x`` and
    ``bias`` are saved for it.
    """
    return _bias_act(x, bias, act)


def bias_act_backward(grad: torch.Tensor, x: torch.Tensor, bias: Optional[torch.Tensor], act: str) -> tuple:
    """The gradients of ``bias_act``: ``(grad * act'(x + bias), that summed over all rows)``.

    The second is None when ``bias`` is None, else has ``bias``'s dtype. The column sum is
    deterministic (fixed order, no atomics) and accumulated in float32.
    """
    return _ops.bias_act_backward(grad, x, bias, act)


def bias_act_amax(x: torch.Tensor, bias: Optional[torch.Tensor], act: str) -> tuple:
    """``(out, amax)``: ``out = bias_act(x, bias, act)`` and ``amax = out.abs().max()`` (float32,
    0-dim; 0 for an empty ``x``; NaN if ``out`` holds one), taken in the same pass: the amax an FP8
    cast of ``out`` needs for its dynamic scale (``cast_fp8_dynamic(out, ..., amax=amax)`` then
    reads ``out`` once). ``x``: float32, float16 or bfloat16. Not differentiable (it runs inside
    ``linear_act_fp8``'s autograd function); an input that requires grad is refused.
    """
    return _ops.bias_act_amax(x, bias, act)


def bias_act_backward_amax(
    grad: torch.Tensor, x: torch.Tensor, bias: Optional[torch.Tensor], act: str
) -> tuple:
    """``bias_act_backward``'s two gradients and the amax of the first (float32, 0-dim), taken in
    the same pass (the e5m2 cast of that gradient reads it once). As :func:`bias_act_amax`, for
    float32, float16 or bfloat16, and not differentiable."""
    return _ops.bias_act_backward_amax(grad, x, bias, act)


def add(self: torch.Tensor, other: Union[torch.Tensor, numbers.Number], *, alpha=1) -> torch.Tensor:
    """Return ``self + alpha * other``, as ``torch.add``.

    ``other`` is a tensor broadcastable with ``self`` (any rank; the result has the broadcast
    shape) or a Python number. The result dtype is ``torch.result_type(self, other)``: float32,
    float64, float16, bfloat16 (computed in float32, rounded once), an integer type (wrapping on
    overflow, as torch) or bool. Complex results are refused. A 0-dim CPU tensor combines with a
    tensor on any device. ``alpha`` must be an integer for integer results. The result is always
    contiguous. Differentiable; a broadcast operand's gradient is summed over its broadcast dims
    deterministically (``sum_leading`` for a per-feature vector, ``cudasteps.sum`` otherwise).
    """
    if isinstance(other, torch.Tensor):
        # An int 1 is the default (a float 1.0 must still reach the integer-alpha check).
        return _add(self, other) if type(alpha) is int and alpha == 1 else _add(self, other, alpha=alpha)
    return _ops.add.Scalar(self, other, alpha)


def mul(self: torch.Tensor, other: Union[torch.Tensor, numbers.Number]) -> torch.Tensor:
    """Return ``self * other``, as ``torch.mul``; operands, dtypes and devices as for :func:`add`.

    Differentiable in both operands (twice: the backward calls ``mul`` again).
    """
    if isinstance(other, torch.Tensor):
        return _mul(self, other)
    return _ops.mul.Scalar(self, other)


def sum_leading(
    self: torch.Tensor,
    other: Optional[torch.Tensor] = None,
    *,
    alpha: float = 1.0,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """Return ``alpha * (self * other).sum over every dim but the last`` (``other`` optional).

    The per-feature gradient of ``add``/``mul``. Accumulates in float32 in a fixed order
    (bitwise reproducible); the result has ``dtype`` (default ``self.dtype``). Not differentiable.
    """
    return _ops.sum_leading(self, other, alpha=alpha, dtype=dtype)


def run_ladder(variant: str, x: torch.Tensor, bias: Optional[torch.Tensor], act: str) -> torch.Tensor:
    """Run one step of the bias_act ladder (CUDA, forward only): see ``LADDER``."""
    return _ops.ladder_bias_act(x, bias, act, variant)


# ---- fake kernels: the same checks and messages as csrc/elementwise/elementwise.h ----------------


def _check_float(t, op, arg):
    _checks.check(
        t.dtype in _FLOAT_DTYPES,
        op,
        f"{arg} must be Float or Half or BFloat16 or Double, got {_checks.dtype_name(t.dtype)}",
    )


def _check_feature_vector(v, x, op, arg, x_arg):
    _checks.same_device(v, x, op, arg, x_arg)
    _checks.check(
        x.dim() >= 1, op, f"{x_arg} must have at least 1 dimension when {arg} is given, got a 0-D tensor"
    )
    _checks.check(
        v.dim() == 1 and v.shape[0] == x.shape[-1],
        op,
        f"{arg} must have shape [{x.shape[-1]}] (the last dimension of {x_arg}), got {list(v.shape)}",
    )
    _checks.check(
        v.dtype == x.dtype or v.dtype == torch.float32,
        op,
        f"{arg} must have the dtype of {x_arg} ({_checks.dtype_name(x.dtype)}) or Float, "
        f"got {_checks.dtype_name(v.dtype)}",
    )


def _check_act(act, op):
    _checks.check(act in ACTIVATIONS, op, f"act must be one of {', '.join(ACTIVATIONS)}, got '{act}'")


def _check_bias_act(x, bias, act, op):
    _check_float(x, op, "x")
    if bias is not None:
        _check_feature_vector(bias, x, op, "bias", "x")
    _check_act(act, op)


# add/mul: the dtypes of csrc/elementwise/binary_plan.cpp, in its message's order.
_BINARY_DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)


def _binary_result(self, other, op):
    """The (shape, dtype, device) of add/mul, with binary_plan.cpp's checks and messages."""
    dtype = torch.result_type(self, other)
    _checks.check(
        dtype in _BINARY_DTYPES,
        op,
        "the result dtype (torch.result_type(self, other)) must be Float, Double, Half, BFloat16, "
        f"Byte, Char, Short, Int, Long or Bool, got {_checks.dtype_name(dtype)}",
    )
    if not isinstance(other, torch.Tensor):
        return list(self.shape), dtype, self.device
    if self.device == other.device:
        device = self.device
    elif other.dim() == 0 and other.device.type == "cpu":
        device = self.device
    elif self.dim() == 0 and self.device.type == "cpu":
        device = other.device
    else:
        _checks.fail(
            op,
            "self and other must be on the same device (or one of them a 0-dim CPU tensor), "
            f"got {self.device} and {other.device}",
        )
    a, b = list(self.shape), list(other.shape)
    shape = []
    for i in range(1, max(len(a), len(b)) + 1):
        sa = a[-i] if i <= len(a) else 1
        sb = b[-i] if i <= len(b) else 1
        shape.insert(0, _broadcast_size(sa, sb, i, a, b, op))
    return shape, dtype, device


def _broadcast_size(sa, sb, i, a, b, op):
    """The broadcast of sizes ``sa`` (of self's shape ``a``) and ``sb`` at dimension ``-i``.

    Sizes may be symbolic (torch.export / torch.compile with a dynamic batch): comparing them with
    plain ``==`` and ``bool`` could pin a dynamic size. As in torch's own broadcasting, a size
    counts as 1 only when it is known to be 1 (a dynamic size counts as not 1, with no guard), and
    the rule left, equal sizes, is a ``torch._check``: decided at once for ints (raising
    binary_plan.cpp's message), a guard or a run-time assert for symbolic sizes.
    """
    if _guard_or_false(sb == 1):
        return sa
    if _guard_or_false(sa == 1):
        return sb
    torch._check(
        sa == sb,
        lambda: (
            f"cudasteps.{op}: self {a} and other {b} are not broadcastable: "
            f"sizes {sa} and {sb} at dimension -{i}"
        ),
    )
    return sa


def _check_alpha(alpha, dtype, op):
    _checks.check(
        not isinstance(alpha, bool) or dtype == torch.bool,
        op,
        f"a boolean alpha is only supported for Bool results, got a {_checks.dtype_name(dtype)} result",
    )
    _checks.check(
        dtype.is_floating_point or isinstance(alpha, numbers.Integral),
        op,
        f"alpha must be an integer for integer results (as in torch.add), got {alpha:g} "
        f"for a {_checks.dtype_name(dtype)} result",
    )


def _empty_like_contiguous(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.register_fake("cudasteps::bias_act")
def _bias_act_fake(x, bias, act="none"):
    _check_bias_act(x, bias, act, "bias_act")
    return _empty_like_contiguous(x)


def _check_amax_input(x, op):
    _checks.check(
        x.dtype in (torch.float32, torch.float16, torch.bfloat16),
        op,
        f"x must be Float or Half or BFloat16, got {_checks.dtype_name(x.dtype)}",
    )


@torch.library.register_fake("cudasteps::bias_act_amax")
def _bias_act_amax_fake(x, bias, act):
    op = "bias_act_amax"
    _check_amax_input(x, op)
    _check_bias_act(x, bias, act, op)
    return _empty_like_contiguous(x), x.new_empty((), dtype=torch.float32)


def _bias_act_backward_outputs(grad, x, bias, act, op):
    _check_float(x, op, "x")
    _checks.same_device(grad, x, op, "grad", "x")
    _checks.same_dtype(grad, x, op, "grad", "x")
    _checks.same_shape(grad, x, op, "grad", "x")
    if bias is not None:
        _check_feature_vector(bias, x, op, "bias", "x")
    _check_act(act, op)
    grad_bias = None if bias is None else torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)
    return _empty_like_contiguous(x), grad_bias


@torch.library.register_fake("cudasteps::bias_act_backward")
def _bias_act_backward_fake(grad, x, bias, act):
    return _bias_act_backward_outputs(grad, x, bias, act, "bias_act_backward")


@torch.library.register_fake("cudasteps::bias_act_backward_amax")
def _bias_act_backward_amax_fake(grad, x, bias, act):
    op = "bias_act_backward_amax"
    _check_amax_input(x, op)
    grad_x, grad_bias = _bias_act_backward_outputs(grad, x, bias, act, op)
    return grad_x, grad_bias, x.new_empty((), dtype=torch.float32)


def _binary_fake(self, other, op, alpha=None):
    shape, dtype, device = _binary_result(self, other, op)
    if alpha is not None:
        _check_alpha(alpha, dtype, op)
    return torch.empty(shape, dtype=dtype, device=device)


@torch.library.register_fake("cudasteps::add")
def _add_fake(self, other, *, alpha=1):
    return _binary_fake(self, other, "add", alpha)


@torch.library.register_fake("cudasteps::add.Scalar")
def _add_scalar_fake(self, other, alpha=1):
    return _binary_fake(self, other, "add", alpha)


@torch.library.register_fake("cudasteps::mul")
def _mul_fake(self, other):
    return _binary_fake(self, other, "mul")


@torch.library.register_fake("cudasteps::mul.Scalar")
def _mul_scalar_fake(self, other):
    return _binary_fake(self, other, "mul")


@torch.library.register_fake("cudasteps::sum_leading")
def _sum_leading_fake(self, other=None, *, alpha=1.0, dtype=None):
    op = "sum_leading"
    _check_float(self, op, "self")
    _checks.check(
        self.dim() >= 1,
        op,
        f"self must have at least 1 dimensions, got {self.dim()}-D with shape {list(self.shape)}",
    )
    if other is not None:
        _checks.same_device(other, self, op, "other", "self")
        _checks.same_dtype(other, self, op, "other", "self")
        _checks.same_shape(other, self, op, "other", "self")
    out_dtype = self.dtype if dtype is None else dtype
    _checks.check(
        out_dtype in _FLOAT_DTYPES,
        op,
        f"dtype must be Float or Half or BFloat16 or Double, got {_checks.dtype_name(out_dtype)}",
    )
    return torch.empty((self.shape[-1],), dtype=out_dtype, device=self.device)


@torch.library.register_fake("cudasteps::ladder_bias_act")
def _ladder_bias_act_fake(x, bias, act, variant):
    _check_bias_act(x, bias, act, "ladder_bias_act")
    _checks.check(
        variant in LADDER,
        "ladder_bias_act",
        f"variant must be one of {', '.join(LADDER)}, got '{variant}'",
    )
    return _empty_like_contiguous(x)
