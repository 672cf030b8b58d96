"""Drop-in modules built on cudasteps ops, for models (and DDP training: examples/train_ddp.py).

* :class:`Linear`: a drop-in for ``torch.nn.Linear`` (same constructor, parameters ``weight`` and
  ``bias``, initialisation and ``state_dict``), running ``torch.ops.cudasteps.linear``.
* :class:`BiasAct`: ``act(x + bias)`` with a learnable bias, one fused kernel each way.
* :class:`GELU`, :class:`ReLU`, :class:`SiLU`: bias-free activations (``bias_act`` with no bias).
* :class:`LinearAct`: a drop-in for ``nn.Sequential(nn.Linear, nn.GELU())`` (or ReLU, SiLU) whose
  forward is one ``cudasteps.linear_act``: the GEMM, then the bias and the activation in one pass
  (and in the backward the activation's derivative and the bias gradient in one pass). Same
  ``state_dict`` keys as that Sequential (``0.weight``, ``0.bias``).
* :class:`MLP`: a :class:`LinearAct` per hidden layer, and a plain ``Linear`` (bias fused into the
  matmul epilogue) for the output layer, which has no activation to fuse with; the last hidden
  layer and the output layer run as one ``linear_act_linear`` (one autograd node for both).

Autocast: ``cudasteps.linear`` is registered for autocast in C++ like aten's ``linear``, so under
``torch.autocast(dtype=torch.bfloat16)`` a :class:`Linear` casts its input and fp32 parameters to
bf16 and runs the tensor-core GEMM, exactly where ``torch.nn.Linear`` does (gradients reach the
fp32 parameters through the cast). The elementwise modules take whatever dtype arrives: a bf16
activation meets the fp32 bias of :class:`BiasAct` in one kernel (fp32 math, bf16 out), with no
cast of the bias; :class:`LinearAct` casts its input and weight like ``Linear`` and keeps its bias
fp32 the same way.
"""

import math
from typing import Sequence

import torch
from torch import nn

from . import elementwise as _ew

__all__ = ["Linear", "BiasAct", "GELU", "ReLU", "SiLU", "LinearAct", "MLP"]


class Linear(nn.Module):
    """``y = x @ weight.T + bias``: a drop-in for ``torch.nn.Linear`` running ``cudasteps.linear``.

    Any dtype of ``cudasteps.linear`` (fp32, fp64, fp16, bf16); under autocast it computes in the
    autocast dtype, as ``torch.nn.Linear``. Same constructor
    arguments (``in_features, out_features, bias=True, device=None, dtype=None``), parameter
    names, initialisation (``reset_parameters``) and ``state_dict`` keys, so state dicts load
    both ways between this and ``torch.nn.Linear``.

    ``fp8=True`` (keyword only) runs ``cudasteps.linear_fp8`` instead: input and weight cast to
    FP8 (e4m3) with per-tensor scales from their current amax, the output gradient to e5m2, the
    three products on ``cudasteps.scaled_mm``; the parameters and their gradients keep their dtype
    (the master weights), so the optimizer is unchanged. Under autocast the output is in the
    autocast dtype. Inside a :class:`LinearAct` (an activation after the layer) it runs
    ``cudasteps.linear_act_fp8``.
    """

    __constants__ = ["in_features", "out_features", "fp8"]

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        fp8: bool = False,
    ):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.fp8 = fp8
        self.weight = nn.Parameter(torch.empty((out_features, in_features), **factory_kwargs))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Exactly torch.nn.Linear.reset_parameters (same RNG draws, in the same order).
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, act: str = "none", *, input_amax=None, with_amax: bool = False):
        # act: the activation a LinearAct that holds this layer applies in the epilogue. Passed
        # through this call (not read off self.weight by the LinearAct) so that hooks on this
        # module, such as FSDP2's unsharding of its parameters, run. input_amax and with_amax
        # (FP8 mode; MLP passes them): x's amax where the layer before took it, and whether to
        # return (out, out's amax) for the layer after (None where this layer took none).
        if self.fp8:
            if act == "none":
                out = torch.ops.cudasteps.linear_fp8(x, self.weight, self.bias, input_amax=input_amax)
                return (out, None) if with_amax else out
            # With an activation the bias goes to the bias-and-activation pass of linear_act_fp8,
            # which adds it in the pass it makes anyway and whose backward returns its gradient
            # from that pass (given to the product, the backward would read the whole output
            # gradient once more for its column sums); that pass also takes the output's amax.
            out, amax = torch.ops.cudasteps.linear_act_fp8(
                x, self.weight, self.bias, act, input_amax=input_amax
            )
            return (out, amax) if with_amax else out
        if with_amax:
            raise ValueError("with_amax is for fp8=True layers")
        if act == "none":
            return torch.ops.cudasteps.linear(x, self.weight, self.bias)
        return torch.ops.cudasteps.linear_act(x, self.weight, self.bias, act)

    def extra_repr(self) -> str:
        fp8 = ", fp8=True" if self.fp8 else ""
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}{fp8}"
        )


