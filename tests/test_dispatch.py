"""The op surface: schemas, the dispatch path, and loading the extension.

cudasteps registers autograd in C++ so that an op call costs no more host time than the built-in op:
no Python frame may run inside a call (a Python-registered autograd or fake kernel would show here).
"""

import importlib
import sys
import warnings

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


# Every differentiable op's overloads, with the tensors it takes (a factory of (args, kwargs) per
# device): forward-mode AD must be refused whichever of those tensors is dual.
def _forward_ad_calls():
    ops = torch.ops.cudasteps

    def t(*shape, seed=0, dtype=torch.float32):
        return lambda device: make_tensor(shape, dtype, device, seed=seed)

    x, w, b = t(4, 3), t(5, 3, seed=1), t(5, seed=2)
    w2, b2 = t(3, 5, seed=3), t(3, seed=4)
    a, m = t(4, 6, seed=5), t(6, 5, seed=6)
    bf = torch.bfloat16
    return {
        "copy": (ops.copy.default, [x], {}),
        "copy_": (ops.copy_.default, [t(4, 3, seed=7), x], {}),
        "transpose": (ops.transpose.default, [x], {}),
        "transpose_": (ops.transpose_.default, [t(3, 4, seed=7), x], {}),
        "sum": (ops.sum.default, [x], {}),
        "mm": (ops.mm.default, [a, m], {}),
        "mm.dtype": (ops.mm.dtype, [a, m, bf], {}),
        "addmm": (ops.addmm.default, [t(4, 5, seed=7), a, m], {}),
        "linear": (ops.linear.default, [x, w, b], {}),
        "linear.dtype": (ops.linear.dtype, [x, w, b, bf], {}),
        "linear_act": (ops.linear_act.default, [x, w, b, "gelu"], {}),
        "linear_act.dtype": (ops.linear_act.dtype, [x, w, b, "gelu", bf], {}),
        "linear_act_aux": (ops.linear_act_aux.default, [x, w, b, "relu"], {}),
        "linear_act_linear": (ops.linear_act_linear.default, [x, w, b, w2, b2, "gelu"], {}),
        "linear_act_linear.dtype": (ops.linear_act_linear.dtype, [x, w, b, w2, b2, "gelu", bf], {}),
        "linear_fp8": (ops.linear_fp8.default, [x, w, b], {}),
        "linear_act_fp8": (ops.linear_act_fp8.default, [x, w, b, "gelu"], {}),
        "linear_act_linear_fp8": (ops.linear_act_linear_fp8.default, [x, w, b, w2, b2, "gelu"], {}),
        "bias_act": (ops.bias_act.default, [t(4, 5), b, "silu"], {}),
        "add": (ops.add.default, [x, t(4, 3, seed=8)], {"alpha": 2}),
        "add.Scalar": (ops.add.Scalar, [x, 1.5], {}),
        "mul": (ops.mul.default, [x, t(4, 3, seed=8)], {}),
        "mul.Scalar": (ops.mul.Scalar, [x, 1.5], {}),
    }


_FORWARD_AD_CALLS = _forward_ad_calls()


def test_forward_ad_cases_cover_every_differentiable_op():
    differentiable = {
        name
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith("cudasteps::") and not name.startswith("cudasteps::ladder_")
    }
    differentiable -= {f"cudasteps::{n}" for n in NO_AUTOGRAD}
    # Not differentiable: they refuse inputs that require grad (as torch._scaled_mm), or are
    # backwards and casts that the FP8 nodes call below autograd.
    refusing = {
        "scaled_mm", "scaled_mm_range", "cast_fp8", "cast_fp8_dynamic", "act_cast_fp8",
        "act_grad_cast_fp8", "bias_act_amax", "bias_act_backward_amax", "mm_bias_act_backward",
        "linear_fp8_aux",
    }  # fmt: skip
    differentiable -= {f"cudasteps::{n}" for n in refusing}
    covered = {"cudasteps::" + name for name in _FORWARD_AD_CALLS}  # overloads named too
    assert differentiable == covered


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_FORWARD_AD_CALLS))
def test_forward_ad_dual_input_is_refused_by_name(name, device):
    import torch.autograd.forward_ad as fwAD

    op, makers, kwargs = _FORWARD_AD_CALLS[name]
    positions = [i for i, m in enumerate(makers) if callable(m)]
    for dual_at in positions:
        with fwAD.dual_level():
            args = [m(device) if callable(m) else m for m in makers]
            primal = args[dual_at]
            args[dual_at] = fwAD.make_dual(primal, torch.ones_like(primal))
            with pytest.raises(NotImplementedError) as info:
                op(*args, **kwargs)
        base = name.split(".")[0]
        assert f"cudasteps.{base}: forward-mode AD is not supported" in str(info.value), (name, dual_at)


@pytest.mark.parametrize("device", DEVICES)
def test_plain_tensors_inside_a_dual_level_still_run(device):
    import torch.autograd.forward_ad as fwAD

    x = make_tensor((4, 3), torch.float32, device)
    w = make_tensor((5, 3), torch.float32, device, seed=1)
    with fwAD.dual_level():
        out = torch.ops.cudasteps.linear(x, w, None)
        _ = fwAD.make_dual(make_tensor((2,), torch.float32, device), torch.ones(2, device=device))
        out_after = torch.ops.cudasteps.linear(x, w, None)
    ref = (x.double() @ w.double().t()).float()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(out, out_after)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_runs_an_op_per_sample(device):
    # No batching rule: torch.vmap's fallback calls the op once per sample (the README says so).
    x = make_tensor((3, 4, 5), torch.float32, device)
    w = make_tensor((6, 5), torch.float32, device, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's performance warning
        out = torch.vmap(lambda a: torch.ops.cudasteps.linear(a, w, None))(x)
    ref = (x.double() @ w.double().t()).float()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
