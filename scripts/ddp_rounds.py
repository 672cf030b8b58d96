"""The benchmark's two-GPU DDP rows (bench_e2e's ddp_step: examples/train_ddp.py under
torch.distributed.run, NCCL), repeated in alternating rounds, torch.nn then cudasteps.nn, so that a
reader sees how far one run's ratio moves (the data-loading figure most).

    python scripts/ddp_rounds.py [--rounds 4]

Prints, per round and case, each side's step_ms (the step with data loading) and train_ms (the
training step alone), and the ratios torch / cudasteps; then per case each side's median over the
rounds, what the benchmark's rows would read. Needs two CUDA devices.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import bench_e2e as E  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=E._DDP_ROUNDS)
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        raise SystemExit("ddp_rounds: needs two CUDA devices")
    print(f"{torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}")
    runs = {case: {"torch": [], "cudasteps": []} for case, *_ in E._DDP_CONFIGS}

    def line(label, t, c):
        return (f"{label}: step_ms {t['step_ms']:.2f} / {c['step_ms']:.2f} "
                f"({t['step_ms'] / c['step_ms']:.2f}x), train_ms {t['train_ms']:.2f} / "
                f"{c['train_ms']:.2f} ({t['train_ms'] / c['train_ms']:.2f}x)")

    for r in range(args.rounds):
        for case, extra, _batch, _dims in E._DDP_CONFIGS:
            # The benchmark's order: torch.nn first in even rounds, cudasteps.nn first in odd ones.
            order = ("torch", "cudasteps") if r % 2 == 0 else ("cudasteps", "torch")
            fig = {impl: E._ddp_step_ms(impl, extra) for impl in order}
            for impl, f in fig.items():
                runs[case][impl].append(f)
            print(line(f"round {r} {case}", fig["torch"], fig["cudasteps"]), flush=True)
    # What the benchmark's rows would read for these runs: each side's median per figure.
    for case, by_impl in runs.items():
        med = E.side_medians(by_impl)
        print(line(f"median of {args.rounds} {case}", med["torch"], med["cudasteps"]))


if __name__ == "__main__":
    main()
