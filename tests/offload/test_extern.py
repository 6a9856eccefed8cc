"""tilecraft.extern: Python and C externs called from compiled IR, in the JIT and in packages,
and the typed errors for everything that can be wrong with them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import ExternError, ExternLibraryError, ExternSignatureError
from extern_testing import C_SOURCE, c_library, externs  # noqa: F401 (fixtures)


MATRIX = "memref<?x?xf32>"


def calling_module(name: str, x: str = "4x8", w: str = "8x16", out: str = "4x16") -> str:
    """``relu(name(x, w))``: an extern call next to a compiled kernel."""
    return f"""
    func.func private @{name}(tensor<{x}xf32>, tensor<{w}xf32>) -> tensor<{out}xf32>
    func.func @main(%x: tensor<{x}xf32>, %w: tensor<{w}xf32>) -> tensor<{out}xf32> {{
      %r = func.call @{name}(%x, %w) : (tensor<{x}xf32>, tensor<{w}xf32>) -> tensor<{out}xf32>
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<{out}xf32>
      %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                            iterator_types = ["parallel", "parallel"]}}
          ins(%r : tensor<{out}xf32>) outs(%e : tensor<{out}xf32>) {{
        ^bb0(%a: f32, %b: f32):
          %m = arith.maximumf %a, %zero : f32
          linalg.yield %m : f32
      }} -> tensor<{out}xf32>
      return %y : tensor<{out}xf32>
    }}
    """


def test_python_extern_next_to_a_compiled_kernel(externs, rand):
    tilecraft.extern.register_python("linear", lambda x, w, y: np.matmul(x, w, out=y),
                                     inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("linear")
    module = tilecraft.compile(calling_module("linear"))
    assert "call @linear" in module.ir("input") and "linalg.generic" in module.ir("input")
    x, w = rand((4, 8)), rand((8, 16))
    np.testing.assert_allclose(module(x, w), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_c_extern_in_the_jit_and_in_a_package_run_in_a_fresh_process(externs, c_library, rand, tmp_path):
    tilecraft.extern.register_c("scale_add", c_library, inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("scale_add")
    package = tmp_path / "scale_add.tar"
    module = tilecraft.compile(calling_module("scale_add", x="4x16", w="4x16"), package_path=package)
    x, y = rand((4, 16)), rand((4, 16))
    expected = np.maximum(2 * x + y, 0)
    np.testing.assert_allclose(module(x, y), expected, rtol=1e-6)
    np.savez(tmp_path / "io.npz", x=x, y=y, expected=expected)
    code = textwrap.dedent(f"""
        import sys, numpy as np
        import tilecraft.runtime as rt
        package = rt.load({str(package)!r})
        with np.load({str(tmp_path / 'io.npz')!r}) as io:
            np.testing.assert_allclose(package(io['x'], io['y']), io['expected'], rtol=1e-6)
        assert 'mlir' not in sys.modules
        print(package.manifest['libraries'])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "libscaleadd.so" in done.stdout


def test_unknown_extern_is_a_compile_error_naming_it(externs):
    with pytest.raises(ExternError, match="no extern function named 'nowhere'"):
        tilecraft.compile(calling_module("nowhere"))


@pytest.mark.parametrize("inputs, outputs, message", [
    ([MATRIX], [MATRIX], "1 input"),
    ([MATRIX, "memref<?x?xf64>"], [MATRIX], "operand 1 is tensor<8x16xf32>, registered as memref<\\?x\\?xf64>"),
    ([MATRIX, "memref<8x32xf32>"], [MATRIX], "operand 1 is tensor<8x16xf32>, registered as memref<8x32xf32>"),
    ([MATRIX, "memref<?xf32>"], [MATRIX], "operand 1"),
])
def test_signature_mismatch_is_a_compile_error(externs, inputs, outputs, message):
    tilecraft.extern.register_python("mismatch", lambda *arrays: None, inputs=inputs, outputs=outputs)
    externs.append("mismatch")
    with pytest.raises(ExternSignatureError, match=message):
        tilecraft.compile(calling_module("mismatch"))


def test_malformed_signatures_are_rejected_at_registration():
    with pytest.raises(ExternSignatureError, match="memref<AxBx...xT>"):
        tilecraft.extern.register_python("bad", print, inputs=["tensor<4xf32>"])
    with pytest.raises(ExternSignatureError, match="C identifier"):
        tilecraft.extern.register_python("not-a-name", print, inputs=[MATRIX])
    with pytest.raises(ExternSignatureError, match="list of types"):
        tilecraft.extern.register_python("one_string", print, inputs=MATRIX)
    with pytest.raises(ExternSignatureError, match="outputs must be memrefs the caller allocates, got f32"):
        tilecraft.extern.register_python("scalar_out", print, inputs=[MATRIX], outputs=["f32"])
    assert not {"bad", "not-a-name", "one_string", "scalar_out"} & set(tilecraft.extern.registered())


