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

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "setup: installing torch ($(grep -v '^#' requirements-torch.txt)); a few GB, once"
  "$PY" -m pip install --quiet -r requirements-torch.txt
fi
"$PY" - <<'PYEOF'
import torch, sys
major, minor = (int(p) for p in torch.__version__.split(".")[:2])
if (major, minor) < (2, 6):
    sys.exit(f"setup: torch {torch.__version__} is too old; cudasteps needs torch >= 2.6")
PYEOF

# Pinned dev packages: install the ones that are missing (module name = package name here).
missing=()
while read -r req; do
  case "$req" in ''|'#'*) continue ;; esac
  name=${req%%==*}
  "$PY" -c "import $name" >/dev/null 2>&1 || missing+=("$req")
done < requirements-dev.txt
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if ! "$PY" -m pip install --quiet "${missing[@]}"; then
    # No network (an offline machine): go on without them; the harness degrades (no plots / bar).
    echo "setup: WARNING: could not install ${missing[*]}; continuing without them" >&2
    "$PY" -c "import pytest" >/dev/null 2>&1 || { echo "setup: pytest is required" >&2; exit 1; }
  fi
fi
