"""gemm family: ``mm``, ``addmm``, ``linear`` and ``linear_act`` (linear + bias + activation in the
GEMM's epilogue) on CUDA cores and tensor cores (csrc/gemm), ``linear_act_linear`` (an FFN block
as one autograd node) and its backward ``mm_bias_act_backward`` (the hidden gradient and its bias
gradient), and ``scaled_mm``, the scaled FP8 GEMM (csrc/gemm/scaled_mm.cpp).

* bfloat16 / float16: tensor cores, fp32 accumulation, output in the input dtype (as torch). On a
  Hopper GPU a warp-specialized wgmma + TMA kernel, elsewhere (sm_80+) a multistage cp.async +
  ldmatrix mma.sync kernel.
* float32: the exact SGEMM (register-blocked, warp-tiled, a multistage cp.async pipeline, configs
  chosen by shape from a measured table, deterministic split-K for small outputs with a long K),
  or, when torch's TF32 switch is on (``torch.backends.cuda.matmul.allow_tf32`` or
  ``torch.set_float32_matmul_precision("high")``), the tensor-core kernels in TF32, as
  ``torch.mm`` does. The switch is read per call in C++.
* float64: a simple tiled kernel.

Under ``torch.autocast`` the three ops cast their floating-point arguments to the autocast dtype,
as aten's mm / addmm / linear do (registered in C++, csrc/gemm/gemm_autocast.cpp); linear and
linear_act_linear cast inside their ``.dtype`` overloads, whose backward writes a float32
parameter's gradient in float32 straight from its GEMM (``mm.dtype``). Transposed
operands (``a.t()``, linear's weight) are read in place where the kernel allows it. All three ops
are differentiable; their backward runs ``cudasteps.mm`` in the same dtype (the same kernels).
"""

from typing import Optional, Tuple

import torch

from . import _checks
from .elementwise import _check_feature_vector
from .fp8 import _check_per_tensor

_ops = torch.ops.cudasteps
# The hot ops' overloads, bound once: calling an OpOverload skips the packet's overload lookup.
_mm, _linear, _linear_act = _ops.mm.default, _ops.linear.default, _ops.linear_act.default
# linear_act's activations (elementwise.ACTIVATIONS; the same names as bias_act).
_ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")
# linear_act's ladder (run_linear_act_ladder): two passes, then the fused epilogue in
# tc:ws_persistent's kernel, then in tc:ws_pingpong's (what the op runs where the stage can run:
# kFuseByDefault and linear_act_fuses in csrc/gemm/gemm_cuda.cpp; two_pass elsewhere).
LINEAR_ACT_LADDER = ("two_pass", "fused", "fused_pingpong")
# mm_bias_act_backward's ladder (run_mm_bias_act_backward_ladder): mm then bias_act_backward (what
# the op runs: the fused step measured slower, kFuseActGradByDefault in csrc/gemm/gemm_cuda.cpp),
# then the derivative and the bias gradient's column sums in tc:ws_persistent's epilogue.
MM_BIAS_ACT_BACKWARD_LADDER = ("two_pass", "fused")
# scaled_mm's ladder (run_scaled_mm_ladder): the operands widened to float32 on the TF32 tensor
# cores, then the Hopper FP8 kernel (what scaled_mm runs there) and two measured alternatives.
SCALED_MM_LADDER = ("widen_tf32", "fp8_ws", "fp8_multicast", "fp8_ws256")
# Forms ladder_scaled_mm also takes, for sweeps rather than the report: tc:fp8_ws with its two
# consumer warpgroups 1-4 k-tiles apart (a trial; run_scaled_mm_ladder).
SCALED_MM_SWEEP = tuple(f"fp8_ws:st{lag}" for lag in range(1, 5))

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
    "cp_async_multistage",
    "frag_double_buffer",
    "smem_epilogue",
    "swizzled_raster",
    "cp_async_kmajor",
    "grouped_copies",
    "stream_k_tail",
    "serpentine_fma",
    "swap_nn",
    "blocked_sum",
    "final",
)

# The config table of the final kernel, each runnable by name through ladder_mm ("cfg:<name>"),
# optionally with a split-K factor ("cfg:<name>:s<splits>"), the stream-K tail forced on
# ("cfg:<name>:sk"; without a suffix a ring config takes it where mm would), or (a ring config)
# split-K whose parts its stream-K kernel adds up itself ("cfg:<name>:sk<splits>"). Index 0 is the
# main config. The
# ``cp<stages>_*`` entries are the multistage cp.async kernel (csrc/gemm/sgemm/multistage.cuh);
# the others the tile kernel of csrc/gemm/sgemm/kernel.cuh: ``ring<stages>_*`` its cp.async ring
# into k-major tiles, the rest its register-staged double buffer, which also runs the multistage
# configs' operands whose rows are not 16-byte aligned.
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
    "ring3_128x256x8_w64x64_t8x16",
    "ring3_256x128x8_w64x64_t16x8",
    "ring3_128x256x8_w64x64_t8x16_rowfma",
    "ring3_256x128x8_w64x64_t16x8_rowfma",
    "ring3_256x128x8_w64x64_t16x8_swapnn",
    "cp3_128x128x16_w64x32_t8x8_fdb_se",
    "cp3_128x128x16_w64x32_t8x8",
    "cp4_128x128x8_w64x32_t8x8_occ2",
    "cp3_128x128x32_w64x32_t8x8_se",
    "cp3_128x256x16_w64x64_t8x16_se",
    "cp4_128x256x8_w64x64_t8x16_se",
    "cp3_256x128x16_w64x64_t16x8_se",
    "cp4_128x64x16_w64x32_t8x8_occ2",
    "cp4_64x64x16_w32x32_t8x4_occ4",
)
# The multistage configs (cp.async ring, layout-preserving tiles), a subset of CONFIGS.
MULTISTAGE_CONFIGS = tuple(c for c in CONFIGS if c.startswith("cp"))
# The tile kernel's cp.async ring configs (k-major tiles), a subset of CONFIGS.
RING_CONFIGS = tuple(c for c in CONFIGS if c.startswith("ring"))
# The SGEMM ladder steps that run a cp.async kernel (row-major operands only): every step from
# cp_async_multistage up to final.
MULTISTAGE_STEPS = LADDER[LADDER.index("cp_async_multistage") : LADDER.index("final")]
CONFIG_VARIANTS = (
    tuple(f"cfg:{c}" for c in CONFIGS)
    + tuple(f"cfg:{CONFIGS[0]}:s{s}" for s in (2, 4, 8))
    + tuple(f"cfg:{MULTISTAGE_CONFIGS[0]}:s{s}" for s in (2, 3, 8))
)

