"""sum / ladder_sum: torch.sum semantics over dims, keepdim, dtypes and layouts; determinism;
accuracy against a float64 sum; errors; autograd; opcheck; torch.compile; the ladder."""

import cudasteps
import pytest
import torch
from _helpers import DEVICES, make_tensor, misaligned, rel_err, requires_cuda

_ops = torch.ops.cudasteps

# Error bounds relative to the sum of magnitudes (the condition of a sum): |out - ref| <= TOL * sum|x|
# per output element, ref a float64 sum. Half and bfloat16 outputs are rounded to 11 and 8 bits.
TOL = {
    torch.float32: 1e-5,
    torch.float64: 1e-13,
    torch.float16: 2e-3,
    torch.bfloat16: 1e-2,
}
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]

DIM_CASES = [None, [], 0, 1, 2, -1, [0, 1], [1, 2], [0, 2], [2, 0], [0, 1, 2], [-1, -3]]


def _as_list(dim):
    return [dim] if isinstance(dim, int) else dim


def _torch_sum(x, dim, keepdim=False, dtype=None):
    d = _as_list(dim)
    if not d:  # None or []: all dims
        d = list(range(x.dim()))
        if not d:
            return torch.sum(x, dtype=dtype)
    return torch.sum(x, d, keepdim, dtype=dtype)


def scaled_err(out, src, dim, keepdim=False):
    """max |out - sum(src)| / sum(|src|) over output elements, in float64."""
    s = src.detach().double().cpu()
    ref = _torch_sum(s, dim, keepdim)
    mag = _torch_sum(s.abs(), dim, keepdim).clamp_min(1e-300)
    o = out.detach().double().cpu()
    if torch.isnan(o).any():
        return float("inf")
    return ((o - ref).abs() / mag).max().item() if o.numel() else 0.0


def check_sum(x, dim=None, keepdim=False, dtype=None):
    """cudasteps.sum against torch.sum: dtype and shape exactly, values exactly (integers) or
    within TOL of a float64 sum (floats)."""
    out = cudasteps.sum(x, dim, keepdim, dtype=dtype)
    ref = _torch_sum(x, dim, keepdim, dtype)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.device == x.device
    if not ref.dtype.is_floating_point:
        assert torch.equal(out, ref)
        return out
    # torch.sum casts to dtype first; half/bf16 -> float32 reads the input exactly as it is.
    src = x.to(dtype) if dtype is not None and dtype != torch.float32 else x
    err = scaled_err(out, src, dim, keepdim)
    assert err <= TOL[out.dtype], (tuple(x.shape), x.dtype, dim, keepdim, dtype, err)
    return out


