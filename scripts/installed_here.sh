#!/usr/bin/env bash
# Exit 0 when PYTHON already imports `cudasteps` from this checkout (an editable install of it).
cd "$(dirname "$0")/.." || exit 1
here=$(pwd)
# An absolute path that keeps the last symlink: a venv's python is a link to the base interpreter,
# and only through the link does it see the venv's site-packages.
case "$1" in */*) py=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") ;; *) py=$(command -v "$1") ;; esac
cd / && "$py" - "$here" <<'PYEOF' >/dev/null 2>&1
import importlib.util, os, sys
spec = importlib.util.find_spec("cudasteps")
ok = spec is not None and spec.origin and os.path.realpath(spec.origin).startswith(os.path.realpath(sys.argv[1]) + "/")
sys.exit(0 if ok else 1)
PYEOF
