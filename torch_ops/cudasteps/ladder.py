"""The optimization ladder of every family: each step from the naive kernel to the final one.

Each step is a real, tested CUDA kernel, run through a ``ladder_<op>`` op. The benchmarks time all
of them side by side so the results table shows what each optimization buys.

    >>> cudasteps.ladder.variants("copy")
    ('scalar', 'grid_stride', 'vec16')
    >>> y = cudasteps.ladder.run("copy", "grid_stride", x)
"""

from . import copy as _copy
from . import elementwise as _elementwise
from . import fp8 as _fp8
from . import gemm as _gemm
from . import reduce as _reduce
from . import transpose as _transpose

# family name -> its module, which defines LADDER (naive first) and run_ladder(variant, *args).
_FAMILIES = {
    "copy": _copy,
    "transpose": _transpose,
    "reduce": _reduce,
    "gemm": _gemm,
    "elementwise": _elementwise,
    "fp8": _fp8,
}


def families() -> tuple:
    return tuple(_FAMILIES)


def variants(family: str) -> tuple:
    """The ladder steps of ``family``, naive first; the last is the kernel the plain op runs."""
    return _FAMILIES[family].LADDER


def run(family: str, variant: str, *args):
    """Run ``variant`` of ``family``'s ladder on ``args`` (CUDA tensors)."""
    return _FAMILIES[family].run_ladder(variant, *args)
