"""The default (not fast-math) f32 erf and exact GELU over float32, against float64
references: a dense grid of [-10, 10], magnitudes from 1e-38 to 3e38 of both signs and the
special values. Why: the f32 erf's tail is a polynomial in |x| (ir/elementwise.py
``_ErfTable``: no exp, no division, so a GELU costs about half of what it did); this holds it
to the accuracy of the exp form it replaced (2e-7 relative)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mlir import ir
from mlir.dialects import func

import tilecraft
from tilecraft.ir import core, elementwise

_erf = np.frompyfunc(math.erf, 1, 1)


def _points() -> np.ndarray:
    f32 = np.finfo(np.float32)
    magnitudes = np.geomspace(1e-38, 3e38, 1 << 14).astype(np.float32)
    special = np.array([0.0, -0.0, 1.5, -1.5, 4.0, -4.0, f32.max, -f32.max, np.inf, -np.inf], np.float32)
    return np.concatenate([np.linspace(-10, 10, 1 << 20, dtype=np.float32), magnitudes, -magnitudes, special])


def _module(size: int) -> str:
    """main(x) -> (erf(x), gelu(x)), each an elementwise linalg.generic."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        f32 = ir.F32Type.get()
        tensor = ir.RankedTensorType.get([size], f32)
        with ir.InsertionPoint(module.body):
            main = func.FuncOp("main", ir.FunctionType.get([tensor], [tensor, tensor]))
            entry = main.add_entry_block()
            with ir.InsertionPoint(entry):
                x = entry.arguments[0]
                func.ReturnOp([core.elementwise([x], f32, elementwise.erf),
                               core.elementwise([x], f32, elementwise.gelu)])
        return str(module)


@pytest.fixture(scope="module")
def compiled():
    x = _points()
    return x, tilecraft.compile(_module(x.size))


def test_erf_within_the_exp_forms_accuracy(compiled):
    x, module = compiled
    got = module(x)[0].astype(np.float64)
    want = _erf(x.astype(np.float64)).astype(np.float64)
    error = np.abs(got - want)
    assert error.max() <= 2.0e-7, f"max |error| {error.max():.3g} at x = {x[error.argmax()]}"
    assert (error <= 2.0e-7 * np.abs(want) + 1e-45).all()  # relative, down to the smallest x
    assert np.abs(got).max() <= 1.0
    assert np.signbit(got[x < 0]).all() and not np.signbit(got[x > 0]).any()


def test_exact_gelu_within_an_output_ulp(compiled):
    """5.5e-7: about one f32 ulp of GELU's value where the error peaks (x = 5.09; the exp
    form's was 4.5e-7 there, both rounding of a value near 5)."""
    x, module = compiled
    got = module(x)[1].astype(np.float64)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)).astype(np.float64))
    finite = np.isfinite(want) & (np.abs(x64) <= 10)
    assert np.abs(got[finite] - want[finite]).max() <= 5.5e-7
    big = (np.abs(x64) > 10) & np.isfinite(x64)
    np.testing.assert_array_equal(got[big & (x64 > 0)], x[big & (x64 > 0)])  # Phi(x) = 1 exactly
    assert (got[big & (x64 < 0)] == 0).all()


def test_nan_propagates():
    x = np.full(16, np.nan, np.float32)
    erf_values, gelu_values = tilecraft.compile(_module(x.size))(x)
    assert np.isnan(erf_values).all() and np.isnan(gelu_values).all()


def test_the_f32_erf_has_no_exp_and_no_division(compiled):
    """The point of the tail polynomial: one vector of erf is FMAs, compares and selects."""
    _, module = compiled
    vector = module.ir("vector")
    assert "math.exp" not in vector and "arith.divf" not in vector
    assert "math.fma" in vector
