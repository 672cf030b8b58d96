"""copy / copy_: correctness over dtypes, sizes and layouts, errors, autograd, opcheck, ladder."""

import cudasteps
import pytest
import torch
from _helpers import ALL_DTYPES, DEVICES, make_tensor, misaligned, poisoned, requires_cuda

SIZES = [0, 1, 3, 15, 16, 17, 1000, 4099, (1 << 16) + 5]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_copy_matches_input_every_dtype(device, dtype):
    for n in SIZES:
        x = make_tensor((n,), dtype, device, seed=n)
        y = cudasteps.copy(x)
        assert y.dtype == dtype and y.device == x.device and y.shape == x.shape
        assert y.is_contiguous()
        assert y.data_ptr() != x.data_ptr() or n == 0
        assert torch.equal(y, x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8, torch.float64])
@pytest.mark.parametrize("offset", [1, 2, 3, 5])
def test_copy_misaligned_views(device, dtype, offset):
    # Storage offsets put the data pointer off any 16-byte boundary: head, body and tail all run.
    # On CUDA, contiguous copies of up to 4 MiB are one cudaMemcpyAsync; the last size takes the
    # copy kernel.
    elem = torch.empty((), dtype=dtype).element_size()
    for n in [1, 7, 31, 33, 4096 + 3, (4 << 20) // elem + 4099]:
        x = misaligned((n,), dtype, device, seed=n, offset=offset)
        assert torch.equal(cudasteps.copy(x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_copy_non_contiguous_inputs(device):
    base = make_tensor((6, 7, 9), torch.float32, device)
    views = [
        base.transpose(0, 2),
        base[:, ::2, 1:],
        base.permute(1, 2, 0),
        base[..., 3],
        base.expand(2, 6, 7, 9),  # zero stride: reads repeat
        make_tensor((5, 1, 4), torch.float32, device).expand(5, 3, 4),
        base.t() if base.dim() == 2 else base[0].t(),
    ]
    for v in views:
        y = cudasteps.copy(v)
        assert y.is_contiguous()
        assert torch.equal(y, v.contiguous())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_copy__into_poisoned_output(device, dtype):
    for shape in [(0,), (1,), (17,), (33, 65), (4, 5, 6)]:
        src = make_tensor(shape, dtype, device, seed=len(shape))
        dst = poisoned(shape, dtype, device)
        out = cudasteps.copy_(dst, src)
        assert out is dst
        assert torch.equal(dst, src)


@pytest.mark.parametrize("device", DEVICES)
def test_copy__strided_destination(device):
    src = make_tensor((8, 10), torch.float32, device)
    big = poisoned((10, 8), torch.float32, device)
    dst = big.t()  # non-contiguous destination
    cudasteps.copy_(dst, src)
    assert torch.equal(big.t(), src)
    # Into a slice, leaving the rest untouched.
    base = make_tensor((6, 6), torch.float32, device, seed=3)
    expect = base.clone()
    patch = make_tensor((3, 2), torch.float32, device, seed=4)
    cudasteps.copy_(base[1:4, 2:4], patch)
    expect[1:4, 2:4] = patch
    assert torch.equal(base, expect)


@pytest.mark.parametrize("device", DEVICES)
def test_copy__same_tensor_is_a_no_op(device):
    x = make_tensor((10,), torch.float32, device)
    before = x.clone()
    assert cudasteps.copy_(x, x) is x
    assert torch.equal(x, before)


@pytest.mark.parametrize("device", DEVICES)
def test_copy_errors(device):
    x = make_tensor((4, 5), torch.float32, device)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.copy_: src must have the shape of out \[4, 5\], got \[5, 4\]"
    ):
        cudasteps.copy_(x, make_tensor((5, 4), torch.float32, device))
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.copy_: src must have the dtype of out \(Float\), got Double"
    ):
        cudasteps.copy_(x, make_tensor((4, 5), torch.float64, device))
    with pytest.raises(RuntimeError, match=r"cudasteps\.copy_: out must not have overlapping elements"):
        cudasteps.copy_(make_tensor((1, 5), torch.float32, device).expand(4, 5), x)
    base = make_tensor((10,), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"cudasteps\.copy_: src and out partly share memory"):
        cudasteps.copy_(base[2:8], base[0:6])


@requires_cuda
def test_copy__device_mismatch():
    x = make_tensor((4,), torch.float32, "cuda")
    y = make_tensor((4,), torch.float32, "cpu")
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.copy_: src must be on out's device \(cuda:0\), got cpu"
    ):
        cudasteps.copy_(x, y)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.copy_: src must be on out's device \(cpu\), got cuda:0"
    ):
        cudasteps.copy_(y, x)


