"""export_library / runtime.load_module / time_evaluator: a module that tilecraft.build or
tilecraft.compile made, written as a .so or a .tar package and run again in a new process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecraft
import tilecraft.runtime as rt
from mlir_text import matmul
from tilecraft import scheduling as te
from tilecraft.errors import EntryPointError, ExternError, PackageError
from tilecraft.runtime.timing import Timing

N = 64


@pytest.fixture(scope="module")
def vector_add():
    """TVM's first tutorial's function, split and vectorized, built by TE's build."""
    a, b = te.placeholder((N,), name="A"), te.placeholder((N,), name="B")
    c = te.compute((N,), lambda i: a[i] + b[i], name="C")
    sch = te.Schedule(c)
    (i,) = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(i, factors=[None, 16])
    sch.vectorize(inner)
    return te.build(sch)


@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_export_and_load_in_a_new_process(vector_add, tmp_path, suffix):
    path = vector_add.export_library(tmp_path / f"vadd{suffix}")
    assert path.read_bytes()[:4] == b"\x7fELF" if suffix == ".so" else path.read_bytes()[:4] != b"\x7fELF"
    code = textwrap.dedent(f"""
        import sys, numpy as np
        import tilecraft.runtime as rt
        module = rt.load_module({str(path)!r})
        a, b = np.arange({N}, dtype=np.float32), np.full({N}, 0.5, np.float32)
        np.testing.assert_array_equal(module(a, b), a + b)
        assert 'mlir' not in sys.modules
        print(module.time_evaluator(number=2, repeat=2)(a, b).mean > 0)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_a_relative_so_path_loads(vector_add, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    vector_add.export_library("relative.so")
    a = np.ones(N, np.float32)
    np.testing.assert_array_equal(rt.load_module("relative.so")(a, a), 2 * a)


def test_package_path_with_so_suffix_writes_a_shared_library(tmp_path, rand):
    path = tmp_path / "scale.so"
    module = tilecraft.compile(matmul(4, 8, 16), package_path=path)
    assert path.read_bytes()[:4] == b"\x7fELF"
    x = rand((4, 16)), rand((16, 8))
    np.testing.assert_allclose(rt.load_module(path)(*x), module(*x), rtol=1e-6)


def test_time_evaluator_on_compiled_modules(vector_add):
    a = b = np.ones(N, np.float32)
    timing = vector_add.time_evaluator(number=3, repeat=4)(a, b)
    assert isinstance(timing, Timing) and len(timing.per_call) == 4 and timing.min > 0
    assert vector_add.time_evaluator("main", repeat=1)(a, b).mean > 0
    with pytest.raises(EntryPointError, match="'nothere'"):
        vector_add.time_evaluator("nothere")
    with pytest.raises(ValueError, match="number and repeat"):
        vector_add.time_evaluator(number=0)


def test_a_so_cannot_hold_the_profiling_variant(tmp_path):
    with pytest.raises(PackageError, match="profiling variant"):
        tilecraft.compile(matmul(4, 8, 16), package_path=tmp_path / "p.so", profile=True)


def test_a_python_extern_cannot_be_exported(tmp_path):
    tilecraft.extern.register_python("env.copy", lambda a, out: np.copyto(out, a),
                                     inputs=["memref<?xf32>"], outputs=["memref<?xf32>"])
    try:
        module = tilecraft.compile("""
        func.func private @env.copy(tensor<4xf32>) -> tensor<4xf32>
        func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %r = func.call @env.copy(%x) : (tensor<4xf32>) -> tensor<4xf32>
          return %r : tensor<4xf32>
        }""")
        with pytest.raises(ExternError, match="env.copy"):
            module.export_library(tmp_path / "copy.so")
    finally:
        tilecraft.extern.unregister("env.copy")


def test_loading_a_library_tilecraft_did_not_write(tmp_path):
    source = tmp_path / "other.c"
    source.write_text("int answer(void) { return 42; }\n")
    library = tmp_path / "libother.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    with pytest.raises(PackageError, match="tilecraft_manifest"):
        rt.load_module(library)
    with pytest.raises(PackageError, match="no such shared library"):
        rt.load_module(tmp_path / "missing.so")


def test_target_c_refuses_a_so_path(tmp_path):
    with pytest.raises(PackageError, match="C sources as a tar"):
        tilecraft.compile(matmul(4, 8, 16), target="c", package_path=tmp_path / "model.so")
    assert not (tmp_path / "model.so").exists()


def test_a_compiled_torch_module_exports_and_times(tmp_path):
    torch = pytest.importorskip("torch")
    import tilecraft.torch

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()).eval()
    x = torch.randn(2, 8)
    compiled = tilecraft.torch.compile(model, (x,))
    assert compiled.time_evaluator(number=2, repeat=2)(x).mean > 0
    loaded = rt.load_module(compiled.export_library(tmp_path / "linear_tanh.so"))
    with torch.no_grad():
        np.testing.assert_allclose(loaded(x.numpy()), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_shared_library_is_refused_under_a_trusted_key(vector_add, tmp_path):
    """A .so carries no signature, and opening it to look would run its code: trust= refuses
    it before loading."""
    from tilecraft.errors import PackageSignatureError
    from tilecraft.runtime.package_signing import generate_key

    key = generate_key(tmp_path / "package.key")
    path = tmp_path / "vector_add.so"
    vector_add.export_library(path)
    with pytest.raises(PackageSignatureError, match="carries no signature"):
        rt.load_module(path, trust=key)
    assert rt.load_module(path).output_names  # without trust= it loads
