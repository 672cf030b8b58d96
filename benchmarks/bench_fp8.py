"""fp8 family: cast_fp8 (x to FP8 with a scale, its FP8 transpose and max |x|, in one pass) and
cast_fp8_dynamic (the scale from x's own amax) against what a user writes in torch (eager, and the
same under torch.compile): the amax, the scale, the scaled and clamped cast, and the transpose as
separate ops; and an FP8 MLP's hidden activation (bias, GELU and the cast of the result), with
the amax taken where it is produced (bias_act_amax) or by a pass of its own.

GB/s counts the bytes one pass must move: x read once, the FP8 output and its transpose written
(one byte each), so the percentage is the fraction of the copy bandwidth. The casts are timed as
CUDA-graph replays (the GPU's time, as a training step meets a cast queued behind its GEMMs): an
eager call of the smaller shapes is bound by the host's launch path, not by the kernel.
"""

import cudasteps
import torch
import torch.nn.functional as F
from cudasteps.fp8 import FP8_MAX


def _torch_cast(x, scale):
    """What torch code runs for the same outputs (torchao's float8 casts do the same steps)."""
    amax = x.abs().amax().float()
    out = (x.float() * scale).clamp(-FP8_MAX[torch.float8_e4m3fn], FP8_MAX[torch.float8_e4m3fn])
    out = out.to(torch.float8_e4m3fn)
    return out, out.t().contiguous(), amax


def _torch_dynamic_cast(x):
    """torchao's tensorwise dynamic recipe in torch ops: the amax, the scale from it, the cast and
    the transpose, and the dequantization scale scaled_mm takes."""
    e4m3 = torch.float8_e4m3fn
    amax = x.abs().amax().float()
    scale = torch.where(amax > 0, FP8_MAX[e4m3] / amax, torch.ones_like(amax))
    out = (x.float() * scale).clamp(-FP8_MAX[e4m3], FP8_MAX[e4m3]).to(e4m3)
    return out, out.t().contiguous(), scale.reciprocal(), amax


