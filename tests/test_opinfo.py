"""PyTorch's own OpInfo sample inputs through the matching cudasteps op.

Each cudasteps op is a drop-in for a built-in. Here every sample input that PyTorch's test suite
uses for that built-in (``torch.testing._internal.common_methods_invocations.op_db``) runs through
the cudasteps op, on the CPU and on CUDA, for every dtype the built-in supports. Every sample must
either match torch (values, shape, dtype, device) or be refused with the clear error listed in
REFUSALS below, which is the documented list of what cudasteps does not do by design (the README's
"Not supported" paragraph says the same). A refusal that is not in the table, or a table entry
whose error does not come, fails the test.

Forward values are compared for every dtype; gradients (``test_opinfo_grad``) for float64
samples of the differentiable ops.
"""

import re

import cudasteps
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES

pytest.importorskip(
    "expecttest",
    reason="torch's OpInfo database imports expecttest: pip install -r requirements-dev.txt",
)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

# ---- the cudasteps counterpart of each OpInfo entry -----------------------------------------------


def _gelu(x, approximate="none", **_):
    return cudasteps.bias_act(x, None, "gelu_tanh" if approximate == "tanh" else "gelu")


def _act(name):
    # inplace=True samples: bias_act always returns a new tensor; its values are compared.
    return lambda x, inplace=False: cudasteps.bias_act(x, None, name)


def _clone(x, memory_format=None):
    # cudasteps.copy always returns a contiguous tensor: values are compared, not strides.
    return cudasteps.copy(x)


def _addmm(c, a, b, beta=1, alpha=1):
    return cudasteps.addmm(c, a, b, beta=beta, alpha=alpha)


COUNTERPARTS = {
    "add": cudasteps.add,
    "mul": cudasteps.mul,
    "sum": cudasteps.sum,
    "clone": _clone,
    "t": cudasteps.transpose,
    "mm": cudasteps.mm,
    "addmm": _addmm,
    "nn.functional.linear": cudasteps.linear,
    "nn.functional.gelu": _gelu,
    "nn.functional.relu": _act("relu"),
    "nn.functional.silu": _act("silu"),
}
GEMM_OPS = {"mm", "addmm", "nn.functional.linear"}

# The dtypes the gemm ops take (half and bf16 on tensor cores); every other dtype must be refused
# with the gemm ops' dtype message.
GEMM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

OPINFOS = {op.name: op for op in op_db if op.name in COUNTERPARTS and op.variant_test_name == ""}
assert set(OPINFOS) == set(COUNTERPARTS), set(COUNTERPARTS) - set(OPINFOS)

# ---- what cudasteps refuses by design ------------------------------------------------------------
# (ops, condition on (sample, dtype), error regex, why). Only these refusals are allowed.


def _tensors(sample):
    args = [sample.input, *sample.args, *sample.kwargs.values()]
    return [a for a in args if isinstance(a, torch.Tensor)]


def _any_complex(sample, dtype):
    return dtype.is_complex or any(t.dtype.is_complex for t in _tensors(sample))


REFUSALS = [
    (
        {"add", "mul"},
        _any_complex,
        r"cudasteps\.(add|mul): the result dtype \(torch\.result_type\(self, other\)\) must be Float, "
        r"Double, Half, BFloat16, Byte, Char, Short, Int, Long or Bool, got Complex",
        "complex arithmetic is not implemented",
    ),
    (
        {"sum"},
        _any_complex,
        r"cudasteps\.sum: self must be Float, Double, Half, BFloat16, an integer type or Bool, got Complex",
        "complex sums are not implemented",
    ),
    (
        {"t"},
        lambda s, dtype: s.input.dim() < 2,
        r"cudasteps\.transpose: self must have at least 2 dimensions",
        "x.t() of a 0-D or 1-D tensor is x itself: there is nothing to transpose",
    ),
    (
        {"t"},
        lambda s, dtype: s.input.element_size() not in (1, 2, 4, 8),
        r"cudasteps\.transpose: self must have an element size of 1, 2, 4 or 8 bytes",
        "16-byte elements (complex128) are not moved by the transpose kernel",
    ),
    (
        GEMM_OPS,
        lambda s, dtype: dtype not in GEMM_DTYPES,
        r"cudasteps\.(mm|addmm|linear): \w+ must be float32, float64, float16 or bfloat16, got \w+",
        "the gemm kernels are floating point only (torch.mm serves integer and complex matrices)",
    ),
    (
        {"nn.functional.gelu", "nn.functional.relu", "nn.functional.silu"},
        lambda s, dtype: not dtype.is_floating_point,
        r"cudasteps\.bias_act: x must be Float or Half or BFloat16 or Double, got \w+",
        "activations of integer tensors are not implemented",
    ),
]


def expected_refusal(name, sample, dtype):
    for ops, applies, message, _why in REFUSALS:
        if name in ops and applies(sample, dtype):
            return message
    return None


# ---- comparison -------------------------------------------------------------------------------

