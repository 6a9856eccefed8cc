#!/usr/bin/env bash
# Builds tilecraft's wheel, installs it (not editable) into a fresh virtual environment and
# uses it from a folder outside the checkout: every module imports, the digits demo runs,
# `tilecraft compile` / `tilecraft run` / `tilecraft-opt` work, the PyTorch paths compile.
# `make test` runs it (target `wheel`); alone: tests/wheel/check_wheel.sh [python]
#
# The environment: a fresh venv and `pip install <wheel>[onnx,torch]`, so the wheel's own
# dependency metadata is what gets tested (a venv with --system-site-packages over .venv
# would see .venv's editable tilecraft and its entry points; installing with --no-deps
# would not notice a missing dependency). The pinned releases come from pip's cache or the
# configured indexes, which `make` has already filled for .venv; --no-compile skips
# byte-compiling torch's files, the bulk of the install time (30 s to 3 min here, with the
# two cores shared).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${1:-$ROOT/.venv/bin/python}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tilecraft-wheel.XXXXXX")"
# The scratch folder (2 GB, mostly torch) is removed in the background: deleting it took
# about a minute here. TILECRAFT_KEEP_WHEEL_CHECK=1 keeps it for a look.
[ -n "${TILECRAFT_KEEP_WHEEL_CHECK:-}" ] || trap '(rm -rf "$WORK" >/dev/null 2>&1 &)' EXIT
unset PYTHONPATH PYTHONHOME
SECONDS=0
step() { printf '[wheel %3ds] %s\n' "$SECONDS" "$*"; }

# 1. Build from a clean copy of the working tree: an in-tree build reuses build/lib, where a
#    module deleted from the checkout would still be packed.
step "building the wheel"
mkdir "$WORK/src"
tar -C "$ROOT" -cf - --exclude=./.venv --exclude=./.git --exclude=./build --exclude=./dist \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=Output --exclude=.pytest_cache . \
    | tar -C "$WORK/src" -xf -
"$PYTHON" -m pip wheel --quiet --no-deps --disable-pip-version-check "$WORK/src" -w "$WORK/dist"
WHEEL="$(ls "$WORK"/dist/tilecraft-*.whl)"
"$PYTHON" - "$WHEEL" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
top = {n.split("/")[0] for n in names}
assert top == {"tilecraft", "tilecraft-0.1.0.dist-info"} or all(t.startswith("tilecraft") for t in top), top
for unwanted in ("tilecraft/tests/", "tilecraft/benchmarks/", "tilecraft/.venv/", "tilecraft/build/",
                 "tilecraft/docs/", "tilecraft/setup.py", "tilecraft/conftest.py"):
    assert not any(n.startswith(unwanted) for n in names), f"the wheel ships {unwanted}"
for wanted in ("tilecraft/frontend/onnx/__init__.py", "tilecraft/ir/__init__.py",
               "tilecraft/frontend/torch/__init__.py", "tilecraft/examples/digits_cnn.onnx",
               "tilecraft/examples/digits_test.npz", "tilecraft/examples/matmul_bias_relu.mlir",
               "tilecraft/runtime/async_runtime.c", "tilecraft/dialects/graph.irdl.mlir",
               "tilecraft/runtime/c_api/tilecraft_runtime.h", "tilecraft/runtime/c_api/Makefile",
               "tilecraft/examples/deploy/classify_digits.c"):
    assert wanted in names, f"the wheel lacks {wanted}"
print(f"  {sys.argv[1].rsplit('/', 1)[-1]}: {len(names)} files")
PY

