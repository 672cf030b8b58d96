"""copy: cudasteps.copy / copy_ against torch clone() / copy_, its ladder, and misaligned views."""

import cudasteps
import torch

MiB = 1 << 20
# Copies of at most this many bytes are timed as CUDA-graph replays (run's size loop).
GRAPH_MAX_BYTES = 16 * MiB


def _make(numel, dtype, device, offset=0):
    def make(seed):
        g = torch.Generator(device=device).manual_seed(seed)
        base = torch.randn(numel + offset, generator=g, device=device).to(dtype)
        return (base[offset:],)

    return make


def _size_label(nbytes):
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // 1024} KiB"


def run(bench):
    dev = bench.device
    f32 = torch.float32
    # torch and cudasteps timed interleaved (harness.time_many) in every case of this family.
    clone_pair = [("torch", lambda x: x.clone()), ("cudasteps", cudasteps.copy)]
    if bench.is_cuda:
        sizes = [4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB] + ([] if bench.quick else [1024 * MiB])
    else:
        sizes = [4 * MiB, 64 * MiB]

    for nbytes in sizes:
        numel = nbytes // 4
        inputs = bench.rotation(_make(numel, f32, dev), nbytes)
        case = f"{_size_label(nbytes)} fp32"
        timer = bench.time_many
        if bench.is_cuda and nbytes <= GRAPH_MAX_BYTES:
            # A copy this small takes less GPU time than a timed eager call's host path (the
            # events' records and the call's launch), which is then what the eager timing reads:
            # on an H100, torch / cudasteps, 4 MiB 18.1 / 23.0 us and 16 MiB 18.3 / 17.5 in one
            # report, 28.2 / 28.3 and 62.7 / 37.3 in the one before, the same code. As CUDA-graph
            # replays: the GPU's time.
            timer, case = bench.time_many_graphed, f"{case} (graph)"
        for impl, ms in timer(clone_pair, inputs).items():
            bench.record(op="copy", case=case, impl=impl, dtype=f32, shape=[numel], ms=ms, bytes=2 * nbytes)

    # Misaligned: a view one element past a 16-byte boundary (x[1:]), against the aligned figure.
    for nbytes in sizes[-2:]:
        numel = nbytes // 4
        inputs = bench.rotation(_make(numel, f32, dev, offset=1), nbytes)
        case = f"{_size_label(nbytes)} fp32 misaligned (offset 1)"
        for impl, ms in bench.time_many(clone_pair, inputs).items():
            bench.record(op="copy", case=case, impl=impl, dtype=f32, shape=[numel], ms=ms, bytes=2 * nbytes)

    # In place, into an existing tensor.
    nbytes = sizes[-1]
    numel = nbytes // 4
    src = _make(numel, f32, dev)(0)[0]
    dst = torch.empty_like(src)
    case = f"copy_ {_size_label(nbytes)} fp32"
    pair = [("torch", lambda: dst.copy_(src)), ("cudasteps", lambda: cudasteps.copy_(dst, src))]
    for impl, ms in bench.time_many(pair, [()]).items():
        bench.record(op="copy_", case=case, impl=impl, dtype=f32, shape=[numel], ms=ms, bytes=2 * nbytes)

    # Other element sizes move the same bytes through the same kernel.
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.uint8, "uint8"), (torch.float64, "fp64")):
        nbytes = 64 * MiB
        numel = nbytes // torch.tensor([], dtype=dtype).element_size()
        inputs = bench.rotation(_make(numel, dtype, dev), nbytes)
        case = f"64 MiB {name}"
        for impl, ms in bench.time_many(clone_pair, inputs).items():
            bench.record(op="copy", case=case, impl=impl, dtype=dtype, shape=[numel], ms=ms, bytes=2 * nbytes)

    # Non-contiguous sources, materialized contiguous (torch: x.contiguous(), i.e.
    # clone(memory_format=torch.contiguous_format)). A transposed view of a contiguous tensor runs
    # the transpose kernel on CUDA (target: 2.5x); other strided views (target: at least 0.95x)
    # the row kernel when the innermost dim stays contiguous (row slices, column slices: 16-byte
    # chunks of each row) and the gather kernel when it is strided (x[:, ::2]: element loads,
    # 16-byte stores).
    side = 4096
    base = _make(side * side, f32, dev)(0)[0].view(side, side)
    strided_cases = [
        (f"{side}x{side} fp32 transposed view", base.t()),
        (f"{side}x{side} bf16 transposed view", base.bfloat16().t()),
        ("64x512x512 fp32 batched transposed view (.mT)", base.view(64, 512, 512).mT),
        (f"{side}x{side // 2} fp32 column-strided view (x[:, ::2])", base[:, ::2]),
        (f"{side // 2}x{side} fp32 row-sliced view (x[::2])", base[::2]),
        (f"{side // 2}x{side} bf16 row-sliced view (x[::2])", base.bfloat16()[::2]),
        (f"{side}x{side - 4} fp32 column-sliced view (x[:, 1:-3], rows 4 bytes off 16)", base[:, 1:-3]),
        ("64x510x512 fp32 3-D sliced view (x[:, 1:-1, :])", base.view(64, 512, 512)[:, 1:-1, :]),
        (f"{side}x{side // 2} bf16 column-strided view (x[:, ::2])", base.bfloat16()[:, ::2]),
        ("64x256x256 fp32 3-D strided view (x[:, ::2, ::2])", base.view(64, 512, 512)[:, ::2, ::2]),
    ]
    for case, x in strided_cases:
        moved = 2 * x.numel() * x.element_size()
        pair = [("torch", lambda x=x: x.contiguous()), ("cudasteps", lambda x=x: cudasteps.copy(x))]
        for impl, ms in bench.time_many(pair, [()]).items():
            bench.record(
                op="copy", case=case, impl=impl, dtype=x.dtype, shape=list(x.shape), ms=ms, bytes=moved
            )
    del base, strided_cases

    if not bench.is_cuda:
        return

    # Small: 4 KiB, where launch overhead is everything. Host time per call (the two sides taking
    # turns), and GPU time: each side's calls captured in a CUDA graph, the replays timed
    # interleaved. (Timed one side after the other, reports read cudasteps at 1.2 us against
    # torch's 1.0; both graphs hold one memcpy node, and interleaved their replays took 1.04 us each
    # on an H100.)
    small = _make(1024, f32, dev)(0)[0]
    for label, by_impl in bench.time_host_and_graph(clone_pair, (small,)).items():
        case = f"4 KiB fp32 {label}"
        for impl, ms in by_impl.items():
            bench.record(op="copy", case=case, impl=impl, dtype=f32, shape=[1024], ms=ms, bytes=2 * 4096)

    # Per-call host cost with autograd recording (C++ autograd: no Python runs inside the call).
    small_rg = small.clone().requires_grad_()
    case = "4 KiB fp32 requires_grad host/call"
    for impl, ms in bench.time_host_many(clone_pair, (small_rg,)).items():
        bench.record(op="copy", case=case, impl=impl, dtype=f32, shape=[1024], ms=ms, bytes=2 * 4096)

    # The ladder, on the largest size.
    nbytes = sizes[-1]
    numel = nbytes // 4
    inputs = bench.rotation(_make(numel, f32, dev), nbytes)
    case = f"{_size_label(nbytes)} fp32"
    steps = [
        (f"ladder:{v}", lambda x, v=v: cudasteps.ladder.run("copy", v, x))
        for v in cudasteps.ladder.variants("copy")
    ]
    for impl, ms in bench.time_many(steps, inputs).items():
        bench.record(op="copy", case=case, impl=impl, dtype=f32, shape=[numel], ms=ms, bytes=2 * nbytes)

    bench.section(
        "copy: what each step buys",
        "`scalar` launches one thread per element, each block moving 2 KiB with 4-byte accesses. "
        "`grid_stride` sizes the grid to one wave of resident blocks (SM count x occupancy) and "
        "loops. `vec16_persistent` moves 16 bytes per load and store (SASS: `LDG.E.128` / "
        "`STG.E.128`, see the SASS report of scripts/gpu_check.sh) from the same one-wave grid. "
        "`vec16` (what `copy` runs) launches one block per 8 KiB tile instead, so blocks sweep memory "
        "in address order, with streaming (evict-first) cache hints. Misaligned views keep 16-byte "
        "stores and load the widest words the input address allows.",
    )
