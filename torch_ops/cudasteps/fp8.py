"""fp8 family: ``cast_fp8``, a tensor cast to FP8 with a scale, its FP8 transpose and its amax in
one pass (csrc/fp8): the casts an FP8 GEMM's operands need (``cudasteps.scaled_mm``), and the
amax the next scale is computed from; ``cast_fp8_dynamic``, the same with the scale taken from
this tensor's own amax (dynamic scaling, what ``linear_fp8`` runs); ``act_cast_fp8`` and
``act_grad_cast_fp8``, an FP8 MLP's hidden casts with the activation (or its derivative) in the
same pass, scaled from the range the GEMM before them took (``linear_act_linear_fp8``).
"""

from typing import Optional, Tuple

import torch

from . import _checks

_ops = torch.ops.cudasteps
_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
# The largest finite value of each format: casts saturate to it.
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}

# The optimization ladder of the cast (csrc/fp8/kernels.cu), naive first; the last entry is what
# cast_fp8() runs where x's rows and columns are multiples of 16 and x is 16-byte aligned (else
# tile32). tile32: 32 x 32 tiles, one element per thread and access (byte stores); vec16: 64 x 64
# tiles, 16 elements per thread, 16-byte loads and stores of both outputs; vec16_prefetch: the next
# tile's loads issued before this one is cast and transposed (measured no faster on an H100);
# tile128: 128 x 128 tiles, four segments per thread in flight, the transpose by byte permutes and
# transposed stores that fill whole 128-byte lines.
LADDER = ("tile32", "vec16", "vec16_prefetch", "tile128")


def cast_fp8(
    x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn, transpose: bool = False
) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]:
    """``(out, out_t, amax)``: ``out = fp8(x * scale)`` in ``dtype`` (round to nearest even,
    saturated to ``FP8_MAX[dtype]``; NaN stays NaN), ``out_t`` the FP8 transpose of ``out`` viewed as
    ``[rows, x.shape[-1]]`` (contiguous ``[x.shape[-1], rows]``; None unless ``transpose``), and
    ``amax = max |x|`` (float32, 0-dim; 0 for an empty ``x``), in one pass over ``x``.

    ``x``: float32, bfloat16 or float16, any shape with at least one dimension (non-contiguous
    inputs are copied first on CUDA). ``scale``: a float32 tensor of one element on ``x``'s device,
    read on the device (no host sync). Not differentiable.
    """
    return _ops.cast_fp8(x, scale, dtype, transpose)


def cast_fp8_dynamic(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    transpose: bool = False,
    amax: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor, torch.Tensor]:
    """``(out, out_t, scale_inv, amax)``: ``x`` cast with its own dynamic per-tensor scale
    ``scale = FP8_MAX[dtype] / amax`` (``amax = max |x|``; the scale is 1 where ``amax`` is 0 or
    NaN), as torchao's tensorwise float8 recipe scales. ``out`` and ``out_t`` are
    ``cast_fp8(x, scale, dtype, transpose)``'s; ``scale_inv = 1 / scale`` is the dequantization
    scale ``scaled_mm`` takes (``out.float() * scale_inv`` approximates ``x``). Everything stays on
    the device (no host sync): on CUDA two launches (an amax pass whose last block writes the
    scales, then the cast), where the recipe in torch ops takes seven. Given ``amax`` (``x``'s, a
    float32 tensor of one element on ``x``'s device, as :func:`cudasteps.bias_act_amax` returns it
    with the tensor it produced), one launch: the cast takes the scale from it and reads ``x``
    once. The given amax is trusted: one below ``max |x|`` saturates the values above it. Not
    differentiable.
    """
    return _ops.cast_fp8_dynamic(x, dtype, transpose, amax)


