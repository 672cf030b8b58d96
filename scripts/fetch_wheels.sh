#!/usr/bin/env bash
# Downloads the wheels of the pinned dev packages that the GPU machine lacks into .whl/ (git-ignored),
# on a machine with network access. That machine has no network: scripts/gpu_check.sh installs
# whatever .whl/ holds from there, without an index. Today that is expecttest, which torch's OpInfo
# database (tests/test_opinfo.py) imports (pure Python: one py3-none-any wheel serves any Python),
# and torchao, whose float8 training the benchmark's FP8 rows compare against (GPU_ONLY: not a
# dev requirement, so `make test` never installs it; its float8 code is Python on top of
# torch._scaled_mm). The platform flags let pip resolve for the GPU machine's Python 3.12.
# Usage: scripts/fetch_wheels.sh   (then ship .whl/ along with the working tree)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
packages=()
for name in expecttest; do
  req=$(grep -E "^${name}==" requirements-dev.txt) || { echo "fetch_wheels: $name is not pinned in requirements-dev.txt" >&2; exit 1; }
  packages+=("$req")
done
# Pinned here, not in requirements-dev.txt: for the GPU machine's benchmarks alone.
GPU_ONLY=("torchao==0.18.0")
mkdir -p .whl
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any -d .whl \
  "${packages[@]}" "${GPU_ONLY[@]}"
ls -l .whl
