# Two commands for users (see README.md): `make demo` and `make test`.
# Both create .venv when missing and (re)install the project when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test pytest lit wheel bench bench-gemm clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,onnx,torch,tuning,cross,blas,distributed,keras,tflite,tflite-test,train,zoo]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/python examples/demo.py

test: pytest lit wheel

# Tests spread over the cores (pytest-xdist; at most 4 workers: a worker compiling the model
# zoo holds a few GB; loadgroup: the README/docs blocks, which build on each other, stay on
# one worker) and the 60 slowest printed, so CI logs show where the time goes.
pytest: $(INSTALLED)
	$(BIN)/python -m pytest tests -q -n auto --maxprocesses 4 --dist loadgroup --durations 60

lit: $(INSTALLED)
	$(BIN)/lit -sv tests/lit

# The wheel, installed (not editable) into a fresh venv and used from outside the checkout.
wheel: $(INSTALLED)
	tests/wheel/check_wheel.sh $(BIN)/python

# numpy's OpenBLAS anchors run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they slow
# numpy on these machines); only here, never in tests.
bench: $(INSTALLED)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/end_to_end.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/public_suite.py --quick

bench-gemm: $(INSTALLED)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/gemm.py

clean:
	rm -rf $(VENV) *.egg-info build dist tests/lit/**/Output

# The C runtime for packages (runtime/c_api: libtilecraft_runtime.so and .a in
# runtime/c_api/build) and the C/C++ deploy examples (examples/deploy/build); host cc and
# c++ only, no Python (docs/deploy.md).
.PHONY: c-runtime
c-runtime:
	$(MAKE) -C runtime/c_api
	$(MAKE) -C examples/deploy

# qemu-user and Debian's C libraries for AArch64, armhf and riscv64: the cross-built packages
# run emulated in tests/package/test_cross*.py (skipped without them). Debian packages, root only.
.PHONY: emulators
emulators:
	@command -v qemu-riscv64 >/dev/null && [ -e /usr/riscv64-linux-gnu/lib/libc.so.6 ] || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    apt-get update -qq >/dev/null && apt-get install -y -qq qemu-user libc6-arm64-cross libc6-armhf-cross libc6-riscv64-cross >/dev/null; } || \
	  echo "emulators: not installed (needs root and apt-get); the emulated cross tests will skip"
pytest: emulators