@pytest.mark.parametrize("device", DEVICES)
def test_copy_autograd(device):
    x = make_tensor((5, 6), torch.float64, device).requires_grad_()
    torch.autograd.gradcheck(cudasteps.copy, (x,))
    torch.autograd.gradcheck(lambda t: cudasteps.copy(t.t()), (x,))
    # copy_: the gradient reaches src; the overwritten values of dst get none.
    src = make_tensor((5, 6), torch.float64, device, seed=1).requires_grad_()
    dst_leaf = make_tensor((5, 6), torch.float64, device, seed=2).requires_grad_()
    dst = dst_leaf * 2
    out = cudasteps.copy_(dst, src)
    assert out is dst
    (out * 3).sum().backward()
    assert torch.equal(src.grad, torch.full_like(src, 3.0))
    # No gradient reaches the old dst (torch.Tensor.copy_ gives zeros; an undefined grad is the same).
    assert dst_leaf.grad is None or torch.equal(dst_leaf.grad, torch.zeros_like(dst_leaf))


@pytest.mark.parametrize("device", DEVICES)
def test_copy__bumps_version_counter(device):
    dst = make_tensor((3,), torch.float32, device)
    v = dst._version
    cudasteps.copy_(dst, make_tensor((3,), torch.float32, device, seed=1))
    assert dst._version > v


@pytest.mark.parametrize("device", DEVICES)
def test_copy_opcheck(device):
    x = make_tensor((7, 9), torch.float32, device)
    torch.library.opcheck(torch.ops.cudasteps.copy.default, (x,))
    torch.library.opcheck(torch.ops.cudasteps.copy.default, (x.t(),))
    torch.library.opcheck(torch.ops.cudasteps.copy.default, (x.clone().requires_grad_(),))
    torch.library.opcheck(torch.ops.cudasteps.copy_.default, (torch.empty_like(x), x))


@pytest.mark.parametrize("device", DEVICES)
def test_copy_torch_compile_fullgraph(device):
    @torch.compile(fullgraph=True)
    def f(x, dst):
        y = cudasteps.copy(x.t() * 2) + 1
        cudasteps.copy_(dst, y)
        return y

    x = make_tensor((8, 6), torch.float32, device)
    dst = poisoned((6, 8), torch.float32, device)
    y = f(x, dst)
    assert torch.equal(y, x.t() * 2 + 1)
    assert torch.equal(dst, y)


@requires_cuda
@pytest.mark.parametrize("variant", cudasteps.ladder.variants("copy"))
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.uint8, torch.float64, torch.complex128]
)
def test_copy_ladder_variants(variant, dtype):
    for n in [1, 255, 257, 100_003]:
        x = make_tensor((n,), dtype, "cuda", seed=n)
        assert torch.equal(cudasteps.ladder.run("copy", variant, x), x)


@requires_cuda
def test_copy_ladder_rejects_unknown_variant():
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.ladder_copy: variant must be one of scalar, grid_stride, vec16_persistent, vec16",
    ):
        cudasteps.ladder.run("copy", "fastest", make_tensor((4,), torch.float32, "cuda"))


@requires_cuda
def test_copy_large_cuda():
    # 256 MiB: the main loop, the unrolled remainder and several waves of the grid.
    x = torch.randn((1 << 26) + 7, device="cuda")
    assert torch.equal(cudasteps.copy(x), x)
    assert torch.equal(cudasteps.copy(x[3:]), x[3:])


