"""End-to-end benchmarks: what a training step gains or loses when a model swaps torch.nn for
cudasteps.nn, rather than one op in isolation.

ffn_step: a transformer feed-forward block, ``Linear(d, h) -> GELU -> Linear(h, d)`` (batch 8192,
2048 -> 8192 -> 2048 on CUDA), trained one step at a time: ``zero_grad``, forward, MSE loss,
backward, ``SGD.step``. ``torch`` is ``torch.nn.Sequential(Linear, GELU, Linear)``, and on CUDA
``torch.compile`` is the same model under ``torch.compile`` (what a user who does not switch would
run); ``cudasteps`` is ``cudasteps.nn.MLP([d, h, d], "gelu")`` loaded with the same weights and
biases (the function computed is the same; the first loss of both is compared before timing).
Two precisions: fp32 with TF32 off (the report disables TF32 for every family), and
``torch.autocast(bfloat16)`` with fp32 parameters. The FLOP count is that of the six GEMMs of a
step (forward: 2; backward: 2 for the input gradients and 2 for the weight gradients),
``3 * 2 * B * (d*h + h*d)``; the elementwise work, the loss and the optimizer are timed but not
counted, so TFLOP/s is the rate a step achieves on its GEMM work.

block_step: a GPT-style transformer block, pre-LayerNorm as in GPT-2: ``x + proj(attn(ln1(x)))``
then ``x + mlp(ln2(x))``, causal ``F.scaled_dot_product_attention``, an MLP ``d -> 4d -> d`` with
GELU (batch 8 x 1024 tokens, d = 2048, 16 heads on CUDA). ``torch`` builds its four linears from
``torch.nn.Linear`` (the MLP as ``Sequential(Linear, GELU, Linear)``); ``cudasteps`` from
``cudasteps.nn.Linear`` (the MLP as ``cudasteps.nn.MLP``, bias + GELU fused); same weights. One
training step under bf16 autocast: forward, MSE loss, backward, ``AdamW`` step (fused on CUDA).
Timed eager, and with both models under ``torch.compile(fullgraph=True)`` (a graph break is an
error), in one run. The FLOP count is the four linears' (``3 * 2 * tokens * 12 d^2``); attention,
the norms and the optimizer are timed but not counted.

On CUDA the report also gets a table of where each timed step's GPU time goes: one more step per
impl under torch.profiler, its kernels' durations summed as matrix products (cuBLAS's and
cudasteps' GEMM kernels), attention, and everything else, so that a reader sees whether a step's
gain or loss is in its GEMMs or around them.

ddp_step: ``examples/train_ddp.py`` run by ``torch.distributed.run`` on two GPUs (NCCL), with
``--impl torch`` and with ``--impl cudasteps`` in four alternating rounds, reporting the medians
of the script's own ``--step-time`` figures: ms per step with its data loading, and ms of the
training step alone (forward, backward with the gradient all-reduce, optimizer step; each such
step started on both ranks at once, after a barrier). Runs when two CUDA devices are visible.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from contextlib import nullcontext

import cudasteps
import cudasteps.nn as cnn
import torch
import torch.nn.functional as F
from torch import nn

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLE = os.path.join(_ROOT, "examples", "train_ddp.py")
sys.path.insert(0, os.path.dirname(_EXAMPLE))
import train_ddp  # noqa: E402  (the example's model builder: one definition of "the same network")

_PRECISIONS = {"fp32": None, "bf16 autocast": torch.bfloat16}
_WARMUP_STEPS = 10


def ffn_flops(batch: int, d: int, h: int) -> int:
    """GEMM flops of one training step of Linear(d, h) -> act -> Linear(h, d)."""
    return 3 * 2 * batch * (d * h + h * d)


def _autocast(device: torch.device, dtype):
    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def _models(device: torch.device, d: int, h: int):
    dims = [d, h, d]
    return {
        impl: train_ddp.build_model(impl, dims, "gelu", seed=0).to(device) for impl in ("torch", "cudasteps")
    }


def _train_step(model, opt, device, amp_dtype):
    def step(x, target):
        opt.zero_grad(set_to_none=True)
        x.grad = None  # x stands for the previous layer's output: its gradient is computed too
        with _autocast(device, amp_dtype):
            out = model(x)
        loss = F.mse_loss(out.float(), target)
        loss.backward()
        opt.step()
        return loss

    return step


# Kernel names of matrix products: cuBLAS's (nvjet, xmma, ampere/sm90 gemm kernels, cutlass) and
# cudasteps' (the SGEMM, the tensor-core and few-row kernels). Everything else a step runs is
# elementwise work, reductions, copies, the loss, the optimizer, attention (SDPA's flash kernels
# are counted apart: not a GEMM of the model's linears).
_GEMM_MARKS = ("gemm", "nvjet", "xmma", "cutlass", "wgmma", "gemv", "splitk", "mma_kernel", "cp_async")
_ATTENTION_MARKS = ("flash", "fmha", "attention", "efficient_attention")


def kernel_kind(name: str) -> str:
    """'gemm', 'attention' or 'other' for a CUDA kernel name (as the profiler reports it)."""
    low = name.lower()
    if any(m in low for m in _ATTENTION_MARKS):
        return "attention"
    if any(m in low for m in _GEMM_MARKS):
        return "gemm"
    return "other"


def own_durations(intervals) -> list:
    """Each kernel's own time, from the (start, duration) intervals of one stream's kernels sorted
    by start: its duration less the part that overlaps the kernels before it. A programmatic
    dependent launch (cudasteps' Hopper GEMMs, split-K's reduce, the few-row kernels) starts a
    kernel's blocks under the tail of the one before it, where they wait for it to finish
    (griddepcontrol.wait) before touching memory; the profiler's interval of that kernel includes
    the wait (in the FFN step an 86 us overlap made a 343 us weight-gradient product read 429 us),
    so its raw duration counted that time twice. The overlap goes to the kernel before, the one
    still working in it."""
    own, end = [], float("-inf")
    for start, duration in intervals:
        own.append(max(0.0, start + duration - max(start, end)))
        end = max(end, start + duration)
    return own


def idle_between(intervals) -> float:
    """The time, from the first kernel's start to the last one's end, when no kernel ran (the same
    sorted (start, duration) intervals as own_durations): the GPU waiting for the host to launch
    the next kernel, or for a launch's own latency, inside one step."""
    if not intervals:
        return 0.0
    span = max(start + duration for start, duration in intervals) - intervals[0][0]
    return span - sum(own_durations(intervals))


