#!/usr/bin/env bash
# Prints the Python that `make` uses: python3 itself when it can already import torch (the GPU
# machine's python3 is a venv with torch; a nested venv would not see it), else the project's .venv.
if python3 -c "import torch" >/dev/null 2>&1; then
  echo python3
else
  echo .venv/bin/python
fi