# ---- correctness grid ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL) + INT_DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dims_grid(device, dtype, keepdim):
    x = make_tensor((3, 5, 7), dtype, device, seed=1)
    for dim in DIM_CASES:
        check_sum(x, dim, keepdim)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_small_and_empty_shapes(device):
    cases = [
        ((), None),
        ((), 0),
        ((), -1),
        ((), []),
        ((1,), None),
        ((1,), 0),
        ((1, 1, 1), [0, 2]),
        ((0,), None),
        ((0,), 0),
        ((4, 0, 3), 1),
        ((4, 0, 3), [0, 2]),
        ((4, 0, 3), None),
        ((0, 5), 0),
        ((0, 5), 1),
        ((2, 1, 3), 1),
        ((2, 1, 3), [0, 1]),
        ((17,), 0),
        ((5, 1), 0),
        ((1, 9), 0),
    ]
    for dtype in [torch.float32, torch.int32, torch.float16]:
        for shape, dim in cases:
            x = make_tensor(shape, dtype, device, seed=len(shape))
            for keepdim in (False, True):
                out = check_sum(x, dim, keepdim)
                if x.numel() == 0:
                    assert (out == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_sum_non_contiguous_layouts(device):
    base = make_tensor((6, 10, 12), torch.float32, device, seed=3)
    views = [
        base.transpose(0, 2),
        base.permute(1, 2, 0),
        base[:, ::2, 1:],
        base[..., 3],
        base[1:, 2:, 3:],
        base.expand(2, 6, 10, 12),  # zero stride: non-dense, goes through a copy
        make_tensor((64, 48), torch.float32, device).t(),
        misaligned((7, 33), torch.float32, device, offset=1),
        misaligned((129,), torch.float16, device, offset=3),
    ]
    for v in views:
        for dim in [None, 0, -1, sorted({0, v.dim() - 1}), list(range(1, v.dim()))]:
            for keepdim in (False, True):
                check_sum(v, dim, keepdim)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_dtype_argument(device):
    x16 = make_tensor((9, 130), torch.float16, device, seed=4)
    xbf = make_tensor((9, 130), torch.bfloat16, device, seed=5)
    x32 = make_tensor((9, 130), torch.float32, device, seed=6)
    xi = make_tensor((9, 130), torch.int32, device, seed=7)
    xb = make_tensor((9, 130), torch.bool, device, seed=8)
    for x in (x16, xbf):
        check_sum(x, dtype=torch.float32)
        check_sum(x, 1, dtype=torch.float32)
        check_sum(x, 0, dtype=torch.float64)
    check_sum(x32, 1, dtype=torch.float64)
    check_sum(x32, None, dtype=torch.float16)
    check_sum(xi, 0, dtype=torch.float32)
    check_sum(xi, 1, dtype=torch.int64)
    check_sum(xb, None, dtype=torch.float64)
    check_sum(x32, 0, dtype=torch.int64)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_half_accumulates_in_float(device):
    # 4096 ones of half: a half accumulator would stop at 2048; fp32 accumulation gives 4096 exactly.
    x = torch.ones(4096, dtype=torch.float16, device=device)
    assert cudasteps.sum(x).item() == 4096.0
    assert cudasteps.sum(x.view(2, 2048), 1).tolist() == [2048.0, 2048.0]
    assert cudasteps.sum(x.view(2048, 2), 0).tolist() == [2048.0, 2048.0]


def _shape_cases_cuda():
    # Each path and its edges: full (one block, many blocks), warp rows, block rows, segmented rows,
    # columns (vectorized, scalar, batched, split), narrow columns (general path).
    return [
        ((1 << 20) + 3, None),
        ((1 << 22) + 17, 0),
        ((4099, 300), -1),
        ((1000, 2049), 1),
        ((3, 300001), 1),
        ((4096, 4096), 1),
        ((4096, 4096), 0),
        ((1000, 777), 0),
        ((4097, 64), 0),
        ((65537, 40), 0),
        ((5, 333, 100), 1),
        ((100000, 3), 0),
        ((7, 11, 13, 17), [0, 2]),
        ((7, 11, 13, 17), [1, 3]),
        ((64, 3, 4096), [0, 2]),
    ]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32])
def test_sum_cuda_paths(dtype):
    for shape, dim in _shape_cases_cuda():
        shape = shape if isinstance(shape, tuple) else (shape,)
        x = make_tensor(shape, dtype, "cuda", seed=len(shape))
        check_sum(x, dim)
        check_sum(x, dim, keepdim=True)
        if x.dim() == 2:
            check_sum(x.t(), dim)  # transposed: the same memory reduced the other way
        # misaligned base pointer
        y = misaligned(shape, dtype, "cuda", offset=1)
        check_sum(y, dim)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sum_cuda_matches_cpu(dtype):
    x = make_tensor((513, 1031), dtype, "cpu", seed=9)
    for dim in [None, 0, 1]:
        a = cudasteps.sum(x, dim)
        b = cudasteps.sum(x.cuda(), dim)
        assert scaled_err(a, x, dim) <= TOL[dtype]
        assert scaled_err(b, x, dim) <= TOL[dtype]