def kernel_ms_by_kind(step, args) -> dict:
    """GPU kernel time of one call of ``step(*args)`` by kind ({"gemm": ms, "attention": ms,
    "other": ms}), from torch.profiler's kernel events (a step's kernels run on one stream here):
    each kernel's own time (own_durations), so that kernels started under the tail of the one
    before (programmatic dependent launch) do not count the overlap twice; and "idle": the time
    between its kernels when none ran (idle_between)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    step(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    events = sorted(
        (e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start
    )
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    intervals = [(e.time_range.start, e.time_range.elapsed_us()) for e in events]
    for evt, own_us in zip(events, own_durations(intervals)):
        kinds[kernel_kind(evt.name)] += own_us / 1e3
    kinds["idle"] = idle_between(intervals) / 1e3
    return kinds


# Lines of the report's breakdown table, filled by the cases (CUDA only).
_BREAKDOWN: list = []


def _record_breakdown(case: str, steps: list, args) -> None:
    for impl, step in steps:
        try:
            k = kernel_ms_by_kind(step, args)
        except Exception as exc:  # noqa: BLE001  (the profiler's API moves between releases)
            _BREAKDOWN.append(f"| {case} | {impl} | not measured: {type(exc).__name__}: {exc} | | | | |")
            continue
        total = k["gemm"] + k["attention"] + k["other"]
        share = 100 * k["gemm"] / total if total else 0.0
        _BREAKDOWN.append(
            f"| {case} | {impl} | {k['gemm']:.3f} | {k['attention']:.3f} | {k['other']:.3f} | {share:.0f}% "
            f"| {k['idle']:.3f} |"
        )


def _first_losses_agree(models, x, target, device, amp_dtype, precision: str) -> None:
    """Both models compute the same function from the same state: their first losses agree."""
    losses = {}
    for impl, model in models.items():
        with torch.no_grad(), _autocast(device, amp_dtype):
            losses[impl] = F.mse_loss(model(x).float(), target).item()
    ref = losses["torch"]
    # fp32: both are fp32 GEMMs (summation order differs). bf16: each side rounds its GEMM
    # operands or outputs to bf16 in its own places, an error of a few bf16 ulps (2^-8) at most.
    tol = 1e-4 if amp_dtype is None else 3e-2
    if abs(losses["cudasteps"] - ref) > tol * abs(ref):
        raise AssertionError(
            f"bench_e2e: ffn_step {precision}: torch.nn and cudasteps.nn disagree before training "
            f"(first loss {ref:.6g} vs {losses['cudasteps']:.6g}); the timings would not compare "
            "the same computation"
        )


def _ffn_cases(bench, batch: int, d: int, h: int) -> None:
    dev = bench.device
    gen = torch.Generator(device=dev).manual_seed(1)
    # requires_grad: in a transformer the block's input is an activation, so the backward computes
    # its gradient too (the sixth GEMM of the count below).
    x = torch.randn(batch, d, device=dev, generator=gen).requires_grad_(True)
    target = torch.randn(batch, d, device=dev, generator=torch.Generator(device=dev).manual_seed(2))
    flops = ffn_flops(batch, d, h)
    shape = [batch, d, h]
    for precision, amp_dtype in _PRECISIONS.items():
        models = _models(dev, d, h)
        _first_losses_agree(models, x, target, dev, amp_dtype, precision)
        case = f"{batch}x{d}->{h}->{d} {precision}"
        if dev.type == "cuda":
            # torch.nn under torch.compile (inductor fuses the bias, GELU and their backward into
            # its own kernels around cuBLAS): what a user who does not switch would run instead.
            compiled = train_ddp.build_model("torch", [d, h, d], "gelu", seed=0).to(dev)
            models["torch.compile"] = torch.compile(compiled)
        steps = []
        for impl, model in models.items():
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            step = _train_step(model, opt, dev, amp_dtype)
            # The harness warms up for 3 calls of a slow fn; a fresh model needs more (the CPU
            # GEMM library stalled for ~5 steps on new weights, the first steps allocate grads).
            for _ in range(_WARMUP_STEPS):
                step(x, target)
            steps.append((impl, step))
        dtype = torch.float32 if amp_dtype is None else amp_dtype
        for impl, ms in bench.time_many(steps, [(x, target)]).items():
            bench.record(op="ffn_step", case=case, impl=impl, dtype=dtype, shape=shape, ms=ms, flops=flops)
        if bench.is_cuda:
            _record_breakdown(f"ffn_step {case}", steps, (x, target))
        del models, steps
        if bench.is_cuda:
            torch.cuda.empty_cache()


def fp8_models(dev: torch.device, d: int, h: int) -> dict:
    """The FP8 FFN step's models, same weights: torch.nn (run in bf16 autocast, the baseline),
    torchao's float8 training under torch.compile (where torchao is installed) and
    cudasteps.nn.MLP(fp8=True)."""
    models = {"torch": train_ddp.build_model("torch", [d, h, d], "gelu", seed=0).to(dev)}
    try:
        from torchao.float8 import convert_to_float8_training

        ao = convert_to_float8_training(train_ddp.build_model("torch", [d, h, d], "gelu", seed=0).to(dev))
        models["torchao.float8"] = torch.compile(ao)
    except ImportError:
        pass  # torchao is optional: no row
    except Exception as e:  # an installed torchao that does not work with this torch: say so
        print(f"bench_e2e: torchao float8 unavailable ({type(e).__name__}: {e}); no row", file=sys.stderr)
    fp8 = cnn.MLP([d, h, d], "gelu", fp8=True).to(dev)
    fp8.load_from_torch_linears([m for m in models["torch"] if isinstance(m, nn.Linear)])
    models["cudasteps"] = fp8
    return models


def _ffn_fp8_case(bench, batch: int, d: int, h: int) -> None:
    """The FFN training step with FP8 linears: torch.nn in bf16 autocast (the baseline), torchao's
    float8 training under torch.compile (where torchao is installed), and cudasteps.nn.MLP with
    fp8=True under bf16 autocast (one cudasteps.linear_act_linear_fp8: dynamic per-tensor scales,
    the hidden tensor and its gradient only in FP8, their scales bounded from the range their GEMM
    took, e4m3 forward, e5m2 gradients)."""
    dev = bench.device
    gen = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(batch, d, device=dev, generator=gen).requires_grad_(True)
    target = torch.randn(batch, d, device=dev, generator=torch.Generator(device=dev).manual_seed(2))
    models = fp8_models(dev, d, h)
    steps = []
    for impl, model in models.items():
        step = _train_step(model, torch.optim.SGD(model.parameters(), lr=1e-3), dev, torch.bfloat16)
        for _ in range(_WARMUP_STEPS):
            step(x, target)
        steps.append((impl, step))
    case = f"{batch}x{d}->{h}->{d} fp8 (torch: bf16 autocast)"
    for impl, ms in bench.time_many(steps, [(x, target)]).items():
        bench.record(
            op="ffn_step",
            case=case,
            impl=impl,
            dtype=torch.float8_e4m3fn,
            shape=[batch, d, h],
            ms=ms,
            flops=ffn_flops(batch, d, h),
        )
    _record_breakdown(f"ffn_step {case}", steps, (x, target))


class GPTBlock(nn.Module):
    """A pre-LayerNorm transformer block (GPT-2's): causal self-attention through
    ``F.scaled_dot_product_attention``, then an MLP ``d -> 4d -> d`` with GELU, each with a
    residual. ``impl`` picks where the linears come from: ``torch.nn`` or ``cudasteps.nn``."""

    def __init__(self, d: int, heads: int, impl: str):
        super().__init__()
        linear = nn.Linear if impl == "torch" else cnn.Linear
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = linear(d, 3 * d)
        self.proj = linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        if impl == "torch":
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        else:
            self.mlp = cnn.MLP([d, 4 * d, d], "gelu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
        return x + self.mlp(self.ln2(x))

    def load_from(self, other: "GPTBlock") -> None:
        """Copy the parameters of a block built with ``torch.nn`` linears into this one."""
        for name in ("ln1", "qkv", "proj", "ln2"):
            getattr(self, name).load_state_dict(getattr(other, name).state_dict())
        if isinstance(self.mlp, cnn.MLP):
            self.mlp.load_from_torch_linears([other.mlp[0], other.mlp[2]])
        else:
            self.mlp.load_state_dict(other.mlp.state_dict())


def block_flops(tokens: int, d: int) -> int:
    """GEMM flops of one training step of GPTBlock's four linears (qkv 3d^2, proj d^2, MLP 8d^2)."""
    return 3 * 2 * tokens * 12 * d * d


def _block_cases(bench, batch: int, seq: int, d: int, heads: int) -> None:
    dev = bench.device
    gen = torch.Generator(device=dev).manual_seed(3)
    x = torch.randn(batch, seq, d, device=dev, generator=gen).requires_grad_(True)
    target = torch.randn(batch, seq, d, device=dev, generator=torch.Generator(device=dev).manual_seed(4))
    amp_dtype = torch.bfloat16
    torch.manual_seed(0)
    reference = GPTBlock(d, heads, "torch").to(dev)
    models = {"torch": reference}
    models["cudasteps"] = GPTBlock(d, heads, "cudasteps").to(dev)
    models["cudasteps"].load_from(reference)
    _first_losses_agree(models, x, target, dev, amp_dtype, "block_step bf16 autocast")
    base = f"{batch}x{seq} tokens, d {d}, {heads} heads, bf16 autocast"
    flops = block_flops(batch * seq, d)
    shape = [batch, seq, d, heads]
    for compiled in (False, True):
        steps = []
        for impl in models:
            # A fresh copy per mode: each timed model starts from the same weights and optimizer.
            model = GPTBlock(d, heads, impl).to(dev)
            model.load_from(reference)
            if compiled:
                model = torch.compile(model, fullgraph=True)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=bench.is_cuda)
            step = _train_step(model, opt, dev, amp_dtype)
            try:
                for _ in range(_WARMUP_STEPS):
                    step(x, target)
            except Exception as exc:  # noqa: BLE001  (a compile failure: record nothing, say why)
                what = f"{impl}{' under torch.compile' if compiled else ''}"
                print(f"bench_e2e: block_step {what} not recorded: {type(exc).__name__}: {exc}")
                continue
            steps.append((impl, step))
        # Under torch.compile the "torch" row is torch.nn compiled: the case label says so, and the
        # report's speedup column compares like with like.
        case = base + (", both under torch.compile" if compiled else ", eager")
        for impl, ms in bench.time_many(steps, [(x, target)]).items():
            bench.record(
                op="block_step", case=case, impl=impl, dtype=amp_dtype, shape=shape, ms=ms, flops=flops
            )
        if bench.is_cuda:
            _record_breakdown(f"block_step {case}", steps, (x, target))
        del steps
        if bench.is_cuda:
            torch.cuda.empty_cache()


