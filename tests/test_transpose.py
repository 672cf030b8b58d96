"""transpose / transpose_: shapes, dtypes, layouts, errors, autograd, opcheck, compile, ladder."""

import cudasteps
import pytest
import torch
from _helpers import ALL_DTYPES, DEVICES, make_tensor, misaligned, poisoned, requires_cuda

# Not multiples of any tile (32, 64, 128), primes, 1, and tile-size neighbours; rectangular both ways
# (the textbook block-index swap bug shows only on non-square shapes).
SHAPES_2D = [
    (1, 1),
    (1, 7),
    (7, 1),
    (2, 2),
    (3, 5),
    (33, 65),
    (65, 33),
    (31, 97),
    (64, 64),
    (128, 129),
    (130, 4),
    (4, 130),
    (1, 1000),
    (1000, 1),
    (257, 255),
]
SUPPORTED_DTYPES = [d for d in ALL_DTYPES if torch.empty((), dtype=d).element_size() in (1, 2, 4, 8)]


def ref_t(x):
    return x.transpose(-2, -1).contiguous()


def check(y, x):
    expect = ref_t(x)
    assert y.shape == expect.shape and y.dtype == x.dtype and y.device == x.device
    assert y.is_contiguous()
    assert torch.equal(y, expect)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_transpose_every_dtype(device, dtype):
    for i, shape in enumerate(SHAPES_2D + [(3, 33, 65), (2, 3, 4, 5)]):
        x = make_tensor(shape, dtype, device, seed=i)
        check(cudasteps.transpose(x), x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_transpose_small_dense_and_past_it(dtype):
    """Dense 4-byte matrices of up to 512 x 512 elements take the padded-tile kernel, larger ones
    the final kernel: both sides of that line, batched, into poisoned outputs. The bits move
    unchanged (NaN payloads of fp32 included)."""
    for i, shape in enumerate([(512, 512), (512, 513), (4, 256, 255), (3, 200, 300), (1, 511, 7)]):
        x = make_tensor(shape, dtype, "cuda", seed=i)
        if dtype == torch.float32:
            x.view(torch.int32).view(-1)[::97] = 0x7FC00123  # a NaN with a payload
        out = poisoned(ref_t(x).shape, dtype, "cuda")
        cudasteps.transpose_(out, x)
        # Compared as int32 bit patterns: torch.equal would count NaN != NaN.
        assert torch.equal(out.view(torch.int32), ref_t(x).view(torch.int32)), shape


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8, torch.float64])
def test_transpose__into_poisoned_output(device, dtype):
    for i, shape in enumerate([(33, 65), (4097 if device == "cuda" else 257, 31), (5, 17, 3), (1, 9)]):
        x = make_tensor(shape, dtype, device, seed=i)
        out = poisoned(ref_t(x).shape, dtype, device)
        assert cudasteps.transpose_(out, x) is out
        assert torch.equal(out, ref_t(x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8, torch.int64])
