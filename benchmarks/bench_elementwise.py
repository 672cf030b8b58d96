"""Benchmarks of the elementwise family: bias_act (gelu) forward and forward+backward, add, mul, and
the bias_act ladder, against eager PyTorch and torch.compile.

Bytes are those that must move: forward reads x and writes y; backward reads grad and x and writes
grad_x (the bias and its gradient are N elements, counted too, and negligible). So fwd+bwd moves
5 tensors' worth; it is timed as a training step (y.backward(g) into the leaves' .grad, against
eager F.gelu(x + b)). add/mul read two operands (or one and a broadcast one) and write one.
"""

import cudasteps
import torch
import torch.nn.functional as F

_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _gelu_bias(x, b):
    return F.gelu(x + b)


def _make(shape, dtype, device, seed, requires_grad=False):
    gen = torch.Generator(device=device).manual_seed(seed)
    t = torch.empty(shape, dtype=torch.float32, device=device).uniform_(-3, 3, generator=gen).to(dtype)
    return t.requires_grad_(requires_grad)


def _ladder_fn(variant):
    return lambda x, b: cudasteps.ladder.run("elementwise", variant, x, b, "gelu")


def _fwd_bwd(fn):
    """fn(x, b) forward and backward as a training step runs them: x and b are leaf tensors that
    require grad, their .grad is None (optimizer.zero_grad()'s default), and y.backward(g) writes
    the gradients into .grad through autograd's AccumulateGrad."""

    def step(x, b, g):
        x.grad = None
        b.grad = None
        y = fn(x, b)
        y.backward(g)
        return x.grad, b.grad

    return step


def _compile_or_none(bench, fn, label, warm_args, fwd_bwd):
    """torch.compile(fn), compiled and run once outside timing; None (and a printed reason) if it fails."""
    try:
        compiled = torch.compile(fn)
        if fwd_bwd:
            _fwd_bwd(compiled)(*warm_args)
        else:
            compiled(*warm_args[:2])
        torch.cuda.synchronize() if bench.is_cuda else None
        return compiled
    except Exception as exc:  # noqa: BLE001  (any compile failure: record nothing, say why)
        print(
            f"bench_elementwise: torch.compile failed for {label}, not recorded: {type(exc).__name__}: {exc}"
        )
        return None


def _bias_act_cases(bench, M, N, dtype):
    dev = bench.device
    name = _DTYPE_NAMES[dtype]
    elem = torch.empty((), dtype=dtype).element_size()
    nbytes = M * N * elem
    bias_bytes = N * elem
    shape = [M, N]

    # Forward.
    inputs = bench.rotation(
        lambda s: (_make((M, N), dtype, dev, s), _make((N,), dtype, dev, s + 1000)), nbytes
    )
    case = f"gelu fwd {M}x{N} {name}"
    fwd_bytes = 2 * nbytes + bias_bytes
    impls = {
        "torch": _gelu_bias,
        "cudasteps": lambda x, b: cudasteps.bias_act(x, b, "gelu"),
    }
    compiled = _compile_or_none(bench, _gelu_bias, case, inputs[0], fwd_bwd=False)
    if compiled is not None:
        impls["torch.compile"] = compiled
    if bench.is_cuda:
        for variant in cudasteps.ladder.variants("elementwise"):
            impls[f"ladder:{variant}"] = _ladder_fn(variant)
    for impl, ms in bench.time_many(list(impls.items()), inputs).items():
        bench.record(op="bias_act", case=case, impl=impl, dtype=dtype, shape=shape, ms=ms, bytes=fwd_bytes)
    del inputs

    # Forward + backward (grad_x and grad_bias).
    inputs = bench.rotation(
        lambda s: (
            _make((M, N), dtype, dev, s, requires_grad=True),
            _make((N,), dtype, dev, s + 1000, requires_grad=True),
            _make((M, N), dtype, dev, s + 2000),
        ),
        2 * nbytes,
    )
    case = f"gelu fwd+bwd (training step) {M}x{N} {name}"
    total_bytes = 5 * nbytes + 2 * bias_bytes + bias_bytes  # + bias read twice, grad_bias written
    impls = {
        "torch": _fwd_bwd(_gelu_bias),
        "cudasteps": _fwd_bwd(lambda x, b: cudasteps.bias_act(x, b, "gelu")),
    }
    compiled = _compile_or_none(bench, _gelu_bias, case, inputs[0], fwd_bwd=True)
    if compiled is not None:
        impls["torch.compile"] = _fwd_bwd(compiled)
    for impl, ms in bench.time_many(list(impls.items()), inputs).items():
        bench.record(op="bias_act", case=case, impl=impl, dtype=dtype, shape=shape, ms=ms, bytes=total_bytes)
    del inputs


