"""cudasteps: PyTorch custom CUDA operators, each with its optimization ladder and benchmarks.

``import cudasteps`` imports torch, loads the compiled extension ``cudasteps._C`` (which registers
``torch.ops.cudasteps.*``), the fake kernels, and the typed wrappers re-exported here.
"""

import torch  # noqa: F401  (must be loaded before _C: _C links against libtorch)

from ._loader import load_extension

load_extension()

from . import ladder, nn  # noqa: E402,F401
from .copy import copy, copy_  # noqa: E402
from .elementwise import (  # noqa: E402
    add,
    bias_act,
    bias_act_amax,
    bias_act_backward,
    bias_act_backward_amax,
    mul,
    sum_leading,
)
from .fp8 import cast_fp8, cast_fp8_dynamic  # noqa: E402
from .gemm import (  # noqa: E402
    addmm,
    linear,
    linear_act,
    linear_act_fp8,
    linear_act_linear,
    linear_act_linear_fp8,
    linear_fp8,
    mm,
    mm_bias_act_backward,
    scaled_mm,
    scaled_mm_range,
)
from .reduce import sum  # noqa: E402,A004
from .transpose import transpose, transpose_  # noqa: E402

__all__ = [
    "add",
    "addmm",
    "bias_act",
    "bias_act_amax",
    "bias_act_backward",
    "bias_act_backward_amax",
    "cast_fp8",
    "cast_fp8_dynamic",
    "copy",
    "copy_",
    "cuda_available",
    "ladder",
    "linear",
    "linear_act",
    "linear_act_fp8",
    "linear_act_linear",
    "linear_act_linear_fp8",
    "linear_fp8",
    "mm",
    "mm_bias_act_backward",
    "mul",
    "nn",
    "scaled_mm",
    "scaled_mm_range",
    "sum",
    "sum_leading",
    "transpose",
    "transpose_",
]


def cuda_available() -> bool:
    """True when this build registered CUDA kernels (nvcc was found at build time)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("cudasteps::copy", "CUDA")