def _ddp_step_ms(impl: str, extra_args: list[str]) -> dict:
    """Runs examples/train_ddp.py on two GPUs; returns its figures {"step_ms": .., "train_ms": ..}."""
    env = dict(os.environ)
    env["NCCL_NVLS_ENABLE"] = "0"  # NVLink SHARP multicast: not needed for 2 ranks, and fragile
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0,1")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cudasteps.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        _EXAMPLE,
        "--impl",
        impl,
        "--device",
        "cuda",
        "--step-time",
        *extra_args,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    found = dict(re.findall(r"^(step_ms|train_ms) (\S+)$", proc.stdout, re.MULTILINE))
    if proc.returncode != 0 or set(found) != {"step_ms", "train_ms"}:
        raise RuntimeError(
            f"{' '.join(cmd[3:])} exited with {proc.returncode}:\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    return {k: float(v) for k, v in found.items()}


# (case label, train_ddp.py arguments, per-rank batch, dims). Epochs: the script's step_ms is the
# median over its odd epochs after the first of each epoch's mean step, train_ms over its even ones
# of their steps' median; 32 batches per epoch and rank here. With the example's default 5 epochs
# (4 for the FFN) a run's step_ms was the median of two epoch means; 11 and 10 epochs give it five
# (and train_ms five or four epochs of steps), for under a second more per run, whose ~15 s is
# mostly start-up.
_DDP_CONFIGS = [
    ("example defaults 32->256->256->10, batch 128/rank", ["--epochs", "11"], 128, [32, 256, 256, 10]),
    (
        "FFN 1024->4096->1024->10, batch 1024/rank",
        ["--dims", "1024,4096,1024,10", "--batch-size", "1024", "--samples", "65536", "--epochs", "10"],
        1024,
        [1024, 4096, 1024, 10],
    ),
]


# Runs of examples/train_ddp.py per impl and case, in alternating rounds (torch first in even
# rounds, cudasteps first in odd ones); each row is the median of its runs. One run per impl moved
# the data-loading figure by up to a third between reports, on either side (scripts/ddp_rounds.py
# shows the spread), so that a single pair's ratio said more about the run than the build.
# An even number of rounds: the runs drift (2x H200, 2026-11-28: the FFN's step with loading ran
# 4.97, 4.51, 4.41, 4.33, 4.02, 3.99 ms in six consecutive runs, both sides alike), and with three
# rounds (torch's runs 1st, 4th, 5th, cudasteps.nn's 2nd, 3rd, 6th) one side's median is an
# earlier run than the other's; with four (1, 4, 5, 8 against 2, 3, 6, 7) each median is the mean
# of runs at the same mean position.
_DDP_ROUNDS = 4


def ddp_round_medians(run, impls=("torch", "cudasteps"), rounds=_DDP_ROUNDS) -> dict:
    """{impl: {figure: median}} over `rounds` calls run(impl) -> {figure: ms} per impl, the impls
    alternating their order round by round; an impl whose every run failed (run raised
    RuntimeError or subprocess.TimeoutExpired, reported on stderr) is left out."""
    runs = {impl: [] for impl in impls}
    for r in range(rounds):
        for impl in impls if r % 2 == 0 else tuple(reversed(impls)):
            try:
                runs[impl].append(run(impl))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"bench_e2e: ddp_step {impl} round {r} failed: {exc}", file=sys.stderr)
    return side_medians(runs)


