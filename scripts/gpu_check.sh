#!/usr/bin/env bash
# Everything that needs a GPU, in one call (it needs no network and leaves everything under $OUT):
#   1. build against the local torch          (make build)
#   2. the full pytest suite, CUDA included    (slow tests too)
#   3. compute-sanitizer: memcheck over the CUDA tests' smoke run, racecheck over the smem kernels
#   4. SASS checks (16-byte accesses, no local-memory spills) and ncu counters for the ladders
#   5. the benchmark report                    (make bench -> $RESULTS_DIR)
# Logs go to $OUT/logs.tgz, results to $RESULTS_DIR (default $OUT/results, packed as
# $OUT/results.tgz), a summary to $OUT/summary.txt. STEPS selects steps (default: all).
# Usage on the device: OUT=$OUT scripts/gpu_check.sh   or   STEPS="build test" scripts/gpu_check.sh
# Without the build step the other steps use the extension that Python finds (e.g. one built on
# another machine against the same torch, through PYTHONPATH=torch_ops). The build step itself
# installs a matching prebuilt/ instead of building (scripts/prebuild.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(pwd)/gpu_check_out}
LOGS=$OUT/logs
mkdir -p "$LOGS"
export RESULTS_DIR=${RESULTS_DIR:-$OUT/results}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export PIP_NO_INDEX=1  # a GPU machine may be offline: fail fast instead of retrying downloads
STEPS=${STEPS:-"build test sanitize sass ncu bench"}
PY=$(scripts/python.sh)
# Some images set CXX=/opt/gcc/bin/g++, a wrapper whose link step puts a static copy of
# libstdc++ into shared objects: the extension then formats its first error message with its own,
# uninitialised iostreams and segfaults. The system g++ links libstdc++.so like libtorch does.
if [[ "${CXX:-}" == /opt/gcc/* ]] && [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++ CC=/usr/bin/gcc
fi
export PATH=$PATH:/usr/local/cuda/bin
status=0
summary=()

step() {  # step NAME TIMEOUT_S CMD...: run, log to $LOGS/NAME.log, remember pass/fail
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name: $*"
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  local line="$name: rc=$rc in $((SECONDS - t0)) s"
  [ $rc -ne 0 ] && status=1
  summary+=("$line")
  echo "$line"
  tail -n 4 "$LOGS/$name.log"
}

want() { [[ " $STEPS " == *" $1 "* ]]; }

# Wheels brought along for packages this machine lacks (scripts/fetch_wheels.sh, run where there is
# network): installed without an index into a private directory, found through PYTHONPATH.
if compgen -G ".whl/*.whl" >/dev/null && ! "$PY" -c "import expecttest, torchao" >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/cudasteps-site .whl/*.whl
  export PYTHONPATH=/tmp/cudasteps-site${PYTHONPATH:+:$PYTHONPATH}
fi
"$PY" -c "import expecttest" >/dev/null 2>&1 ||
  echo "gpu_check: WARNING: expecttest is missing: tests/test_opinfo.py will skip (run scripts/fetch_wheels.sh)"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$LOGS/gpu.txt" 2>&1
cat "$LOGS/gpu.txt"

# A binary built on another machine for this one (scripts/prebuild.sh: prebuilt/, carried along)
# replaces the build step where it was built against this machine's torch from these very sources
# (scripts/source_digest.sh); otherwise it is ignored and the build runs.
prebuilt_matches() {
  [ -f prebuilt/_C.abi3.so ] && [ -f prebuilt/_build_info.py ] && [ -f prebuilt/SOURCES ] || return 1
  [ "$(cat prebuilt/SOURCES)" = "$(scripts/source_digest.sh)" ] || return 1
  "$PY" - <<'PYEOF'
import runpy, sys, torch
info = runpy.run_path("prebuilt/_build_info.py")
sys.exit(0 if info["TORCH_VERSION"] == torch.__version__ else 1)
PYEOF
}
PREBUILT=0
if want build && prebuilt_matches; then
  cp prebuilt/_C.abi3.so prebuilt/_build_info.py torch_ops/cudasteps/
  # Found without an install: the package's directory first on the path (pytest's own setting too).
  export PYTHONPATH=$(pwd)/torch_ops${PYTHONPATH:+:$PYTHONPATH}
  PREBUILT=1
  line="build: prebuilt/ used (torch $("$PY" -c 'import torch; print(torch.__version__)'), sources $(cat prebuilt/SOURCES))"
  summary+=("$line")
  echo "$line"
elif want build; then
  [ -f prebuilt/_C.abi3.so ] && echo "gpu_check: prebuilt/ does not match this torch or these sources: building"
  step build 600 make build
  # Per-unit compile times from ninja's logs: where the build's time goes.
  "$PY" scripts/build_times.py build >"$LOGS/build_times.txt" 2>&1 && head -n 12 "$LOGS/build_times.txt" &&
    tail -n 1 "$LOGS/build_times.txt"
fi
SO=$(ls torch_ops/cudasteps/_C*.so 2>/dev/null | head -n1)

if want test; then
  # TEST_ARGS narrows the run (e.g. "tests/test_gemm.py"); the default is the whole suite.
  step test "${TEST_TIMEOUT:-600}" "$PY" -m pytest -q -ra -p no:cacheprovider --junitxml="$LOGS/junit.xml" ${TEST_ARGS:-}
  grep -E "passed|failed" "$LOGS/test.log" | tail -n 1
fi

if want sanitize; then
  # The smoke run calls every op and ladder step once on small, odd shapes: every kernel runs, fast
  # enough for the sanitizers' 10-100x slow-down.
  step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
    "$PY" scripts/sanitize_smoke.py
  step racecheck 300 compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 20 \
    "$PY" scripts/sanitize_smoke.py --smem-only
fi

if want sass && [ -n "$SO" ]; then
  cuobjdump --dump-sass "$SO" >"$LOGS/sass.txt" 2>&1
  "$PY" scripts/sass_report.py "$LOGS/sass.txt" >"$LOGS/sass_report.txt" 2>&1
  head -n 60 "$LOGS/sass_report.txt"
  rm -f "$LOGS/sass.txt"  # hundreds of MB; the report is what the logs keep
fi

if want ncu && command -v ncu >/dev/null; then
  for script in benchmarks/ncu_*.py; do
    [ -e "$script" ] || continue
    name=$(basename "$script" .py)
    step "$name" 300 ncu --clock-control none --csv --metrics \
      l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
      "$PY" "$script"
  done
fi

if want bench; then
  # Without the build step (an extension built elsewhere, found through PYTHONPATH), the report
  # runs as is: `make bench` would build first.
  if want build && [ $PREBUILT = 0 ]; then
    step bench "${BENCH_TIMEOUT:-900}" make bench BENCH_ARGS="${BENCH_ARGS:-}"
  else
    step bench "${BENCH_TIMEOUT:-900}" "$PY" -m benchmarks ${BENCH_ARGS:-}
  fi
  # The ncu counters of the ladders go into the results page next to the timings.
  for md in "$RESULTS_DIR"/*.md; do
    for log in "$LOGS"/ncu_*.log; do
      [ -e "$md" ] && [ -e "$log" ] || continue
      "$PY" scripts/ncu_table.py "$log" "benchmarks/$(basename "$log" .log).py" >>"$md"
    done
  done
  tail -n 150 "$LOGS/bench.log" | grep -E "^\|" | head -n 150
fi

echo "=== summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
# One archive each for the logs (and the results, if under $OUT), easy to copy off the machine.
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
if [ -d "$OUT/results" ]; then tar czf "$OUT/results.tgz" -C "$OUT" results && rm -rf "$OUT/results"; fi
exit $status
