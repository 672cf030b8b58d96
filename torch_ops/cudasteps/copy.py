"""copy family: vectorized device copy (csrc/copy).

The CUDA kernel moves 16 bytes per load and store, from a grid sized to one wave of the GPU, with a
byte-wise head and tail when a view is not 16-byte aligned; non-contiguous tensors take a strided
path. Every dtype works: the kernel moves bytes.
"""

import torch

from . import _checks

_ops = torch.ops.cudasteps
_copy = _ops.copy.default  # bound once: calling an OpOverload skips the packet's overload lookup

# The optimization ladder of this family, naive first; the last entry is what copy() runs.
LADDER = ("scalar", "grid_stride", "vec16_persistent", "vec16")


def copy(x: torch.Tensor) -> torch.Tensor:
    """Return a new contiguous tensor equal to ``x``.

    Like ``x.clone(memory_format=torch.contiguous_format)``: any dtype, any layout, on CPU or CUDA.
    The result is always contiguous (``clone`` keeps a dense input's strides). Differentiable: the
    gradient passes through unchanged.
    """
    return _copy(x)


def copy_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy ``src`` into ``dst`` in place and return ``dst``.

    Like ``dst.copy_(src)``, but stricter: ``src`` must have exactly ``dst``'s shape, dtype and
    device (no broadcasting, casting or cross-device copies), and the two may not partly overlap.
    Differentiable with respect to ``src``.
    """
    _ops.copy_(dst, src)
    return dst


def run_ladder(variant: str, x: torch.Tensor) -> torch.Tensor:
    """Run one step of the copy ladder (CUDA, contiguous ``x``): see ``LADDER``."""
    return _ops.ladder_copy(x, variant)


@torch.library.register_fake("cudasteps::copy")
def _copy_fake(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.register_fake("cudasteps::copy_")
def _copy__fake(out, src):
    _checks.same_device(src, out, "copy_", "src", "out")
    _checks.same_dtype(src, out, "copy_", "src", "out")
    _checks.same_shape(src, out, "copy_", "src", "out")


@torch.library.register_fake("cudasteps::ladder_copy")
def _ladder_copy_fake(x, variant):
    _checks.check(
        variant in LADDER, "ladder_copy", f"variant must be one of {', '.join(LADDER)}, got '{variant}'"
    )
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
