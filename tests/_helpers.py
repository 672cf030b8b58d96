"""Shared test helpers: devices, random inputs, poisoned outputs, float64 references.

Imported by the test modules as ``from _helpers import ...`` (pytest puts tests/ on sys.path).
"""

import cudasteps
import pytest
import torch


def _cuda_skip_reason() -> str:
    if not torch.cuda.is_available():
        return "needs a CUDA device, and none is visible (scripts/gpu_check.sh runs these where one is)"
    if not cudasteps.cuda_available():
        return "needs the CUDA kernels, and cudasteps was built without nvcc (none are registered)"
    return ""


CUDA_SKIP_REASON = _cuda_skip_reason()
HAS_CUDA = CUDA_SKIP_REASON == ""

requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason=CUDA_SKIP_REASON or "unused")
requires_two_gpus = pytest.mark.skipif(
    not HAS_CUDA or torch.cuda.device_count() < 2,
    reason="needs two CUDA devices; " + (CUDA_SKIP_REASON or f"{torch.cuda.device_count()} visible"),
)

# torch's (major, minor): the few tests of torch features that older releases lack or get wrong
# skip below the release that has them, with the reason.
TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])

# Parametrize over these to run a test on every device; CUDA is skipped with a visible reason.
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
ALL_DTYPES = FLOAT_DTYPES + [
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
    torch.complex128,
]


def make_tensor(shape, dtype=torch.float32, device="cpu", seed=0, low=-1.0, high=1.0):
    """Random data, never zeros: seeded, on ``device``, any dtype."""
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.randint(0, 2, shape, generator=gen).bool()
    elif dtype.is_complex:
        t = torch.complex(
            torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=gen),
            torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=gen),
        ).to(dtype)
    elif dtype.is_floating_point:
        t = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=gen).to(dtype)
    else:
        info = torch.iinfo(dtype)
        t = torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, shape, generator=gen, dtype=dtype)
    return t.to(device)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` with a value no kernel would compute (NaN for floats), so unwritten elements show."""
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(torch.iinfo(t.dtype).max)


def poisoned(shape, dtype, device) -> torch.Tensor:
    return poison_(torch.empty(shape, dtype=dtype, device=device))


def poison_allocator(numel, dtype):
    """Leaves a NaN-filled block in the CUDA caching allocator, which an op's next output of about
    this size reuses: an output element a kernel forgets to write stays NaN."""
    torch.full((numel + 1024,), float("nan"), dtype=dtype, device="cuda")


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (complex as pairs); inf when out has a NaN."""
    o = torch.view_as_real(out) if out.is_complex() else out
    r = torch.view_as_real(ref) if ref.is_complex() else ref
    o = o.detach().to("cpu", torch.float64)
    r = r.detach().to("cpu", torch.float64)
    if torch.isnan(o).any():
        return float("inf")
    denom = r.norm().item()
    diff = (o - r).norm().item()
    return diff / denom if denom > 0 else diff


def misaligned(shape, dtype=torch.float32, device="cpu", seed=0, offset=1) -> torch.Tensor:
    """A contiguous view whose data pointer sits ``offset`` elements past an aligned allocation."""
    n = 1
    for s in shape:
        n *= s
    base = make_tensor((n + offset,), dtype, device, seed)
    return base[offset:].view(shape)