def act_cast_fp8(
    x: torch.Tensor, x_range: torch.Tensor, act: str = "gelu", dtype: torch.dtype = torch.float8_e4m3fn
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(out, out_t, scale_inv)``: ``h = act(x)`` (rounded to ``x``'s dtype, the values of
    ``cudasteps.bias_act(x, None, act)``) cast to FP8 with a dynamic scale, and its FP8 transpose,
    in one pass over ``x`` (2-D). The scale is ``FP8_MAX[dtype] / amax`` for a bound of ``max |h|``
    taken from ``x_range``, the largest and the smallest value of ``x`` (with 0) as
    :func:`cudasteps.scaled_mm_range` returns it with the ``x`` it wrote: ``max(|act(hi)|,
    |act(lo)|)``, and the depth of the activation's negative lobe (0.17 for gelu, 0.28 for silu)
    where ``lo`` lies beyond it; that is ``max |h|`` itself wherever a value above the lobe's depth is
    the largest. ``scale_inv = 1 / scale``. What ``linear_act_linear_fp8`` runs on its hidden
    tensor. Not differentiable."""
    return _ops.act_cast_fp8(x, x_range, act, dtype)


def act_grad_cast_fp8(
    grad: torch.Tensor,
    grad_range: torch.Tensor,
    x: torch.Tensor,
    act: str = "gelu",
    dtype: torch.dtype = torch.float8_e5m2,
    bias_grad: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """``(out, out_t, scale_inv, grad_bias)``: ``g = grad * act'(x)`` (rounded to the dtype, the
    values of ``cudasteps.bias_act_backward(grad, x, None, act)[0]``) cast to FP8 with a dynamic
    scale and transposed, and (``bias_grad``) its column sums in float32, in one pass over ``grad``
    and ``x`` (2-D, one shape and dtype). The amax the scale comes from is ``max |grad|`` over
    ``grad_range`` (:func:`cudasteps.scaled_mm_range`'s) times the activation's largest ``|act'|``
    (1.13 for gelu, 1.1 for silu, 1 for relu and none). Not differentiable."""
    return _ops.act_grad_cast_fp8(grad, grad_range, x, act, dtype, bias_grad)


def run_ladder(
    variant: str,
    x: torch.Tensor,
    scale: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    transpose: bool = True,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]:
    """Run one step of the cast's ladder (CUDA): ``cast_fp8(x, scale, dtype, transpose)`` with the
    kernel form ``variant`` (see ``LADDER``; the 16-byte forms need x's rows and columns to be
    multiples of 16 and x 16-byte aligned). Every step returns the same tensors."""
    return _ops.ladder_cast_fp8(x, scale, dtype, transpose, variant)


def _check_x_and_format(x, dtype, op):
    _checks.check(
        x.dim() >= 1, op, f"x must have at least 1 dimensions, got {x.dim()}-D with shape {list(x.shape)}"
    )
    _checks.check(
        x.dtype in (torch.float32, torch.bfloat16, torch.float16),
        op,
        f"x must be Float or BFloat16 or Half, got {_checks.dtype_name(x.dtype)}",
    )
    _checks.check(
        dtype in _FP8_DTYPES,
        op,
        f"dtype must be Float8_e4m3fn or Float8_e5m2, got {_checks.dtype_name(dtype)}",
    )


def _check_per_tensor(t, x, op, arg, what, x_arg="x"):
    """A per-tensor float32 value (a scale, an amax) named `arg`, on the device of `x` (named
    `x_arg`): fp8.h's check_per_tensor (also linear_fp8's input_amax)."""
    _checks.check(t.dtype == torch.float32, op, f"{arg} must be float32, got {_checks.dtype_name(t.dtype)}")
    _checks.check(t.numel() == 1, op, f"{arg} must have one element ({what}), got shape {list(t.shape)}")
    _checks.same_device(t, x, op, arg, x_arg)


def _check_cast_args(x, scale, dtype, op):
    _check_x_and_format(x, dtype, op)
    _check_per_tensor(scale, x, op, "scale", "a per-tensor scale")


def _cast_outputs(x, dtype, transpose):
    cols = x.shape[-1]
    rows = x.numel() // cols if cols != 0 else 0
    out = x.new_empty(x.shape, dtype=dtype)
    out_t = x.new_empty((cols, rows), dtype=dtype) if transpose else None
    return out, out_t, x.new_empty((), dtype=torch.float32)


@torch.library.register_fake("cudasteps::cast_fp8")
def _cast_fp8_fake(x, scale, dtype, transpose=False):
    _check_cast_args(x, scale, dtype, "cast_fp8")
    return _cast_outputs(x, dtype, transpose)


@torch.library.register_fake("cudasteps::cast_fp8_dynamic")
def _cast_fp8_dynamic_fake(x, dtype, transpose=False, amax=None):
    _check_x_and_format(x, dtype, "cast_fp8_dynamic")
    if amax is not None:
        _check_per_tensor(amax, x, "cast_fp8_dynamic", "amax", "x's amax")
    out, out_t, amax = _cast_outputs(x, dtype, transpose)
    return out, out_t, x.new_empty((), dtype=torch.float32), amax


@torch.library.register_fake("cudasteps::ladder_cast_fp8")
def _ladder_cast_fp8_fake(x, scale, dtype, transpose, variant):
    op = "ladder_cast_fp8"
    _check_cast_args(x, scale, dtype, op)
    _checks.check(variant in LADDER, op, f"variant must be one of {', '.join(LADDER)}, got '{variant}'")
    return _cast_outputs(x, dtype, transpose)


_ACTS = ("none", "relu", "gelu", "gelu_tanh", "silu")


def _check_matrix(t, op, arg):
    _checks.check(t.dim() == 2, op, f"{arg} must be 2-D, got {t.dim()}-D with shape {list(t.shape)}")
    _checks.check(
        t.dtype in (torch.float32, torch.bfloat16, torch.float16),
        op,
        f"{arg} must be Float or BFloat16 or Half, got {_checks.dtype_name(t.dtype)}",
    )


def _check_range(r, x, op, arg, x_arg):
    _checks.check(r.dtype == torch.float32, op, f"{arg} must be float32, got {_checks.dtype_name(r.dtype)}")
    _checks.check(
        r.dim() == 1 and r.shape[0] == 2,
        op,
        f"{arg} must have shape [2] (the largest and the smallest value of {x_arg}, as scaled_mm_range "
        f"returns them), got shape {list(r.shape)}",
    )
    _checks.same_device(r, x, op, arg, x_arg)


def _check_act_and_format(act, dtype, op):
    _checks.check(
        dtype in _FP8_DTYPES,
        op,
        f"dtype must be Float8_e4m3fn or Float8_e5m2, got {_checks.dtype_name(dtype)}",
    )
    _checks.check(act in _ACTS, op, f"act must be one of {', '.join(_ACTS)}, got '{act}'")


@torch.library.register_fake("cudasteps::act_cast_fp8")
def _act_cast_fp8_fake(x, x_range, act, dtype):
    op = "act_cast_fp8"
    _check_matrix(x, op, "x")
    _check_range(x_range, x, op, "x_range", "x")
    _check_act_and_format(act, dtype, op)
    out = x.new_empty(x.shape, dtype=dtype)
    return out, x.new_empty((x.shape[1], x.shape[0]), dtype=dtype), x.new_empty((), dtype=torch.float32)


@torch.library.register_fake("cudasteps::act_grad_cast_fp8")
def _act_grad_cast_fp8_fake(grad, grad_range, x, act, dtype, bias_grad):
    op = "act_grad_cast_fp8"
    _check_matrix(grad, op, "grad")
    _check_matrix(x, op, "x")
    _checks.same_device(x, grad, op, "x", "grad")
    _checks.same_dtype(x, grad, op, "x", "grad")
    _checks.same_shape(x, grad, op, "x", "grad")
    _check_range(grad_range, grad, op, "grad_range", "grad")
    _check_act_and_format(act, dtype, op)
    out = x.new_empty(x.shape, dtype=dtype)
    out_t = x.new_empty((x.shape[1], x.shape[0]), dtype=dtype)
    grad_bias = x.new_empty((x.shape[1],), dtype=torch.float32) if bias_grad else None
    return out, out_t, x.new_empty((), dtype=torch.float32), grad_bias
