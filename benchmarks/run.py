"""The benchmark report: every family's bench_<family>.py, side by side with PyTorch.

    python -m benchmarks                      # all families, full sizes
    python -m benchmarks --ops copy,reduce    # some families
    python -m benchmarks --quick              # fewer, smaller cases

    python -m benchmarks --replot benchmarks/results/<gpu-slug>.json   # redraw the plots only
    python -m benchmarks --merge /tmp/a/<gpu-slug>.json /tmp/b/<gpu-slug>.json   # runs of some
                                              # families each, as one report in --results-dir

Writes <results-dir>/<gpu-slug>.json (records as in docs/ARCHITECTURE.md), <gpu-slug>.md (the
tables), <gpu-slug>-<op>.png (GB/s of each implementation per case, for the memory-bound ops) and
<gpu-slug>-ladder-<op>.png (each ladder step's throughput, with torch and the ceiling as lines).
The results directory is --results-dir, else $RESULTS_DIR, else benchmarks/results.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import sys
import time
from collections import OrderedDict

import cudasteps
import torch

from benchmarks.harness import Bench, fp32_peak_tflops

FAMILY_ORDER = ["copy", "transpose", "reduce", "gemm", "elementwise", "e2e"]
HERE = os.path.dirname(os.path.abspath(__file__))


def available_families() -> list[str]:
    found = [f[len("bench_") : -3] for f in os.listdir(HERE) if f.startswith("bench_") and f.endswith(".py")]
    return sorted(found, key=lambda f: (FAMILY_ORDER.index(f) if f in FAMILY_ORDER else 99, f))


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_info(device: torch.device) -> dict:
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudasteps_cuda_kernels": cudasteps.cuda_available(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            name=props.name,
            sm_count=props.multi_processor_count,
            l2_bytes=props.L2_cache_size,
            memory_gib=round(props.total_memory / 2**30, 1),
        )
    else:
        info.update(
            name=f"CPU {platform.machine()} ({os.cpu_count()} cores)", threads=torch.get_num_threads()
        )
    return info


class Progress:
    """A progress bar over the families (tqdm when installed, plain lines otherwise)."""

    def __init__(self, families):
        self.bar = None
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=len(families), unit="family", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            print("(tqdm not installed: plain progress lines)", file=sys.stderr)

    def start(self, family):
        if self.bar is not None:
            self.bar.set_description(family)
        else:
            print(f"[bench] {family} ...", file=sys.stderr, flush=True)

    def on_record(self, rec):
        text = f"{rec.op} {rec.case} {rec.impl}: {rec.ms:.4f} ms"
        if self.bar is not None:
            self.bar.set_postfix_str(text[:70])
        else:
            print(f"  {text}", file=sys.stderr, flush=True)

    def done(self):
        if self.bar is not None:
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _fmt(x, digits=3):
    return "" if x is None else f"{x:.{digits}f}"


def markdown(bench: Bench, info: dict, peak_tflops: float | None, families) -> str:
    c = bench.ceilings
    lines = [f"# cudasteps benchmarks: {info['name']}", ""]
    lines.append(
        f"torch {info['torch']}, CUDA {info['cuda']}, {info['date']}. Produced by `make bench` "
        f"({'quick' if bench.quick else 'full'} mode). Times are medians of CUDA-event timings "
        "(wall clock on CPU); `speedup` is torch's time over this row's time for the same case."
    )
    lines.append("")
    if c.copy_gbps:
        lines.append(
            f"- Bandwidth ceiling (`copy_` of a large buffer, read + write): **{c.copy_gbps:.0f} GB/s**"
        )
    if c.mm_tflops:
        lines.append(f"- Matmul ceiling (`torch.mm` fp32, TF32 off, cuBLAS): **{c.mm_tflops:.1f} TFLOP/s**")
    if peak_tflops:
        lines.append(f"- FP32 peak (SMs x 128 lanes x 2 x max clock): **{peak_tflops:.1f} TFLOP/s**")
    lines.append("")
    by_family = OrderedDict((f, []) for f in families)
    for rec in bench.records:
        by_family.setdefault(rec.family, []).append(rec)
    for fam, recs in by_family.items():
        if not recs:
            continue
        lines += [f"## {fam}", ""]
        torch_ms = {(r.op, r.case): r.ms for r in recs if r.impl == "torch"}
        compute = any(r.tflops is not None for r in recs)
        rate = "TFLOP/s" if compute else "GB/s"
        ceiling = "% of cuBLAS" if compute else "% of copy BW"
        header = f"| op | case | impl | ms | torch ms | speedup | {rate} | {ceiling} |"
        if compute and peak_tflops:
            header += " % of FP32 peak |"
        lines.append(header)
        lines.append("|" + "---|" * (header.count("|") - 1))
        for r in recs:
            t = torch_ms.get((r.op, r.case))
            speedup = _fmt(t / r.ms, 2) + "x" if t and r.impl != "torch" else ""
            value = r.tflops if r.tflops is not None else r.gbps
            pct = bench.pct_of_ceiling(r)
            row = (
                f"| {r.op} | {r.case} | {r.impl} | {_fmt(r.ms, 4)} | {_fmt(t, 4) if t else ''} | {speedup} | "
                f"{_fmt(value, 1)} | {_fmt(pct, 1)} |"
            )
            if compute and peak_tflops:
                fp32 = r.tflops is not None and r.dtype == "float32"
                row += f" {_fmt(100 * r.tflops / peak_tflops, 1) if fp32 else ''} |"
            lines.append(row)
        lines.append("")
        for title, text in bench.sections.get(fam, []):
            lines += [f"### {title}", "", text.strip(), ""]
    return "\n".join(lines)


def plots(records, copy_ceiling_gbps, out_prefix: str) -> list[str]:
    """One PNG per memory-bound op: GB/s of each implementation, case by case (grouped bars).

    Host-time and graph-time rows (launch-bound) and ladder rows (in the tables) are left out.
    `records` are Record objects or their JSON dicts, so plots can be redrawn from a results JSON.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots", file=sys.stderr)
        return []
    get = (lambda r, k: r.get(k)) if records and isinstance(records[0], dict) else getattr
    ops = OrderedDict()
    for r in records:
        case, impl = get(r, "case"), get(r, "impl")
        if get(r, "gbps") is None or impl.startswith("ladder:") or "host" in case or "graph" in case:
            continue
        ops.setdefault(get(r, "op"), OrderedDict()).setdefault(case, {})[impl] = get(r, "gbps")
    written = []
    for op, cases in ops.items():
        if len(cases) < 3:
            continue
        impls = list(OrderedDict.fromkeys(i for per_case in cases.values() for i in per_case))
        fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(cases) * len(impls)), 4.2))
        width = 0.8 / len(impls)
        for k, impl in enumerate(impls):
            xs = [c + k * width for c in range(len(cases))]
            ax.bar(xs, [per_case.get(impl, 0) for per_case in cases.values()], width, label=impl)
        if copy_ceiling_gbps:
            ax.axhline(copy_ceiling_gbps, color="gray", linestyle="--", label="copy ceiling")
        ax.set_xticks([c + 0.4 - width / 2 for c in range(len(cases))])
        ax.set_xticklabels(list(cases), rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("GB/s")
        ax.set_title(f"cudasteps.{op} vs torch")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        path = f"{out_prefix}-{slug(op)}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _ladder_of(variant: str) -> str:
    """Which ladder of its op a step belongs to: "tc" for the tensor-core ladder of mm (`tc:*`
    steps), "gemv" for the few-row ladder (`gemv:*`), "" for an op's own ladder. Each ladder gets
    its own plot."""
    for prefix in ("tc", "gemv"):
        if variant.startswith(prefix + ":"):
            return prefix
    return ""


# Ladders whose kernels are memory-bound: plotted in GB/s against the copy bandwidth even where
# their rows also record TFLOP/s.
_BANDWIDTH_LADDERS = ("gemv",)


def _ladder_case(rows, key: str | None = None) -> tuple[str, list] | None:
    """The case whose ladder is most complete: (case, [(variant, rate), ...] in run order). The
    rate is `key` ("tflops" or "gbps"), or by default TFLOP/s where the row has it, else GB/s.

    Named steps only: `cfg:` rows are the gemm config sweep, not steps of the ladder.
    """
    cases = OrderedDict()
    for r in rows:
        variant = r["impl"][len("ladder:") :]
        if variant.startswith("cfg:") or variant.startswith("tc:cp_async_cfg:"):
            continue
        if key is not None:
            rate = r.get(key)
        else:
            rate = r.get("tflops") if r.get("tflops") is not None else r.get("gbps")
        if variant.startswith("gemv:mma:"):  # the split sweep, not a step
            continue
        if rate is not None:
            cases.setdefault(r["case"], []).append((variant, rate))
    if not cases:
        return None
    case = max(cases, key=lambda c: len(cases[c]))  # the first of the longest
    return case, cases[case]


def _rate_text(rate: float) -> str:
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"


def ladder_plots(records, ceilings: dict, out_prefix: str) -> list[str]:
    """One PNG per ladder of an op (mm has two: the SGEMM's and the tensor cores'): each step's
    throughput as a bar, torch's figure for the same case and the measured ceiling as horizontal
    lines (what each optimization buys, and what is left).

    `records` are Record objects or their JSON dicts; `ceilings` is the JSON's "ceilings" object.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = [r if isinstance(r, dict) else r.as_json() for r in records]
    by_op = OrderedDict()
    for r in rows:
        by_op.setdefault(r["op"], []).append(r)
    written = []
    ladders = OrderedDict()  # (op, ladder) -> that ladder's rows
    for op, op_rows in by_op.items():
        for r in op_rows:
            if r["impl"].startswith("ladder:"):
                ladders.setdefault((op, _ladder_of(r["impl"][len("ladder:") :])), []).append(r)
    for (op, ladder), ladder_rows in ladders.items():
        op_rows = by_op[op]
        bandwidth = ladder in _BANDWIDTH_LADDERS
        found = _ladder_case(ladder_rows, "gbps" if bandwidth else None)
        if found is None:
            continue
        case, steps = found
        compute = not bandwidth and any(r["case"] == case and r.get("tflops") is not None for r in op_rows)
        unit = "TFLOP/s" if compute else "GB/s"
        key = "tflops" if compute else "gbps"
        torch_rate = next((r.get(key) for r in op_rows if r["case"] == case and r["impl"] == "torch"), None)
        fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(steps) + 2), 4.2))
        xs = range(len(steps))
        bars = ax.bar(xs, [rate for _, rate in steps], 0.6, color="tab:blue", label="cudasteps ladder step")
        for bar, (_, rate) in zip(bars, steps):
            ax.annotate(
                _rate_text(rate),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        if torch_rate:
            ax.axhline(torch_rate, color="tab:red", label=f"torch ({_rate_text(torch_rate)} {unit})")
        dtype = next((r["dtype"] for r in op_rows if r["case"] == case), "")
        ceiling = ceilings.get("mm_tflops") if compute else ceilings.get("copy_gbps")
        if ceiling and (not compute or dtype == "float32"):
            what = "cuBLAS fp32, TF32 off" if compute else "copy bandwidth"
            label = f"ceiling: {what} ({_rate_text(ceiling)} {unit})"
            ax.axhline(ceiling, color="gray", linestyle="--", label=label)
        else:
            ceiling = None
        peak = ceilings.get("fp32_peak_tflops")
        if compute and peak and dtype == "float32":
            ax.axhline(peak, color="gray", linestyle=":", label=f"FP32 peak ({_rate_text(peak)} {unit})")
        else:
            peak = None
        ax.set_xticks(list(xs))
        ax.set_xticklabels([v for v, _ in steps], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(unit)
        kind = {"tc": "tensor-core ", "gemv": "few-row "}.get(ladder, "")
        ax.set_title(f"{op} {kind}ladder: {case}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        ax.set_ylim(0, 1.15 * max([rate for _, rate in steps] + [torch_rate or 0, ceiling or 0, peak or 0]))
        path = f"{out_prefix}-ladder-{slug(op)}{'-' + ladder if ladder else ''}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def plots_section(pngs) -> str:
    return "## Plots\n\n" + "\n".join(f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in pngs) + "\n"


def replot(json_path: str) -> list[str]:
    """Redraw every plot of a results JSON beside it, and the image list of the .md beside it."""
    with open(json_path) as f:
        payload = json.load(f)
    prefix = json_path[: -len(".json")]
    ceilings = payload.get("ceilings", {})
    pngs = plots(payload["records"], ceilings.get("copy_gbps"), prefix)
    pngs += ladder_plots(payload["records"], ceilings, prefix)
    md_path = prefix + ".md"
    if pngs and os.path.exists(md_path):
        with open(md_path) as f:
            lines = f.read().split("\n")
        if "## Plots" in lines:
            start = lines.index("## Plots")
            end = start + 1
            while end < len(lines) and (not lines[end].strip() or lines[end].startswith("![")):
                end += 1
            lines[start:end] = plots_section(pngs).split("\n")
        else:
            lines += plots_section(pngs).split("\n")
        with open(md_path, "w") as f:
            f.write("\n".join(lines))
    return pngs


def _family_blocks(md_text: str) -> tuple[str, dict]:
    """A report's text before its first `## ` heading, and each family's block (its `## family`
    heading up to the next `## ` heading), by family name; `## Plots` is left out."""
    head, blocks, name = [], {}, None
    for line in md_text.split("\n"):
        if line.startswith("## "):
            name = line[3:].strip()
            if name != "Plots":
                blocks[name] = [line]
            continue
        if name is None:
            head.append(line)
        elif name != "Plots":
            blocks[name].append(line)
    return "\n".join(head), {k: "\n".join(v) for k, v in blocks.items()}


def merge(json_paths: list[str], results_dir: str) -> str:
    """One report from the results of several runs on the same GPU, each of some families
    (`--ops`): a machine that limits how long one command may run gets the whole report in parts.
    Each family comes from the one run that measured it (records carry no family, so two runs of
    one family are refused), its table's % columns against its own run's ceilings; the header, the
    device and the ceilings are the first run's, with a line naming which run gave which
    families. Writes <results-dir>/<gpu-slug>.json and .md, redraws the plots, and returns the
    .md's path."""
    runs = []
    for path in json_paths:
        with open(path) as f:
            payload = json.load(f)
        with open(path[: -len(".json")] + ".md") as f:
            runs.append((path, payload, _family_blocks(f.read())))
    names = {run[1]["device"]["name"] for run in runs}
    if len(names) != 1:
        raise SystemExit(f"--merge: the runs come from different GPUs: {sorted(names)}")
    source = {}
    for i, (path, payload, _) in enumerate(runs):
        for fam in payload["families"]:
            if fam in source:
                raise SystemExit(f"--merge: {fam} is in {runs[source[fam]][0]} and in {path}")
            source[fam] = i
    order = [f for f in available_families() if f in source] + [
        f for f in source if f not in available_families()
    ]
    first = runs[0][1]
    merged = dict(first, families=order, records=[r for run in runs for r in run[1]["records"]])
    head = runs[0][2][0].rstrip("\n")
    parts = "; ".join(
        f"run {i + 1}: " + ", ".join(f for f in order if source[f] == i) for i in range(len(runs))
    )
    head += (
        f"\n\nMerged from {len(runs)} runs on this GPU (`python -m benchmarks "
        f"--merge`; each family's percentages use its own run's ceilings): {parts}.\n"
    )
    md = "\n".join([head] + [runs[source[f]][2][1][f].rstrip("\n") + "\n" for f in order])
    os.makedirs(results_dir, exist_ok=True)
    name = slug(first["device"]["name"]) + ("-quick" if first.get("quick") else "")
    prefix = os.path.join(results_dir, name)
    with open(prefix + ".json", "w") as f:
        json.dump(merged, f, indent=1)
    with open(prefix + ".md", "w") as f:
        f.write(md)
    replot(prefix + ".json")
    return prefix + ".md"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ops", default="", help="comma-separated families (default: all): " + ",".join(available_families())
    )
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    parser.add_argument(
        "--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available"
    )
    parser.add_argument("--results-dir", default=os.environ.get("RESULTS_DIR", os.path.join(HERE, "results")))
    parser.add_argument(
        "--replot",
        metavar="RESULTS_JSON",
        help="measure nothing: redraw the plots of a results JSON (and the .md's image list) beside it",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="RESULTS_JSON",
        help="measure nothing: one report in --results-dir from runs of some families each (a "
        "family in two runs, or runs from two GPUs, is refused)",
    )
    args = parser.parse_args(argv)
    if args.merge:
        print(merge(args.merge, args.results_dir))
        return 0
    if args.replot:
        pngs = replot(args.replot)
        print("\n".join(pngs) if pngs else "no plots (matplotlib missing, or nothing to plot)")
        return 0

    families = [f.strip() for f in args.ops.split(",") if f.strip()] or available_families()
    unknown = sorted(set(families) - set(available_families()))
    if unknown:
        parser.error(f"unknown families {unknown}; available: {available_families()}")

    use_cuda = (
        torch.cuda.is_available() and cudasteps.cuda_available()
        if args.device is None
        else args.device == "cuda"
    )
    if use_cuda and not (torch.cuda.is_available() and cudasteps.cuda_available()):
        parser.error("--device cuda: no CUDA device, or cudasteps built without CUDA kernels")
    device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    if not use_cuda:
        print(
            "No CUDA device (or no CUDA kernels in this build): benchmarking the CPU implementations "
            "against torch on the CPU. GPU figures come from scripts/gpu_check.sh on a GPU machine.",
            file=sys.stderr,
        )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    bench = Bench(device=device, quick=args.quick)
    info = device_info(device)
    progress = Progress(families)
    bench.on_record = progress.on_record
    bench.measure_ceilings()
    peak = fp32_peak_tflops(device)
    os.makedirs(args.results_dir, exist_ok=True)
    name = slug(info["name"]) + ("-quick" if args.quick else "")
    prefix = os.path.join(args.results_dir, name)

    def write_results(done_families) -> str:
        """The JSON and the tables of what has run so far: a run stopped part way (a time limit on
        the GPU machine) keeps every family it finished."""
        payload = {
            "device": info,
            "ceilings": {
                "copy_gbps": bench.ceilings.copy_gbps,
                "mm_tflops": bench.ceilings.mm_tflops,
                "fp32_peak_tflops": peak,
            },
            "quick": args.quick,
            "families": done_families,
            "records": [r.as_json() for r in bench.records],
        }
        with open(prefix + ".json", "w") as f:
            json.dump(payload, f, indent=1)
        md = markdown(bench, info, peak, done_families)
        with open(prefix + ".md", "w") as f:
            f.write(md + "\n")
        return md

    for i, fam in enumerate(families):
        progress.start(fam)
        bench.family = fam
        module = importlib.import_module(f"benchmarks.bench_{fam}")
        module.run(bench)
        progress.done()
        write_results(families[: i + 1])
    progress.close()

    md = write_results(families)
    ceilings = {"copy_gbps": bench.ceilings.copy_gbps, "mm_tflops": bench.ceilings.mm_tflops}
    pngs = plots(bench.records, bench.ceilings.copy_gbps, prefix)
    pngs += ladder_plots(bench.records, dict(ceilings, fp32_peak_tflops=peak), prefix)
    if pngs:
        with open(prefix + ".md", "a") as f:
            f.write("\n" + plots_section(pngs))
    print(md)
    print(f"\nwrote {prefix}.json, {prefix}.md" + (f" and {len(pngs)} plots" if pngs else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