# (rtol, atol) by dtype. Elementwise ops compute in fp32 and round once, as torch does, but torch's
# vectorized CPU kernels may contract a + alpha * b into one fma: the output may differ by one ulp
# of its dtype. Reductions and GEMMs add in another order than torch, so they get room for a few
# roundings of the output.
_ELEMENTWISE_TOL = {
    torch.float16: (2e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_ACCUMULATING_TOL = {
    torch.float16: (4e-3, 1e-3),
    torch.bfloat16: (3.2e-2, 1e-2),
    torch.float32: (2e-5, 1e-5),
    torch.float64: (1e-10, 1e-10),
}


def tolerance(name, dtype):
    table = _ACCUMULATING_TOL if name in GEMM_OPS | {"sum"} else _ELEMENTWISE_TOL
    return table.get(dtype, (0, 0))


def assert_matches(actual, expected, name):
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.device == expected.device, (actual.device, expected.device)
    rtol, atol = tolerance(name, expected.dtype)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)


def describe(sample):
    def d(a):
        if isinstance(a, torch.Tensor):
            return f"Tensor{list(a.shape)}:{a.dtype}:{a.device}:strides{list(a.stride())}"
        return repr(a)

    args = ", ".join(d(a) for a in sample.args)
    kwargs = ", ".join(f"{k}={d(v)}" for k, v in sample.kwargs.items())
    return f"input={d(sample.input)} args=({args}) kwargs=({kwargs})"


def _cases():
    for name, op in sorted(OPINFOS.items()):
        for dtype in sorted(op.supported_dtypes("cpu"), key=str):
            yield pytest.param(name, dtype, id=f"{name}-{str(dtype).replace('torch.', '')}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, dtype", list(_cases()))
def test_opinfo_samples(device, name, dtype):
    op = OPINFOS[name]
    if dtype not in op.supported_dtypes(device):
        pytest.skip(f"torch itself does not support {name} in {dtype} on {device}")
    ours = COUNTERPARTS[name]
    checked = refused = 0
    for sample in op.sample_inputs(device, dtype, requires_grad=False):
        where = f"{name} {dtype} on {device}: {describe(sample)}"
        refusal = expected_refusal(name, sample, dtype)
        if refusal is not None:
            with pytest.raises(RuntimeError) as info:
                ours(sample.input, *sample.args, **sample.kwargs)
            assert re.search(refusal, str(info.value)), f"{where}: unexpected error {info.value}"
            refused += 1
            continue
        expected = op(sample.input.clone(), *sample.args, **sample.kwargs)
        try:
            actual = ours(sample.input, *sample.args, **sample.kwargs)
        except RuntimeError as e:
            raise AssertionError(f"{where}: refused, and no REFUSALS entry covers it: {e}") from e
        try:
            assert_matches(actual, expected, name)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from e
        checked += 1
    assert checked + refused > 0, f"{name} {dtype}: no samples"


_GRAD_OPS = [
    "add",
    "mul",
    "sum",
    "clone",
    "t",
    "mm",
    "addmm",
    "nn.functional.linear",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.relu",
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", _GRAD_OPS)
def test_opinfo_grad(device, name):
    """Gradients of every differentiable float64 sample match torch's (broadcast operands reduced)."""
    op = OPINFOS[name]
    compared = 0
    for sample in op.sample_inputs(device, torch.float64, requires_grad=True):
        if expected_refusal(name, sample, torch.float64) is not None:
            continue
        inputs = [t for t in _tensors(sample) if t.requires_grad]
        if not inputs:
            continue
        expected = op(sample.input, *sample.args, **sample.kwargs)
        if not expected.requires_grad:
            continue
        actual = COUNTERPARTS[name](sample.input, *sample.args, **sample.kwargs)
        grad = torch.randn_like(expected)
        want = torch.autograd.grad(expected, inputs, grad, allow_unused=True)
        got = torch.autograd.grad(actual, inputs, grad, allow_unused=True)
        for w, g, t in zip(want, got, inputs):
            where = f"{name} on {device}: {describe(sample)}"
            if w is None:
                assert g is None or not g.any(), where
                continue
            assert g is not None, f"{where}: no gradient for an input of shape {list(t.shape)}"
            assert g.shape == t.shape and g.dtype == t.dtype, (where, g.shape, g.dtype)
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, where=where: f"{where}: {m}")
        compared += 1
    assert compared > 0, f"{name}: no differentiable float64 samples"


def test_refusal_table_is_documented():
    """Each refusal names its reason; the README states each one."""
    readme = open(__file__.replace("tests/test_opinfo.py", "README.md"), encoding="utf-8").read()
    for ops, _applies, _message, why in REFUSALS:
        assert why, ops
        assert why in readme, f"README does not state: {why}"


def test_gelu_relu_silu_reference_is_functional():
    # The adapters compare against torch.nn.functional itself (a guard against a wrong mapping).
    x = torch.linspace(-3, 3, 11, dtype=torch.float64)
    torch.testing.assert_close(_gelu(x, approximate="tanh"), F.gelu(x, approximate="tanh"))
    torch.testing.assert_close(_act("silu")(x), F.silu(x))
