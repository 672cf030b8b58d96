# The README's commands. `make bench` and `make test` each set up everything on a fresh machine.
PYTHON := $(shell scripts/python.sh)
MAX_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
export MAX_JOBS
BENCH_ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup build test bench quick-bench gpu-check lint clean wheel

setup:
	@scripts/setup_env.sh $(PYTHON)

# The first time: an editable install (pip builds _C into torch_ops/cudasteps/). After that, pip
# would rebuild every source in a fresh temporary directory, so later builds run build_ext in place,
# where ninja recompiles only what changed (objects kept under build/).
build: setup
	@if scripts/installed_here.sh $(PYTHON); then \
	  echo "$(PYTHON) setup.py build_ext --inplace"; \
	  $(PYTHON) setup.py --quiet build_ext --inplace; \
	else \
	  echo "$(PYTHON) -m pip install --no-build-isolation --no-deps --no-index -e ."; \
	  $(PYTHON) -m pip install --quiet --no-build-isolation --no-deps --no-index -e .; \
	fi

test: build
	$(PYTHON) -m pytest $(PYTEST_ARGS)

# A release wheel in dist/: abi3 (one binary for every CPython the torch build supports),
# stripped (no debug information, no line tables: CUDASTEPS_RELEASE=1), for the GPUs of
# WHEEL_ARCH_LIST (Ampere, Ada and Hopper; the Hopper kernels for 9.0a alone). Its objects live
# under build/release/, apart from the in-place build's. Then a test installs it into a throwaway
# venv and imports it there (tests/test_wheel.py).
WHEEL_ARCH_LIST ?= 8.0;8.6;8.9;9.0a
wheel: build
	CUDASTEPS_RELEASE=1 TORCH_CUDA_ARCH_LIST="$(WHEEL_ARCH_LIST)" \
	  $(PYTHON) -m pip wheel --no-build-isolation --no-deps --no-index -w dist .
	@ls -l dist/cudasteps-*.whl
	CUDASTEPS_WHEEL="$$(ls -t dist/cudasteps-*.whl | head -n1)" $(PYTHON) -m pytest -q tests/test_wheel.py

bench: build
	$(PYTHON) -m benchmarks $(BENCH_ARGS)

quick-bench: build
	$(PYTHON) -m benchmarks --quick $(BENCH_ARGS)

# On a GPU machine: build, all tests, compute-sanitizer, SASS and ncu checks, benchmarks.
gpu-check:
	scripts/gpu_check.sh

lint:
	$(PYTHON) -m ruff check torch_ops tests benchmarks examples scripts setup.py
	@if command -v clang-format >/dev/null; then \
	  clang-format --dry-run --Werror $$(find csrc -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh'); \
	else echo "clang-format not installed: C++/CUDA formatting not checked"; fi

clean:
	rm -rf build dist torch_ops/cudasteps/_C*.so torch_ops/cudasteps/_build_info.py *.egg-info torch_ops/*.egg-info