def test_transpose_non_contiguous_and_offset_inputs(device, dtype):
    base = make_tensor((6, 40, 68), dtype, device)
    views = [
        base[:, 3:37, 5:66],  # row slice: unit column stride, row stride 68
        base[1:5],  # batch slice (storage offset)
        base[::2],  # batch stride 2 * 40 * 68
        base.transpose(-2, -1),  # transposed view: the result is a plain copy
        base[:, :, ::2],  # column stride 2: made contiguous first
        base.permute(1, 0, 2),  # batch stride smaller than the row stride
        base.view(2, 3, 40, 68).permute(1, 0, 2, 3),  # batch dims that do not collapse to one stride
        base[2, 1:, 1:],  # 2-D with offset
        base[:, 7],  # (6, 68): a 2-D view with row stride 40 * 68
        make_tensor((1, 40, 68), dtype, device).expand(3, 40, 68),  # batch stride 0
        base.unsqueeze(1)[:, :, 1:],  # size-1 batch dim
        base[:, :1, 1:],  # M == 1, strided: a copy
        base[:, 1:, 3:4],  # N == 1, strided: a copy
    ]
    for v in views:
        check(cudasteps.transpose(v), v)
    for offset in (1, 2, 3):  # data pointer off any 4- or 16-byte boundary
        for shape in [(33, 65), (64, 128), (4, 8)]:
            x = misaligned(shape, dtype, device, offset=offset)
            check(cudasteps.transpose(x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_transpose__non_contiguous_out(device):
    x = make_tensor((3, 33, 17), torch.float32, device)
    big = poisoned((3, 33, 20), torch.float32, device)
    out = big[:, :, 1:18].transpose(-2, -1)  # shape (3, 17, 33), not contiguous
    cudasteps.transpose_(out, x)
    assert torch.equal(out, ref_t(x))
    assert torch.isnan(big[:, :, 0]).all() and torch.isnan(big[:, :, 18:]).all()
    # M == 1 into a non-contiguous out.
    x1 = make_tensor((3, 1, 17), torch.float32, device, seed=1)
    big1 = poisoned((3, 1, 19), torch.float32, device)
    out1 = big1[:, :, 1:18].transpose(-2, -1)  # (3, 17, 1)
    cudasteps.transpose_(out1, x1)
    assert torch.equal(out1, ref_t(x1))
    # Misaligned but contiguous out (storage offset 1).
    out2 = poisoned((17 * 33 * 3 + 1,), torch.float32, device)[1:].view(3, 17, 33)
    cudasteps.transpose_(out2, x)
    assert torch.equal(out2, ref_t(x))


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_empty(device):
    for shape in [(0, 5), (5, 0), (0, 0), (3, 0, 4), (0, 3, 4)]:
        x = torch.empty(shape, device=device)
        y = cudasteps.transpose(x)
        assert y.shape == ref_t(x).shape
        out = torch.empty(ref_t(x).shape, device=device)
        assert cudasteps.transpose_(out, x) is out


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_errors(device):
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.transpose: self must have at least 2 dimensions, got 1-D with shape \[5\]",
    ):
        cudasteps.transpose(make_tensor((5,), torch.float32, device))
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.transpose: self must have at least 2 dimensions, got 0-D"
    ):
        cudasteps.transpose(make_tensor((), torch.float32, device))
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.transpose: self must have an element size of 1, 2, 4 or 8 bytes, "
        r"got 16 \(ComplexDouble\)",
    ):
        cudasteps.transpose(make_tensor((2, 3), torch.complex128, device))
    x = make_tensor((4, 5), torch.float32, device)
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.transpose_: out must have the shape \[5, 4\] "
        r"\(src's last two dimensions swapped\), got \[4, 5\]",
    ):
        cudasteps.transpose_(torch.empty((4, 5), device=device), x)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.transpose_: out must have the dtype of src \(Float\), got Double"
    ):
        cudasteps.transpose_(torch.empty((5, 4), dtype=torch.float64, device=device), x)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.transpose_: src must have at least 2 dimensions, got 1-D"
    ):
        cudasteps.transpose_(torch.empty((5,), device=device), make_tensor((5,), torch.float32, device))
    sq = make_tensor((6, 6), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"cudasteps\.transpose_: out must not share memory with src"):
        cudasteps.transpose_(sq, sq)


