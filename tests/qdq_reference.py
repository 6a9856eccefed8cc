"""A compiled QDQ model against onnxruntime running the same model (tests/precision).

onnxruntime's QLinearConv and QLinearAdd requantize by a multiplier, so where x / scale
lies within about an ulp of a half-integer the two may round to neighbouring 8-bit steps:
the comparison allows one step (the smallest gap between the reference's distinct values)
and returns the fraction of values that differ, for tests that bound it."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def differing_within_one_step(compiled: Any, qdq: Any, samples: Sequence[dict]) -> float:
    """Assert ``compiled``'s output is within one 8-bit step of onnxruntime's (one thread)
    on every input of ``samples``; the largest fraction of output values that differ."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(qdq.SerializeToString(), options, providers=["CPUExecutionProvider"])
    worst = 0.0
    for feeds in samples:
        (expected,) = session.run(None, feeds)
        got = np.asarray(compiled(**feeds))
        values = np.unique(expected)
        step = float(np.min(np.diff(values))) if len(values) > 1 else 1.0
        np.testing.assert_allclose(got, expected, rtol=0, atol=step * 1.01)
        worst = max(worst, float(np.mean(got != expected)))
    return worst
