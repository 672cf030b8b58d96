"""The op surface: schemas, the dispatch path, and loading the extension.

cudasteps registers autograd in C++ so that an op call costs no more host time than the built-in op:
no Python frame may run inside a call (a Python-registered autograd or fake kernel would show here).
"""

import importlib
import sys

import cudasteps
import pytest
import torch
from _helpers import DEVICES, make_tensor
from cudasteps import _loader

# Every schema of the public surface, as users see it through torch.ops.
PUBLIC_OPS = [
    "copy", "copy_",
    "transpose", "transpose_",
    "sum",
    "mm", "addmm", "linear", "linear_act", "linear_act_aux", "scaled_mm", "linear_fp8",
    "linear_act_fp8", "linear_act_linear", "mm_bias_act_backward",
    "bias_act", "bias_act_backward", "bias_act_amax", "bias_act_backward_amax",
    "add", "mul", "sum_leading",
    "cast_fp8", "cast_fp8_dynamic",
]  # fmt: skip
# Backward helpers: called by autograd, not differentiated themselves.
NO_AUTOGRAD = {"bias_act_backward", "sum_leading"}


@pytest.mark.parametrize("name", PUBLIC_OPS)
def test_every_public_op_has_cpu_and_autograd_kernels(name):
    qualname = f"cudasteps::{name}"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CPU"), f"{name}: no CPU kernel"
    if name not in NO_AUTOGRAD:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Autograd"), (
            f"{name}: no C++ autograd"
        )
    if cudasteps.cuda_available():
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CUDA"), f"{name}: no CUDA kernel"


def _python_frames_during(fn):
    frames = []

    def profiler(frame, event, arg):
        if event == "call":
            frames.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return frames


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_no_python_frame_runs_inside_an_op_call(device, requires_grad):
    x = make_tensor((64, 32), torch.float32, device).requires_grad_(requires_grad)
    op = torch.ops.cudasteps.copy.default  # an OpOverload calls straight into the dispatcher
    op(x)  # warm caches
    frames = _python_frames_during(lambda: op(x))
    # Allowed: this test's lambda, and OpOverload.__call__ where torch implements it in Python.
    foreign = [
        f for f in frames if not f.startswith(__file__) and "torch/_ops.py" not in f.replace("\\", "/")
    ]
    assert foreign == [], f"Python ran inside cudasteps.copy: {foreign}"


def test_load_failure_explains_versions_and_rebuild(monkeypatch):
    def broken_import(name, *args, **kwargs):
        raise ImportError(f"{name}.so: undefined symbol: _ZN3c104cuda20getCurrentCUDAStreamEa")

    monkeypatch.setattr(importlib, "import_module", broken_import)
    with pytest.raises(ImportError) as info:
        _loader.load_extension()
    message = str(info.value)
    assert "could not load the compiled extension cudasteps._C" in message
    assert "undefined symbol" in message and "does not match the installed torch" in message
    assert f"installed:     torch {torch.__version__}" in message
    assert "built against:" in message
    assert "pip install --no-build-isolation" in message


def test_import_cudasteps_imports_torch_itself():
    # A fresh interpreter that never imported torch can import cudasteps and use the ops.
    import subprocess

    code = (
        "import cudasteps, torch; x = torch.arange(5.0); assert torch.equal(torch.ops.cudasteps.copy(x), x)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_extension_links_the_shared_libstdcxx():
    # A static libstdc++ inside _C (some toolchain wrappers link it so) gives the extension its own
    # iostreams, which crash while formatting the first TORCH_CHECK message. See README Troubleshooting.
    import shutil
    import subprocess

    import cudasteps._C as ext

    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) not installed: cannot read the extension's dynamic section")
    needed = subprocess.run([readelf, "-d", ext.__file__], capture_output=True, text=True, check=True).stdout
    assert "libstdc++.so" in needed, f"{ext.__file__} does not link libstdc++.so dynamically:\n{needed}"


def _schemas():
    return [s for s in torch._C._jit_get_all_schemas() if s.name.startswith("cudasteps::")]


def test_mutating_schemas_do_not_name_an_argument_self():
    # functionalization (torch.compile, torch.export) warns that `self` in a mutating custom op's
    # schema "may lead to ambiguous parsing"; the mutated argument is `out`, the source `src`.
    mutating = {
        s.name: s for s in _schemas() if any(a.alias_info and a.alias_info.is_write for a in s.arguments)
    }
    assert {"cudasteps::copy_", "cudasteps::transpose_"} <= set(mutating)
    for name, schema in mutating.items():
        names = [a.name for a in schema.arguments]
        assert not {"self", "self_"} & set(names), f"{name}: {schema}"
        assert names[0] == "out" and schema.arguments[0].alias_info.is_write, f"{name}: {schema}"


def test_mutating_ops_compile_without_the_self_argument_warning():
    import warnings

    @torch.compile(backend="aot_eager", fullgraph=True)  # functionalization, without code generation
    def f(x, copy_out, t_out):
        cudasteps.copy_(copy_out, x * 2)
        cudasteps.transpose_(t_out, x + 1)
        return copy_out.sum() + t_out.sum()

    x = make_tensor((5, 3), torch.float32, "cpu")
    copy_out, t_out = torch.empty(5, 3), torch.empty(3, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x, copy_out, t_out)
    messages = [str(w.message) for w in caught if "ambiguous parsing" in str(w.message)]
    assert messages == [], messages
    assert torch.equal(copy_out, x * 2)
    assert torch.equal(t_out, (x + 1).t())