# ---- determinism and accuracy -------------------------------------------------------------------


@requires_cuda
def test_sum_cuda_deterministic_20_runs():
    cases = [
        (make_tensor(((1 << 24) + 5,), torch.float32, "cuda", seed=10), None),
        (make_tensor((8192, 4096), torch.float32, "cuda", seed=11), 0),
        (make_tensor((8192, 4096), torch.bfloat16, "cuda", seed=12), 1),
        (make_tensor((4, 1 << 22), torch.float32, "cuda", seed=13), 1),
        (make_tensor((64, 3, 4096), torch.float32, "cuda", seed=14), [0, 2]),
    ]
    for x, dim in cases:
        first = cudasteps.sum(x, dim)
        for _ in range(19):
            assert torch.equal(cudasteps.sum(x, dim), first)
    # Other streams use other ticket counters and give the same result.
    x = cases[0][0]
    first = cudasteps.sum(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        results = [cudasteps.sum(x) for _ in range(5)]
    torch.cuda.current_stream().wait_stream(side)
    for r in results:
        assert torch.equal(r, first)


def _mixed_magnitudes(n, device, seed):
    g = torch.Generator().manual_seed(seed)
    mant = torch.randn(n, generator=g, dtype=torch.float64)
    expo = torch.randint(-12, 13, (n,), generator=g).double()
    return (mant * torch.pow(2.0, expo)).float().to(device)


def _rms_scaled_err(out, src, dim):
    s = src.double().cpu()
    ref, mag = _torch_sum(s, dim), _torch_sum(s.abs(), dim)
    return (((out.double().cpu() - ref) / mag) ** 2).mean().sqrt().item()


def _accuracy(x, dim=None):
    if dim is None:
        return scaled_err(cudasteps.sum(x, dim), x, dim), scaled_err(_torch_sum(x, dim), x, dim)
    # Many outputs: the RMS error (the maximum is set by one unlucky output rounding).
    return _rms_scaled_err(cudasteps.sum(x, dim), x, dim), _rms_scaled_err(_torch_sum(x, dim), x, dim)


# Errors are measured against sum(|x|), the scale any float32 summation error is proportional to.
# 2^-24 of it is a floor both sums reach on well-conditioned data; a plain running sum over 2^24
# floats misses it by orders of magnitude.
ACCURACY_FLOOR = 2.0**-24


@pytest.mark.parametrize("device", DEVICES)
def test_sum_accuracy_vs_torch(device):
    n = (1 << 24) if device == "cuda" else (1 << 20)
    g = torch.Generator().manual_seed(15)
    inputs = [
        torch.rand(n, generator=g).to(device),  # all positive: the hard case for running sums
        torch.randn(n, generator=g).to(device),
        _mixed_magnitudes(n, device, 16),
    ]
    for x in inputs:
        ours, theirs = _accuracy(x)
        assert ours <= max(theirs, ACCURACY_FLOOR), (ours, theirs)
    # Rows and columns of all-positive data.
    x = torch.rand(1024, n // 1024, generator=g).to(device)
    for dim in (0, 1):
        ours, theirs = _accuracy(x, dim)
        assert ours <= max(1.1 * theirs, ACCURACY_FLOOR), (dim, ours, theirs)


def _three_sums(x):
    y = x[:3000000]
    return [cudasteps.sum(x), cudasteps.sum(y.view(3, -1), 1), cudasteps.sum(y.view(-1, 600), 0)]


def test_sum_cpu_independent_of_thread_count():
    x = torch.rand(3_000_001, generator=torch.Generator().manual_seed(17))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _three_sums(x)
        torch.set_num_threads(max(2, threads))
        many = _three_sums(x)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, many):
        assert torch.equal(a, b)


@requires_cuda
@pytest.mark.slow
def test_sum_beyond_2_pow_31_elements():
    n = (1 << 31) + 1000
    x = torch.ones(n, dtype=torch.int8, device="cuda")
    assert cudasteps.sum(x).item() == n
    assert cudasteps.sum(x.view(2, n // 2), 1).tolist() == [n // 2, n // 2]
    del x
    y = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    assert cudasteps.sum(y, dtype=torch.float32).item() == pytest.approx(float(n), rel=1e-6)


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "meta"] + ([pytest.param("cuda", marks=requires_cuda)]))
def test_sum_errors(device):
    x = torch.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"cudasteps\.sum: dim must be in the range \[-2, 1\], got 2"):
        cudasteps.sum(x, 2)
    with pytest.raises(RuntimeError, match=r"cudasteps\.sum: dim must be in the range \[-2, 1\], got -3"):
        cudasteps.sum(x, [0, -3])
    with pytest.raises(RuntimeError, match=r"cudasteps\.sum: dim must not repeat a dimension, got \[1, -1\]"):
        cudasteps.sum(x, [1, -1])
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.sum: self must be Float, Double, Half, BFloat16, "
        r"an integer type or Bool, got ComplexFloat",
    ):
        cudasteps.sum(torch.zeros(2, dtype=torch.complex64, device=device))
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.sum: dtype must be Float, Double, Half, BFloat16 or "
        r"Long, got Int",
    ):
        cudasteps.sum(x, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"cudasteps\.sum: dim must be in the range \[-1, 0\], got 1"):
        cudasteps.sum(torch.zeros((), device=device), 1)


