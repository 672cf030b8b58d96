"""transpose family: materialize the transpose of the last two dimensions (csrc/transpose).

The CUDA kernel moves each tile through shared memory, stored transposed with an XOR swizzle so
that neither the shared store nor the shared load has a bank conflict; global reads and writes are
both whole 128-byte row segments. 1- and 2-byte dtypes travel packed, 4 bytes per access, with the
K x K micro-block transposed in registers. It moves bytes, so every dtype of 1, 2, 4 or 8 bytes
works.
"""

import torch

from . import _checks

_ops = torch.ops.cudasteps

# The optimization ladder of this family, naive first; the last entry is what transpose() runs.
LADDER = ("naive_row", "naive_col", "smem", "padded", "final")


def transpose(x: torch.Tensor) -> torch.Tensor:
    """Return a new contiguous tensor of shape ``(..., N, M)`` for ``x`` of shape ``(..., M, N)``.

    Equal to ``x.transpose(-2, -1).contiguous()`` (``x.mT.contiguous()``), but the result is always
    contiguous (PyTorch's is a view when no copy is needed, e.g. for a transposed view or M == 1),
    and the copy runs at close to device-copy bandwidth. Leading dimensions are a batch. Any dtype
    of element size 1, 2, 4 or 8 bytes, any layout, on CPU or CUDA. Differentiable: the gradient is
    the transpose of the output gradient.
    """
    return _ops.transpose(x)


def transpose_(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Write the transpose of ``x``'s last two dimensions into ``out`` and return ``out``.

    Like ``out.copy_(x.mT)``, but stricter: ``out`` must have exactly the shape ``(..., N, M)``,
    ``x``'s dtype and device (no broadcasting or casting), and must not share memory with ``x``.
    ``out`` may be non-contiguous (the result is then computed contiguous and copied in).
    Differentiable with respect to ``x``.
    """
    _ops.transpose_(out, x)
    return out


def run_ladder(variant: str, x: torch.Tensor) -> torch.Tensor:
    """Run one step of the transpose ladder on CUDA: see ``LADDER``.

    All but ``final`` take contiguous float32 ``x`` of shape ``(..., M, N)``.
    """
    return _ops.ladder_transpose(x, variant)


def _check_input(x: torch.Tensor, op: str, name: str = "self") -> None:
    # `name`: the schema argument, `self` of transpose and ladder_transpose, `src` of transpose_.
    _checks.check(
        x.dim() >= 2,
        op,
        f"{name} must have at least 2 dimensions, got {x.dim()}-D with shape {list(x.shape)}",
    )
    size = x.element_size()
    _checks.check(
        size in (1, 2, 4, 8),
        op,
        f"{name} must have an element size of 1, 2, 4 or 8 bytes, got {size} ({_checks.dtype_name(x.dtype)})",
    )


def _transposed_shape(x: torch.Tensor) -> list:
    shape = list(x.shape)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    return shape


@torch.library.register_fake("cudasteps::transpose")
def _transpose_fake(x):
    _check_input(x, "transpose")
    return torch.empty(_transposed_shape(x), dtype=x.dtype, device=x.device)


@torch.library.register_fake("cudasteps::transpose_")
def _transpose__fake(out, src):
    _check_input(src, "transpose_", "src")
    _checks.same_device(out, src, "transpose_", "out", "src")
    _checks.same_dtype(out, src, "transpose_", "out", "src")
    expected = _transposed_shape(src)
    _checks.check(
        list(out.shape) == expected,
        "transpose_",
        f"out must have the shape {expected} (src's last two dimensions swapped), got {list(out.shape)}",
    )


@torch.library.register_fake("cudasteps::ladder_transpose")
def _ladder_transpose_fake(x, variant):
    _checks.check(
        variant in LADDER,
        "ladder_transpose",
        f"variant must be one of {', '.join(LADDER)}, got '{variant}'",
    )
    _check_input(x, "ladder_transpose")
    return torch.empty(_transposed_shape(x), dtype=x.dtype, device=x.device)