@requires_cuda
@pytest.mark.slow
def test_copy_beyond_int32_elements():
    # 2^31 + 33 uint8 elements (2 GiB): 64-bit indexing in every path.
    n = (1 << 31) + 33
    x = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    y = cudasteps.copy(x)
    assert torch.equal(y[-1000:], x[-1000:]) and torch.equal(y[:1000], x[:1000])
    assert torch.equal(y, x)
    del y
    z = cudasteps.copy(x[1:])  # misaligned path too
    assert torch.equal(z, x[1:])


@requires_cuda
def test_copy_on_non_default_stream_and_other_device():
    s = torch.cuda.Stream()
    x = make_tensor((1 << 20,), torch.float32, "cuda")
    with torch.cuda.stream(s):
        y = cudasteps.copy(x)
    s.synchronize()
    assert torch.equal(y, x)
    if torch.cuda.device_count() > 1:
        x1 = make_tensor((12345,), torch.float32, "cuda:1")
        y1 = cudasteps.copy(x1)
        assert y1.device == x1.device and torch.equal(y1, x1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_copy_of_transposed_views(device, dtype):
    """Transposed views of contiguous tensors (CUDA: the transpose kernel) and their neighbours
    that are not (a row slice, a size-1 dim: the strided and byte paths) copy exactly."""
    for shape in [(33, 65), (4, 17, 130), (2, 3, 64, 1), (1, 5), (1000, 3), (2, 1, 7, 9)]:
        x = make_tensor(shape, dtype, device)
        for view in (x.mT, x.mT[..., 1:, :], x.transpose(0, -1)):
            y = cudasteps.copy(view)
            assert y.is_contiguous() and torch.equal(y, view), (shape, view.stride())
            dst = poisoned(view.shape, dtype, device)
            assert torch.equal(cudasteps.copy_(dst, view), view)
    x = make_tensor((3, 40, 24), torch.float32, device).requires_grad_(True)
    g = make_tensor((3, 24, 40), torch.float32, device, seed=1)
    cudasteps.copy(x.mT).backward(g)
    assert torch.equal(x.grad, g.mT)


# Every element size the strided-row paths move (1, 2, 4, 8 and 16 bytes), floats and not.
STRIDED_VIEW_DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.uint8,
    torch.float64,
    torch.int64,
    torch.bool,
    torch.complex128,
]


def _row_views(dtype, device):
    """Views of contiguous tensors whose innermost dim stays contiguous (CUDA: the row kernel):
    row slices, column slices (rows shorter than the pitch, starts off any 16-byte boundary),
    both, 3-D, odd row lengths, rows longer than one tile, and sizes 0 and 1."""
    views = []
    for rows, cols in [(64, 48), (37, 67), (130, 1030), (9, 8200)]:
        x = make_tensor((rows, cols), dtype, device, seed=rows + cols)
        views += [
            x[::2],
            x[1::3],
            x[:, 1:],
            x[:, :-1],
            x[::2, 3:],
            x[1:, 1:-1],
        ]
    x3 = make_tensor((6, 10, 36), dtype, device, seed=3)
    views += [x3[:, 1:, :], x3[::2, 2:7, 5:], x3[1:, :, :35], x3.transpose(0, 1)[:, 1:]]
    # A storage offset of one element: every input row start is misaligned.
    flat = make_tensor((1 + 33 * 40,), dtype, device, seed=4)
    views += [flat[1:].view(33, 40)[:, :37], flat[1:].view(33, 40)[::2, 8:]]
    # Sizes 0 and 1, and a broadcast row (outer stride 0).
    views += [x3[:, :0, 1:], x3[:1, 2:4, 1:], x3[:1, :, 1:], x3[2:3, :1, 1:2], x3[:, 2:4, 5:6]]
    views += [make_tensor((1, 50), dtype, device, seed=5).expand(7, 50)]
    return views