@pytest.mark.parametrize("device", ["meta"] + ([pytest.param("cuda", marks=requires_cuda)]))
def test_ladder_sum_errors(device):
    x = torch.zeros(8, device=device)
    with pytest.raises(RuntimeError, match=r"cudasteps\.ladder_sum: variant must be one of smem_tree, "):
        _ops.ladder_sum(x, "nope")
    with pytest.raises(RuntimeError, match=r"cudasteps\.ladder_sum: self must be Float, got Double"):
        _ops.ladder_sum(x.double(), "shfl")
    with pytest.raises(RuntimeError, match=r"cudasteps\.ladder_sum: self must be contiguous"):
        _ops.ladder_sum(torch.zeros(4, 4, device=device).t(), "shfl")


def test_sum_fake_shapes_and_dtypes():
    for dtype in [torch.float16, torch.int8, torch.bool, torch.float64]:
        x = torch.empty(3, 4, 5, dtype=dtype, device="meta")
        for dim in [None, 1, [0, 2], [-1]]:
            for keepdim in (False, True):
                out = cudasteps.sum(x, dim, keepdim)
                ref = (
                    torch.sum(x, _as_list(dim), keepdim)
                    if dim is not None
                    else (torch.sum(x, list(range(3)), keepdim) if keepdim else torch.sum(x))
                )
                assert out.shape == ref.shape and out.dtype == ref.dtype
    assert cudasteps.sum(torch.empty(3, dtype=torch.float16, device="meta"), dtype=torch.float32).dtype == (
        torch.float32
    )


# ---- autograd, opcheck, compile -----------------------------------------------------------------


def test_sum_gradcheck_cpu():
    x = make_tensor((3, 4, 5), torch.float64, "cpu", seed=18).requires_grad_()
    for dim, keepdim in [(None, False), ([1], False), ([0, 2], True), ([-1], False), ([], True)]:
        assert torch.autograd.gradcheck(lambda t, d=dim, k=keepdim: _ops.sum(t, d, k), (x,))
    s = make_tensor((), torch.float64, "cpu", seed=19).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: _ops.sum(t, [0], False), (s,))


