#!/usr/bin/env bash
# Prints a digest of the sources the extension is built from (csrc/ and setup.py), the same on any
# machine that holds the same files: scripts/prebuild.sh records it beside a binary built here,
# and scripts/gpu_check.sh uses that binary only where the tree it runs on gives the same digest.
set -euo pipefail
cd "$(dirname "$0")/.."
find csrc setup.py -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