def _binary_cases(bench, numel, dtype):
    dev = bench.device
    name = _DTYPE_NAMES[dtype]
    elem = torch.empty((), dtype=dtype).element_size()
    nbytes = numel * elem
    size = f"{nbytes / 2**30:g}GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:g}MiB"
    same = bench.rotation(
        lambda s: (_make((numel,), dtype, dev, s), _make((numel,), dtype, dev, s + 1)), 2 * nbytes
    )
    N = 8192 if numel % 8192 == 0 else 1024
    per_feature = bench.rotation(
        lambda s: (_make((numel // N, N), dtype, dev, s), _make((N,), dtype, dev, s + 1)), nbytes
    )
    for op, torch_fn, ours in [
        ("add", lambda a, b: torch.add(a, b, alpha=2), lambda a, b: cudasteps.add(a, b, alpha=2)),
        ("mul", torch.mul, cudasteps.mul),
    ]:
        for case, inputs, shape, nb in [
            (f"{size} {name}", same, [numel], 3 * nbytes),
            (f"{size} per-feature [{N}] {name}", per_feature, [numel // N, N], 2 * nbytes + N * elem),
        ]:
            for impl, ms in bench.time_many([("torch", torch_fn), ("cudasteps", ours)], inputs).items():
                bench.record(op=op, case=case, impl=impl, dtype=dtype, shape=shape, ms=ms, bytes=nb)
    del same, per_feature


def _broadcast_cases(bench, rows, cols, dtype):
    """General broadcasts (the strided kernel) and 0-dim / Python-number operands."""
    dev = bench.device
    name = _DTYPE_NAMES[dtype]
    elem = torch.empty((), dtype=dtype).element_size()
    out_bytes = rows * cols * elem
    cases = [
        (f"[{rows},1] * [{cols}] {name}", (rows, 1), (cols,), out_bytes + (rows + cols) * elem),
        (f"[{rows},{cols}] * [{rows},1] {name}", (rows, cols), (rows, 1), 2 * out_bytes + rows * elem),
        (
            f"[4,{rows // 4},{cols}] * [{rows // 4},{cols}] {name}",
            (4, rows // 4, cols),
            (rows // 4, cols),
            2 * out_bytes + out_bytes // 4,
        ),
        (f"[{rows},{cols}] * 0-dim {name}", (rows, cols), (), 2 * out_bytes),
    ]
    for case, sa, sb, nb in cases:
        inputs = bench.rotation(
            lambda s, sa=sa, sb=sb: (_make(sa, dtype, dev, s), _make(sb, dtype, dev, s + 1)), nb
        )
        for impl, ms in bench.time_many([("torch", torch.mul), ("cudasteps", cudasteps.mul)], inputs).items():
            bench.record(op="mul", case=case, impl=impl, dtype=dtype, shape=[rows, cols], ms=ms, bytes=nb)
        del inputs
    inputs = bench.rotation(lambda s: (_make((rows, cols), dtype, dev, s),), out_bytes)
    case = f"[{rows},{cols}] * 0.5 (Python number) {name}"
    pair = [("torch", lambda x: torch.mul(x, 0.5)), ("cudasteps", lambda x: cudasteps.mul(x, 0.5))]
    for impl, ms in bench.time_many(pair, inputs).items():
        bench.record(
            op="mul", case=case, impl=impl, dtype=dtype, shape=[rows, cols], ms=ms, bytes=2 * out_bytes
        )
    del inputs


def _host_cases(bench):
    """Host time per call on a tiny input (launch + dispatch + autograd overhead), vs torch."""
    dev = bench.device
    x = _make((64, 64), torch.float32, dev, 0, requires_grad=True)
    b = _make((64,), torch.float32, dev, 1, requires_grad=True)
    g = _make((64, 64), torch.float32, dev, 2)

    def ours(x, b):
        return cudasteps.bias_act(x, b, "gelu")

    pair = [("torch", _gelu_bias), ("cudasteps", ours)]
    for impl, ms in bench.time_host_many(pair, (x, b)).items():
        bench.record(
            op="bias_act", case="host 64x64 fp32 fwd", impl=impl, dtype=torch.float32, shape=[64, 64], ms=ms
        )
    for impl, ms in bench.time_host_many([(i, _fwd_bwd(f)) for i, f in pair], (x, b, g)).items():
        bench.record(
            op="bias_act",
            case="host 64x64 fp32 fwd+bwd",
            impl=impl,
            dtype=torch.float32,
            shape=[64, 64],
            ms=ms,
        )


def run(bench):
    if not bench.is_cuda:
        # A few small CPU cases, so `make bench` works without a GPU.
        _bias_act_cases(bench, 512, 1024, torch.float32)
        _binary_cases(bench, 1 << 20, torch.float32)
        _broadcast_cases(bench, 1024, 1024, torch.float32)
        _host_cases(bench)
        return
    M = N = 4096 if bench.quick else 8192
    for dtype in (torch.float32, torch.bfloat16):
        _bias_act_cases(bench, M, N, dtype)
    numel = (1 << 26) if bench.quick else (1 << 28)  # 1 GiB of fp32 per operand in full mode
    _binary_cases(bench, numel, torch.float32)
    _binary_cases(bench, numel, torch.bfloat16)
    side = 4096 if bench.quick else 16384
    _broadcast_cases(bench, side, side, torch.float32)
    _host_cases(bench)
    bench.section(
        "elementwise",
        "bias_act fuses the bias add into the activation (one read of x, one write of y) and its "
        "backward into one pass that reads grad and x, writes grad_x and sums grad_bias per block "
        "(a deterministic second pass adds the per-block partials). The forward saves only x and "
        "bias. Ladder: unfused (bias add and activation as two kernels, as eager PyTorch) -> "
        "fused_scalar (one kernel, one element per thread, a modulo per element for the bias "
        "index) -> fused_vec16 (16-byte accesses, bias held in registers, rows in flight).",
    )