def _dynamic_case(bench, shape, dtype):
    """cast_fp8_dynamic: the scale from x's own amax, so x is read twice (the amax, then the cast):
    GB/s counts both reads and both FP8 outputs."""
    rows, cols = shape

    def make(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        return (torch.randn(rows, cols, generator=g, device=bench.device).to(dtype),)

    elem = torch.tensor([], dtype=dtype).element_size()
    moved = rows * cols * (2 * elem + 2)
    impls = [
        ("torch", _torch_dynamic_cast),
        ("cudasteps", lambda x: cudasteps.cast_fp8_dynamic(x, torch.float8_e4m3fn, True)),
    ]
    if bench.is_cuda:
        impls.insert(1, ("torch.compile", torch.compile(_torch_dynamic_cast)))
    for impl, ms in bench.time_many_graphed(impls, bench.rotation(make, rows * cols * elem)).items():
        bench.record(
            op="cast_fp8_dynamic",
            case=f"{rows}x{cols} {str(dtype).replace('torch.', '')} -> e4m3 + transpose, scale from amax",
            impl=impl,
            dtype=dtype,
            shape=[rows, cols],
            ms=ms,
            bytes=moved,
        )


def _case(bench, shape, dtype):
    rows, cols = shape

    def make(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        x = torch.randn(rows, cols, generator=g, device=bench.device).to(dtype)
        return (x, torch.tensor(16.0, device=bench.device))

    elem = torch.tensor([], dtype=dtype).element_size()
    moved = rows * cols * (elem + 2)
    inputs = bench.rotation(make, moved)
    impls = [
        ("torch", _torch_cast),
        ("cudasteps", lambda x, s: cudasteps.cast_fp8(x, s, torch.float8_e4m3fn, True)),
    ]
    if bench.is_cuda:
        impls.insert(1, ("torch.compile", torch.compile(_torch_cast)))
    for impl, ms in bench.time_many_graphed(impls, inputs).items():
        bench.record(
            op="cast_fp8",
            case=f"{rows}x{cols} {str(dtype).replace('torch.', '')} -> e4m3 + transpose + amax",
            impl=impl,
            dtype=dtype,
            shape=[rows, cols],
            ms=ms,
            bytes=moved,
        )


def _ladder(bench, shape, dtype):
    """The cast's ladder (cudasteps.fp8.LADDER) on one case: what each kernel form buys."""
    rows, cols = shape
    elem = torch.tensor([], dtype=dtype).element_size()
    moved = rows * cols * (elem + 2)

    def make(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        x = torch.randn(rows, cols, generator=g, device=bench.device).to(dtype)
        return (x, torch.tensor(16.0, device=bench.device))

    inputs = bench.rotation(make, moved)
    steps = [
        (f"ladder:{v}", lambda x, s, v=v: cudasteps.ladder.run("fp8", v, x, s))
        for v in cudasteps.ladder.variants("fp8")
    ]
    for impl, ms in bench.time_many_graphed(steps, inputs).items():
        bench.record(
            op="cast_fp8",
            case=f"{rows}x{cols} {str(dtype).replace('torch.', '')} -> e4m3 + transpose + amax",
            impl=impl,
            dtype=dtype,
            shape=[rows, cols],
            ms=ms,
            bytes=moved,
        )


def _torch_hidden(h_pre, bias):
    """An FP8 MLP's hidden activation in torch ops: bias and GELU, then the dynamic cast of the
    result (what the next FP8 linear reads)."""
    h = F.gelu(h_pre + bias.to(h_pre.dtype))
    return (h, *_torch_dynamic_cast(h))


def _hidden_case(bench, shape):
    """The hidden activation of an FP8 MLP (cudasteps.nn.MLP(fp8=True)): h = gelu(h_pre + b) (the
    autograd output, bf16) and h's FP8 cast with its transpose for the next layer. `two_pass`:
    bias_act, then cast_fp8_dynamic (its amax pass reads h again: what the MLP ran before
    linear_act_fp8); `cudasteps`: bias_act_amax (the amax taken as h is written), then
    cast_fp8_dynamic with that amax (linear_act_fp8 and the next linear_fp8's input_amax). GB/s
    counts h_pre read, h written, h read and its two FP8 copies written: 8 bytes per element."""
    rows, cols = shape

    def make(seed):
        g = torch.Generator(device=bench.device).manual_seed(seed)
        h_pre = (torch.randn(rows, cols, generator=g, device=bench.device) * 2).to(torch.bfloat16)
        bias = torch.randn(cols, generator=g, device=bench.device)
        # act_cast's input: the product with its bias, and the range its GEMM takes as it stores.
        z = (h_pre.float() + bias).to(torch.bfloat16)
        z_range = torch.stack([z.float().max().clamp_min(0), z.float().min().clamp_max(0)])
        return (h_pre, bias, z, z_range)

    e4m3 = torch.float8_e4m3fn

    def torch_hidden(h_pre, bias, z, z_range):
        return _torch_hidden(h_pre, bias)

    def two_pass(h_pre, bias, z, z_range):
        h = cudasteps.bias_act(h_pre, bias, "gelu")
        return (h, *cudasteps.cast_fp8_dynamic(h, e4m3, True))

    def fused_amax(h_pre, bias, z, z_range):
        h, amax = cudasteps.bias_act_amax(h_pre, bias, "gelu")
        return (h, *cudasteps.cast_fp8_dynamic(h, e4m3, True, amax))

    def act_cast(h_pre, bias, z, z_range):
        return cudasteps.fp8.act_cast_fp8(z, z_range, "gelu")

    # The ladder: two_pass, amax_fused, then act_cast (what linear_act_linear_fp8 runs, timed again
    # as the ladder's step): GB/s counts what each form moves (act_cast: z read, the two FP8
    # copies written, 4 bytes per element; no bf16 h).
    impls = [
        ("torch", torch_hidden, 8),
        ("cudasteps", act_cast, 4),
        ("ladder:two_pass", two_pass, 8),
        ("ladder:amax_fused", fused_amax, 8),
        ("ladder:act_cast", act_cast, 4),
    ]
    if bench.is_cuda:
        impls.insert(1, ("torch.compile", torch.compile(torch_hidden), 8))
    per_element = {impl: b for impl, _, b in impls}
    timed = bench.time_many([(impl, f) for impl, f, _ in impls], bench.rotation(make, rows * cols * 4))
    for impl, ms in timed.items():
        bench.record(
            op="fp8_hidden",
            case=f"{rows}x{cols} bfloat16: gelu(x + b), then e4m3 + transpose, scale from amax",
            impl=impl,
            dtype=torch.bfloat16,
            shape=[rows, cols],
            ms=ms,
            bytes=rows * cols * per_element[impl],
        )


def run(bench):
    if not bench.is_cuda:
        _case(bench, (512, 768), torch.bfloat16)
        _dynamic_case(bench, (512, 768), torch.bfloat16)
        _hidden_case(bench, (512, 768))
        return
    shapes = [(8192, 8192), (16384, 2048), (8192, 2048)] if not bench.quick else [(8192, 8192)]
    for shape in shapes:
        _case(bench, shape, torch.bfloat16)
    _case(bench, (8192, 8192), torch.float32)
    for shape, dtype in (((8192, 8192), torch.bfloat16), ((8192, 2048), torch.float32)):
        _dynamic_case(bench, shape, dtype)
    _ladder(bench, (8192, 8192), torch.bfloat16)
    _hidden_case(bench, (8192, 8192))
    bench.section(
        "fp8 (cast, transpose, amax)",
        "`cudasteps.cast_fp8(x, scale, float8_e4m3fn, transpose=True)`: the FP8 cast of x (scaled, "
        "saturated), its FP8 transpose and max |x| in one pass, against torch's separate ops "
        "(`x.abs().amax()`, `(x.float() * s).clamp(...).to(float8_e4m3fn)`, `.t().contiguous()`), "
        "eager and under torch.compile. GB/s counts x read once and both FP8 outputs written once. "
        "The cast_fp8 and cast_fp8_dynamic rows (and the ladder's) are timed as CUDA-graph "
        "replays over inputs that rotate through more than twice the L2, every impl the same "
        "way: the GPU's time, as a training step meets a cast queued behind its GEMMs. Eager "
        "calls of the smaller shapes were bound by the host's launch path (H100 machine, 8192 x "
        "2048 bf16: about 31 us of host time a call against a 25 us kernel), so their rows "
        "measured the host, not the kernel. cudasteps' cast takes its amax in the same launch "
        "(the grid's last block folds the blocks' maxima): no amax word to zero first. "
        "cudasteps' kernel on these shapes is `tile128` (128 x 128 tiles, four 16-element segments "
        "per thread in flight, the transpose read from shared memory as words and turned by byte "
        "permutes, each warp's transposed store filling four whole 128-byte lines of the "
        "transpose). The ladder rows: `tile32` "
        "(32 x 32 tiles, one element per thread and access, byte stores), `vec16` (64 x 64 tiles, "
        "16-byte loads and stores of both outputs), `vec16_prefetch` (the next tile's loads issued "
        "before this one is cast; measured no faster), `tile128`. "
        "`cast_fp8_dynamic` rows: the scale taken from x's own amax (dynamic tensorwise scaling, "
        "torchao's default recipe and linear_fp8's), so x is read twice; GB/s counts both reads. "
        "torch: amax, scale, cast, transpose and the reciprocal as separate ops; cudasteps: an "
        "amax pass whose last block writes the scales, then the cast. "
        "`fp8_hidden` rows: the hidden activation of an FP8 MLP, h = gelu(h_pre + b) in bf16 (the "
        "autograd output) and h's dynamic FP8 cast with its transpose (the next layer's input); "
        "`ladder:two_pass` is bias_act then cast_fp8_dynamic (h read twice more), "
        "`ladder:amax_fused` bias_act_amax (the amax taken as h is written) then "
        "cast_fp8_dynamic with that amax (what linear_act_fp8 and the next linear_fp8 run); GB/s "
        "counts 8 bytes per element (h_pre read, h written and read once, two FP8 copies "
        "written). `ladder:act_cast` and `cudasteps`: act_cast_fp8 (what linear_act_linear_fp8 "
        "runs) on z = h_pre + b as its GEMM writes it (bias added there) with the range that GEMM "
        "takes as it stores (given here), one pass that writes no bf16 h (the FP8 MLP reads only "
        "the FP8 copies): 4 bytes per element.",
    )
