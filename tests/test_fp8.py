"""Tests for cudasteps.cast_fp8 (csrc/fp8): x cast to FP8 with a scale (round to nearest even,
saturated), its FP8 transpose, and max |x|, in one pass.

The reference is torch's own float32 arithmetic: x * scale, clamped to the format's largest finite
value, cast with torch's FP8 conversion (round to nearest even). Every output is compared bit for
bit; amax exactly.
"""

import cudasteps
import pytest
import torch
from _helpers import DEVICES, HAS_CUDA, requires_cuda
from cudasteps.fp8 import FP8_MAX

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
SOURCES = [torch.float32, torch.bfloat16, torch.float16]


def reference(x, scale, dtype):
    xs = x.float().cpu() * scale.float().cpu().reshape(())
    out = xs.clamp(-FP8_MAX[dtype], FP8_MAX[dtype]).to(dtype)
    amax = x.float().cpu().abs().amax() if x.numel() else torch.zeros(())
    return out, amax


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


def values(shape, dtype, device, seed):
    """Random values over many binades, some past the FP8 range once scaled."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-12, 12, shape, generator=g).float())
    return x.to(dtype).to(device)


# Odd sizes (no multiple of the 32 x 32 tile), 1, rows > cols and the reverse, 3-D, empty; then
# shapes of the 16-byte form (rows and columns multiples of 16): one segment, part of a 64 x 64
# tile, tiles cut at both edges, 3-D.
SHAPES = [(1,), (7,), (1, 1), (3, 5), (33, 65), (100, 31), (17, 1000), (2, 45, 70), (0, 8), (8, 0)]
SHAPES += [(16, 16), (64, 48), (80, 144), (3, 16, 32), (272, 1040)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("src", SOURCES, ids=["fp32", "bf16", "fp16"])
def test_matches_reference_bitwise(device, dtype, src):
    for i, shape in enumerate(SHAPES):
        x = values(shape, src, device, seed=i)
        for scale_value in (1.0, 64.0, 2.0**-7):
            scale = torch.tensor(scale_value, device=device)
            want, want_amax = reference(x, scale, dtype)
            for transpose in (False, True):
                out, out_t, amax = cudasteps.cast_fp8(x, scale, dtype, transpose)
                assert out.dtype == dtype and out.device == x.device
                assert same_bits(out, want), (shape, src, dtype, scale_value)
                assert amax.dtype == torch.float32 and amax.shape == ()
                assert torch.equal(amax.cpu(), want_amax), (shape, src, dtype)
                if transpose:
                    cols = shape[-1]
                    rows = x.numel() // cols if cols else 0
                    assert out_t.is_contiguous()
                    assert same_bits(out_t, want.reshape(rows, cols).t()), (shape, src, dtype)
                else:
                    assert out_t is None


@pytest.mark.parametrize("device", DEVICES)
def test_saturation_nan_and_views(device):
    x = torch.tensor([[1e6, -1e6, 0.5, float("nan")], [3.0, -0.0, 1e-9, -2.0]], device=device)
    out, out_t, amax = cudasteps.cast_fp8(x, torch.ones(1, device=device), torch.float8_e4m3fn, True)
    got = out.float().cpu()
    assert got[0, 0] == 448 and got[0, 1] == -448  # saturated, not NaN
    assert torch.isnan(got[0, 3]) and torch.isnan(amax.cpu())  # NaN passes through, and wins amax
    assert same_bits(out_t, out.t())
    # A transposed, sliced input: the same values as its contiguous copy.
    base = values((40, 70), torch.bfloat16, device, seed=3)
    view = base.t()[5:50]
    out, out_t, amax = cudasteps.cast_fp8(view, torch.tensor(4.0, device=device), torch.float8_e5m2, True)
    want, want_amax = reference(view, torch.tensor(4.0), torch.float8_e5m2)
    assert same_bits(out, want) and same_bits(out_t, want.t()) and torch.equal(amax.cpu(), want_amax)
    # A contiguous view 2 bytes into its storage: a shape of the 16-byte form, x not 16-byte aligned
    # (the one-element form runs it).
    shifted = values((16 * 32 + 1,), torch.bfloat16, device, seed=4)[1:].view(16, 32)
    two = torch.tensor(2.0, device=device)
    out, out_t, amax = cudasteps.cast_fp8(shifted, two, torch.float8_e4m3fn, True)
    want, want_amax = reference(shifted, torch.tensor(2.0), torch.float8_e4m3fn)
    assert same_bits(out, want) and same_bits(out_t, want.t()) and torch.equal(amax.cpu(), want_amax)


@pytest.mark.parametrize("device", DEVICES)
def test_feeds_scaled_mm(device):
    """The cast and its transpose are the operands of an FP8 product: scaled_mm of them, with the
    inverse scales, approximates the bf16 product of the inputs."""
    x = torch.randn(64, 96, device=device).bfloat16()
    w = torch.randn(48, 96, device=device).bfloat16()
    sx = (FP8_MAX[torch.float8_e4m3fn] / x.float().abs().amax()).reshape(1)
    sw = (FP8_MAX[torch.float8_e4m3fn] / w.float().abs().amax()).reshape(1)
    x8, _, _ = cudasteps.cast_fp8(x, sx, torch.float8_e4m3fn)
    w8, w8_t, _ = cudasteps.cast_fp8(w, sw, torch.float8_e4m3fn, transpose=True)
    out = cudasteps.scaled_mm(x8, w8_t, sx.reciprocal(), sw.reciprocal(), out_dtype=torch.float32)
    ref = x.double() @ w.double().t()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 0.08  # e4m3: 3 mantissa bits
    # The transpose holds the same values: the product of its view equals that of w8.t().
    again = cudasteps.scaled_mm(x8, w8.t(), sx.reciprocal(), sw.reciprocal(), None, torch.float32)
    assert torch.equal(out, again)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.randn(4, 6, device=device)
    one = torch.ones((), device=device)
    op = "cudasteps.cast_fp8"
    cases = [
        ((x.double(), one, torch.float8_e4m3fn), rf"{op}: x must be Float or BFloat16 or Half, got Double"),
        ((x[0, 0], one, torch.float8_e4m3fn), rf"{op}: x must have at least 1 dimensions, got 0-D"),
        ((x, one.half(), torch.float8_e4m3fn), rf"{op}: scale must be float32, got Half"),
        ((x, torch.ones(2, device=device), torch.float8_e4m3fn), rf"{op}: scale must have one element"),
        ((x, one, torch.bfloat16), rf"{op}: dtype must be Float8_e4m3fn or Float8_e5m2, got BFloat16"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8(*args)
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8(*meta)
    if device == "cuda":
        with pytest.raises(RuntimeError, match=rf"{op}: scale must be on x's device \(cuda:0\), got cpu"):
            torch.ops.cudasteps.cast_fp8(x, one.cpu(), torch.float8_e4m3fn)
    with pytest.raises(RuntimeError, match=rf"{op}: x requires grad, but cast_fp8 is not differentiable"):
        cudasteps.cast_fp8(x.clone().requires_grad_(), one)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_and_compile(device):
    x = torch.randn(33, 40, device=device).bfloat16()
    scale = torch.tensor(8.0, device=device)
    for args in [(x, scale, torch.float8_e4m3fn, True), (x, scale, torch.float8_e5m2, False)]:
        torch.library.opcheck(torch.ops.cudasteps.cast_fp8.default, args)

    def f(x, scale):
        out, out_t, amax = cudasteps.cast_fp8(x * 2, scale, torch.float8_e4m3fn, True)
        return out.float().sum(), out_t, amax

    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    got, want = compiled(x, scale), f(x, scale)
    assert torch.equal(got[0], want[0]) and same_bits(got[1], want[1]) and torch.equal(got[2], want[2])


# ---- the ladder (ladder_cast_fp8): every kernel form by name ----------------------------------

# (8208, 2064): 129 x 33 tiles of 64 x 64, cut at both edges, several per block on any GPU (the
# vector forms launch 8 blocks per SM), so vec16_prefetch's loads of a block's next tile run.
LADDER_SHAPES = [(272, 1040), (8208, 2064)]


@requires_cuda
@pytest.mark.parametrize("variant", cudasteps.ladder.variants("fp8"))
@pytest.mark.parametrize("src", SOURCES, ids=["fp32", "bf16", "fp16"])
def test_ladder_steps_match_reference(variant, src):
    shapes = LADDER_SHAPES + ([(33, 65), (100, 31)] if variant == "tile32" else [])
    for i, shape in enumerate(shapes):
        x = values(shape, src, "cuda", seed=100 + i)
        for dtype, scale_value in ((torch.float8_e4m3fn, 64.0), (torch.float8_e5m2, 2.0**-7)):
            scale = torch.tensor(scale_value, device="cuda")
            want, want_amax = reference(x, scale, dtype)
            out, out_t, amax = cudasteps.ladder.run("fp8", variant, x, scale, dtype, True)
            assert same_bits(out, want), (variant, shape, src, dtype)
            assert same_bits(out_t, want.t()), (variant, shape, src, dtype)
            assert torch.equal(amax.cpu(), want_amax), (variant, shape, src, dtype)
            plain = cudasteps.cast_fp8(x, scale, dtype, False)
            assert same_bits(plain[0], out) and plain[1] is None and torch.equal(plain[2], amax)


@requires_cuda
@pytest.mark.parametrize("variant", cudasteps.ladder.variants("fp8"))
def test_amax_from_the_grid_last_block(variant):
    """The amax is folded by the cast's last block from every block's partial, with no word zeroed
    before the launch: over a grid of many blocks, the largest |x| planted in a different tile (and
    with either sign) on each call, calls back to back with the full sum and the dynamic cast
    between them (both take the same partials and ticket of the stream), and in a CUDA graph
    replayed with new values (the ticket must be back at 0 after every launch)."""
    e4m3 = torch.float8_e4m3fn
    scale = torch.tensor(2.0**-4, device="cuda")
    x = values((1040, 2064), torch.bfloat16, "cuda", seed=31)
    for at, big in (((0, 0), 1e5), ((1039, 2063), -2e5), ((517, 1029), 3e5), ((3, 2050), -4e5)):
        y = x.clone()
        y[at] = big  # rounded to bf16: the reference reads it back from y
        want, want_amax = reference(y, scale, e4m3)
        assert want_amax.item() == abs(y[at].item())
        out, out_t, amax = cudasteps.ladder.run("fp8", variant, y, scale, e4m3, True)
        assert torch.equal(amax.cpu(), want_amax), (variant, at)
        assert same_bits(out, want) and same_bits(out_t, want.t()), (variant, at)
        assert torch.equal(cudasteps.cast_fp8_dynamic(y, e4m3, True)[3].cpu(), want_amax)
        total, exact = cudasteps.sum(y.float()), y.double().sum()
        assert abs(total.item() - exact.item()) <= 1e-5 * y.double().abs().sum().item()
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cudasteps.ladder.run("fp8", variant, static, scale, e4m3, True)  # warm up on this stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, out_t, amax = cudasteps.ladder.run("fp8", variant, static, scale, e4m3, True)
    for seed in (32, 33):
        static.copy_(values((1040, 2064), torch.bfloat16, "cuda", seed=seed))
        graph.replay()
        want, want_amax = reference(static, scale, e4m3)
        assert same_bits(out, want) and same_bits(out_t, want.t())
        assert torch.equal(amax.cpu(), want_amax), (variant, seed)


def test_ladder_lists_the_forms():
    assert cudasteps.ladder.variants("fp8") == ("tile32", "vec16", "vec16_prefetch", "tile128")


@pytest.mark.parametrize("device", [d for d in ("cuda", "meta") if d == "meta" or HAS_CUDA])
def test_ladder_errors(device):
    x = torch.randn(32, 48, device=device)
    one = torch.ones((), device=device)
    op = "cudasteps.ladder_cast_fp8"
    steps = "tile32, vec16, vec16_prefetch, tile128"
    with pytest.raises(RuntimeError, match=rf"{op}: variant must be one of {steps}, got 'fast'"):
        torch.ops.cudasteps.ladder_cast_fp8(x, one, torch.float8_e4m3fn, True, "fast")
    with pytest.raises(RuntimeError, match=rf"{op}: scale must be float32, got Half"):
        torch.ops.cudasteps.ladder_cast_fp8(x, one.half(), torch.float8_e4m3fn, True, "vec16")
    if device == "cuda":
        odd = torch.randn(33, 48, device=device)
        with pytest.raises(RuntimeError, match=rf"{op}: the 16-byte forms need x's rows and columns"):
            torch.ops.cudasteps.ladder_cast_fp8(odd, one, torch.float8_e4m3fn, True, "vec16_prefetch")
        args = (x.bfloat16(), one, torch.float8_e4m3fn, True, "vec16")
        torch.library.opcheck(torch.ops.cudasteps.ladder_cast_fp8.default, args)


# ---- cast_fp8_dynamic: the scale from x's own amax ---------------------------------------------


def dynamic_reference(x, dtype):
    """fp8.h's recipe in torch's float32 ops: scale = max / amax, a true division (Python's
    `448 / amax` multiplies by the reciprocal), 1 where amax is 0 or NaN."""
    amax = x.float().cpu().abs().amax() if x.numel() else torch.zeros(())
    scale = torch.where(amax > 0, torch.full((), FP8_MAX[dtype]).div(amax), torch.ones(()))
    out, _ = reference(x, scale, dtype)
    return out, scale.reciprocal(), amax


# Beside SHAPES: sizes whose amax pass runs many blocks (its last block folds their partials), a
# size with a tail past the 16-byte loads, and 16 x 4096 x 32 (the pass's unrolled loop and its
# remainder both run).
DYNAMIC_SHAPES = SHAPES + [(1000, 3000), (4099, 7), (16, 4096, 32)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("src", SOURCES, ids=["fp32", "bf16", "fp16"])
def test_dynamic_matches_recipe_bitwise(device, dtype, src):
    for i, shape in enumerate(DYNAMIC_SHAPES):
        x = values(shape, src, device, seed=200 + i)
        want, want_inv, want_amax = dynamic_reference(x, dtype)
        for transpose in (False, True):
            out, out_t, scale_inv, amax = cudasteps.cast_fp8_dynamic(x, dtype, transpose)
            assert same_bits(out, want), (shape, src, dtype)
            assert scale_inv.dtype == torch.float32 and scale_inv.shape == () and amax.shape == ()
            assert torch.equal(scale_inv.cpu(), want_inv), (shape, src, dtype)
            assert torch.equal(amax.cpu(), want_amax), (shape, src, dtype)
            if transpose:
                cols = shape[-1]
                rows = x.numel() // cols if cols else 0
                assert same_bits(out_t, want.reshape(rows, cols).t()), (shape, src, dtype)
            else:
                assert out_t is None


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_special_values_and_views(device):
    e4m3 = torch.float8_e4m3fn
    # All zero: scale 1. A NaN: scale 1, amax NaN. An infinity: scale 0, scale_inv inf.
    nan, inf = float("nan"), float("inf")
    for fill, inv, amax in ((0.0, 1.0, 0.0), (nan, 1.0, nan), (inf, inf, inf)):
        x = torch.zeros(64, 48, device=device)
        x[5, 7] = fill
        _, _, scale_inv, got_amax = cudasteps.cast_fp8_dynamic(x, e4m3, True)
        assert torch.equal(scale_inv.cpu(), torch.tensor(inv)), fill
        assert torch.allclose(got_amax.cpu(), torch.tensor(amax), equal_nan=True), fill
    # A view whose data is not 16-byte aligned (the amax pass's element-wise path) and a transposed,
    # non-contiguous view (copied first): the same as their contiguous copies.
    base = values((4097,), torch.bfloat16, device, seed=9)
    for view in (base[1:].view(64, 64), values((48, 80), torch.float32, device, seed=10).t()):
        got = cudasteps.cast_fp8_dynamic(view, e4m3, True)
        want = cudasteps.cast_fp8_dynamic(view.contiguous(), e4m3, True)
        assert same_bits(got[0], want[0]) and same_bits(got[1], want[1])
        assert torch.equal(got[2], want[2]) and torch.equal(got[3], want[3])
        assert torch.equal(got[2].cpu(), dynamic_reference(view, e4m3)[1])


@requires_cuda
def test_dynamic_cuda_equals_cpu_and_replays_in_a_graph():
    """The CUDA kernels against the CPU op (the recipe in torch ops), and under CUDA-graph replay
    (the amax pass's last-block ticket must be back at 0 for every launch)."""
    x = values((2048, 1536), torch.bfloat16, "cuda", seed=11)
    cpu = cudasteps.cast_fp8_dynamic(x.cpu(), torch.float8_e5m2, True)
    gpu = cudasteps.cast_fp8_dynamic(x, torch.float8_e5m2, True)
    assert same_bits(gpu[0], cpu[0]) and same_bits(gpu[1], cpu[1])
    assert torch.equal(gpu[2].cpu(), cpu[2]) and torch.equal(gpu[3].cpu(), cpu[3])
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cudasteps.cast_fp8_dynamic(static, torch.float8_e4m3fn, True)  # warm up on this stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, out_t, scale_inv, amax = cudasteps.cast_fp8_dynamic(static, torch.float8_e4m3fn, True)
    for seed in (12, 13):
        static.copy_(values((2048, 1536), torch.bfloat16, "cuda", seed=seed) * seed)
        graph.replay()
        want, want_inv, want_amax = dynamic_reference(static, torch.float8_e4m3fn)
        assert same_bits(out, want) and same_bits(out_t, want.t())
        assert torch.equal(scale_inv.cpu(), want_inv) and torch.equal(amax.cpu(), want_amax)


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_errors(device):
    x = torch.randn(4, 6, device=device)
    op = "cudasteps.cast_fp8_dynamic"
    cases = [
        ((x.double(), torch.float8_e4m3fn), rf"{op}: x must be Float or BFloat16 or Half, got Double"),
        ((x[0, 0], torch.float8_e4m3fn), rf"{op}: x must have at least 1 dimensions, got 0-D"),
        ((x, torch.bfloat16), rf"{op}: dtype must be Float8_e4m3fn or Float8_e5m2, got BFloat16"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8_dynamic(*args)
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8_dynamic(*meta)
    message = rf"{op}: x requires grad, but cast_fp8_dynamic is not differentiable"
    with pytest.raises(RuntimeError, match=message):
        cudasteps.cast_fp8_dynamic(x.clone().requires_grad_())


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_opcheck_and_compile(device):
    x = values((33, 48), torch.bfloat16, device, seed=14)
    for args in [(x, torch.float8_e4m3fn, True), (x.float(), torch.float8_e5m2, False)]:
        torch.library.opcheck(torch.ops.cudasteps.cast_fp8_dynamic.default, args)

    def f(x):
        out, out_t, scale_inv, amax = cudasteps.cast_fp8_dynamic(x * 2, torch.float8_e4m3fn, True)
        return out.float() * scale_inv, out_t, amax

    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    got, want = compiled(x), f(x)
    assert torch.equal(got[0], want[0]) and same_bits(got[1], want[1]) and torch.equal(got[2], want[2])


# ---- cast_fp8_dynamic with a given amax (x's producer took it: bias_act_amax) -----------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("src", SOURCES, ids=["fp32", "bf16", "fp16"])
def test_dynamic_with_given_amax_is_the_one_pass_form(device, dtype, src):
    """Given x's own amax, the one-pass form returns what the two-pass form does, bit for bit;
    the amax output is a copy of the given one (not the same tensor)."""
    for i, shape in enumerate(DYNAMIC_SHAPES):
        x = values(shape, src, device, seed=300 + i)
        for transpose in (False, True):
            want = cudasteps.cast_fp8_dynamic(x, dtype, transpose)
            given = want[3].clone()
            got = cudasteps.cast_fp8_dynamic(x, dtype, transpose, amax=given)
            assert same_bits(got[0], want[0]), (shape, src, dtype)
            assert (got[1] is None) == (not transpose)
            if transpose:
                assert same_bits(got[1], want[1]), (shape, src, dtype)
            assert torch.equal(got[2], want[2]) and torch.equal(got[3], want[3]), (shape, src, dtype)
            assert got[3].data_ptr() != given.data_ptr()


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_given_amax_is_trusted(device):
    """The scale comes from the given amax, not from x: a smaller amax saturates what lies above
    it, as cast_fp8 with that scale; a zero or NaN amax gives scale 1, as the recipe says."""
    e4m3 = torch.float8_e4m3fn
    x = values((64, 48), torch.float32, device, seed=15)
    true_amax = x.abs().max()
    for given in (true_amax / 4, torch.zeros((), device=device), torch.full((), float("nan"), device=device)):
        given = given.reshape(1).float()  # any one-element shape
        out, out_t, scale_inv, amax = cudasteps.cast_fp8_dynamic(x, e4m3, True, amax=given)
        scale = torch.where(given > 0, torch.full_like(given, 448.0).div(given), torch.ones_like(given))
        want, _, _ = cudasteps.cast_fp8(x, scale, e4m3, True)
        assert same_bits(out, want) and same_bits(out_t, want.t())
        assert torch.equal(scale_inv, scale.reciprocal().reshape(()))
        assert torch.allclose(amax, given.reshape(()), equal_nan=True) and amax.shape == ()


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_given_amax_errors_and_opcheck(device):
    x = torch.randn(4, 6, device=device)
    op = "cudasteps.cast_fp8_dynamic"
    e4m3 = torch.float8_e4m3fn
    amax = x.abs().max()
    cases = [
        (amax.double(), rf"{op}: amax must be float32, got Double"),
        (torch.ones(2, device=device), rf"{op}: amax must have one element \(x's amax\), got shape \[2\]"),
    ]
    for bad, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8_dynamic(x, e4m3, True, bad)
        with pytest.raises(RuntimeError, match=message):
            torch.ops.cudasteps.cast_fp8_dynamic(x.to("meta"), e4m3, True, bad.to("meta"))
    if device == "cuda":
        with pytest.raises(RuntimeError, match=rf"{op}: amax must be on x's device"):
            torch.ops.cudasteps.cast_fp8_dynamic(x, e4m3, True, amax.cpu())
    torch.library.opcheck(torch.ops.cudasteps.cast_fp8_dynamic.default, (x.bfloat16(), e4m3, True, amax))
