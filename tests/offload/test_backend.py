"""The UMA-style backend API: a backend of a few lines, registered with one call, offloads the
ops it accepts to its extern and leaves the others compiled."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import BackendError
from tilecraft.pipelines.tensor.extern import emit_call
from tilecraft.pipelines.ir_queries import is_zero_fill
from tilecraft.tools.cli import run_cli, split_composite_target

PLAIN = ("affine_map<(d0, d1, d2) -> (d0, d2)>", "affine_map<(d0, d1, d2) -> (d2, d1)>")


class NumpyMatmul(tilecraft.Backend):
    name = "numpy_matmul_test"
    patterns = ("linalg.matmul",)

    def prepare(self):
        self.calls = 0

        def matmul(a, b, out):
            self.calls += 1
            np.matmul(a, b, out=out)

        self.extern = tilecraft.extern.register_python(
            "numpy_matmul_test", matmul, inputs=["memref<?x?xf32>", "memref<?x?xf32>"],
            outputs=["memref<?x?xf32>"])

    def lower(self, op, module, num_threads):
        a, b, init = op.operands
        if tuple(str(m) for m in op.attributes["indexing_maps"])[:2] != PLAIN or not is_zero_fill(init):
            return None
        return emit_call(module, self.extern, [a, b], [init.type])


def two_matmuls(n: int = 16) -> str:
    t = f"tensor<{n}x{n}xf32>"
    return f"""
    func.func @main(%a: {t}, %b: {t}, %c: {t}) -> {t} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t}
      %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}
      %m = linalg.matmul ins(%a, %b : {t}, {t}) outs(%f : {t}) -> {t}
      %r = linalg.matmul ins(%m, %b : {t}, {t}) outs(%c : {t}) -> {t}
      return %r : {t}
    }}
    """


def test_a_backend_takes_what_it_accepts(rand, capsys):
    backend = tilecraft.register_backend(NumpyMatmul())
    try:
        module = tilecraft.compile(two_matmuls(), offload=["numpy_matmul_test"])
        assert module.offloaded == {"numpy_matmul_test": {"declined": 1, "linalg.matmul": 1}}
        assert "offload numpy_matmul_test: 1 ops (linalg.matmul 1), 1 left to the compiler" in capsys.readouterr().err
        a, b, c = rand((16, 16)), rand((16, 16)), rand((16, 16))
        np.testing.assert_allclose(module(a, b, c), (a @ b) @ b + c, rtol=1e-4, atol=1e-5)
        assert backend.calls == 1
    finally:
        tilecraft.extern.unregister("numpy_matmul_test")


def test_backends_chain_in_order(rand):
    """numpy_matmul_test takes the plain matmul; blas the accumulating one it declined."""
    pytest.importorskip("scipy_openblas32")
    tilecraft.register_backend(NumpyMatmul())
    try:
        module = tilecraft.compile(two_matmuls(64), offload=["numpy_matmul_test", "blas"])
        assert module.offloaded["numpy_matmul_test"]["linalg.matmul"] == 1
        assert module.offloaded["blas"]["linalg.matmul"] == 1
        a, b, c = rand((64, 64)), rand((64, 64)), rand((64, 64))
        np.testing.assert_allclose(module(a, b, c), (a @ b) @ b + c, rtol=1e-4, atol=1e-4)
    finally:
        tilecraft.extern.unregister("numpy_matmul_test")


def test_registration_checks_name_and_patterns():
    class Nameless(tilecraft.Backend):
        patterns = ("linalg.matmul",)

    class Patternless(tilecraft.Backend):
        name = "patternless"

    with pytest.raises(BackendError, match="identifier"):
        tilecraft.register_backend(Nameless())
    with pytest.raises(BackendError, match="no patterns"):
        tilecraft.register_backend(Patternless())
    with pytest.raises(BackendError, match="CPU targets only"):
        tilecraft.CompileOptions(target="cuda -arch=sm_80", offload=["blas"])


@pytest.mark.parametrize("text, target, backends", [
    ("llvm", "llvm", ()),
    ("blas, llvm", "llvm", ("blas",)),
    ("blas,toy, llvm -mcpu=znver4", "llvm -mcpu=znver4", ("blas", "toy")),
    # A target's own commas (LLVM feature lists) are no composite.
    ("llvm -mattr=+avx2,+fma", "llvm -mattr=+avx2,+fma", ()),
    ("blas, llvm -mattr=+avx2,-avx512f", "llvm -mattr=+avx2,-avx512f", ("blas",)),
])
def test_composite_targets_split_off_leading_backend_names(text, target, backends):
    assert split_composite_target(text) == (target, backends)


def test_a_composite_target_with_no_target_is_a_usage_error(capsys):
    assert run_cli(["compile", "model.onnx", "--target", "blas, ", "-o", "x.tar"]) != 0
    assert "a composite target ends with the target itself" in capsys.readouterr().err
