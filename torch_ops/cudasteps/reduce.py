"""reduce family: deterministic ``sum`` on warp-shuffle primitives (csrc/reduce).

Full reductions run one single-pass kernel (block partials, combined in a fixed order by the last
block to finish); sums over trailing dims run a warp or a block per row; sums over leading or middle
dims run a column kernel whose threads walk columns; any other dim set is permuted and copied so
the reduced dims come last. No floating-point atomics: results are bitwise reproducible.
"""

from typing import Optional, Sequence, Union

import torch

from . import _checks

_ops = torch.ops.cudasteps
_sum = _ops.sum.default  # bound once: calling an OpOverload skips the packet's overload lookup

# The optimization ladder of this family, naive first; the last entry is what sum() runs for a full
# reduction.
LADDER = ("smem_tree", "syncwarp", "shfl", "coop_groups", "grid_stride_vec", "single_pass")

_SUPPORTED_INPUTS = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
)
_SUPPORTED_OUTPUTS = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64)


def sum(  # noqa: A001  (mirrors torch.sum)
    x: torch.Tensor,
    dim: Optional[Union[int, Sequence[int]]] = None,
    keepdim: bool = False,
    *,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """Sum of ``x`` over ``dim`` (all dims when None or empty), like ``torch.sum``.

    Same semantics as ``torch.sum``: negative dims, a list of dims, ``keepdim``; integer and bool
    inputs give int64, half and bfloat16 keep their dtype, ``dtype=`` overrides (the input is cast
    to it first, except that half/bfloat16 -> float32 reads the input directly). Accumulates in
    float32 for half/bfloat16/float32, float64 for float64, int64 for integers; an empty reduction
    gives 0.

    Differs from ``torch.sum``: results are bitwise deterministic run to run (no floating-point
    atomics, fixed combine order on CUDA; fixed chunking, independent of the thread count, on CPU);
    complex inputs are not supported; ``dtype=`` must be float32, float64, float16, bfloat16 or
    int64. Differentiable: the gradient is the output gradient broadcast back to ``x``'s shape.
    """
    if isinstance(dim, int):
        dim = [dim]
    if dtype is None:  # a None keyword costs the dispatcher's Python binding ~0.5 us per call
        return _sum(x, dim, keepdim)
    return _sum(x, dim, keepdim, dtype=dtype)


def run_ladder(variant: str, x: torch.Tensor) -> torch.Tensor:
    """Run one step of the sum ladder: a full sum of a contiguous float32 CUDA tensor (0-d result)."""
    return _ops.ladder_sum(x, variant)


def _out_dtype(x: torch.Tensor, dtype: Optional[torch.dtype]) -> torch.dtype:
    _checks.check(
        x.dtype in _SUPPORTED_INPUTS,
        "sum",
        "self must be Float, Double, Half, BFloat16, an integer type or Bool, got "
        + _checks.dtype_name(x.dtype),
    )
    if dtype is not None:
        _checks.check(
            dtype in _SUPPORTED_OUTPUTS,
            "sum",
            "dtype must be Float, Double, Half, BFloat16 or Long, got " + _checks.dtype_name(dtype),
        )
        return dtype
    return x.dtype if x.dtype.is_floating_point else torch.int64


def _reduced_dims(ndim: int, dim) -> list:
    wrap = max(ndim, 1)
    if dim is None or len(dim) == 0:
        return list(range(wrap))
    seen = [False] * wrap
    for d in dim:
        _checks.check(-wrap <= d < wrap, "sum", f"dim must be in the range [{-wrap}, {wrap - 1}], got {d}")
        w = d + wrap if d < 0 else d
        _checks.check(not seen[w], "sum", f"dim must not repeat a dimension, got {list(dim)}")
        seen[w] = True
    return [d for d in range(wrap) if seen[d]]


@torch.library.register_fake("cudasteps::sum")
def _sum_fake(x, dim=None, keepdim=False, *, dtype=None):
    out_dtype = _out_dtype(x, dtype)
    reduced = set(_reduced_dims(x.dim(), dim))
    shape = []
    for d in range(x.dim()):
        if d not in reduced:
            shape.append(x.shape[d])
        elif keepdim:
            shape.append(1)
    return x.new_empty(shape, dtype=out_dtype)


@torch.library.register_fake("cudasteps::ladder_sum")
def _ladder_sum_fake(x, variant):
    _checks.check(
        x.dtype == torch.float32, "ladder_sum", f"self must be Float, got {_checks.dtype_name(x.dtype)}"
    )
    _checks.check(x.is_contiguous(), "ladder_sum", f"self must be contiguous, got strides {list(x.stride())}")
    _checks.check(
        variant in LADDER, "ladder_sum", f"variant must be one of {', '.join(LADDER)}, got '{variant}'"
    )
    return x.new_empty((), dtype=torch.float32)