class BiasAct(nn.Module):
    """``act(x + bias)`` over the last dimension (``features``), one fused cudasteps kernel.

    ``act`` is one of ``none, relu, gelu, gelu_tanh, silu``. The bias starts at zero (call
    :meth:`reset_parameters` with ``fan_in`` to draw it as ``torch.nn.Linear`` draws its bias).
    """

    def __init__(self, features: int, act: str = "gelu", device=None, dtype=None):
        super().__init__()
        if act not in _ew.ACTIVATIONS:
            raise ValueError(f"act must be one of {', '.join(_ew.ACTIVATIONS)}, got '{act}'")
        self.features = features
        self.act = act
        self.bias = nn.Parameter(torch.zeros(features, device=device, dtype=dtype))

    def reset_parameters(self, fan_in: int = 0) -> None:
        """Zero the bias, or draw it from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) when fan_in > 0."""
        with torch.no_grad():
            if fan_in > 0:
                bound = 1 / math.sqrt(fan_in)
                nn.init.uniform_(self.bias, -bound, bound)
            else:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ew.bias_act(x, self.bias, self.act)

    def extra_repr(self) -> str:
        return f"features={self.features}, act={self.act}"


class _Act(nn.Module):
    _act = "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ew.bias_act(x, None, self._act)


class GELU(_Act):
    """``F.gelu(x)`` (erf form; ``approximate="tanh"`` selects the tanh form), via ``bias_act``."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got '{approximate}'")
        self.approximate = approximate
        self._act = "gelu" if approximate == "none" else "gelu_tanh"


class ReLU(_Act):
    """``F.relu(x)`` via ``bias_act`` (out of place only)."""

    _act = "relu"


class SiLU(_Act):
    """``F.silu(x)`` via ``bias_act`` (out of place only)."""

    _act = "silu"


_ACT_MODULES = {
    "relu": lambda: ReLU(),
    "gelu": lambda: GELU(),
    "gelu_tanh": lambda: GELU("tanh"),
    "silu": lambda: SiLU(),
}


class LinearAct(nn.Sequential):
    """``act(x @ weight.T + bias)``: ``Linear`` then an activation, run as one ``linear_act``.

    A drop-in for ``nn.Sequential(nn.Linear(in_features, out_features, bias), nn.GELU())`` (``act``
    ``"gelu"``; ``"gelu_tanh"``, ``"relu"``, ``"silu"`` for ``nn.GELU("tanh")``, ``nn.ReLU``,
    ``nn.SiLU``): it is such a Sequential of a :class:`Linear` and the cudasteps activation module,
    so indexing (``m[0].weight``), initialisation and ``state_dict`` keys (``0.weight``,
    ``0.bias``) are the same, and state dicts load both ways. Only ``forward`` differs: one
    ``cudasteps.linear_act`` call (the GEMM, then the bias and the activation in one pass).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        act: str = "gelu",
        device=None,
        dtype=None,
        *,
        fp8: bool = False,
    ):
        if act not in _ACT_MODULES:
            raise ValueError(f"act must be one of {', '.join(_ACT_MODULES)}, got '{act}'")
        linear = Linear(in_features, out_features, bias, device=device, dtype=dtype, fp8=fp8)
        super().__init__(linear, _ACT_MODULES[act]())
        self.act = act

    def forward(self, x: torch.Tensor, *, input_amax=None, with_amax: bool = False):
        # The activation module at [1] is for structure and repr only. input_amax, with_amax: see
        # Linear.forward (an FP8 MLP threads the amax from layer to layer).
        return self[0](x, self.act, input_amax=input_amax, with_amax=with_amax)


def _has_hooks(*modules: nn.Module) -> bool:
    """Whether any of ``modules`` has a forward or backward hook of its own (FSDP2 unshards a
    module's parameters in its forward pre-hook): MLP then calls those modules, not one op on
    their parameters."""
    return any(
        m._forward_pre_hooks or m._forward_hooks or m._backward_pre_hooks or m._backward_hooks
        for m in modules
    )