# The tensor-core ladder (bf16, fp16, and float32 as TF32), naive first; ``tc:final`` is what mm()
# runs for those dtypes. The sm_80 steps run on any GPU of compute capability 8.0 or newer; the
# Hopper steps (wgmma onwards) need compute capability 9.0 and a build that includes it.
TC_LADDER = (
    "tc:mma",
    "tc:ldmatrix_cp_async",
    "tc:wgmma",
    "tc:wgmma_tma",
    "tc:ws_persistent",
    "tc:ws_multicast",
    "tc:ws_pingpong",
    "tc:final",
)
TC_HOPPER_STEPS = (
    "tc:wgmma",
    "tc:wgmma_tma",
    "tc:ws_persistent",
    "tc:ws_multicast",
    "tc:ws_pingpong",
    "tc:ws_tf32_rs",
)
# Hopper steps that only the ladder runs (``tc:final`` runs ``tc:ws_persistent``'s kernel): for
# bf16 they are built for one layout, row-major ``a`` and row-major ``b`` (the layout of the
# benchmark's ladder rows), and other layouts are transposed into it first, so they give the
# right product in every layout but time a transpose there. For float16 only tc:ws_pingpong is
# built (for K-major operands, linear_act's layout: others are transposed into it), and for
# float32 (TF32) none: ladder_mm refuses the others by name. TF32 transposes MN-major operands for
# every Hopper step but tc:ws_tf32_rs.
TC_HOPPER_NN_STEPS = ("tc:wgmma", "tc:wgmma_tma", "tc:ws_multicast", "tc:ws_pingpong")
# The TC_HOPPER_NN_STEPS built for float16.
TC_HOPPER_FP16_STEPS = ("tc:ws_pingpong",)
# Hopper steps for float32 (TF32) alone, outside TC_LADDER: tc:ws_tf32_rs reads one MN-major
# operand (a column-major ``a`` or a row-major ``b``) into wgmma's register operand instead of
# transposing it. tc:final runs it for one MN-major operand, but where the output's tiles are too
# few to fill the SMs and the operand is narrow (there it transposes and splits K).
TC_TF32_STEPS = ("tc:ws_tf32_rs",)
TC_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# The few-row ladder (bf16 / fp16 products whose output has at most GEMV_MAX_TOKENS rows or
# columns, both operands K-major: a decode step's ``linear``), naive first; ``gemv:final`` is what
# mm / linear run for such products (on Hopper, for 9-16 tokens against large weights, 8-16 on
# GPUs with fast DRAM per SM, or long K, the skinny tiles ``tc:ws_persistent:bt16[:k2]``:
# sm90/scheduler.cuh's decode_skinny_tiles).
# Every step needs compute capability 8.0 (the mma step's mma.sync). ``gemv:mma:s<splits>:u<2|4>``
# (either field optional) forces the blocks that share K and the 64-wide chunks of K each warp
# loads before it multiplies (for sweeps).
GEMV_LADDER = (
    "gemv:warp_row",
    "gemv:vec16",
    "gemv:rows_in_flight",
    "gemv:split_k",
    "gemv:mma",
    "gemv:final",
)
# The few-row steps only the ladder runs, built for bf16 alone (float16 is refused with an error).
GEMV_BF16_ONLY_STEPS = GEMV_LADDER[:3]
GEMV_MAX_TOKENS = 16

_COUNTERPART = {
    "mm": "torch.mm",
    "addmm": "torch.addmm",
    "linear": "torch.nn.functional.linear",
    "linear_act": "torch.nn.functional.linear",
    "linear_act_aux": "torch.nn.functional.linear",
    "ladder_linear_act": "torch.nn.functional.linear",
    "linear_act_linear": "torch.nn.functional.linear",
}