def side_medians(runs: dict) -> dict:
    """{impl: [{figure: ms}, ...]} -> {impl: {figure: median}}, leaving out an impl with no runs."""
    return {
        impl: {key: statistics.median(f[key] for f in figs) for key in figs[0]}
        for impl, figs in runs.items()
        if figs
    }


def _ddp_cases(bench) -> None:
    for case, args, batch, dims in _DDP_CONFIGS:
        flops = 3 * 2 * batch * sum(a * b for a, b in zip(dims, dims[1:]))  # per rank
        medians = ddp_round_medians(lambda impl, args=args: _ddp_step_ms(impl, args))
        for impl, figures in medians.items():
            for what, key in (("step with data loading", "step_ms"), ("training step only", "train_ms")):
                bench.record(
                    op="ddp_step",
                    case=f"2 GPUs, {case}, {what}",
                    impl=impl,
                    dtype=torch.float32,
                    shape=[batch, *dims],
                    ms=figures[key],
                    flops=flops,
                )


def run_fp8(bench):
    """The FP8 FFN step alone (GPU only), with its kernel-time breakdown, for a measurement round
    that needs just it (scripts/bench_cases.py e2e.run_fp8 --sections)."""
    if bench.is_cuda:
        _ffn_fp8_case(bench, 8192, 2048, 8192)
        _breakdown_section(bench)


