"""fast_math=True: tanh, exp, erf, sigmoid and GELU (both forms) within their stated maximum
errors (pipelines/vector/fast_math.py, docs/performance.md) over float32, against float64
references: a dense grid of [-10, 10] (spacing 1e-5), magnitudes from 1e-38 to 3e38 of both
signs, and the special values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mlir import ir
from mlir.dialects import func, math as math_dialect

import tilecraft
from tilecraft.errors import OptionError
from tilecraft.ir import core, elementwise
from tilecraft.pipelines.vector.fast_math import MAX_ABS_ERROR, MAX_REL_ERROR

FUNCTIONS = {
    "tanh": math_dialect.tanh,
    "exp": math_dialect.exp,
    "erf": elementwise.erf,
    "sigmoid": elementwise.sigmoid,
    "gelu": elementwise.gelu,
    "gelu_tanh": lambda x: elementwise.gelu(x, "tanh"),
}

_erf = np.frompyfunc(math.erf, 1, 1)


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """float64 values of the functions at the float32 points ``x``."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "tanh":
            return np.tanh(x)
        if name == "exp":
            return np.exp(x)
        if name == "sigmoid":
            return 1 / (1 + np.exp(-x))
        if name == "erf":
            return _erf(x).astype(np.float64)
        if name == "gelu":
            return 0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + np.tanh(inner))


def points() -> np.ndarray:
    f32 = np.finfo(np.float32)
    magnitudes = np.geomspace(1e-38, 3e38, 1 << 16).astype(np.float32)
    special = np.array([0.0, -0.0, f32.max, -f32.max, f32.tiny, 1e-45, -1e-45, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([np.linspace(-10, 10, 1 << 21, dtype=np.float32), magnitudes, -magnitudes, special])


def module_of_functions(size: int) -> str:
    """main(x) -> one result per entry of FUNCTIONS, each an elementwise linalg.generic."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        f32 = ir.F32Type.get()
        tensor = ir.RankedTensorType.get([size], f32)
        with ir.InsertionPoint(module.body):
            main = func.FuncOp("main", ir.FunctionType.get([tensor], [tensor] * len(FUNCTIONS)))
            entry = main.add_entry_block()
            with ir.InsertionPoint(entry):
                func.ReturnOp([core.elementwise([entry.arguments[0]], f32, fn) for fn in FUNCTIONS.values()])
        return str(module)


@pytest.fixture(scope="module")
def results():
    x = points()
    fast = tilecraft.compile(module_of_functions(x.size), fast_math=True)
    assert fast.pipeline.stage("schedule").passes[0] == "tilecraft-fast-math"
    assert "math.tanh" not in fast.ir("schedule") and "tilecraft.fast_math" not in fast.ir("schedule")
    return x, dict(zip(FUNCTIONS, fast(x)))


@pytest.mark.parametrize("name", [n for n in FUNCTIONS if n != "exp"])
def test_absolute_error_within_the_stated_bound(results, name):
    x, outputs = results
    expected, got = reference(name, x), outputs[name].astype(np.float64)
    checked = np.isfinite(expected) & (np.abs(x) <= 10)
    bound = MAX_ABS_ERROR[name]
    with np.errstate(invalid="ignore"):
        error = np.abs(got - expected)[checked]
    assert error.max() <= bound, f"{name}: {error.max():.3e} at x={x[checked][error.argmax()]!r}"
    # Beyond +-10 every function is at its limit (or, GELU, x itself) within a relative 2^-23.
    far = np.isfinite(x) & (np.abs(x) > 10)
    np.testing.assert_allclose(got[far], expected[far], rtol=2.4e-7, atol=1e-30)


def test_exp_relative_error_within_the_stated_bound(results):
    x, outputs = results
    expected, got = reference("exp", x), outputs["exp"].astype(np.float64)
    normal = np.isfinite(expected) & (expected >= np.finfo(np.float32).tiny) & (expected <= np.finfo(np.float32).max)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = (np.abs(got - expected) / expected)[normal]
    assert error.max() <= MAX_REL_ERROR["exp"], f"{error.max():.3e} at x={x[normal][error.argmax()]!r}"
    assert got[x == np.inf] == np.inf and got[x == -np.inf] == 0 and got[x > 89].min() == np.inf


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_special_values(results, name):
    x, outputs = results
    got = outputs[name]
    assert np.isnan(got[np.isnan(x)]).all()
    limits = {"tanh": (-1, 1), "erf": (-1, 1), "sigmoid": (0, 1), "exp": (0, np.inf)}
    if name in limits:
        assert (got[x == -np.inf], got[x == np.inf]) == limits[name]
    assert np.signbit(got[(x == 0) & np.signbit(x)]).all() == (name in ("tanh", "erf", "gelu", "gelu_tanh"))


def test_the_pass_runs_only_when_asked():
    module = tilecraft.compile(module_of_functions(4), fast_math=False)
    assert "tilecraft-fast-math" not in module.pipeline.stage("schedule").passes
    with pytest.raises(OptionError, match="fast_math"):
        tilecraft.CompileOptions(fast_math="yes")


def test_the_cli_flag_sets_the_option():
    from tilecraft.tools.cli import _compile_options, build_parser

    for flags, expected in (([], False), (["--fast-math"], True)):
        args = build_parser().parse_args(["compile", "model.onnx", *flags])
        assert _compile_options(args).fast_math is expected