def mm(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Matrix product ``a @ b`` of 2-D tensors ``a`` [M, K] and ``b`` [K, N] -> [M, N].

    Like ``torch.mm`` for float32, float64, float16 and bfloat16: half types run on tensor cores
    with fp32 accumulation; float32 is exact unless torch's TF32 switch is on, then TF32 tensor
    cores (as ``torch.mm``). Other dtypes raise. Any strides: a row- or column-major operand (e.g.
    ``a.t()``) is read in place where the kernel can, anything else is copied first. The result is
    always contiguous. Differentiable in both arguments; autocast casts as for ``torch.mm``.

    ``out_dtype`` (``torch.mm``'s, the op's ``mm.dtype`` overload): ``a``'s dtype, or float32 for
    bf16/fp16 operands, whose fp32 sums are then written unrounded (on a Hopper GPU by the
    tensor-core kernel's epilogue; elsewhere the operands are widened to float32 first).
    """
    if out_dtype is None:
        return _mm(a, b)
    return _ops.mm.dtype(a, b, out_dtype)


def addmm(
    self: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    """``beta * self + alpha * (mat1 @ mat2)``, as ``torch.addmm``.

    ``self`` must broadcast to [M, N]; the addition happens in the GEMM's epilogue (no extra pass).
    With ``beta == 0`` ``self`` is ignored (NaNs in it do not propagate). The dtypes of :func:`mm`.
    Differentiable in ``self``, ``mat1`` and ``mat2``.
    """
    return _ops.addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """``input @ weight.T + bias``, as ``torch.nn.functional.linear``.

    ``input`` [..., K] with any leading dims, ``weight`` [N, K] (read in place as a column-major
    operand: no transpose copy), ``bias`` [N] or None, added in the GEMM's epilogue.
    The dtypes of :func:`mm`. Differentiable in all three.

    ``dtype`` (the op's ``linear.dtype`` overload, what autocast runs): the three are cast to it
    first and the output comes in it, while each gradient comes back in its argument's own dtype:
    a float32 weight's (and input's) written in float32 by the backward's GEMMs from their fp32
    sums (``mm(..., out_dtype=float32)``), with no cast pass after them.
    """
    if dtype is None:
        return _linear(input, weight, bias)
    return _ops.linear.dtype(input, weight, bias, dtype)


def linear_act(
    input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, act: str = "gelu"
) -> torch.Tensor:
    """``act(input @ weight.T + bias)``: :func:`linear` followed by ``cudasteps.bias_act``, in one op.

    ``act`` is one of ``none``, ``relu``, ``gelu``, ``gelu_tanh``, ``silu`` (as ``bias_act``).
    ``bias`` [N] or None, in the dtype of ``input`` or float32 (as ``bias_act``'s; autocast casts
    ``input`` and ``weight`` as for :func:`linear` and leaves an fp32 bias in fp32). On a Hopper
    GPU, for bf16/fp16 with more than 16 rows and output features (output rows a 16-byte
    multiple), the bias and the activation run in the GEMM's epilogue (the ``fused_pingpong`` step
    of :data:`LINEAR_ACT_LADDER`, :func:`run_linear_act_ladder`), applied to the product as
    ``linear`` writes it, so the result is bit for bit ``bias_act(linear(input, weight), bias,
    act)``. Elsewhere, and where autograd records (training keeps the product for the backward,
    and inside a training step the separate pass measured faster than the fused kernel writing
    the product too), it runs ``linear`` (the GEMM, no bias) then ``bias_act`` (the bias and the
    activation in one pass): the same bits either way. Differentiable in all three: the backward
    is ``bias_act_backward`` on the saved product (the activation's derivative and the bias
    gradient in one pass), then linear's two GEMMs.
    """
    if act == "gelu":
        return _linear_act(input, weight, bias)
    return _linear_act(input, weight, bias, act)


def linear_act_linear(
    input: torch.Tensor,
    weight1: torch.Tensor,
    bias1: Optional[torch.Tensor],
    weight2: torch.Tensor,
    bias2: Optional[torch.Tensor] = None,
    act: str = "gelu",
) -> torch.Tensor:
    """An FFN block, ``linear(linear_act(input, weight1, bias1, act), weight2, bias2)``, as one op.

    The values of those two ops (the same kernels forward). One autograd node for both layers, so
    that the GEMM that turns the output's gradient into the hidden activation's (``grad @
    weight2``) and the activation's derivative with the bias gradient are one op,
    :func:`mm_bias_act_backward`, the place for a GEMM with that epilogue (today the same two
    passes the layers' own nodes run: the fused GEMM measured slower). ``bias1`` as
    :func:`linear_act` takes it (the input's dtype or float32), ``bias2`` as :func:`linear`.
    Under autocast input, ``weight1``, ``weight2`` and ``bias2`` are cast as those ops cast them.
    Differentiable in all five tensors. ``cudasteps.nn.MLP`` runs its last hidden layer and its
    output layer through it.
    """
    return _ops.linear_act_linear(input, weight1, bias1, weight2, bias2, act)


def mm_bias_act_backward(
    grad: torch.Tensor, weight: torch.Tensor, x: torch.Tensor, bias: Optional[torch.Tensor], act: str
) -> tuple:
    """``bias_act_backward(grad @ weight, x, bias, act)``: ``(grad_x, grad_bias)``.

    The gradient of ``bias_act``'s input ``x`` (and of its bias) where its output fed a linear of
    ``weight`` [D, N] whose output gradient is ``grad`` [..., D]; ``x`` [..., N] has ``grad``'s
    leading sizes; ``bias`` [N] in ``x``'s dtype or float32, or None (``grad_bias`` is then None).
    It runs ``mm`` then ``bias_act_backward``: the form with the derivative and the bias gradient
    in the GEMM's epilogue (the ``fused`` step of :data:`MM_BIAS_ACT_BACKWARD_LADDER`,
    :func:`run_mm_bias_act_backward_ladder`) measured slower on an H100. Not differentiable (a
    backward: :func:`linear_act_linear`'s).
    """
    return _ops.mm_bias_act_backward(grad, weight, x, bias, act)


def run_mm_bias_act_backward_ladder(
    variant: str, grad: torch.Tensor, weight: torch.Tensor, x: torch.Tensor, bias, act: str = "gelu"
) -> tuple:
    """One step of mm_bias_act_backward's ladder (CUDA): ``(grad_x, grad_bias)``.

    ``two_pass``: ``mm`` then ``bias_act_backward`` (what :func:`mm_bias_act_backward` runs);
    ``fused``: one GEMM, tc:ws_persistent's, whose epilogue applies the derivative to the product
    as ``mm`` writes it (``grad_x`` is the two passes' bit for bit where the GEMM takes mm's
    tiles) and writes the column sums of ``grad_x`` per 32 rows, added up in a fixed order
    (``grad_bias`` sums ``grad_x`` as written, as torch sums the gradient it wrote; within float32
    rounding of the two passes' sums of the unrounded values). It needs a compute capability 9.0
    GPU, bf16/fp16 operands, more than 16 rows, N a multiple of 8 (and more than 16), a contiguous
    ``x``, an output of at least half a wave of 128 x 128 tiles and an aligned bias; elsewhere it
    raises. It measured slower than the two passes on an H100 (both consumer warpgroups stop
    their main loop for an epilogue whose instructions are what it costs).
    """
    return _ops.ladder_mm_bias_act_backward(grad, weight, x, bias, act, variant)


def scaled_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``(scale_a * a) @ (scale_b * b) + bias`` for FP8 ``a`` [M, K] and ``b`` [K, N], as
    ``torch._scaled_mm`` computes it, for any M, N, K and any strides.

    ``a`` and ``b``: ``torch.float8_e4m3fn`` or ``torch.float8_e5m2`` (any pair). ``scale_a``:
    float32, one element (per tensor) or [M, 1] (per row); ``scale_b``: one element or [1, N] (per
    column). ``bias``: [N] in ``out_dtype`` or float32. ``out_dtype``: bfloat16, float16 or
    float32. Products exact, sums in float32, one rounding to ``out_dtype``. Not differentiable
    (as ``torch._scaled_mm``). On a compute capability 9.0 GPU: the FP8 tensor cores (wgmma, TMA,
    warp-specialized and persistent), each k-tile's sums promoted into float32 accumulators; other
    GPUs: the operands widened to float32 on the TF32 tensor cores (which hold every FP8 value
    exactly), then the scales and bias.
    """
    return _ops.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype)


def linear_fp8(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
    *,
    input_amax: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``input @ weight.T + bias`` with input and weight cast to FP8 (e4m3), each with a per-tensor
    scale from its current amax (``448 / amax``: dynamic tensorwise scaling, torchao's default
    float8 recipe), the product on :func:`scaled_mm`, the output in ``out_dtype`` (float32,
    bfloat16 or float16; default ``input``'s dtype).

    ``input`` [..., K] and ``weight`` [N, K]: float32, bfloat16 or float16; ``bias`` [N] of any of
    those. Differentiable: the backward casts the output gradient to e5m2 with its own scale and
    runs ``grad_input`` and ``grad_weight`` on :func:`scaled_mm` too, from the FP8 transposes the
    forward kept (no higher-precision copy of input or weight is saved); gradients come back in
    their tensors' dtypes. Under autocast nothing is cast: the output comes in the autocast dtype
    (``out_dtype``, unless given), input and weight go to FP8 from their own dtypes (a float32
    input quantized once, not rounded to bf16 first), and the bias is added in the output's dtype,
    as ``F.linear`` under autocast adds it. ``cudasteps.nn.Linear(..., fp8=True)`` runs it.

    ``input_amax``: ``input``'s amax (float32, one element, on ``input``'s device) where the op that
    produced ``input`` took it (:func:`linear_act_fp8`'s second output): the input's cast then
    reads it once instead of twice. Trusted as given (a smaller one saturates ``input``'s larger
    values).
    """
    return _ops.linear_fp8(input, weight, bias, out_dtype, input_amax=input_amax)


def linear_act_fp8(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    act: str = "gelu",
    out_dtype: Optional[torch.dtype] = None,
    *,
    input_amax: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(out, amax)``: ``out = act(linear_fp8(input, weight) + bias)`` (``act`` one of
    ``bias_act``'s) and ``amax = out.abs().max()`` (float32, 0-dim), the amax taken in the pass
    that adds the bias and applies the activation. In an FP8 MLP the next layer takes it:
    ``linear_fp8(out, w2, b2, input_amax=amax)`` casts ``out`` in one pass instead of two.
    Differentiable in ``input``, ``weight`` and ``bias`` (not in ``amax``): the backward takes the
    amax of the activation's gradient in the pass that computes it (``bias_act_backward_amax``),
    so its e5m2 cast is one pass too. The same values and gradients as ``linear_fp8(input,
    weight)`` followed by ``bias_act(., bias, act)``, bit for bit. ``bias``: float32 (added in
    float32, as under autocast) or any other dtype of ``linear_fp8`` (cast to the output's).
    ``input_amax`` and autocast as :func:`linear_fp8`. ``cudasteps.nn.MLP(..., fp8=True)`` runs it.
    """
    return _ops.linear_act_fp8(input, weight, bias, act, out_dtype, input_amax=input_amax)


def run_linear_act_ladder(
    variant: str, input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], act: str
) -> tuple:
    """One step of linear_act's ladder (CUDA): ``(out, product)``, ``product = input @ weight.T``.

    ``two_pass``: ``linear`` then ``bias_act`` (what :func:`linear_act` runs where the fused steps
    cannot). ``fused``: the bias and the activation in the epilogue of the Hopper GEMM
    (tc:ws_persistent's kernel: both consumer warpgroups stop their main loop for it), on the fp32
    product before it is rounded, which also writes the product. ``fused_pingpong``: the same in
    tc:ws_pingpong's kernel, where one consumer warpgroup's epilogue runs under the other's main
    loop (what :func:`linear_act` runs where it can). The fused steps need a compute capability 9.0
    GPU, bf16/fp16 operands, more than 16 rows and output features, output rows of a 16-byte
    multiple and a contiguous, pair-aligned bias of the input's dtype or float32, and raise
    otherwise.
    """
    return _ops.ladder_linear_act(input, weight, bias, act, variant)


def scaled_mm_range(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(out, range)``: :func:`scaled_mm`'s output and ``range = [max(0, out.max()),
    min(0, out.min())]`` (float32; NaN where ``out`` holds one), the largest and the smallest value
    written, taken by the Hopper kernel's epilogue as it stores (no pass over ``out``; elsewhere, a
    reduction after). What :func:`cudasteps.fp8.act_cast_fp8` takes its scale from. Not
    differentiable."""
    return _ops.scaled_mm_range(a, b, scale_a, scale_b, bias, out_dtype)


def linear_act_linear_fp8(
    input: torch.Tensor,
    weight1: torch.Tensor,
    bias1: Optional[torch.Tensor],
    weight2: torch.Tensor,
    bias2: Optional[torch.Tensor] = None,
    act: str = "gelu",
    out_dtype: Optional[torch.dtype] = None,
    *,
    input_amax: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """An FP8 FFN block, ``linear_fp8(act(linear_fp8(input, weight1, bias1)), weight2, bias2)``
    (dynamic per-tensor scales, e4m3 forward, e5m2 gradients; ``out_dtype`` the hidden tensor's and
    the output's dtype, default ``input``'s, the autocast dtype under autocast), as one autograd
    node whose hidden tensor and hidden gradient exist only in FP8: the first product's epilogue
    takes the range of its output (:func:`scaled_mm_range`), and one pass applies the activation and
    casts (:func:`cudasteps.fp8.act_cast_fp8`); backward, one pass applies the activation's
    derivative, casts and sums the bias gradient (:func:`cudasteps.fp8.act_grad_cast_fp8`).
    ``bias1`` is added in the first product (one rounding, as ``F.linear`` adds it), and the hidden
    casts' scales are bounds of the amax (within 13% of it for the gradient), so the values differ
    from ``linear_act_fp8`` followed by ``linear_fp8`` within FP8 rounding. What
    ``cudasteps.nn.MLP(..., fp8=True)`` runs for its last hidden layer and its output layer.
    ``input_amax``: the input's amax where its producer took it (:func:`linear_act_fp8`'s second
    output), as :func:`linear_fp8` takes it: the input's cast reads it once."""
    return _ops.linear_act_linear_fp8(
        input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax=input_amax
    )


def run_scaled_mm_ladder(
    variant: str, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> torch.Tensor:
    """One step of :func:`scaled_mm`'s ladder (CUDA), bf16 output, no bias.

    ``widen_tf32``: both FP8 operands widened to float32 (exact), their product on the TF32 tensor
    cores (exact products), then the scales, rounded once: what :func:`scaled_mm` runs where its
    FP8 kernel cannot. ``fp8_ws``: the Hopper FP8 kernel (FP8 wgmmas, TMA, warp specialization,
    each k-tile's sums promoted into fp32 registers), one CTA per 128 x 128 tile;
    ``fp8_multicast``: the same in clusters of two CTAs on vertically adjacent tiles, which share
    their B tile by TMA multicast; ``fp8_ws256``: 256 x 128 tiles (each consumer warpgroup 128 rows
    in two halves, one set of k-tile sums waited for per half). :func:`scaled_mm` runs ``fp8_ws`` on
    Hopper. All three need a compute capability 9.0 GPU and ``b`` float8_e4m3fn, and raise
    otherwise. For sweeps (``SCALED_MM_SWEEP``): ``fp8_ws:st<L>``, L 1-4, ``fp8_ws`` with consumer
    warpgroup 1 started L k-tiles after warpgroup 0, so that their epilogues fall in each other's
    main loops (the same bits as ``fp8_ws``).
    """
    return _ops.ladder_scaled_mm(a, b, scale_a, scale_b, variant)


def run_ladder(variant: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Run one step of a gemm ladder (CUDA, 2-D operands).

    SGEMM steps (``LADDER``, ``CONFIG_VARIANTS``; float32, never TF32): the steps up to
    ``serpentine_fma`` need contiguous operands; ``final`` and ``cfg:*`` take any
    layout (the multistage ``cp*`` configs and the ``_rowfma`` twins are built for row-major
    operands: others are copied into that layout first). Tensor-core steps (``TC_LADDER``, and
    ``tc:cp_async_cfg:<name>``): bfloat16, float16, or float32 computed in TF32 whatever torch's
    switch says (but ``TC_HOPPER_NN_STEPS``: bfloat16, and float16 for ``TC_HOPPER_FP16_STEPS``);
    any layout. For tuning sweeps,
    ``tc:ws_persistent:bn<64|128|256>:bm<128|192>:s<splits>:ts<0|1>`` (any field optional)
    forces the persistent kernel's tile width (128 x 64, bfloat16 and float16 only; 128 x 128;
    128 x 256) and rows (192 x 128 tiles: bfloat16 and float16, 128 wide, no tail split),
    split-K factor (capped at the k-tiles and 16) and
    tail split (``ts1``: the last, partial wave's tiles cut into k ranges, one SM each, wherever
    that makes at least 2 ranges; ``ts0``: never); ``tc:ws_persistent:bt<16|32|64>[:c2|:k2]``
    its skinny tiles for few-row linears (``a @ weight.t()``, bfloat16 and float16: 64 rows of the
    weight by 16-64 tokens, stored transposed; ``c2`` in clusters of two sharing the weight tile;
    ``k2`` in clusters of two on the same tile, each over half its K, the halves added in K order
    in the first CTA's shared memory);
    ``tc:ws_multicast:bn<128|256>:s<splits>`` the same fields for the cluster kernel (no 128 x 64
    or 192 x 128 tiles, no tail split), to compare the two at the same tiles and split. Either
    takes ``pdl0`` (an ordinary launch instead of the programmatic dependent one, to time what
    that buys).
    Few-row steps (``GEMV_LADDER``): bfloat16 or float16, at most ``GEMV_MAX_TOKENS`` rows of
    ``a`` (or columns of ``b``), both operands K-major (``a`` row-major, ``b`` column-major as
    linear's ``weight.t()``; the other way round when ``b`` has the few columns), rows 16-byte
    aligned; the steps of ``GEMV_BF16_ONLY_STEPS`` bfloat16 only. ``gemv:mma:s<splits>:u<2|4>:pdl<0|1>``
    forces the mma step's split, unroll and launch.
    """
    return _ops.ladder_mm(a, b, variant)


# ---- fake kernels: the same checks and messages as csrc/gemm/gemm.h ----


_GEMM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_dtype(t: torch.Tensor, op: str, arg: str) -> None:
    _checks.check(
        t.dtype in _GEMM_DTYPES,
        op,
        f"{arg} must be float32, float64, float16 or bfloat16, got {_checks.dtype_name(t.dtype)} "
        f"(use {_COUNTERPART.get(op, 'torch.mm')} for other dtypes)",
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


@torch.library.register_fake("cudasteps::mm.dtype")
def _mm_dtype_fake(a, b, out_dtype):
    _check_pair(a, b, "mm", "self", "mat2")
    half = a.dtype in (torch.float16, torch.bfloat16)
    _checks.check(
        out_dtype == a.dtype or (out_dtype == torch.float32 and half),
        "mm",
        f"out_dtype must be self's dtype ({_checks.dtype_name(a.dtype)}) or, for bfloat16 or "
        f"float16 operands, Float, got {_checks.dtype_name(out_dtype)}",
    )
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _check_cast_args(op, dtype, **tensors):
    """The arguments of the .dtype overloads as given (gemm.h's check_cast_args);
    their casts then meet the default overload's checks."""
    for name, t in tensors.items():
        if t is not None:
            _check_dtype(t, op, name)
    _checks.check(
        dtype in _GEMM_DTYPES,
        op,
        f"dtype must be float32, float64, float16 or bfloat16, got {_checks.dtype_name(dtype)}",
    )


def _cast_fake(t, dtype):
    return t if t is None or t.dtype == dtype else t.to(dtype)


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


def _check_linear(input, weight, bias, op):
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


@torch.library.register_fake("cudasteps::linear")
def _linear_fake(input, weight, bias=None):
    _check_linear(input, weight, bias, "linear")
    return input.new_empty((*input.shape[:-1], weight.shape[0]))


@torch.library.register_fake("cudasteps::linear.dtype")
def _linear_dtype_fake(input, weight, bias, dtype):
    _check_cast_args("linear", dtype, input=input, weight=weight, bias=bias)
    return _linear_fake(_cast_fake(input, dtype), _cast_fake(weight, dtype), _cast_fake(bias, dtype))


def _check_linear_act(input, weight, bias, act, op):
    _check_linear(input, weight, None, op)
    if bias is not None:
        n = weight.shape[0]
        _checks.same_device(bias, input, op, "bias", "input")
        ok = bias.dim() == 1 and bias.shape[0] == n
        _checks.check(ok, op, f"bias must have shape [{n}], got shape {list(bias.shape)}")
        _checks.check(
            bias.dtype == input.dtype or bias.dtype == torch.float32,
            op,
            f"bias must have the dtype of input ({_checks.dtype_name(input.dtype)}) or Float, "
            f"got {_checks.dtype_name(bias.dtype)}",
        )
    _checks.check(act in _ACTIVATIONS, op, f"act must be one of {', '.join(_ACTIVATIONS)}, got '{act}'")


@torch.library.register_fake("cudasteps::linear_act")
def _linear_act_fake(input, weight, bias=None, act="gelu"):
    _check_linear_act(input, weight, bias, act, "linear_act")
    return input.new_empty((*input.shape[:-1], weight.shape[0]))


@torch.library.register_fake("cudasteps::linear_act.dtype")
def _linear_act_dtype_fake(input, weight, bias, act, dtype):
    _check_cast_args("linear_act", dtype, input=input, weight=weight)
    return _linear_act_fake(_cast_fake(input, dtype), _cast_fake(weight, dtype), bias, act)


@torch.library.register_fake("cudasteps::linear_act_aux")
def _linear_act_aux_fake(input, weight, bias, act):
    _check_linear_act(input, weight, bias, act, "linear_act_aux")
    shape = (*input.shape[:-1], weight.shape[0])
    return input.new_empty(shape), input.new_empty(shape)


@torch.library.register_fake("cudasteps::ladder_linear_act")
def _ladder_linear_act_fake(input, weight, bias, act, variant):
    op = "ladder_linear_act"
    steps = ", ".join(LINEAR_ACT_LADDER)
    _checks.check(variant in LINEAR_ACT_LADDER, op, f"variant must be one of {steps}, got '{variant}'")
    _check_linear_act(input, weight, bias, act, op)
    shape = (*input.shape[:-1], weight.shape[0])
    return input.new_empty(shape), input.new_empty(shape)


@torch.library.register_fake("cudasteps::mm_bias_act_backward")
def _mm_bias_act_backward_fake(grad, weight, x, bias, act):
    return _mm_bias_act_backward_outputs(grad, weight, x, bias, act, "mm_bias_act_backward")


@torch.library.register_fake("cudasteps::ladder_mm_bias_act_backward")
def _ladder_mm_bias_act_backward_fake(grad, weight, x, bias, act, variant):
    op = "ladder_mm_bias_act_backward"
    steps = ", ".join(MM_BIAS_ACT_BACKWARD_LADDER)
    _checks.check(
        variant in MM_BIAS_ACT_BACKWARD_LADDER, op, f"variant must be one of {steps}, got '{variant}'"
    )
    return _mm_bias_act_backward_outputs(grad, weight, x, bias, act, op)


def _mm_bias_act_backward_outputs(grad, weight, x, bias, act, op):
    _checks.check(
        grad.dim() >= 1,
        op,
        f"grad must have at least 1 dimensions, got {grad.dim()}-D with shape {list(grad.shape)}",
    )
    _check_dim(weight, 2, op, "weight")
    _check_dtype(grad, op, "grad")
    _checks.same_dtype(weight, grad, op, "weight", "grad")
    _checks.same_dtype(x, grad, op, "x", "grad")
    _checks.same_device(weight, grad, op, "weight", "grad")
    _checks.same_device(x, grad, op, "x", "grad")
    _checks.check(
        weight.shape[0] == grad.shape[-1],
        op,
        f"weight.size(0) must equal grad.size(-1) ({grad.shape[-1]}), got {weight.shape[0]} "
        f"(shapes {list(grad.shape)} and {list(weight.shape)})",
    )
    x_shape = [*grad.shape[:-1], weight.shape[1]]
    _checks.check(
        list(x.shape) == x_shape,
        op,
        f"x must have shape {x_shape} (grad's leading sizes, then weight.size(1)), got {list(x.shape)}",
    )
    if bias is not None:
        _check_feature_vector(bias, x, op, "bias", "x")
    _checks.check(act in _ACTIVATIONS, op, f"act must be one of {', '.join(_ACTIVATIONS)}, got '{act}'")
    grad_bias = None if bias is None else bias.new_empty(bias.shape)
    return x.new_empty(x.shape), grad_bias


@torch.library.register_fake("cudasteps::linear_act_linear")
def _linear_act_linear_fake(input, weight1, bias1, weight2, bias2=None, act="gelu"):
    op = "linear_act_linear"
    _check_linear_act(input, weight1, bias1, act, op)
    _check_dim(weight2, 2, op, "weight2")
    _checks.same_dtype(weight2, input, op, "weight2", "input")
    _checks.same_device(weight2, input, op, "weight2", "input")
    _checks.check(
        weight2.shape[1] == weight1.shape[0],
        op,
        f"weight2.size(1) must equal weight1.size(0) ({weight1.shape[0]}), got {weight2.shape[1]} "
        f"(shapes {list(weight1.shape)} and {list(weight2.shape)})",
    )
    if bias2 is not None:
        _checks.same_dtype(bias2, input, op, "bias2", "input")
        _checks.same_device(bias2, input, op, "bias2", "input")
        _checks.check(
            bias2.dim() == 1 and bias2.shape[0] == weight2.shape[0],
            op,
            f"bias2 must have shape [{weight2.shape[0]}], got shape {list(bias2.shape)}",
        )
    return input.new_empty((*input.shape[:-1], weight2.shape[0]))


@torch.library.register_fake("cudasteps::linear_act_linear.dtype")
def _linear_act_linear_dtype_fake(input, weight1, bias1, weight2, bias2, act, dtype):
    op = "linear_act_linear"
    _check_cast_args(op, dtype, input=input, weight1=weight1, weight2=weight2, bias2=bias2)
    x, w1, w2, b2 = (_cast_fake(t, dtype) for t in (input, weight1, weight2, bias2))
    return _linear_act_linear_fake(x, w1, bias1, w2, b2, act)


def _check_fp8_bias(bias, weight, input, op, arg):
    """An FP8 linear's bias `arg` for `weight`: 1-D, one per output feature, float, on input's device."""
    _check_dim(bias, 1, op, arg)
    _checks.check(
        bias.shape[0] == weight.shape[0],
        op,
        f"{arg} must have shape [{weight.shape[0]}], got shape {list(bias.shape)}",
    )
    _checks.check(
        bias.dtype in (torch.float32, torch.bfloat16, torch.float16),
        op,
        f"{arg} must be Float or BFloat16 or Half, got {_checks.dtype_name(bias.dtype)}",
    )
    _checks.same_device(bias, input, op, arg, "input")


def _check_linear_fp8(input, weight, bias, out_dtype, op, input_amax=None):
    _checks.check(
        input.dim() >= 1,
        op,
        f"input must have at least 1 dimensions, got {input.dim()}-D with shape {list(input.shape)}",
    )
    _check_dim(weight, 2, op, "weight")
    for t, arg in ((input, "input"), (weight, "weight")):
        _checks.check(
            t.dtype in (torch.float32, torch.bfloat16, torch.float16),
            op,
            f"{arg} must be Float or BFloat16 or Half, got {_checks.dtype_name(t.dtype)}",
        )
    _checks.same_device(weight, input, op, "weight", "input")
    _checks.check(
        weight.shape[1] == input.shape[-1],
        op,
        f"weight.size(1) must equal input.size(-1) ({input.shape[-1]}), got {weight.shape[1]}",
    )
    if bias is not None:
        _check_fp8_bias(bias, weight, input, op, "bias")
    if out_dtype is not None:
        _checks.check(
            out_dtype in (torch.float32, torch.bfloat16, torch.float16),
            op,
            f"out_dtype must be Float or BFloat16 or Half, got {_checks.dtype_name(out_dtype)}",
        )
    if input_amax is not None:
        _check_per_tensor(input_amax, input, op, "input_amax", "input's amax", "input")


@torch.library.register_fake("cudasteps::linear_fp8")
def _linear_fp8_fake(input, weight, bias=None, out_dtype=None, *, input_amax=None):
    _check_linear_fp8(input, weight, bias, out_dtype, "linear_fp8", input_amax)
    return input.new_empty((*input.shape[:-1], weight.shape[0]), dtype=out_dtype or input.dtype)


@torch.library.register_fake("cudasteps::linear_act_fp8")
def _linear_act_fp8_fake(input, weight, bias=None, act="gelu", out_dtype=None, *, input_amax=None):
    op = "linear_act_fp8"
    _check_linear_fp8(input, weight, bias, out_dtype, op, input_amax)
    _checks.check(act in _ACTIVATIONS, op, f"act must be one of {', '.join(_ACTIVATIONS)}, got '{act}'")
    out = input.new_empty((*input.shape[:-1], weight.shape[0]), dtype=out_dtype or input.dtype)
    return out, input.new_empty((), dtype=torch.float32)


@torch.library.register_fake("cudasteps::linear_act_linear_fp8")
def _linear_act_linear_fp8_fake(
    input, weight1, bias1, weight2, bias2=None, act="gelu", out_dtype=None, *, input_amax=None
):
    op = "linear_act_linear_fp8"
    _check_linear_fp8(input, weight1, bias1, out_dtype, op, input_amax)
    _check_dim(weight2, 2, op, "weight2")
    _checks.check(
        weight2.dtype in (torch.float32, torch.bfloat16, torch.float16),
        op,
        f"weight2 must be Float or BFloat16 or Half, got {_checks.dtype_name(weight2.dtype)}",
    )
    _checks.same_device(weight2, input, op, "weight2", "input")
    _checks.check(
        weight2.shape[1] == weight1.shape[0],
        op,
        f"weight2.size(1) must equal weight1.size(0) ({weight1.shape[0]}), got {weight2.shape[1]}",
    )
    if bias2 is not None:
        _check_fp8_bias(bias2, weight2, input, op, "bias2")
    _checks.check(act in _ACTIVATIONS, op, f"act must be one of {', '.join(_ACTIVATIONS)}, got '{act}'")
    return input.new_empty((*input.shape[:-1], weight2.shape[0]), dtype=out_dtype or input.dtype)


@torch.library.register_fake("cudasteps::linear_fp8_aux")
def _linear_fp8_aux_fake(input, weight, bias, out_dtype, input_amax):
    _check_linear_fp8(input, weight, bias, out_dtype, "linear_fp8_aux", input_amax)
    k, n = weight.shape[1], weight.shape[0]
    m = input.numel() // k if k else 0
    out = input.new_empty((*input.shape[:-1], n), dtype=out_dtype or input.dtype)
    x8_t = input.new_empty((k, m), dtype=torch.float8_e4m3fn)
    w8_t = weight.new_empty((k, n), dtype=torch.float8_e4m3fn)
    scale = input.new_empty((), dtype=torch.float32)
    return out, x8_t, w8_t, scale, scale.clone()


_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
_SCALED_MM_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _check_scale(scale, a, arg, count, dim, op="scaled_mm"):
    _checks.check(
        scale.dtype == torch.float32, op, f"{arg} must be float32, got {_checks.dtype_name(scale.dtype)}"
    )
    _checks.same_device(scale, a, op, arg, "a")
    per_tensor = scale.numel() == 1
    per_row = scale.dim() == 2 and scale.shape[dim] == count and scale.shape[1 - dim] == 1
    want = f"[M, 1] = [{count}, 1]" if dim == 0 else f"[1, N] = [1, {count}]"
    _checks.check(
        per_tensor or per_row,
        op,
        f"{arg} must have one element (a per-tensor scale) or shape {want}, got shape {list(scale.shape)}",
    )


def _scaled_mm_out_fake(a, b, scale_a, scale_b, bias, out_dtype, op):
    """scaled_mm's checks (named as `op`) and its output."""
    _check_dim(a, 2, op, "a")
    _check_dim(b, 2, op, "b")
    for t, arg in ((a, "a"), (b, "b")):
        _checks.check(
            t.dtype in _FP8_DTYPES,
            op,
            f"{arg} must be Float8_e4m3fn or Float8_e5m2, got {_checks.dtype_name(t.dtype)} "
            "(cast with tensor.to(torch.float8_e4m3fn))",
        )
    _checks.same_device(b, a, op, "b", "a")
    _checks.check(
        b.shape[0] == a.shape[1],
        op,
        f"b.size(0) must equal a.size(1) ({a.shape[1]}), got {b.shape[0]} "
        f"(shapes {list(a.shape)} and {list(b.shape)})",
    )
    out = torch.bfloat16 if out_dtype is None else out_dtype
    _checks.check(
        out in _SCALED_MM_OUT_DTYPES,
        op,
        f"out_dtype must be BFloat16, Half or Float, got {_checks.dtype_name(out)}",
    )
    _check_scale(scale_a, a, "scale_a", a.shape[0], 0, op)
    _check_scale(scale_b, a, "scale_b", b.shape[1], 1, op)
    if bias is not None:
        _check_dim(bias, 1, op, "bias")
        _checks.check(
            bias.shape[0] == b.shape[1],
            op,
            f"bias must have shape [{b.shape[1]}], got shape {list(bias.shape)}",
        )
        _checks.check(
            bias.dtype in (out, torch.float32),
            op,
            f"bias must have the dtype of out_dtype ({_checks.dtype_name(out)}) or Float, "
            f"got {_checks.dtype_name(bias.dtype)}",
        )
        _checks.same_device(bias, a, op, "bias", "a")
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out)


@torch.library.register_fake("cudasteps::scaled_mm")
def _scaled_mm_fake(a, b, scale_a, scale_b, bias=None, out_dtype=None):
    return _scaled_mm_out_fake(a, b, scale_a, scale_b, bias, out_dtype, "scaled_mm")


@torch.library.register_fake("cudasteps::scaled_mm_range")
def _scaled_mm_range_fake(a, b, scale_a, scale_b, bias=None, out_dtype=None):
    out = _scaled_mm_out_fake(a, b, scale_a, scale_b, bias, out_dtype, "scaled_mm_range")
    return out, a.new_empty((2,), dtype=torch.float32)


@torch.library.register_fake("cudasteps::ladder_scaled_mm")
def _ladder_scaled_mm_fake(a, b, scale_a, scale_b, variant):
    steps = ", ".join(SCALED_MM_LADDER)
    _checks.check(
        variant in SCALED_MM_LADDER or variant in SCALED_MM_SWEEP,
        "ladder_scaled_mm",
        f"variant must be one of {steps} (or fp8_ws:st<1-4>), got '{variant}'",
    )
    # The operands' checks are scaled_mm's (and say so).
    return _scaled_mm_fake(a, b, scale_a, scale_b)


@torch.library.register_fake("cudasteps::ladder_mm")
def _ladder_mm_fake(a, b, variant):
    _check_pair(a, b, "ladder_mm", "self", "mat2")
    _checks.check(
        variant in LADDER
        or variant.startswith("cfg:")
        or variant.startswith("tc:")
        or variant.startswith("gemv:"),
        "ladder_mm",
        f"variant must be one of {', '.join(LADDER + TC_LADDER + GEMV_LADDER)}, "
        f"cfg:<name>[:s<splits>], tc:cp_async_cfg:<name>, gemv:mma:s<splits>:u<2|4>, got '{variant}'",
    )
    return a.new_empty((a.shape[0], b.shape[1]))
