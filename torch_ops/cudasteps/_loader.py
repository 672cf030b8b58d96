"""Loads cudasteps._C and, when that fails, says why in terms a user can act on."""

import importlib
import sys

import torch

_REBUILD = "pip install --no-build-isolation --force-reinstall --no-deps -e .  (or: make build)"


def _build_info() -> str:
    try:
        from . import _build_info as info
    except ImportError:
        return "  built against: unknown (no _build_info.py; the extension was never built here)"
    return (
        f"  built against: torch {info.TORCH_VERSION}, CUDA {info.TORCH_CUDA}, "
        f"cxx11 ABI {info.CXX11_ABI}, Python {info.PYTHON}, CUDA kernels {info.WITH_CUDA}"
    )


def _installed() -> str:
    return (
        f"  installed:     torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"cxx11 ABI {torch.compiled_with_cxx11_abi()}, Python {sys.version.split()[0]}"
    )


def load_extension() -> None:
    try:
        importlib.import_module("cudasteps._C")
    except (ImportError, OSError) as exc:
        hint = ""
        if "undefined symbol" in str(exc):
            hint = (
                "\n  An 'undefined symbol' means the build does not match the installed torch "
                "(version, CUDA or C++ ABI)."
            )
        raise ImportError(
            f"cudasteps: could not load the compiled extension cudasteps._C: {exc}{hint}\n"
            f"{_build_info()}\n{_installed()}\n"
            f"  Rebuild against the installed torch: {_REBUILD}"
        ) from exc