class MLP(nn.Module):
    """A multilayer perceptron ``dims[0] -> dims[1] -> ... -> dims[-1]``.

    Each hidden layer is a :class:`LinearAct` (``dims[i] -> dims[i+1]``: the GEMM, then the bias
    and activation in one pass, and in the backward the activation's derivative and the bias
    gradient in one pass over the saved product); the output layer (logits, no activation) is
    ``Linear(dims[-2], dims[-1])`` with its bias added in the matmul's epilogue. The last hidden
    layer and the output layer run as one ``cudasteps.linear_act_linear`` (the same values and
    gradients as calling them), one autograd node whose backward computes the hidden gradient
    with ``cudasteps.mm_bias_act_backward``; a hook on either layer (FSDP2's unsharding of their
    parameters, say) keeps them separate calls, each running its hooks. No bias add costs a pass
    of its own, forward or backward. Parameters are initialised as a stack of
    ``torch.nn.Linear`` + activation would be; :meth:`linear_params` lists each layer's (weight,
    bias), and :meth:`load_from_torch_linears` copies those of such a stack in. ``fp8=True``
    (keyword only) puts every layer in :class:`Linear`'s FP8 mode: the last hidden layer and the
    output layer run as one ``cudasteps.linear_act_linear_fp8``, whose hidden tensor and hidden
    gradient exist only in FP8 (their scales bounded from the range the GEMM before each cast took;
    a hook on either layer keeps them separate calls). Each other hidden layer is one
    ``cudasteps.linear_act_fp8`` (the FP8 product, then the bias and activation in one pass that
    also takes the output's amax), and each next layer takes that amax as ``input_amax``, so no
    layer reads its input an extra time for its FP8 scale; in the backward the activation's
    derivative pass takes the amax of the gradient it writes, for that gradient's e5m2 cast.
    """

    def __init__(self, dims: Sequence[int], act: str = "gelu", device=None, dtype=None, *, fp8: bool = False):
        super().__init__()
        if len(dims) < 2:
            raise ValueError(f"dims must list at least an input and an output size, got {list(dims)}")
        if act not in _ACT_MODULES:
            raise ValueError(f"act must be one of {', '.join(_ACT_MODULES)}, got '{act}'")
        layers = [
            LinearAct(dims[i], dims[i + 1], act=act, device=device, dtype=dtype, fp8=fp8)
            for i in range(len(dims) - 2)
        ]
        layers.append(Linear(dims[-2], dims[-1], device=device, dtype=dtype, fp8=fp8))
        self.layers = nn.Sequential(*layers)
        self.dims = list(dims)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *hidden, last = self.layers
        # (Each layer's own fp8 flag: a layer may be switched after construction.)
        if not last.fp8 and not any(layer[0].fp8 for layer in hidden):
            if not hidden or _has_hooks(hidden[-1], hidden[-1][0], last):
                return self.layers(x)
            for layer in hidden[:-1]:
                x = layer(x)
            block = hidden[-1]
            return torch.ops.cudasteps.linear_act_linear(
                x, block[0].weight, block[0].bias, last.weight, last.bias, block.act
            )
        # FP8: the last hidden layer and the output layer as one linear_act_linear_fp8 (the hidden
        # tensor and its gradient only in FP8) where both are FP8 layers without hooks.
        fused = len(hidden) > 0 and last.fp8 and hidden[-1][0].fp8
        fused = fused and not _has_hooks(hidden[-1], hidden[-1][0], last)
        amax = None  # the amax of x as the next layer reads it, where the layer before took it
        for layer in hidden[:-1] if fused else hidden:
            x, amax = layer(x, input_amax=amax, with_amax=True) if layer[0].fp8 else (layer(x), None)
        if fused:
            block = hidden[-1]
            return torch.ops.cudasteps.linear_act_linear_fp8(
                x, block[0].weight, block[0].bias, last.weight, last.bias, block.act, input_amax=amax
            )
        return last(x, input_amax=amax) if last.fp8 else last(x)

    def linear_params(self) -> list:
        """``[(weight, bias), ...]``, one pair per layer, input layer first."""
        hidden = [(layer[0].weight, layer[0].bias) for layer in self.layers[:-1]]
        return hidden + [(self.layers[-1].weight, self.layers[-1].bias)]

    def load_from_torch_linears(self, linears: Sequence[nn.Linear]) -> None:
        """Copy weight and bias of each ``torch.nn.Linear`` in ``linears`` (in order) into this MLP."""
        if len(linears) != len(self.dims) - 1:
            raise ValueError(f"expected {len(self.dims) - 1} linear layers, got {len(linears)}")
        with torch.no_grad():
            for (weight, bias), lin in zip(self.linear_params(), linears):
                weight.copy_(lin.weight)
                bias.copy_(lin.bias)