@pytest.mark.parametrize("device", DEVICES)
def test_sum_gradients_match_torch(device):
    for dtype, out_dtype in [(torch.float32, None), (torch.bfloat16, torch.float32), (torch.float16, None)]:
        x = make_tensor((6, 7, 8), dtype, device, seed=20)
        for dim, keepdim in [(None, False), ([1], True), ([0, 2], False)]:
            a = x.clone().requires_grad_()
            b = x.clone().requires_grad_()
            ya = cudasteps.sum(a, dim, keepdim, dtype=out_dtype)
            yb = torch.sum(b, dim if dim is not None else list(range(3)), keepdim, dtype=out_dtype)
            g = make_tensor(tuple(yb.shape), yb.dtype, device, seed=21)
            ya.backward(g)
            yb.backward(g)
            assert a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape
            assert torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_sum_opcheck(device, requires_grad):
    x = make_tensor((4, 6, 5), torch.float32, device, seed=22).requires_grad_(requires_grad)
    for args, kwargs in [
        ((x, None, False), {}),
        ((x, [1], True), {}),
        ((x, [0, 2], False), {}),
        ((x, [-1], False), {"dtype": torch.float64}),
    ]:
        torch.library.opcheck(_ops.sum.default, args, kwargs)
    xi = make_tensor((4, 6), torch.int32, device, seed=23)
    torch.library.opcheck(_ops.sum.default, (xi, [0], False), {})


@requires_cuda
def test_ladder_sum_opcheck():
    x = make_tensor((1000,), torch.float32, "cuda", seed=24)
    torch.library.opcheck(_ops.ladder_sum.default, (x, "single_pass"))


@pytest.mark.parametrize("device", DEVICES)
def test_sum_torch_compile_fullgraph(device):
    @torch.compile(fullgraph=True)
    def f(x):
        return cudasteps.sum(x * 2.0, [1], keepdim=True) + cudasteps.sum(x, None)

    x = make_tensor((16, 33), torch.float32, device, seed=25)
    ref = (x * 2.0).double().sum(1, keepdim=True) + x.double().sum()
    assert rel_err(f(x), ref) <= 1e-6


# ---- ladder -------------------------------------------------------------------------------------


def test_ladder_registry():
    assert cudasteps.ladder.variants("reduce") == (
        "smem_tree",
        "syncwarp",
        "shfl",
        "coop_groups",
        "grid_stride_vec",
        "single_pass",
    )


@requires_cuda
@pytest.mark.parametrize(
    "variant", ["smem_tree", "syncwarp", "shfl", "coop_groups", "grid_stride_vec", "single_pass"]
)
def test_ladder_sum_variants(variant):
    for n in [0, 1, 3, 255, 512, 513, 100_000, (1 << 20) + 3, (1 << 24) + 1]:
        x = make_tensor((n,), torch.float32, "cuda", seed=n % 97)
        out = cudasteps.ladder.run("reduce", variant, x)
        assert out.shape == () and out.dtype == torch.float32
        assert scaled_err(out, x, None) <= TOL[torch.float32]
        if n == 0:
            assert out.item() == 0.0
        y = misaligned((n + 1,), torch.float32, "cuda", offset=1)
        assert scaled_err(_ops.ladder_sum(y, variant), y, None) <= TOL[torch.float32]
    x = make_tensor((1 << 22,), torch.float32, "cuda", seed=26)
    first = _ops.ladder_sum(x, variant)
    for _ in range(5):
        assert torch.equal(_ops.ladder_sum(x, variant), first)


@requires_cuda
def test_single_pass_ladder_is_sum():
    x = make_tensor(((1 << 21) + 7,), torch.float32, "cuda", seed=27)
    assert torch.equal(_ops.ladder_sum(x, "single_pass"), cudasteps.sum(x))


@requires_cuda
def test_sum_cuda_graph_capture():
    x = make_tensor((1 << 20,), torch.float32, "cuda", seed=28)
    ref = cudasteps.sum(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        cudasteps.sum(x)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = cudasteps.sum(x)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref)


