"""gemm family: tiled SGEMM for ``mm``, ``addmm`` and ``linear`` (csrc/gemm).

float32 runs a register-blocked, warp-tiled, double-buffered SGEMM with a small table of tile
configs chosen by shape (split-K for small outputs with a long K); float64 runs a simple tiled
kernel. Transposed operands (``a.t()``, linear's weight) are read in place. Other dtypes raise:
use torch for half/bf16 tensor-core GEMM. All three ops are differentiable; their backward runs
``cudasteps.mm`` on transposed views.
"""

from typing import Optional

import torch

from . import _checks

_ops = torch.ops.cudasteps

# The optimization ladder of this family, naive first; the last entry is what mm() runs.
LADDER = (
    "naive",
    "coalesced",
    "smem_tile",
    "blocktile_1d",
    "blocktile_2d",
    "vectorized",
    "warptile",
    "double_buffer",
    "final",
)

# The config table of the final kernel, each runnable by name through ladder_mm ("cfg:<name>"),
# optionally with a split-K factor ("cfg:<name>:s<splits>"). Index 0 is the main config.
CONFIGS = (
    "128x128x8_w64x32_t8x8",
    "128x128x16_w64x32_t8x8",
    "128x128x8_w32x64_t8x8",
    "128x128x16_w64x32_t8x8_occ1",
    "128x64x16_w64x32_t8x8",
    "64x64x16_w32x32_t8x4",
    "128x256x8_w64x64_t8x16",
    "256x128x8_w64x64_t16x8",
    "128x128x16_w64x64_t8x16",
)
CONFIG_VARIANTS = tuple(f"cfg:{c}" for c in CONFIGS) + tuple(f"cfg:{CONFIGS[0]}:s{s}" for s in (2, 4, 8))

_COUNTERPART = {"mm": "torch.mm", "addmm": "torch.addmm", "linear": "torch.nn.functional.linear"}


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product ``a @ b`` of 2-D tensors ``a`` [M, K] and ``b`` [K, N] -> [M, N].

    Like ``torch.mm`` for float32 and float64 only (float32 accumulates in float32, TF32 is never
    used); other dtypes raise (use ``torch.mm`` for half/bf16 tensor-core GEMM). Any strides: a
    row- or column-major operand (e.g. ``a.t()``) is read in place, anything else is copied first.
    The result is always contiguous. Differentiable in both arguments.
    """
    return _ops.mm(a, b)


def addmm(
    self: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    """``beta * self + alpha * (mat1 @ mat2)``, as ``torch.addmm``.

    ``self`` must broadcast to [M, N]; the addition happens in the GEMM's epilogue (no extra pass).
    With ``beta == 0`` ``self`` is ignored (NaNs in it do not propagate). float32/float64 only.
    Differentiable in ``self``, ``mat1`` and ``mat2``.
    """
    return _ops.addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``input @ weight.T + bias``, as ``torch.nn.functional.linear``.

    ``input`` [..., K] with any leading dims, ``weight`` [N, K] (read in place as a column-major
    operand: no transpose copy), ``bias`` [N] or None, added in the GEMM's epilogue.
    float32/float64 only. Differentiable in all three.
    """
    return _ops.linear(input, weight, bias)


def run_ladder(variant: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Run one step of the SGEMM ladder (CUDA, float32, 2-D): see ``LADDER`` and ``CONFIG_VARIANTS``.

    The steps up to ``warptile`` (and ``double_buffer``) need contiguous operands; ``final`` and
    ``cfg:*`` take any layout.
    """
    return _ops.ladder_mm(a, b, variant)


# ---- fake kernels: the same checks and messages as csrc/gemm/gemm.h ----


def _check_dtype(t: torch.Tensor, op: str, arg: str) -> None:
    _checks.check(
        t.dtype in (torch.float32, torch.float64),
        op,
        f"{arg} must be float32 or float64, got {_checks.dtype_name(t.dtype)} "
        f"(use {_COUNTERPART.get(op, 'torch.mm')} for half/bf16 tensor-core GEMM)",
    )


def _check_dim(t: torch.Tensor, dim: int, op: str, arg: str) -> None:
    _checks.check(t.dim() == dim, op, f"{arg} must be {dim}-D, got {t.dim()}-D with shape {list(t.shape)}")


def _check_pair(a: torch.Tensor, b: torch.Tensor, op: str, a_name: str, b_name: str) -> None:
    _check_dim(a, 2, op, a_name)
    _check_dim(b, 2, op, b_name)
    _check_dtype(a, op, a_name)
    _check_dtype(b, op, b_name)
    _checks.same_dtype(b, a, op, b_name, a_name)
    _checks.same_device(b, a, op, b_name, a_name)
    _checks.check(
        b.shape[0] == a.shape[1],
        op,
        f"{b_name}.size(0) must equal {a_name}.size(1) ({a.shape[1]}), got {b.shape[0]} "
        f"(shapes {list(a.shape)} and {list(b.shape)})",
    )


@torch.library.register_fake("cudasteps::mm")
def _mm_fake(a, b):
    _check_pair(a, b, "mm", "self", "mat2")
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("cudasteps::addmm")
def _addmm_fake(self, mat1, mat2, *, beta=1, alpha=1):
    _check_pair(mat1, mat2, "addmm", "mat1", "mat2")
    _check_dtype(self, "addmm", "self")
    _checks.same_dtype(self, mat1, "addmm", "self", "mat1")
    _checks.same_device(self, mat1, "addmm", "self", "mat1")
    m, n = mat1.shape[0], mat2.shape[1]
    ok = self.dim() <= 2 and all(s == t or s == 1 for s, t in zip(reversed(self.shape), (n, m)))
    _checks.check(ok, "addmm", f"self must be broadcastable to [{m}, {n}], got shape {list(self.shape)}")
    return mat1.new_empty((m, n))


@torch.library.register_fake("cudasteps::linear")
def _linear_fake(input, weight, bias=None):
    op = "linear"
    _checks.check(
        input.dim() >= 1,
        op,
        f"input must have at least 1 dimensions, got {input.dim()}-D with shape {list(input.shape)}",
    )
    _check_dim(weight, 2, op, "weight")
    _check_dtype(input, op, "input")
    _check_dtype(weight, op, "weight")
    _checks.same_dtype(weight, input, op, "weight", "input")
    _checks.same_device(weight, input, op, "weight", "input")
    _checks.check(
        weight.shape[1] == input.shape[-1],
        op,
        f"weight.size(1) must equal input.size(-1) ({input.shape[-1]}), got {weight.shape[1]} "
        f"(shapes {list(input.shape)} and {list(weight.shape)})",
    )
    if bias is not None:
        _checks.same_dtype(bias, input, op, "bias", "input")
        _checks.same_device(bias, input, op, "bias", "input")
        _checks.check(
            bias.dim() <= 1 and (bias.numel() == weight.shape[0] or bias.numel() == 1),
            op,
            f"bias must have shape [{weight.shape[0]}] (or one element), got shape {list(bias.shape)}",
        )
    return input.new_empty((*input.shape[:-1], weight.shape[0]))


@torch.library.register_fake("cudasteps::ladder_mm")
def _ladder_mm_fake(a, b, variant):
    _check_pair(a, b, "ladder_mm", "self", "mat2")
    _checks.check(
        variant in LADDER or variant.startswith("cfg:"),
        "ladder_mm",
        f"variant must be one of {', '.join(LADDER)}, cfg:<name>[:s<splits>], got '{variant}'",
    )
    return a.new_empty((a.shape[0], b.shape[1]))
