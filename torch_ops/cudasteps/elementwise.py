"""elementwise family: fused bias + activation, add, mul (csrc/elementwise).

``bias_act(x, bias, act)`` computes ``act(x + bias)`` in one pass; its backward is one fused pass
too (grad_x and the bias gradient's column sum together), and the forward saves only ``x`` and
``bias``. ``add`` and ``mul`` take a same-shape ``other`` or a per-feature vector broadcast over
the leading dimensions. All take float32, float16 and bfloat16 (and float64), compute in float32
(float64 for float64 inputs), and return a contiguous tensor of the input's dtype. A per-feature
vector may be float32 while the input is float16/bfloat16 (fp32 parameters under autocast).
"""

from typing import Optional

import torch

from . import _checks

_ops = torch.ops.cudasteps

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
    return _ops.bias_act(x, bias, act)


def bias_act_backward(grad: torch.Tensor, x: torch.Tensor, bias: Optional[torch.Tensor], act: str) -> tuple:
    """The gradients of ``bias_act``: ``(grad * act'(x + bias), that summed over all rows)``.

    The second is None when ``bias`` is None, else has ``bias``'s dtype. The column sum is
    deterministic (fixed order, no atomics) and accumulated in float32.
    """
    return _ops.bias_act_backward(grad, x, bias, act)


def add(self: torch.Tensor, other: torch.Tensor, *, alpha=1) -> torch.Tensor:
    """Return ``self + alpha * other``.

    Like ``torch.add`` but narrower: ``other`` has ``self``'s shape and dtype, or is a per-feature
    vector of shape ``[self.shape[-1]]`` (of ``self``'s dtype or float32). No type promotion: the
    result has ``self``'s dtype and is contiguous. Differentiable; the gradient of a per-feature
    ``other`` is summed over the leading dimensions (deterministically, ``sum_leading``).
    """
    return _ops.add(self, other, alpha=alpha)


def mul(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """Return ``self * other``; ``other`` as for :func:`add`. Differentiable in both."""
    return _ops.mul(self, other)


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


def _check_binary(self, other, op):
    _check_float(self, op, "self")
    _checks.same_device(other, self, op, "other", "self")
    # Compare ranks first: comparing a per-feature [N] with a [B, N] shape element by element would
    # guard on B != N, which torch.export rejects for a dynamic batch B.
    if other.dim() == self.dim() and other.shape == self.shape:
        _checks.same_dtype(other, self, op, "other", "self")
        return
    _checks.check(
        self.dim() >= 1 and other.dim() == 1 and other.shape[0] == self.shape[-1],
        op,
        f"other must have the shape of self {list(self.shape)} or [N] with N = self.size(-1), "
        f"got {list(other.shape)}",
    )
    _check_feature_vector(other, self, op, "other", "self")


def _empty_like_contiguous(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.register_fake("cudasteps::bias_act")
def _bias_act_fake(x, bias, act="none"):
    _check_bias_act(x, bias, act, "bias_act")
    return _empty_like_contiguous(x)


@torch.library.register_fake("cudasteps::bias_act_backward")
def _bias_act_backward_fake(grad, x, bias, act):
    op = "bias_act_backward"
    _check_float(x, op, "x")
    _checks.same_device(grad, x, op, "grad", "x")
    _checks.same_dtype(grad, x, op, "grad", "x")
    _checks.same_shape(grad, x, op, "grad", "x")
    if bias is not None:
        _check_feature_vector(bias, x, op, "bias", "x")
    _check_act(act, op)
    grad_bias = None if bias is None else torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)
    return _empty_like_contiguous(x), grad_bias


@torch.library.register_fake("cudasteps::add")
def _add_fake(self, other, *, alpha=1):
    _check_binary(self, other, "add")
    return _empty_like_contiguous(self)


@torch.library.register_fake("cudasteps::mul")
def _mul_fake(self, other):
    _check_binary(self, other, "mul")
    return _empty_like_contiguous(self)


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
