"""The benchmark's two-GPU DDP rows (bench_e2e's ddp_step: examples/train_ddp.py under
torch.distributed.run, NCCL), repeated in alternating rounds, torch.nn then cudasteps.nn, so that a
reader sees how far one run's ratio moves (the data-loading figure most).

    python scripts/ddp_rounds.py [--rounds 3]

Prints, per round and case, each side's step_ms (the step with data loading) and train_ms (the
training step alone), and the ratios torch / cudasteps. Needs two CUDA devices.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import bench_e2e as E  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        raise SystemExit("ddp_rounds: needs two CUDA devices")
    print(f"{torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}")
    for r in range(args.rounds):
        for case, extra, _batch, _dims in E._DDP_CONFIGS:
            fig = {impl: E._ddp_step_ms(impl, extra) for impl in ("torch", "cudasteps")}
            t, c = fig["torch"], fig["cudasteps"]
            print(f"round {r} {case}: step_ms {t['step_ms']:.2f} / {c['step_ms']:.2f} "
                  f"({t['step_ms'] / c['step_ms']:.2f}x), train_ms {t['train_ms']:.2f} / "
                  f"{c['train_ms']:.2f} ({t['train_ms'] / c['train_ms']:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
