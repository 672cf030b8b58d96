#!/usr/bin/env bash
# Builds the extension here against another torch release than this machine's, for a GPU machine
# that has that release and little time: it then skips its own build (a cold one takes 1.5-2.5
# minutes on 16 cores) and runs the tests and benchmarks on this binary (scripts/gpu_check.sh).
#
#   scripts/prebuild.sh 2.11.0            # a venv with torch==2.11.0 under build/, made once
#   scripts/prebuild.sh 2.11.0 PYTHON     # or an interpreter that already has that torch
#
# The working tree (tracked and untracked files, what git does not ignore) is copied into
# build/prebuild-<version>/src, mtimes kept, and built there in place: ninja's objects stay there,
# so the next prebuild recompiles only what changed. The result goes to prebuilt/: _C.abi3.so (abi3:
# any CPython the torch supports), _build_info.py (the torch it was built against) and SOURCES, a
# digest of the sources it was built from (source_digest below). gpu_check.sh installs it only where
# both match (the machine's torch, the tree it runs on), so a stale binary is never measured.
# TORCH_CUDA_ARCH_LIST defaults to 9.0 (every kernel for sm_90, the Hopper ones for sm_90a).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/prebuild.sh TORCH_VERSION [PYTHON]" >&2
  exit 2
fi
version=$1
work=build/prebuild-$version
if [ $# -ge 2 ]; then
  case "$2" in */*) py=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") ;; *) py=$(command -v "$2") ;; esac
else
  py=$(pwd)/$work/venv/bin/python
  if [ ! -x "$py" ]; then
    python3 -m venv "$work/venv"
    "$py" -m pip install -q "torch==$version" numpy setuptools ninja
  fi
fi
have=$("$py" -c "import torch; print(torch.__version__.split('+')[0])")
if [ "$have" != "${version%%+*}" ]; then
  echo "prebuild: $py has torch $have, not $version" >&2
  exit 1
fi

mkdir -p "$work/src"
# Mirror the tree: what git does not ignore, each file copied where it is newer than the copy there
# (mtimes kept: ninja then rebuilds only what changed); sources gone from csrc/ deleted there. The
# ignored files there (its objects, its binary) stay.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 -r cp -p -u --parents -t "$work/src"
comm -23 <(cd "$work/src" && find csrc -type f | LC_ALL=C sort) \
  <(git ls-files --cached --others --exclude-standard csrc | LC_ALL=C sort) |
  (cd "$work/src" && xargs -r rm -f --)
log=$work/build.log
if ! (
  cd "$work/src"
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  export MAX_JOBS=${MAX_JOBS:-$(nproc)}
  "$py" setup.py --quiet build_ext --inplace
) >"$log" 2>&1; then
  grep -E "error" "$log" | head -n 20 >&2
  echo "prebuild: the build failed ($log)" >&2
  exit 1
fi
so=$work/src/torch_ops/cudasteps/_C.abi3.so
mkdir -p prebuilt
cp "$so" "$work/src/torch_ops/cudasteps/_build_info.py" prebuilt/
"$work/src/scripts/source_digest.sh" >prebuilt/SOURCES  # of the sources built
echo "prebuilt/: $(du -h prebuilt/_C.abi3.so | cut -f1) against torch $version, sources $(cat prebuilt/SOURCES)"