# Dim sets whose reduced runs alternate with kept ones in memory: several passes over the input in
# place (reduce.h), and the flat column kernel for many narrow columns on CUDA.
INTERLEAVED_CASES = [
    ((64, 33, 517), 1),
    ((64, 33, 517), (0, 2)),
    ((5, 6, 7, 8), (0, 2)),
    ((5, 6, 7, 8), (1, 3)),
    ((5, 6, 7, 8), (0, 1, 3)),
    ((3, 4, 5, 6, 7), (0, 2, 4)),
    ((9, 1, 10, 1, 3), (0, 3)),
    ((2, 300, 3), (0, 2)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool])
def test_sum_interleaved_dims_in_place(device, dtype):
    for i, (shape, dim) in enumerate(INTERLEAVED_CASES):
        x = make_tensor(shape, dtype, device, seed=i)
        dims = list(dim) if isinstance(dim, tuple) else dim
        check_sum(x, dims)
        check_sum(x, dims, keepdim=True)
        # Permuted dense layouts: the plan follows memory order, so the output may come out
        # permuted and is put back in logical order.
        p = x.permute(*reversed(range(x.dim())))
        check_sum(p, dims)
        q = x.transpose(0, 1)
        check_sum(q, dims, keepdim=True)
        # Gaps: copied dense first.
        check_sum(x[..., ::2], dims)


@requires_cuda
def test_sum_cuda_flat_column_kernel():
    """[batch, rows, cols] with many outputs takes a thread per output: exact for integers,
    bitwise reproducible for floats, and equal to the CPU within TOL."""
    for shape in [(4096, 33, 517), (2048, 7, 100), (300, 1000, 64)]:
        x = make_tensor(shape, torch.float32, "cuda")
        out = check_sum(x, 1)
        assert torch.equal(out, cudasteps.sum(x, 1))
        check_sum(x.to(torch.int32), 1)
        check_sum(x.to(torch.bfloat16), 1)
    x = make_tensor((4096, 33, 517), torch.float32, "cuda", seed=1)
    check_sum(x, [0, 2])


def _full_sum_sizes(dtype):
    """Sizes around the full reduction's grid choices: one block and two, a grid that divides the
    16-byte loads exactly (2^20) and the sizes next to it whose last lanes load fewer, and one, two
    and four waves of resident blocks."""
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    per_block = 512 * 4 * vec  # elements one block sums in one unrolled pass
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sizes = [per_block - 1, per_block, per_block + 1, 2 * per_block + vec - 1]
    sizes += [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, (1 << 20) + 3 * vec + 1]
    for waves in (1, 2, 4):
        sizes += [waves * sms * per_block - 1, waves * sms * per_block + vec + 1]
    return sizes


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32])
def test_sum_full_sizes_around_grid_choices(dtype):
    # Alternating sizes (each with its own grid) also checks that every launch leaves its ticket
    # counter at zero for the next one.
    for n in _full_sum_sizes(dtype):
        for offset in (0, 1):
            x = (
                misaligned((n,), dtype, "cuda", seed=n, offset=offset)
                if offset
                else make_tensor((n,), dtype, "cuda", seed=n)
            )
            first = check_sum(x)
            for _ in range(3):
                assert torch.equal(cudasteps.sum(x), first), (n, offset)


@requires_cuda
def test_sum_full_cuda_graph_replays_match_eager():
    sizes = [1000, 8193, (1 << 20) + 1, 1 << 20, 3 << 22]
    xs = [make_tensor((n,), torch.float32, "cuda", seed=n) for n in sizes]
    eager = [cudasteps.sum(x) for x in xs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in xs:  # warm-up on a side stream, as graph capture asks
            cudasteps.sum(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [cudasteps.sum(x) for x in xs]
    for _ in range(4):
        graph.replay()
        # Eager sums between replays, on the current stream: their counters must not disturb the graph's.
        between = [cudasteps.sum(x) for x in xs]
        torch.cuda.synchronize()
        for out, ref, b in zip(outs, eager, between):
            assert torch.equal(out, ref) and torch.equal(b, ref)
