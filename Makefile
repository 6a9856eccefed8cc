# Two commands for users (see README.md): `make demo` and `make test`.
# Both create .venv when missing and (re)install the project when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test pytest lit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,onnx,torch,tuning,cross,blas]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/python examples/demo.py

test: pytest lit

pytest: $(INSTALLED)
	$(BIN)/python -m pytest tests -q

lit: $(INSTALLED)
	$(BIN)/lit -sv tests/lit

bench: $(INSTALLED)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/gemm.py

clean:
	rm -rf $(VENV) *.egg-info tests/lit/**/Output
