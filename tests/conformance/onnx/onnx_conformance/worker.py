"""Run one conformance case in this process and say how it went.

Statuses, in the order a case can fail:

- ``import-error``: ``tilecraft.compile`` raised ``tilecraft.ModelImportError``;
- ``compile-error``: it raised anything else (``CompileError``, an MLIR or Python error);
- ``runtime-error``: calling the compiled model raised;
- ``wrong-result``: an output differs in count, dtype, shape or values;
- ``pass``: every output of every data set matches.

``timeout`` and ``crash`` are decided by the pool, which watches this process from outside.
Values compare like ONNX's runner (``|got - expected| <= atol + rtol * |expected|``, NaN equal
to NaN, infinities equal to themselves); integers and booleans must be equal exactly.

Run as ``python -m onnx_conformance.worker``, it serves tasks from the pool (protocol.py).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

MESSAGE_LIMIT = 500


def summarize(error: BaseException) -> str:
    """``Type: message`` on one line, cut to a readable length."""
    text = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _describe_mismatch(got: np.ndarray, expected: np.ndarray, bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if got.ndim else ()
    return (
        f"{int(bad.sum())}/{bad.size} values differ; first at {list(index)}: "
        f"got {got[index]!r}, expected {expected[index]!r}"
    )


def compare_value(got: Any, expected: Any, rtol: float, atol: float, where: str) -> str | None:
    """Why ``got`` does not match ``expected`` (one output), or ``None`` when it does."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return f"{where}: expected a sequence of {len(expected)} tensors, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = compare_value(g, e, rtol, atol, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if expected is None:
        return None if got is None else f"{where}: expected an empty optional"
    expected = np.asarray(expected)
    if not isinstance(got, np.ndarray):
        return f"{where}: expected an array, got {type(got).__name__}"
    if got.dtype != expected.dtype:
        return f"{where}: dtype {got.dtype}, expected {expected.dtype}"
    if got.shape != expected.shape:
        return f"{where}: shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind in "biuSUO":
        bad = got != expected
    else:
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    bad = np.asarray(bad)
    if bad.any():
        return f"{where}: {_describe_mismatch(got, expected, bad)} (rtol {rtol:g}, atol {atol:g})"
    return None


def compare_outputs(got: Any, expected: list[Any], rtol: float, atol: float) -> str | None:
    """Why the compiled model's return value does not match ``expected``, or ``None``."""
    outputs = list(got) if isinstance(got, tuple) else [got]
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(outputs, expected)):
        problem = compare_value(g, e, rtol, atol, f"output {i}")
        if problem:
            return problem
    return None


def _schedule_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """Distinct tilecraft warnings (e.g. a schedule that fell back to scalar loops)."""
    found: list[str] = []
    for warning in caught:
        text = " | ".join(line.strip() for line in str(warning.message).splitlines() if line.strip())[:400]
        if text.startswith("tilecraft") and text not in found:
            found.append(text)
    return found


def run_case(payload: Any) -> dict[str, Any]:
    """Compile ``payload.model``, run every data set, and classify (see the module doc)."""
    import onnx

    import tilecraft

    result: dict[str, Any] = {"status": "pass", "message": ""}
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result.update(_classify(tilecraft, onnx.load_from_string(payload.model), payload))
    result["seconds"] = round(time.perf_counter() - start, 3)
    schedule = _schedule_warnings(caught)
    if schedule:
        result["warnings"] = schedule
    return result


def _classify(tilecraft: Any, model: Any, payload: Any) -> dict[str, Any]:
    try:
        compiled = tilecraft.compile(model)
    except tilecraft.ModelImportError as error:
        unsupported = sorted({op for _name, op, _why in getattr(error, "problems", [])})
        return {"status": "import-error", "message": summarize(error), "unsupported": unsupported}
    except Exception as error:  # anything else that escapes compile is a compiler failure
        return {"status": "compile-error", "message": summarize(error)}
    for number, (inputs, expected) in enumerate(payload.data_sets):
        try:
            got = compiled(*inputs)
        except Exception as error:
            return {"status": "runtime-error", "message": f"data set {number}: {summarize(error)}"}
        problem = compare_outputs(got, expected, payload.rtol, payload.atol)
        if problem:
            return {"status": "wrong-result", "message": f"data set {number}: {problem}"}
    return {"status": "pass", "message": ""}


def main() -> None:
    import faulthandler

    from .protocol import serve

    faulthandler.enable()  # a segfault leaves the Python stack in the crash message
    serve(run_case)


if __name__ == "__main__":
    main()
