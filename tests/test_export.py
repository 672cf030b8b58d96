"""torch.export and AOTInductor with the cudasteps ops.

A small model calls every differentiable cudasteps op (copy, copy_, transpose, transpose_, sum, mm,
addmm, linear, bias_act, add, mul). It is exported with ``torch.export.export`` (batch dimension
dynamic), the ExportedProgram is run, then compiled with ``torch._inductor.aoti_compile_and_package``
and the package loaded with ``torch._inductor.aoti_load_package`` and run. Every output must match
the eager model's. The export must keep each op as a ``torch.ops.cudasteps`` node (no op may be
decomposed away or fall back to Python), and a package calls the ops through the dispatcher, so
the process running it must have imported cudasteps.

AOTInductor compiles generated C++ with the system compiler (about 20 s for the CPU package on a
2-core machine). The package calls each cudasteps op through AOTInductor's proxy executor (the
dispatcher), as its extern-node list shows.

An FP8 MLP (``cudasteps.nn.MLP(fp8=True)``) is exported the same way: its ``linear_act_fp8`` and
``linear_act_linear_fp8`` nodes, with a hidden layer's amax handed to the next, and its outputs equal
to the eager model's.
"""

import json
import os
import zipfile

import cudasteps
import pytest
import torch
from _helpers import DEVICES, TORCH_VERSION, make_tensor, rel_err, requires_cuda
from torch import nn

D_IN, HIDDEN, D_OUT = 24, 40, 16

# Every op the model must contain, as export records them (mutating ops appear functionalized).
EXPECTED_OPS = {
    "copy",
    "copy_",
    "transpose",
    "transpose_",
    "sum",
    "mm",
    "addmm",
    "linear",
    "linear_act",
    "bias_act",
    "add",
    "mul",
}