@requires_cuda
def test_transpose__device_mismatch():
    x = make_tensor((4, 5), torch.float32, "cuda")
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.transpose_: out must be on src's device \(cuda:0\), got cpu"
    ):
        cudasteps.transpose_(torch.empty((5, 4)), x)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.transpose_: out must be on src's device \(cpu\), got cuda:0"
    ):
        cudasteps.transpose_(torch.empty((5, 4), device="cuda"), x.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_autograd(device):
    x = make_tensor((2, 5, 7), torch.float64, device).requires_grad_()
    if device == "cpu":
        torch.autograd.gradcheck(cudasteps.transpose, (x,))
        torch.autograd.gradgradcheck(cudasteps.transpose, (x,))
        torch.autograd.gradcheck(lambda t: cudasteps.transpose(t.transpose(0, 2)), (x,))
    # Gradients against torch's.
    g = make_tensor((2, 7, 5), torch.float64, device, seed=1)
    (cudasteps.transpose(x) * g).sum().backward()
    expect = g.transpose(-2, -1)
    assert torch.equal(x.grad, expect)
    # transpose_: the gradient reaches src; the overwritten values of out get none.
    src = make_tensor((5, 7), torch.float64, device, seed=2).requires_grad_()
    out_leaf = make_tensor((7, 5), torch.float64, device, seed=3).requires_grad_()
    out = out_leaf * 2
    assert cudasteps.transpose_(out, src) is out
    (out * 3).sum().backward()
    assert torch.equal(src.grad, torch.full_like(src, 3.0))
    assert out_leaf.grad is None or torch.equal(out_leaf.grad, torch.zeros_like(out_leaf))


@pytest.mark.parametrize("device", DEVICES)
def test_transpose__bumps_version_counter(device):
    out = make_tensor((3, 2), torch.float32, device)
    v = out._version
    cudasteps.transpose_(out, make_tensor((2, 3), torch.float32, device, seed=1))
    assert out._version > v


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_opcheck(device):
    x = make_tensor((7, 9), torch.float32, device)
    torch.library.opcheck(torch.ops.cudasteps.transpose.default, (x,))
    torch.library.opcheck(
        torch.ops.cudasteps.transpose.default, (make_tensor((3, 5, 4), torch.bfloat16, device),)
    )
    torch.library.opcheck(torch.ops.cudasteps.transpose.default, (x.t(),))
    torch.library.opcheck(torch.ops.cudasteps.transpose.default, (x.clone().requires_grad_(),))
    torch.library.opcheck(torch.ops.cudasteps.transpose_.default, (torch.empty((9, 7), device=device), x))
    torch.library.opcheck(
        torch.ops.cudasteps.transpose_.default,
        (torch.empty((9, 7), device=device), x.clone().requires_grad_()),
    )


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_torch_compile_fullgraph(device):
    @torch.compile(fullgraph=True)
    def f(x, out):
        y = cudasteps.transpose(x * 2) + 1
        cudasteps.transpose_(out, y)
        return y

    x = make_tensor((8, 6), torch.float32, device)
    out = poisoned((8, 6), torch.float32, device)
    y = f(x, out)
    assert torch.equal(y, x.t() * 2 + 1)
    assert torch.equal(out, x * 2 + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_wide_and_tall_cpu_sized(device):
    for shape in [(3, 1, 5000), (3, 5000, 1), (2, 3, 300, 70)]:
        x = make_tensor(shape, torch.float32, device, seed=shape[-1])
        check(cudasteps.transpose(x), x)


# ---- CUDA-only: big shapes, grid limits, the ladder ----------------------------------------------


@requires_cuda
@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.uint8,
        torch.float64,
        torch.complex64,
        torch.int16,
        torch.bool,
    ],
)
def test_transpose_cuda_shapes(dtype):
    shapes = [
        (4097, 31),
        (31, 4097),
        (1024, 1024),
        (8191, 4097),
        (1, 1 << 20),
        ((1 << 20) + 3, 1),
        (64, 130, 66),
        (5, 127, 129),
        (2, 2, 63, 65),
        (2, 258),
    ]
    for i, shape in enumerate(shapes):
        x = make_tensor(shape, dtype, "cuda", seed=i)
        check(cudasteps.transpose(x), x)


@requires_cuda
@pytest.mark.parametrize(
    "dtype, word_bytes",
    [(torch.uint8, 4), (torch.float16, 8), (torch.float16, 4), (torch.float32, 8), (torch.bfloat16, 8)],
)
def test_transpose_cuda_packed_and_unpacked_paths(dtype, word_bytes):
    # Packed words (4 bytes for uint8, 8 for 2- and 4-byte elements) need M, N, strides and
    # pointers to be multiples of the word; each condition broken alone must fall back to a
    # narrower word and still be right.
    k = word_bytes // torch.empty((), dtype=dtype).element_size()
    cases = [
        make_tensor((64 * k, 32 * k), dtype, "cuda"),  # packed, whole tiles
        make_tensor((3 * k + 4 * 64, 5 * k), dtype, "cuda"),  # packed, partial tiles
        make_tensor((64 * k + 1, 32 * k), dtype, "cuda"),  # M not a multiple of K
        make_tensor((64 * k, 32 * k + 1), dtype, "cuda"),  # N not a multiple of K
        make_tensor((64, 200), dtype, "cuda")[:, 1:129],  # pointer off by one element
        make_tensor((64, 201), dtype, "cuda")[:, :128],  # row stride not a multiple of K
        make_tensor((3, 17, 8 * k), dtype, "cuda")[:, 1:],  # batch stride off
    ]
    for x in cases:
        check(cudasteps.transpose(x), x)


