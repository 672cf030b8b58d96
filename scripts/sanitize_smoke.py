"""Run every CUDA kernel once on small, odd shapes, checking results: the compute-sanitizer target.

    compute-sanitizer --tool memcheck python scripts/sanitize_smoke.py
    compute-sanitizer --tool racecheck python scripts/sanitize_smoke.py --smem-only

Shapes are small (the sanitizers slow kernels 10-100x) but not multiples of any tile, and include
misaligned views, so bounds checks, heads and tails all execute. Exits non-zero on a wrong result.
"""

import argparse
import sys

import torch

import cudasteps

failures = []


def check(name, got, want, tol=0.0):
    ok = torch.allclose(got.double().cpu(), want.double().cpu(), rtol=tol, atol=tol, equal_nan=False)
    if not ok:
        failures.append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}")


def smoke_copy(dev):
    for n in [1, 17, 4099]:
        x = torch.randn(n + 1, device=dev)
        check(f"copy n={n}", cudasteps.copy(x[:n]), x[:n])
        check(f"copy misaligned n={n}", cudasteps.copy(x[1:]), x[1:])
        for v in cudasteps.ladder.variants("copy"):
            check(f"ladder copy {v} n={n}", cudasteps.ladder.run("copy", v, x), x)
    x = torch.randn(33, 65, device=dev)
    check("copy strided", cudasteps.copy(x.t()), x.t())
    dst = torch.empty(65, 33, device=dev)
    check("copy_", cudasteps.copy_(dst, x.t()), x.t())


# family -> (smoke function, uses shared memory)
FAMILIES = {
    "copy": (smoke_copy, False),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smem-only", action="store_true", help="only families whose kernels use shared memory")
    args = parser.parse_args()
    if not (torch.cuda.is_available() and cudasteps.cuda_available()):
        sys.exit("sanitize_smoke: needs a CUDA device and a CUDA build")
    torch.manual_seed(0)
    for name, (fn, smem) in FAMILIES.items():
        if args.smem_only and not smem:
            continue
        fn(torch.device("cuda"))
    torch.cuda.synchronize()
    if failures:
        sys.exit(f"{len(failures)} wrong results: {failures}")
    print("all results correct")


if __name__ == "__main__":
    main()
