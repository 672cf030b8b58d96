#!/usr/bin/env bash
# One-time set-up for `make test` / `make bench`: a Python with torch and the pinned dev packages.
# Idempotent and quick when everything is present. Usage: scripts/setup_env.sh PYTHON
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-$(scripts/python.sh)}

if [ "$PY" = ".venv/bin/python" ] && [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv (python3 has no torch)"
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi

# One Python process answers what is missing: torch (and whether it is new enough) and the pinned
# dev packages (module name = package name here). It finds modules without importing them and reads
# torch's version from its metadata: importing torch once per check cost `make test` 3-4 s a run.
check() {
  "$PY" - <<'PYEOF'
import importlib.metadata, importlib.util, sys
if importlib.util.find_spec("torch") is None:
    print("torch")
    sys.exit(0)
version = importlib.metadata.version("torch")
major, minor = (int(p) for p in version.split("+")[0].split(".")[:2])
if (major, minor) < (2, 6):
    sys.exit(f"setup: torch {version} is too old; cudasteps needs torch >= 2.6")
for line in open("requirements-dev.txt"):
    req = line.strip()
    if req and not req.startswith("#") and importlib.util.find_spec(req.split("==")[0]) is None:
        print(req)
PYEOF
}
missing=($(check))
if [ "${missing[0]:-}" = torch ]; then
  echo "setup: installing torch ($(grep -v '^#' requirements-torch.txt)); a few GB, once"
  "$PY" -m pip install --quiet -r requirements-torch.txt
  missing=($(check))
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if ! "$PY" -m pip install --quiet "${missing[@]}"; then
    # No network (an offline machine): go on without them; the harness degrades (no plots / bar).
    echo "setup: WARNING: could not install ${missing[*]}; continuing without them" >&2
    "$PY" -c "import pytest" >/dev/null 2>&1 || { echo "setup: pytest is required" >&2; exit 1; }
  fi
fi
