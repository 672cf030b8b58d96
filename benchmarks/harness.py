"""Timing and reporting shared by every benchmarks/bench_<family>.py.

Timing rules (docs/BENCHMARKING.md): CUDA events after a warm-up, the median of many runs, input buffers
rotated when one set would sit in L2, seeded inputs. Small cases are measured two ways: host time
per call (calls back to back; launch overhead included) and GPU time (calls captured in a CUDA graph
and replayed, so launch gaps vanish).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

import torch


@dataclass
class Record:
    op: str
    case: str
    impl: str
    dtype: str
    shape: list
    ms: float
    gbps: float | None = None
    tflops: float | None = None
    family: str = ""  # the bench_<family>.py that produced it (groups the tables; not in the JSON)

    def as_json(self) -> dict:
        out = {
            "op": self.op,
            "case": self.case,
            "impl": self.impl,
            "dtype": self.dtype,
            "shape": self.shape,
            "ms": round(self.ms, 6),
        }
        if self.gbps is not None:
            out["gbps"] = round(self.gbps, 2)
        if self.tflops is not None:
            out["tflops"] = round(self.tflops, 3)
        return out


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def nbytes(shape, dtype) -> int:
    """Bytes of a dense tensor of this shape and dtype."""
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def random_tensor(shape, dtype, device, seed: int) -> torch.Tensor:
    """Seeded random data (normal floats; uniform bytes for uint8), never zeros."""
    g = torch.Generator(device=device).manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g, device=device, dtype=dtype)
    return torch.randn(shape, generator=g, device=device).to(dtype)


def input_maker(shape, dtype, device):
    """make(seed) -> (tensor,): the argument of Bench.rotation for a one-tensor op."""
    return lambda seed: (random_tensor(shape, dtype, device, seed),)


@dataclass
class Ceilings:
    """Measured on this machine at the start of a run: what "100%" means in the tables."""

    copy_gbps: float | None = None  # device-to-device copy_ of a large buffer, read + write bytes
    mm_tflops: float | None = None  # torch.mm fp32, TF32 off, 4096^3


@dataclass
class Bench:
    device: torch.device
    quick: bool = False
    records: list = field(default_factory=list)
    sections: dict = field(default_factory=dict)
    ceilings: Ceilings = field(default_factory=Ceilings)
    family: str = ""
    on_record: object = None  # callback(record) for the progress display

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def l2_bytes(self) -> int:
        if self.is_cuda:
            return torch.cuda.get_device_properties(self.device).L2_cache_size
        return 32 << 20

    # ---- timing --------------------------------------------------------------------------------

    def _sync(self):
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

    def _budget(self) -> tuple[float, int, int]:
        # (target ms of timed work per measurement, min runs, max runs)
        return (40.0, 5, 50) if self.quick else (150.0, 10, 200)

    def rotation(self, make_inputs, set_bytes: int) -> list:
        """Input sets whose total exceeds ~2x L2, so no timed call finds its inputs in cache."""
        n_sets = (
            1 if set_bytes >= 2 * self.l2_bytes else min(64, math.ceil(3 * self.l2_bytes / max(set_bytes, 1)))
        )
        return [make_inputs(seed) for seed in range(n_sets)]

    def time(self, fn, inputs, *, flush_l2: bool = False) -> float:
        """Median ms per call of fn(*inputs[i % len(inputs)])."""
        if isinstance(inputs, tuple):
            inputs = [inputs]
        flush = None
        if flush_l2 and self.is_cuda:
            flush = torch.empty(2 * self.l2_bytes // 4, dtype=torch.float32, device=self.device)
        runs = self._warm_up(fn, inputs)
        return statistics.median(self._timed_calls(fn, inputs, 0, runs, flush))

    def time_many(self, fns, inputs, *, rounds: int = 4) -> dict:
        """Median ms per call of each (impl, fn) of `fns`, interleaved: the runs are cut into
        `rounds` rounds, each timing every fn in turn, in alternating order. A GPU's clock drifts
        with its temperature and power over a measurement (a second of 8192^3 GEMMs heats it
        enough to slow the next one by 10-20%), so timing one impl after the other would hand the
        later ones a hotter GPU; interleaved, each meets the same mix."""
        if isinstance(inputs, tuple):
            inputs = [inputs]
        runs = {impl: self._warm_up(fn, inputs) for impl, fn in fns}
        times = {impl: [] for impl, _ in fns}
        for r in range(rounds):
            for impl, fn in fns if r % 2 == 0 else fns[::-1]:
                lo, hi = runs[impl] * r // rounds, runs[impl] * (r + 1) // rounds
                times[impl] += self._timed_calls(fn, inputs, lo, hi)
        return {impl: statistics.median(t) for impl, t in times.items()}

    def _warm_up(self, fn, inputs) -> int:
        """Runs fn until caches are warm (compilation, cuBLAS heuristics, the allocator) and
        returns how many timed runs fit the budget at the per-call time it saw."""
        t0 = time.perf_counter()
        n_warm = 0
        while n_warm < 3 or (time.perf_counter() - t0 < 0.02 and n_warm < 100):
            fn(*inputs[n_warm % len(inputs)])
            n_warm += 1
            self._sync()
        est_ms = (time.perf_counter() - t0) * 1e3 / n_warm
        budget, lo, hi = self._budget()
        return int(min(hi, max(lo, budget / max(est_ms, 1e-3))))

    def _timed_calls(self, fn, inputs, first: int, end: int, flush=None) -> list:
        """ms of each call fn(*inputs[i % len(inputs)]) for i in [first, end)."""
        times = []
        if self.is_cuda:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(first, end)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(first, end)]
            for j, i in enumerate(range(first, end)):
                if flush is not None:
                    flush.zero_()
                args = inputs[i % len(inputs)]
                starts[j].record()
                fn(*args)
                ends[j].record()
            self._sync()
            times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        else:
            for i in range(first, end):
                args = inputs[i % len(inputs)]
                t = time.perf_counter()
                fn(*args)
                times.append((time.perf_counter() - t) * 1e3)
        return times

    def time_host_many(self, fns, args: tuple, calls: int = 200) -> dict:
        """Host ms per call of each (impl, fn) of `fns`: `calls` calls issued back to back, the
        median of several repeats, in each of which the fns take turns (in alternating order), so
        that each meets the same state of the machine (timed one after the other, a 4 KiB copy's
        host time read 0.93x torch's with the same code that read 0.98x and 1.09x in other
        reports)."""
        for _, fn in fns:
            for _ in range(10):
                fn(*args)
        self._sync()
        reps = {impl: [] for impl, _ in fns}
        for r in range(3 if self.quick else 7):
            for impl, fn in fns if r % 2 == 0 else fns[::-1]:
                self._sync()
                t = time.perf_counter()
                for _ in range(calls):
                    fn(*args)
                reps[impl].append((time.perf_counter() - t) * 1e3 / calls)
        self._sync()
        return {impl: statistics.median(v) for impl, v in reps.items()}

    def time_host_and_graph(self, fns, args: tuple) -> dict:
        """The two timings of a small case, by label: {"host/call": time_host_many's host ms per
        call, "GPU (graph)": time_many_graphed's GPU ms per call}, each {impl: ms}."""
        return {
            "host/call": self.time_host_many(fns, args),
            "GPU (graph)": self.time_many_graphed(fns, [args]),
        }

    def time_many_graphed(self, fns, inputs, *, rounds: int = 4) -> dict:
        """GPU ms per call of each (impl, fn) of `fns`: each fn's calls over the rotating `inputs`
        (rotation: every call finds its inputs out of L2) captured in one CUDA graph, and the
        replays timed interleaved (time_many). For kernels of a few microseconds, where a timed
        eager call is mostly the host's launch path, and for workloads that run as graphs (a
        decode step)."""
        if isinstance(inputs, tuple):
            inputs = [inputs]
        if not self.is_cuda:
            return self.time_many(fns, inputs, rounds=rounds)
        calls = len(inputs) * max(1, math.ceil(20 / len(inputs)))
        side = torch.cuda.Stream(self.device)
        replays = []
        for impl, fn in fns:
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # warm-up off the capture, as graph capture requires
                for args in inputs:
                    fn(*args)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._sync()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(calls):
                    fn(*inputs[i % len(inputs)])
            replays.append((impl, graph.replay))
        ms = self.time_many(replays, [()], rounds=rounds)
        return {impl: t / calls for impl, t in ms.items()}

    # ---- results -------------------------------------------------------------------------------

    def record(self, *, op, case, impl, dtype, shape, ms, bytes=None, flops=None) -> Record:
        rec = Record(
            op=op,
            case=case,
            impl=impl,
            dtype=dtype_name(dtype),
            shape=[int(s) for s in shape],
            ms=float(ms),
            gbps=None if bytes is None else bytes / (ms * 1e6),
            tflops=None if flops is None else flops / (ms * 1e9),
            family=self.family,
        )
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)
        return rec

    def section(self, title: str, text: str) -> None:
        self.sections.setdefault(self.family, []).append((title, text))

    # ---- ceilings ------------------------------------------------------------------------------

    def measure_ceilings(self) -> None:
        if not self.is_cuda:
            return
        n = (256 << 20) // 4 if self.quick else (1 << 30) // 4
        src = torch.randn(n, device=self.device)
        ms = self.time(lambda dst: dst.copy_(src), [(torch.empty_like(src),)])
        self.ceilings.copy_gbps = 2 * n * 4 / (ms * 1e6)
        src = None  # free the buffers before the matmul ceiling
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            size = 2048 if self.quick else 4096
            a = torch.randn(size, size, device=self.device)
            b = torch.randn(size, size, device=self.device)
            ms = self.time(torch.mm, (a, b))
            self.ceilings.mm_tflops = 2 * size**3 / (ms * 1e9)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev

    def pct_of_ceiling(self, rec: Record) -> float | None:
        if rec.gbps is not None and self.ceilings.copy_gbps:
            return 100.0 * rec.gbps / self.ceilings.copy_gbps
        # The matmul ceiling is an fp32 (TF32 off) GEMM: no yardstick for bf16 or fp64 rows.
        if rec.tflops is not None and self.ceilings.mm_tflops and rec.dtype == "float32":
            return 100.0 * rec.tflops / self.ceilings.mm_tflops
        return None


# FP32 lanes per SM by compute capability (FFMA units): the FP32 peak is SMs x lanes x 2 x clock.
_FP32_LANES_PER_SM = {(8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}


def fp32_peak_tflops(device: torch.device) -> float | None:
    """Datasheet-style FP32 peak from the SM count and the max SM clock (nvidia-smi)."""
    import subprocess

    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    lanes = _FP32_LANES_PER_SM.get((props.major, props.minor))
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "-i",
                str(device.index or 0),
                "--query-gpu=clocks.max.sm",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        mhz = float(out.splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None
    if lanes is None:
        return None
    return props.multi_processor_count * lanes * 2 * mhz * 1e6 / 1e12