def test_missing_library_or_symbol(tmp_path, c_library):
    with pytest.raises(ExternLibraryError, match="no shared library"):
        tilecraft.extern.register_c("gone", tmp_path / "libgone.so", inputs=[MATRIX])
    (tmp_path / "libjunk.so").write_text("not an ELF file")
    with pytest.raises(ExternLibraryError, match="cannot load"):
        tilecraft.extern.register_c("junk", tmp_path / "libjunk.so", inputs=[MATRIX])
    with pytest.raises(ExternLibraryError, match="no symbol 'absent'"):
        tilecraft.extern.register_c("absent", c_library, inputs=[MATRIX])
    assert not {"gone", "junk", "absent"} & set(tilecraft.extern.registered())


def test_python_extern_in_a_package_is_refused_at_compile_time(externs, tmp_path):
    tilecraft.extern.register_python("linear", lambda x, w, y: np.matmul(x, w, out=y),
                                     inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("linear")
    with pytest.raises(ExternError, match="Python extern function\\(s\\) linear"):
        tilecraft.compile(calling_module("linear"), package_path=tmp_path / "nope.tar")
    assert not (tmp_path / "nope.tar").exists()


def test_libraries_a_package_cannot_bundle_are_refused_at_compile_time(externs, c_library, tmp_path):
    """A bundled library is found beside model.so by its file name: one not named
    lib<name>.so, or two different libraries of one file name, are compile-time errors."""
    import shutil

    unnamed = tmp_path / "scale_add.so"
    shutil.copyfile(c_library, unnamed)
    tilecraft.extern.register_c("scale_add", unnamed, inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("scale_add")
    source = calling_module("scale_add", x="4x16", w="4x16")
    with pytest.raises(ExternError, match="must be named lib<name>.so, not scale_add.so"):
        tilecraft.compile(source, package_path=tmp_path / "unnamed.tar")
    assert not (tmp_path / "unnamed.tar").exists()

    other = tmp_path / "other"
    other.mkdir()
    shutil.copyfile(c_library, other / c_library.name)
    tilecraft.extern.register_c("scale_add", c_library, inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    tilecraft.extern.register_c("scale_add_again", other / c_library.name, symbol="scale_add",
                                inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("scale_add_again")
    t = "tensor<4x16xf32>"
    both = f"""
    func.func private @scale_add({t}, {t}) -> {t}
    func.func private @scale_add_again({t}, {t}) -> {t}
    func.func @main(%x: {t}, %y: {t}) -> {t} {{
      %a = func.call @scale_add(%x, %y) : ({t}, {t}) -> {t}
      %b = func.call @scale_add_again(%a, %y) : ({t}, {t}) -> {t}
      return %b : {t}
    }}
    """
    with pytest.raises(ExternError, match=f"two extern libraries share the file name {c_library.name}"):
        tilecraft.compile(both, package_path=tmp_path / "clash.tar")


def test_manifest_names_bundled_and_system_libraries(tmp_path):
    pytest.importorskip("scipy_openblas32")
    x = "tensor<64x64xf32>"
    source = f"""
    func.func @main(%a: {x}, %b: {x}) -> {x} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {x}
      %f = linalg.fill ins(%zero : f32) outs(%e : {x}) -> {x}
      %m = linalg.matmul ins(%a, %b : {x}, {x}) outs(%f : {x}) -> {x}
      return %m : {x}
    }}
    """
    tilecraft.compile(source, offload=["blas"], package_path=tmp_path / "mm.tar")
    import tarfile
    with tarfile.open(tmp_path / "mm.tar") as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        assert "libtilecraft_blas.so" in archive.getnames()
    assert manifest["libraries"]["bundled"] == ["libtilecraft_blas.so"]
    assert [Path(p).name for p in manifest["libraries"]["system"]] == ["libscipy_openblas.so"]


def test_an_exception_in_a_python_extern_is_raised_after_the_call(externs, rand):
    def failing(x, w, y):
        raise ValueError("bad weights")

    tilecraft.extern.register_python("failing", failing, inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("failing")
    module = tilecraft.compile(calling_module("failing"))
    with pytest.raises(ExternError, match="'failing' raised ValueError: bad weights") as caught:
        module(rand((4, 8)), rand((8, 16)))
    assert isinstance(caught.value.__cause__, ValueError)
    tilecraft.extern.register_python("failing", lambda x, w, y: np.matmul(x, w, out=y),
                                     inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    x, w = rand((4, 8)), rand((8, 16))
    np.testing.assert_allclose(tilecraft.compile(calling_module("failing"))(x, w), np.maximum(x @ w, 0),
                               rtol=1e-5, atol=1e-6)


def test_mlp_example_runs(capsys):
    import runpy
    example = Path(tilecraft.__file__).resolve().parent / "examples" / "mlp_extern.py"
    try:
        runpy.run_path(str(example), run_name="__main__")
        out = capsys.readouterr().out
        assert "call @linear0" in out and "linalg.generic" in out and "extern MLP matches" in out
    finally:
        for name in ("linear0", "linear1"):
            tilecraft.extern.unregister(name)
