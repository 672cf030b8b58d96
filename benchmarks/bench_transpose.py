"""transpose: cudasteps.transpose against torch's x.transpose(-2, -1).contiguous() (always
materialized), and its ladder."""

import cudasteps
import torch

from benchmarks.harness import input_maker, nbytes

MiB = 1 << 20

_NAMES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.uint8: "uint8",
    torch.float64: "fp64",
}


def _torch_t(x):
    # x.transpose(-2, -1).contiguous(), forced to materialize: for M == 1 or N == 1 the transposed
    # view is already contiguous and .contiguous() would return it without moving a byte.
    return x.transpose(-2, -1).clone(memory_format=torch.contiguous_format)


def _label(shape, dtype):
    return "x".join(str(s) for s in shape) + " " + _NAMES[dtype]


def _compare(bench, shape, dtype, case=None):
    set_bytes = nbytes(shape, dtype)
    inputs = bench.rotation(input_maker(shape, dtype, bench.device), set_bytes)
    case = case or _label(shape, dtype)
    pair = [("torch", _torch_t), ("cudasteps", cudasteps.transpose)]
    for impl, ms in bench.time_many(pair, inputs).items():
        bench.record(
            op="transpose", case=case, impl=impl, dtype=dtype, shape=list(shape), ms=ms, bytes=2 * set_bytes
        )
    return inputs


def run(bench):
    f32 = torch.float32
    if not bench.is_cuda:
        for shape in [(2048, 2048), (1000, 3001), (16, 256, 256)]:
            _compare(bench, shape, f32)
        return

    big = [(8192, 8192), (4096, 4096), (8191, 4097), (1, 1 << 26), (1 << 26, 1), (64, 1024, 1024)]
    if bench.quick:
        big = [(8192, 8192), (8191, 4097), (1, 1 << 26), (64, 1024, 1024)]
    ladder_inputs = None
    for shape in big:
        inputs = _compare(bench, shape, f32)
        if shape == (8192, 8192):
            ladder_inputs = inputs

    dtypes = [torch.bfloat16, torch.float16, torch.uint8, torch.float64]
    if bench.quick:
        dtypes = [torch.bfloat16, torch.uint8]
    for dtype in dtypes:
        _compare(bench, (8192, 8192), dtype)

    # transpose_ into a preallocated output, against out.copy_(x.mT).
    shape = (8192, 8192)
    x = input_maker(shape, f32, bench.device)(0)[0]
    out = torch.empty_like(x)
    case = "transpose_ 8192x8192 fp32"
    pair = [("torch", lambda: out.copy_(x.mT)), ("cudasteps", lambda: cudasteps.transpose_(out, x))]
    for impl, ms in bench.time_many(pair, [()]).items():
        bench.record(
            op="transpose_",
            case=case,
            impl=impl,
            dtype=f32,
            shape=list(shape),
            ms=ms,
            bytes=2 * nbytes(shape, f32),
        )

    # Small: 256x256, where host overhead is everything. Host time per call and GPU time (CUDA-graph
    # replays), each with the two sides taking turns.
    small = input_maker((256, 256), f32, bench.device)(0)[0]
    pair = [("torch", _torch_t), ("cudasteps", cudasteps.transpose)]
    for label, by_impl in bench.time_host_and_graph(pair, (small,)).items():
        case = f"256x256 fp32 {label}"
        for impl, ms in by_impl.items():
            bench.record(
                op="transpose",
                case=case,
                impl=impl,
                dtype=f32,
                shape=[256, 256],
                ms=ms,
                bytes=2 * nbytes((256, 256), f32),
            )

    # The ladder, at 8192x8192 fp32.
    set_bytes = nbytes((8192, 8192), f32)
    steps = [
        (f"ladder:{v}", lambda x, v=v: cudasteps.ladder.run("transpose", v, x))
        for v in cudasteps.ladder.variants("transpose")
    ]
    for impl, ms in bench.time_many(steps, ladder_inputs).items():
        bench.record(
            op="transpose",
            case="8192x8192 fp32",
            impl=impl,
            dtype=f32,
            shape=[8192, 8192],
            ms=ms,
            bytes=2 * set_bytes,
        )

    bench.section(
        "transpose: what each step buys",
        "`naive_row` reads rows (coalesced) and writes columns: each 4-byte store lands in its own "
        "32-byte sector, so the writes move 8x the bytes. `naive_col` writes rows and reads columns "
        "through `__ldg`; the read-only cache recovers part of each fetched sector. `smem` stages a "
        "32x32 tile in shared memory so both global sides are coalesced, but reading a tile column "
        "from `float tile[32][32]` hits one bank 32 times (32-way conflict). `padded` "
        "(`tile[32][33]`) shifts row r to start at bank r: zero conflicts. `final` keeps the tile "
        "transposed in shared memory with an XOR swizzle (zero conflicts on both the shared store "
        "and load, no padding), gives each thread 8 loads in flight (64x32 fp32 tiles), packs 1- and "
        "2-byte dtypes into 4-byte words (K x K micro-blocks transposed in registers), and turns "
        "M == 1 / N == 1 and transposed views into plain copies; `cudasteps` runs it except for dense "
        "4-byte matrices of up to 512 x 512, which take `padded` (more, smaller blocks: a tiny "
        "transpose's time is one load-to-store latency). Bank conflicts and DRAM throughput "
        "per kernel: `ncu --clock-control none --metrics "
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,"
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,"
        "dram__throughput.avg.pct_of_peak_sustained_elapsed python benchmarks/ncu_transpose.py`.",
    )