# 2. A fresh environment with the wheel and its onnx/torch extras (lit only for step 6).
step "installing it into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
LIT_PIN="$(grep -o '"lit==[^"]*"' "$ROOT/pyproject.toml" | tr -d '"')"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-compile "$WHEEL[onnx,torch]" "$LIT_PIN" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
"$VPY" -m pip check --disable-pip-version-check >/dev/null
export PATH="$WORK/venv/bin:$PATH"

# Everything below runs outside the checkout, against the installed package only.
mkdir "$WORK/use" && cd "$WORK/use"

step "importing every module"
"$VPY" - "$ROOT" <<'PY'
import importlib, pkgutil, sys
import tilecraft
root = sys.argv[1]
assert "site-packages" in tilecraft.__file__ and not tilecraft.__file__.startswith(root), tilecraft.__file__
names = [m.name for m in pkgutil.walk_packages(tilecraft.__path__, "tilecraft.", onerror=lambda n: sys.exit(f"cannot import {n}"))]
for name in names:
    importlib.import_module(name)
for needed in ("tilecraft.frontend.onnx", "tilecraft.ir", "tilecraft.frontend.torch"):
    assert needed in names, needed
print(f"  {len(names) + 1} modules from {tilecraft.__file__.rsplit('/', 1)[0]}")
PY

step "the digits demo (examples/demo.py as installed)"
EXAMPLES="$("$VPY" -c 'import tilecraft, pathlib; print(pathlib.Path(tilecraft.__file__).parent / "examples")')"
"$VPY" "$EXAMPLES/demo.py" | tail -n 2

step "tilecraft compile + tilecraft run"
tilecraft compile "$EXAMPLES/digits_cnn.onnx" --input-shapes "input:[360,1,16,16]" -o digits.tar
"$VPY" -c "import numpy as np; np.savez('digits_in.npz', input=np.load('$EXAMPLES/digits_test.npz')['images'])"
tilecraft run digits.tar --inputs digits_in.npz --output digits_out.npz --print-top 1 | tail -n 1
"$VPY" - "$EXAMPLES/digits_test.npz" <<'PY'
import sys, numpy as np
logits = np.load("digits_out.npz")
labels = np.load(sys.argv[1])["labels"]
accuracy = float(np.mean(logits[logits.files[0]].argmax(1) == labels))
assert accuracy > 0.9, accuracy
print(f"  accuracy of the package: {accuracy:.4f}")
PY

step "tilecraft-opt: lit's opt/ and graph/ tests with the installed tools"
mkdir lit && cp "$ROOT/tests/lit/lit.cfg.py" lit/ && cp -r "$ROOT/tests/lit/opt" "$ROOT/tests/lit/graph" lit/
"$WORK/venv/bin/lit" -q lit
tilecraft-opt "$EXAMPLES/matmul_bias_relu.mlir" --tilecraft-schedule --canonicalize -o scheduled.mlir
grep -q "vector.contract" scheduled.mlir   # scheduled: tiled and vectorized

step "a backend in its own package: pip builds its C library, the CLI finds it by name"
cp -r "$ROOT/examples/toy_accelerator" toy_src
# Without build isolation where the venv has setuptools (Python <= 3.11): nothing to fetch.
ISOLATION="$("$VPY" -c 'import setuptools' 2>/dev/null && echo --no-build-isolation || true)"
"$VPY" -m pip install --quiet --disable-pip-version-check $ISOLATION --no-deps ./toy_src
tilecraft compile "$EXAMPLES/digits_cnn.onnx" --input-shapes "input:[1,1,16,16]" --offload toy -o digits_toy.tar \
    2>&1 | grep "offload toy: 1 ops"  # the second conv; the one-channel first is a window matmul
tilecraft run digits_toy.tar --print-time | tail -n 1

step "PyTorch: tilecraft.torch.compile, torch.compile(backend=\"tilecraft\"), a .pt2 file"
"$VPY" - <<'PY'
import numpy as np, torch
import tilecraft

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
x = torch.randn(3, 8)
with torch.no_grad():
    expected = model(x)
    compiled = tilecraft.torch.compile(model, (x,))
    np.testing.assert_allclose(np.asarray(compiled(x)), expected.numpy(), rtol=1e-4, atol=1e-5)
    fast = torch.compile(model, backend="tilecraft")  # found through the wheel's entry point
    np.testing.assert_allclose(np.asarray(fast(x)), expected.numpy(), rtol=1e-4, atol=1e-5)
    torch.export.save(torch.export.export(model, (x,)), "model.pt2")  # a saved program, by path
    from_file = tilecraft.compile("model.pt2")
    np.testing.assert_allclose(from_file(x.numpy()), expected.numpy(), rtol=1e-4, atol=1e-5)
print("  tilecraft.torch.compile, torch.compile and compile('model.pt2') match eager")
PY

step "OK: the installed wheel works"