@requires_cuda
def test_transpose_cuda_huge_batch_and_tall():
    # More than 65535 tiles along what a 2-D/3-D grid would put in y or z.
    x = make_tensor((70000, 2, 3), torch.float32, "cuda")
    check(cudasteps.transpose(x), x)
    x = make_tensor((70000 * 64 + 5, 3), torch.float32, "cuda", seed=1)
    check(cudasteps.transpose(x), x)
    x = make_tensor((3, 70000 * 32 + 5), torch.uint8, "cuda", seed=2)
    check(cudasteps.transpose(x), x)


@requires_cuda
@pytest.mark.slow
def test_transpose_beyond_int32_elements():
    # 2^31 + a bit uint8 elements: 64-bit offsets in the kernel's reads and writes.
    M, N = 46341, 46345  # M * N > 2^31
    x = torch.randint(0, 255, (M, N), dtype=torch.uint8, device="cuda")
    y = cudasteps.transpose(x)
    assert torch.equal(y[-3:], x[:, -3:].t())
    assert torch.equal(y[:, -3:], x[-3:].t())
    assert torch.equal(y, x.t())
    del y
    x2 = x[:, 1:]  # unpacked path
    assert torch.equal(cudasteps.transpose(x2), x2.t())


@requires_cuda
@pytest.mark.parametrize("variant", cudasteps.ladder.variants("transpose"))
def test_transpose_ladder_variants(variant):
    for i, shape in enumerate(
        [(1, 1), (33, 65), (65, 33), (1, 1000), (1000, 1), (4097, 31), (3, 70, 45), (512, 512)]
    ):
        x = make_tensor(shape, torch.float32, "cuda", seed=i)
        check(cudasteps.ladder.run("transpose", variant, x), x)


@requires_cuda
def test_transpose_ladder_errors():
    x = make_tensor((4, 4), torch.float32, "cuda")
    with pytest.raises(
        RuntimeError,
        match=r"cudasteps\.ladder_transpose: variant must be one of "
        r"naive_row, naive_col, smem, padded, final, got 'fastest'",
    ):
        cudasteps.ladder.run("transpose", "fastest", x)
    with pytest.raises(
        RuntimeError, match=r"cudasteps\.ladder_transpose: self must be Float for variant 'smem'"
    ):
        cudasteps.ladder.run("transpose", "smem", x.half())
    with pytest.raises(RuntimeError, match=r"cudasteps\.ladder_transpose: self must be contiguous"):
        cudasteps.ladder.run("transpose", "padded", x.t())
    assert torch.equal(cudasteps.ladder.run("transpose", "final", x.half()), x.half().t())


@requires_cuda
def test_transpose_gradients_match_torch_cuda():
    x = make_tensor((3, 33, 65), torch.float32, "cuda").requires_grad_()
    xt = x.detach().clone().requires_grad_()
    g = make_tensor((3, 65, 33), torch.float32, "cuda", seed=5)
    (cudasteps.transpose(x) * g).sum().backward()
    (xt.transpose(-2, -1) * g).sum().backward()
    assert torch.equal(x.grad, xt.grad)


@requires_cuda
def test_transpose_on_non_default_stream_and_other_device():
    s = torch.cuda.Stream()
    x = make_tensor((1000, 999), torch.float32, "cuda")
    with torch.cuda.stream(s):
        y = cudasteps.transpose(x)
    s.synchronize()
    assert torch.equal(y, x.t())
    if torch.cuda.device_count() > 1:
        x1 = make_tensor((123, 457), torch.float32, "cuda:1")
        y1 = cudasteps.transpose(x1)
        assert y1.device == x1.device and torch.equal(y1, x1.t())
