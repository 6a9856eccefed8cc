"""tilecraft.builder.ModelBuilder: models built from TE computes, constants and extern calls
(dotted names, from Python and from C), compiled like imported ones; and the typed errors
for everything that can be wrong with them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft
from tilecraft import scheduling as te
from tilecraft.builder import ModelBuilder
from tilecraft.errors import ExternError, ExternSignatureError, ModelBuilderError
from extern_testing import C_SOURCE, c_library, externs  # noqa: F401 (fixtures)

torch = pytest.importorskip("torch")

MATRIX, VECTOR = "memref<?x?xf32>", "memref<?xf32>"


def linear(x, w, b):
    """``x @ w.T + b`` as TE computes (PyTorch's layout for ``w``)."""
    k = te.reduce_axis(x.shape[1], name="k")
    product = te.compute((x.shape[0], w.shape[0]), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="mm")
    return te.compute(product.shape, lambda i, j: product[i, j] + b[j], name="linear")


def relu(x):
    return te.compute(x.shape, lambda *i: te.maximum(x[i], 0.0), name="relu")


def numpy_linear(x, w, b, out):
    np.matmul(x, w.T, out=out)
    out += b


def run_in_new_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_mlp_with_a_dotted_python_extern_matches_pytorch(externs, rand):
    tilecraft.extern.register_python("env.linear", numpy_linear, inputs=[MATRIX, MATRIX, VECTOR],
                                     outputs=[MATRIX])
    externs.append("env.linear")
    w0, b0, w1, b1 = rand((32, 64)), rand((32,)), rand((10, 32)), rand((10,))
    mb = ModelBuilder()
    x = mb.input("x", (2, 64))
    hidden = mb.emit_te(relu, mb.emit_te(linear, x, mb.const(w0, "w0"), mb.const(b0, "b0")))
    mb.output(mb.call_dps_packed("env.linear", [hidden, mb.const(w1, "w1"), mb.const(b1, "b1")], (2, 10)))
    module = mb.build()
    assert isinstance(module, tilecraft.CompiledModule)
    assert "_tcx_3env6linear" in module.ir("input") and module.group_count is not None
    xv = rand((2, 64))
    t = [torch.from_numpy(a) for a in (xv, w0, b0, w1, b1)]
    expected = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(t[0], t[1], t[2])), t[3], t[4])
    np.testing.assert_allclose(module(xv), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_cnn_layers_from_emit_te_match_pytorch(rand):
    def conv2d(x, w, stride):
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
        return te.compute((n, o, (h - kh) // stride + 1, (wd - kw) // stride + 1),
                          lambda b, f, y, z: te.sum(x[b, rc, y * stride + ry, z * stride + rx] * w[f, rc, ry, rx],
                                                    axis=[rc, ry, rx]), name="conv")

    w1, w2 = rand((4, 3, 3, 3)), rand((6, 4, 3, 3))
    mb = ModelBuilder()
    x = mb.input("image", (1, 3, 12, 12))
    h = mb.emit_te(relu, mb.emit_te(conv2d, x, mb.const(w1, "w1"), stride=1))
    mb.output(mb.emit_te(conv2d, h, mb.const(w2, "w2"), stride=2))
    module = mb.build()
    image = rand((1, 3, 12, 12))
    f = torch.nn.functional
    expected = f.conv2d(f.relu(f.conv2d(torch.from_numpy(image), torch.from_numpy(w1))), torch.from_numpy(w2), stride=2)
    np.testing.assert_allclose(module(image), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_symbolic_batch_and_several_results(rand):
    n = te.var("n")
    mb = ModelBuilder()
    x = mb.input("x", (n, 8))
    doubled, negated = mb.emit_te(lambda a: (te.compute(a.shape, lambda i, j: a[i, j] * 2.0, name="double"),
                                             te.compute(a.shape, lambda i, j: -a[i, j], name="negate")), x)
    mb.output(mb.emit_te(relu, doubled), negated)
    module = mb.build()
    for batch in (1, 5):
        xv = rand((batch, 8))
        out, neg = module(xv)
        np.testing.assert_allclose(out, np.maximum(2 * xv, 0), rtol=1e-6)
        np.testing.assert_allclose(neg, -xv)


def test_dotted_c_extern_in_a_package_loaded_in_a_new_process(externs, c_library, rand, tmp_path):
    tilecraft.extern.register_c("env.scale_add", c_library, symbol="scale_add", inputs=[MATRIX, MATRIX],
                                outputs=[MATRIX])
    externs.append("env.scale_add")
    mb = ModelBuilder()
    x, y = mb.input("x", (4, 16)), mb.input("y", (4, 16))
    mb.output(mb.emit_te(relu, mb.call_dps_packed("env.scale_add", [x, y], (4, 16))))
    package = tmp_path / "scale_add.tar"
    module = mb.build(package_path=package)
    xv, yv = rand((4, 16)), rand((4, 16))
    expected = np.maximum(2 * xv + yv, 0)
    np.testing.assert_allclose(module(xv, yv), expected, rtol=1e-6)
    np.savez(tmp_path / "io.npz", x=xv, y=yv, expected=expected)
    run_in_new_process(f"""
        import sys, numpy as np
        import tilecraft.runtime as rt
        package = rt.load_module({str(package)!r})
        with np.load({str(tmp_path / 'io.npz')!r}) as io:
            np.testing.assert_allclose(package(io['x'], io['y']), io['expected'], rtol=1e-6)
        assert 'mlir' not in sys.modules
    """)


def test_a_dotted_extern_called_from_mlir_text(externs, rand):
    tilecraft.extern.register_python("env.add", lambda a, b, out: np.add(a, b, out=out),
                                     inputs=[MATRIX, MATRIX], outputs=[MATRIX])
    externs.append("env.add")
    module = tilecraft.compile("""
    func.func private @env.add(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %r = func.call @env.add(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      return %r : tensor<2x3xf32>
    }""")
    a, b = rand((2, 3)), rand((2, 3))
    np.testing.assert_allclose(module(a, b), a + b)


def test_an_extern_with_two_results(externs, rand):
    def split_sign(x, positive, negative):
        np.maximum(x, 0, out=positive)
        np.minimum(x, 0, out=negative)

    tilecraft.extern.register_python("env.split_sign", split_sign, inputs=[MATRIX], outputs=[MATRIX, MATRIX])
    externs.append("env.split_sign")
    mb = ModelBuilder()
    x = mb.input("x", (3, 5))
    positive, negative = mb.call_dps_packed("env.split_sign", [x], [(3, 5), (3, 5)])
    mb.output(mb.emit_te(lambda p, n: te.compute(p.shape, lambda i, j: p[i, j] - n[i, j], name="abs"),
                         positive, negative))
    xv = rand((3, 5))
    np.testing.assert_allclose(mb.build()(xv), np.abs(xv))
    with pytest.raises(ModelBuilderError, match="2 result shape"):
        mb.call_dps_packed("env.split_sign", [x], [(3, 5), (3, 5)], dtype=["float32"])


# ---- bad input ---------------------------------------------------------------------------------


def _matrix_builder():
    mb = ModelBuilder()
    return mb, mb.input("x", (2, 3))


def test_unknown_extern_is_a_typed_error_naming_it():
    mb, x = _matrix_builder()
    with pytest.raises(ExternError, match="no extern function named 'env.nowhere'"):
        mb.call_dps_packed("env.nowhere", [x], (2, 3))


def test_extern_argument_and_result_mismatches(externs):
    tilecraft.extern.register_python("env.vec", lambda a, out: None, inputs=[VECTOR], outputs=[VECTOR])
    externs.append("env.vec")
    mb, x = _matrix_builder()
    with pytest.raises(ExternSignatureError, match="argument 0"):
        mb.call_dps_packed("env.vec", [x], (6,))
    with pytest.raises(ExternSignatureError, match="1 input"):
        mb.call_dps_packed("env.vec", [x, x], (6,))
    vector = mb.const(np.zeros(6, np.float32), "v")
    with pytest.raises(ExternSignatureError, match="does not match the registered"):
        mb.call_dps_packed("env.vec", [vector], (2, 3))


@pytest.mark.parametrize("name, match", [("env..linear", "C identifier"), ("1env.x", "C identifier"),
                                         ("env.", "C identifier"), ("_tcx_3env", "reserved")])
def test_bad_extern_names(name, match):
    with pytest.raises(ExternSignatureError, match=match):
        tilecraft.extern.register_python(name, lambda out: None, inputs=[], outputs=[MATRIX])


def test_a_dotted_c_extern_needs_a_symbol(c_library):
    with pytest.raises(ExternSignatureError, match="symbol="):
        tilecraft.extern.register_c("env.scale_add", c_library, inputs=[MATRIX, MATRIX], outputs=[MATRIX])


def test_builder_misuse_is_a_typed_error(rand):
    mb, x = _matrix_builder()
    other, y = _matrix_builder()
    with pytest.raises(ModelBuilderError, match="another ModelBuilder"):
        mb.emit_te(relu, y)
    with pytest.raises(ModelBuilderError, match="distinct identifier"):
        mb.input("x", (2, 3))
    with pytest.raises(ModelBuilderError, match="distinct identifier"):
        mb.input("a b", (2, 3))
    with pytest.raises(ModelBuilderError, match="positive integers"):
        mb.input("z", (2, 0))
    with pytest.raises(ModelBuilderError, match="unsupported dtype"):
        mb.input("z", (2,), dtype="complex64")
    with pytest.raises(ModelBuilderError, match="must return a TE tensor"):
        mb.emit_te(lambda a: 3, x)
    with pytest.raises(ModelBuilderError, match="placeholder"):
        mb.emit_te(lambda a: a, x)
    with pytest.raises(ModelBuilderError, match="no outputs"):
        mb.build()
    mb.const(rand((3,)), "w")
    with pytest.raises(ModelBuilderError, match="before the first constant"):
        mb.input("late", (2,))
    mb.output(x)
    with pytest.raises(ModelBuilderError, match="already"):
        mb.output(x)


def test_a_te_shape_error_surfaces_as_a_schedule_error():
    mb, x = _matrix_builder()
    with pytest.raises(te.ScheduleError, match="index"):
        mb.emit_te(lambda a: te.compute((2, 4), lambda i, j: a[i, j], name="overrun"), x)
