"""sum: cudasteps.sum against torch.sum (full, row, column, middle-dim and outer+inner sums),
small-size host and graph times, and the ladder of full-reduction kernels."""

import cudasteps
import torch

from benchmarks.harness import input_maker, nbytes

MiB = 1 << 20


def _label(dtype):
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _compare(bench, case, shape, dtype, dim, out_elems):
    """torch.sum vs cudasteps.sum on rotated inputs; bytes = input read + output written."""
    set_bytes = nbytes(shape, dtype)
    inputs = bench.rotation(input_maker(shape, dtype, bench.device), set_bytes)
    moved = set_bytes + out_elems * torch.tensor([], dtype=dtype).element_size()
    if dim is None:
        impls = (("torch", lambda x: torch.sum(x)), ("cudasteps", lambda x: cudasteps.sum(x)))
    else:
        impls = (("torch", lambda x: torch.sum(x, dim)), ("cudasteps", lambda x: cudasteps.sum(x, dim)))
    for impl, ms in bench.time_many(list(impls), inputs).items():
        bench.record(op="sum", case=case, impl=impl, dtype=dtype, shape=list(shape), ms=ms, bytes=moved)


def run(bench):
    f32 = torch.float32
    if not bench.is_cuda:
        for n in (1 << 20, 1 << 24):
            _compare(bench, f"full 2^{n.bit_length() - 1} fp32", [n], f32, None, 1)
        _compare(bench, "rows 2048x2048 fp32 dim=-1", [2048, 2048], f32, -1, 2048)
        _compare(bench, "cols 2048x2048 fp32 dim=0", [2048, 2048], f32, 0, 2048)
        _compare(bench, "middle 256x33x517 fp32 dim=1", [256, 33, 517], f32, 1, 256 * 517)
        _compare(bench, "outer+inner 256x33x517 fp32 dim=(0,2)", [256, 33, 517], f32, (0, 2), 33)
        return

    # Full reductions.
    for log2 in (20, 24) if bench.quick else (20, 24, 28):
        n = 1 << log2
        _compare(bench, f"full 2^{log2} fp32", [n], f32, None, 1)

    # Small: host time per call (back to back) and GPU time per call (CUDA-graph replay).
    n = 1 << 20
    x = input_maker([n], f32, bench.device)(0)[0]
    pair = [("torch", lambda t: torch.sum(t)), ("cudasteps", lambda t: cudasteps.sum(t))]
    for label, by_impl in bench.time_host_and_graph(pair, (x,)).items():
        case = f"full 2^20 fp32 {label}"
        for impl, ms in by_impl.items():
            bench.record(op="sum", case=case, impl=impl, dtype=f32, shape=[n], ms=ms, bytes=4 * n + 4)

    # Row and column sums of 8192x8192.
    side = 4096 if bench.quick else 8192
    for dtype in (f32, torch.bfloat16):
        shape = [side, side]
        _compare(bench, f"rows {side}x{side} {_label(dtype)} dim=-1", shape, dtype, -1, side)
        _compare(bench, f"cols {side}x{side} {_label(dtype)} dim=0", shape, dtype, 0, side)

    # Dim sets that are neither leading nor trailing, read in place: a middle dim (one column pass
    # with a thread per output) and the outer and inner dims together (a row pass, then a small
    # column pass over the row sums).
    batch = 1024 if bench.quick else 4096
    shape3 = [batch, 33, 517]
    for dtype in (f32, torch.bfloat16):
        _compare(bench, f"middle {batch}x33x517 {_label(dtype)} dim=1", shape3, dtype, 1, batch * 517)
        _compare(bench, f"outer+inner {batch}x33x517 {_label(dtype)} dim=(0,2)", shape3, dtype, (0, 2), 33)

    # The ladder: every step on one size, torch.sum alongside.
    log2 = 24 if bench.quick else 28
    n = 1 << log2
    inputs = bench.rotation(input_maker([n], f32, bench.device), 4 * n)
    case = f"full 2^{log2} fp32"
    steps = [
        (f"ladder:{v}", lambda t, v=v: cudasteps.ladder.run("reduce", v, t))
        for v in cudasteps.ladder.variants("reduce")
    ]
    for impl, ms in bench.time_many(steps, inputs).items():
        bench.record(op="sum", case=case, impl=impl, dtype=f32, shape=[n], ms=ms, bytes=4 * n + 4)

    bench.section(
        "sum: what each step buys",
        "Steps 1-4 share one kernel shape (256 threads, two elements added per thread during the "
        "load, one partial per block, passes until one value remains) and differ only in the block "
        "reduction: `smem_tree` halves in shared memory with a barrier per level; `syncwarp` stops "
        "the barriers at 64 values and finishes in one warp ordered by `__syncwarp`; `shfl` uses the "
        "shared warp-shuffle primitives (`warp_reduce.cuh` -> `block_reduce.cuh`); `coop_groups` "
        "writes the same with `cg::reduce` on a `thread_block_tile<32>`. `grid_stride_vec` sizes the "
        "grid to one wave and has each thread sum many 16-byte loads (4 in flight) before the block "
        "reduce, plus a one-block second kernel. `single_pass` (what `sum()` runs) folds that second "
        "kernel into the first: the last block to take a ticket adds the block partials in a fixed "
        "order, so a small sum is one launch. No floating-point atomics: results are bitwise "
        "reproducible.",
    )