class AllOps(nn.Module):
    """A two-branch MLP head written with cudasteps ops only."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)

        def param(*shape, scale=0.3):
            return nn.Parameter(torch.randn(*shape, generator=gen) * scale)

        self.w1 = param(HIDDEN, D_IN)  # linear weight, (out, in) like nn.Linear
        self.b1 = param(HIDDEN)
        self.b2 = param(HIDDEN)  # bias_act's bias
        self.w2 = param(HIDDEN, D_OUT)  # addmm operand
        self.c = param(D_OUT)  # addmm's self, broadcast over rows
        self.w3 = param(HIDDEN, D_OUT)  # mm operand
        self.scale = param(D_OUT, scale=1.0)  # mul's per-feature vector
        self.w4 = param(D_OUT, D_IN)  # linear_act weight (its bias: self.c)

    def forward(self, x):
        h = cudasteps.linear(x, self.w1, self.b1)  # [B, H]
        h = cudasteps.bias_act(h, self.b2, "gelu")
        ht = cudasteps.transpose(h)  # [H, B]
        hc = cudasteps.copy(ht.t())  # a contiguous [B, H] from a transposed view
        y = cudasteps.addmm(self.c, hc, self.w2, beta=0.5, alpha=2.0)  # [B, O]
        z = cudasteps.mm(cudasteps.transpose(ht), self.w3)  # [B, O]
        y = cudasteps.add(y, z, alpha=0.5)
        y = cudasteps.add(y, cudasteps.linear_act(x, self.w4, self.c, "silu"))
        y = cudasteps.mul(y, self.scale)
        yt = torch.empty(y.shape[1], y.shape[0], dtype=y.dtype, device=y.device)
        cudasteps.transpose_(yt, y)  # [O, B]
        out = torch.empty_like(y)
        cudasteps.copy_(out, y)
        return cudasteps.sum(out, dim=[1]), yt


def _reference(model, x):
    """The same function with torch ops in float64: checks that the eager model is right at all."""
    p = {k: v.detach().double() for k, v in model.named_parameters()}
    x = x.double()
    h = torch.nn.functional.gelu(x @ p["w1"].t() + p["b1"] + p["b2"])
    y = 0.5 * p["c"] + 2.0 * (h @ p["w2"]) + 0.5 * (h @ p["w3"])
    y = y + torch.nn.functional.silu(x @ p["w4"].t() + p["c"])
    y = y * p["scale"]
    return y.sum(1), y.t()


def _export(model, x):
    batch = torch.export.Dim("batch", min=2, max=4096)
    return torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})


def _cudasteps_ops_in(graph_module) -> set:
    found = set()
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        # Mutating ops are wrapped by functionalization: auto_functionalized(op, **kwargs).
        if getattr(target, "__name__", "") == "auto_functionalized" or "auto_functionalized" in str(target):
            target = node.args[0]
        name = getattr(target, "_schema", None) and target._schema.name
        if name and name.startswith("cudasteps::"):
            found.add(name.split("::")[1])
    return found


def _check_outputs(got, want, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: shape {tuple(g.shape)} != {tuple(w.shape)}"
        assert rel_err(g, w) < 1e-5, f"{what}: rel err {rel_err(g, w)}"


@pytest.mark.parametrize("device", DEVICES)
def test_eager_model_matches_torch_reference(device):
    model = AllOps().to(device)
    x = make_tensor((33, D_IN), torch.float32, device, seed=1)
    got = model(x)
    want = _reference(model, x)
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_export_keeps_every_op_and_runs(device):
    model = AllOps().to(device)
    x = make_tensor((33, D_IN), torch.float32, device, seed=1)
    ep = _export(model, x)
    ops = _cudasteps_ops_in(ep.graph_module)
    assert ops >= EXPECTED_OPS, f"missing from the exported graph: {sorted(EXPECTED_OPS - ops)}"
    # The exported program runs at the traced batch and at another one (the batch is dynamic).
    for batch, seed in ((33, 1), (7, 2)):
        xb = make_tensor((batch, D_IN), torch.float32, device, seed=seed)
        _check_outputs(ep.module()(xb), model(xb), f"ExportedProgram, batch {batch}")


@pytest.mark.parametrize("device", DEVICES)
def test_export_rejects_bad_shapes_with_the_op_message(device):
    # The fake kernels raise the real kernels' errors while tracing.
    class Bad(nn.Module):
        def forward(self, a, b):
            return cudasteps.mm(a, b)

    a = make_tensor((4, 5), torch.float32, device)
    b = make_tensor((6, 3), torch.float32, device, seed=1)
    with pytest.raises(Exception, match=r"cudasteps\.mm: "):
        torch.export.export(Bad(), (a, b))


def _aoti_roundtrip(device, tmp_path):
    from torch._inductor import aoti_compile_and_package, aoti_load_package

    model = AllOps().to(device)
    x = make_tensor((33, D_IN), torch.float32, device, seed=1)
    ep = _export(model, x)
    path = aoti_compile_and_package(ep, package_path=os.path.join(tmp_path, "allops.pt2"))
    # The extern calls the package makes (a JSON list of nodes beside the generated wrapper code):
    # every cudasteps op, none compiled away or replaced.
    targets = set()
    with zipfile.ZipFile(path) as package:
        for name in package.namelist():
            if name.endswith(".json") and "/aotinductor/" in name:
                extern = json.loads(package.read(name))
                if isinstance(extern, dict):
                    targets |= {node["node"]["target"] for node in extern.get("nodes", [])}
    assert {f"cudasteps::{op}" for op in EXPECTED_OPS} <= targets, sorted(targets)
    compiled = aoti_load_package(path)
    for batch, seed in ((33, 1), (7, 2)):
        xb = make_tensor((batch, D_IN), torch.float32, device, seed=seed)
        with torch.no_grad():
            want = model(xb)
        _check_outputs(compiled(xb), want, f"AOTInductor package, batch {batch}")


# AOTInductor's proxy executor (how a package calls a custom op) in torch 2.6 and 2.7 drops or
# miscounts a custom op's defaulted and integer Scalar arguments (add's alpha=1; in 2.6 also sum's
# defaults), so the package's calls fail at run time; 2.8.0, 2.9.1, 2.11 and 2.14.1 run it.
requires_aoti_custom_ops = pytest.mark.skipif(
    TORCH_VERSION < (2, 8),
    reason="AOTInductor packages that call custom ops need torch >= 2.8 (the proxy executor of "
    f"older releases mishandles their Scalar arguments), got {torch.__version__}",
)


@requires_aoti_custom_ops
def test_aoti_package_cpu(tmp_path):
    _aoti_roundtrip("cpu", tmp_path)


@requires_cuda
@requires_aoti_custom_ops
def test_aoti_package_cuda(tmp_path):
    _aoti_roundtrip("cuda", tmp_path)


@pytest.mark.parametrize("device", DEVICES)
def test_export_mlp(device):
    """cudasteps.nn.MLP exports with its first hidden layer a linear_act node and its last hidden
    layer and output layer one linear_act_linear node, and the exported program returns the eager
    model's outputs, bit for bit, at the traced batch and another."""
    torch.manual_seed(0)
    model = cudasteps.nn.MLP([D_IN, HIDDEN, HIDDEN, D_OUT], "silu").to(device)
    x = make_tensor((33, D_IN), torch.float32, device, seed=3)
    ep = _export(model, x)
    targets = [str(n.target) for n in ep.graph_module.graph.nodes if str(n.target).startswith("cudasteps.")]
    assert targets == ["cudasteps.linear_act.default", "cudasteps.linear_act_linear.default"], targets
    for batch, seed in ((33, 3), (7, 4)):
        xb = make_tensor((batch, D_IN), torch.float32, device, seed=seed)
        with torch.no_grad():
            assert torch.equal(ep.module()(xb), model(xb)), batch


@pytest.mark.parametrize("device", DEVICES)
def test_export_fp8_mlp(device):
    """cudasteps.nn.MLP(fp8=True) exports with its FP8 ops as nodes (a hidden layer's
    linear_act_fp8, whose amax the next layer takes as input_amax; the last hidden layer and the
    output layer one linear_act_linear_fp8) and the exported program returns the eager model's
    outputs, bit for bit, at the traced batch and another."""
    torch.manual_seed(0)
    model = cudasteps.nn.MLP([D_IN, HIDDEN, HIDDEN, HIDDEN, D_OUT], "gelu", fp8=True).to(device)
    x = make_tensor((33, D_IN), torch.float32, device, seed=3)
    ep = _export(model, x)
    ops = _cudasteps_ops_in(ep.graph_module)
    assert {"linear_act_fp8", "linear_act_linear_fp8"} <= ops, sorted(ops)
    # The amax each hidden layer returns feeds the next layer (no amax pass of its input there);
    # the first layer's input, x, comes with none.
    names = ("cudasteps.linear_act_fp8.default", "cudasteps.linear_act_linear_fp8.default")
    layers = [n for n in ep.graph_module.graph.nodes if str(n.target) in names]
    assert [str(n.target) for n in layers] == [names[0], names[0], names[1]], layers
    assert [n.kwargs.get("input_amax") is not None for n in layers] == [False, True, True], layers
    for batch, seed in ((33, 3), (7, 4)):
        xb = make_tensor((batch, D_IN), torch.float32, device, seed=seed)
        with torch.no_grad():
            assert torch.equal(ep.module()(xb), model(xb)), batch