def _breakdown_section(bench) -> None:
    """The report's section of the breakdown lines the cases recorded (then cleared)."""
    if not _BREAKDOWN:
        return
    bench.section(
        "e2e: where a step's GPU time goes",
        "GPU kernel time of one step (torch.profiler, after the timed runs), summed by kind: "
        "matrix products (cuBLAS's and cudasteps' GEMM kernels), attention (SDPA's kernels) "
        "and everything else (elementwise, reductions, casts, the loss, the optimizer). "
        "The kernels' sum, not the step's wall time: launch gaps are left out, and each kernel "
        "counts its own time only (a kernel started under the tail of the one before it, by a "
        "programmatic dependent launch, loses the overlap, which it spends waiting). The last "
        "column is the time between the step's first kernel and its last when none ran (the GPU "
        "waiting for the host's next launch): with the kernels' sum, the step's span on the GPU.\n\n"
        "| case | impl | GEMM ms | attention ms | other ms | GEMM share | idle between kernels ms |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(_BREAKDOWN),
    )
    _BREAKDOWN.clear()


def run(bench):
    if not bench.is_cuda:
        # A small FFN and block on the CPU, so `make bench` without a GPU stays fast.
        if bench.quick:
            _ffn_cases(bench, 128, 64, 256)
            _block_cases(bench, 2, 32, 64, 2)
        else:
            _ffn_cases(bench, 512, 256, 1024)
            _block_cases(bench, 2, 128, 256, 4)
        return
    if bench.quick:
        _ffn_cases(bench, 4096, 1024, 4096)
        _block_cases(bench, 4, 512, 1024, 8)
    else:
        _ffn_cases(bench, 8192, 2048, 8192)
        _block_cases(bench, 8, 1024, 2048, 16)
    _ffn_fp8_case(bench, 8192, 2048, 8192)
    two_gpus = torch.cuda.device_count() >= 2
    if two_gpus:
        _ddp_cases(bench)
    _breakdown_section(bench)
    bench.section(
        "e2e",
        "ffn_step times a whole training step of a transformer FFN block (zero_grad, forward, MSE "
        "loss, backward, SGD step): torch.nn.Sequential(Linear, GELU, Linear), eager and (on CUDA) "
        "under torch.compile, against cudasteps.nn.MLP (its hidden layer and output layer one "
        "cudasteps.linear_act_linear: linear_act, then linear) with the same weights. block_step "
        "times a training step (bf16 autocast, AdamW) of a GPT-style pre-LayerNorm block (causal "
        "SDPA attention, MLP d -> 4d -> d with GELU) whose four linears come from torch.nn or "
        "cudasteps.nn, eager and with both models "
        "under torch.compile(fullgraph=True); its TFLOP/s counts the linears only "
        "(3 x 2 x tokens x 12 d^2). ffn_step's TFLOP/s counts the step's six GEMMs only "
        "(3 x 2 x B x 2dh). Under bf16 autocast the torch rows use cuBLAS's bf16 tensor-core "
        "GEMM; the cudasteps rows use whatever cudasteps.nn.Linear runs under autocast, so the "
        "ratio is what a user who swaps the modules gets. ddp_step is examples/train_ddp.py's "
        f"own --step-time figures on two GPUs (NCCL), each the median of {_DDP_ROUNDS} runs per "
        "impl in alternating rounds (one run's data-loading figure moves by up to a third): ms "
        "per step with the script's data loading "
        "(DataLoader over a CPU TensorDataset: whole batches through a BatchSampler, pinned), "
        "and ms of the training step alone (forward, "
        "backward with the gradient all-reduce, SGD step; CUDA events; each timed step starts on both "
        "ranks at once, after a device sync and a barrier). TFLOP/s is per rank. "
        "The ffn_step fp8 rows: torch.nn in bf16 autocast (the baseline), torchao's float8 "
        "training (convert_to_float8_training, tensorwise dynamic scaling) under torch.compile "
        "where torchao is installed, and cudasteps.nn.MLP(fp8=True) (one "
        "cudasteps.linear_act_linear_fp8: dynamic per-tensor scales, e4m3 forward and e5m2 "
        "gradients, the six products on scaled_mm's FP8 kernel on Hopper; the hidden tensor and "
        "its gradient exist only in FP8, each cast with its activation or derivative in one pass "
        "whose scale is bounded from the range the GEMM before it took in its epilogue)."
        + ("" if two_gpus else " (Fewer than two CUDA devices were visible: no ddp_step rows.)"),
    )