def _gather_views(dtype, device):
    """Views whose innermost dim is strided (CUDA: the gather kernel): column strides, with row
    slices, 3-D, odd row lengths, storage offsets, an expanded (stride 0) inner dim, sizes 0 and 1."""
    views = []
    for rows, cols in [(64, 64), (37, 67), (130, 1030), (5, 16400)]:
        x = make_tensor((rows, cols), dtype, device, seed=rows * cols)
        views += [x[:, ::2], x[:, 1::3], x[::2, ::2], x[1::3, 5::7], x[:, :: cols - 1]]
    x3 = make_tensor((6, 10, 36), dtype, device, seed=6)
    views += [x3[:, :, ::2], x3[::2, 1:, 1::3], x3[:, ::3, ::5], x3.permute(1, 0, 2)[..., ::2]]
    flat = make_tensor((3 + 33 * 40,), dtype, device, seed=7)
    views += [flat[3:].view(33, 40)[:, ::2], flat[1 : 1 + 33 * 40].view(33, 40)[1:, 1::2]]
    views += [x3[:, :0, ::2], x3[:1, :1, ::2], x3[:1, 3:4, 7::40]]
    views += [make_tensor((9, 1), dtype, device, seed=8).expand(9, 24)]
    return views


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", STRIDED_VIEW_DTYPES)
@pytest.mark.parametrize("kind", ["rows", "gather"])
def test_copy_of_strided_views(device, dtype, kind):
    views = _row_views(dtype, device) if kind == "rows" else _gather_views(dtype, device)
    for view in views:
        expect = view.contiguous()
        assert not view.is_contiguous() or view.numel() <= 1, view.stride()
        y = cudasteps.copy(view)
        assert y.is_contiguous() and y.shape == view.shape
        assert torch.equal(y, expect), (view.shape, view.stride(), view.storage_offset())
        # Into a poisoned contiguous destination, and into one whose start is misaligned.
        dst = poisoned(view.shape, dtype, device)
        assert cudasteps.copy_(dst, view) is dst and torch.equal(dst, expect)
        big = poisoned((view.numel() + 1,), dtype, device)
        sentinel = big[:1].clone()
        dst = big[1:].view(view.shape)
        cudasteps.copy_(dst, view)
        assert torch.equal(dst, expect), (view.shape, view.stride(), "misaligned destination")
        # Bitwise (NaN != NaN): the element before the destination keeps its poison.
        assert torch.equal(big[:1].view(torch.uint8), sentinel.view(torch.uint8))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8])
def test_copy_of_large_strided_views_cuda(dtype):
    # Many tiles in both directions, a partial last row group and partial column tiles.
    x = make_tensor((2051, 4100), dtype, "cuda")
    for view in (x[::2], x[:, 3:], x[:, ::2], x[1::3, 1::3], x.view(2051, 100, 41)[:, 1:, ::2]):
        dst = poisoned(view.shape, dtype, "cuda")
        cudasteps.copy_(dst, view)
        assert torch.equal(dst, view.contiguous()), (view.shape, view.stride())


@requires_cuda
@pytest.mark.slow
def test_copy_of_strided_views_beyond_int32():
    # Rows and chunk offsets past 2^31 bytes (64-bit index math in the row and gather kernels):
    # 3 rows of 2^31 + 40 bytes, copied in 16-byte chunks (x[:, 8:]) and single bytes (x[:, 1:]);
    # x[:, ::2] merges into one gathered row of 3 * (2^30 + 20) elements.
    x = torch.randint(0, 255, (3, (1 << 31) + 40), dtype=torch.uint8, device="cuda")
    for view in (x[:, 1:], x[:, 8:], x[::2, 7:], x[:, ::2]):
        y = cudasteps.copy(view)
        assert torch.equal(y, view.contiguous()), (view.shape, view.stride())
        del y


@pytest.mark.parametrize("device", DEVICES)
def test_copy_of_strided_views_autograd(device):
    x = make_tensor((12, 20), torch.float64, device).requires_grad_()
    torch.autograd.gradcheck(lambda t: cudasteps.copy(t[::2, 1:]), (x,))
    torch.autograd.gradcheck(lambda t: cudasteps.copy(t[1:, ::3]), (x,))
