"""Builds of one model under switchable planner rules, beside a one-thread onnxruntime session:
the in-process A/B the schedule benchmarks share (conv_tiles.py, partial_tiles.py,
one_vector_tiles.py).

Why in one process: on a shared 2-core machine only builds timed alternately in one process
compare; each build is compiled with the rules patched in and the default restored after,
and a schedule that falls back to scalar loops is an error, not a slow variant.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

import tilecraft


def builds_under_rules(model: Any, rules_by_label: Mapping[str, Any], apply: Callable[[Any], None],
                       default: Any) -> dict[str, Any]:
    """``{label: tilecraft.compile(model)}`` with ``apply(rules)`` in force for each label;
    ``apply(default)`` after each build, also when it fails."""
    builds = {}
    for label, rules in rules_by_label.items():
        apply(rules)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a schedule falling back to scalar loops
                builds[label] = tilecraft.compile(model, cache=False)
        finally:
            apply(default)
    return builds


def one_thread_session(model: Any) -> Any:
    """An onnxruntime CPU session of the ONNX ``model`` on one thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def checked_calls(builds: Mapping[str, Any], session: Any, feeds: Mapping[str, Any]) -> dict[str, Callable[[], Any]]:
    """``{label: call}`` of each build, after checking its output against onnxruntime's
    (rtol/atol 2e-3 of the largest magnitude), with onnxruntime's own call as ``"onnxruntime"``."""
    import numpy as np

    expected = session.run(None, dict(feeds))[0]
    scale = float(np.abs(expected).max()) or 1.0
    for label, module in builds.items():
        got = module(**feeds)
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3 * scale, err_msg=label)
    calls = {label: (lambda m=module: m(**feeds)) for label, module in builds.items()}
    calls["onnxruntime"] = lambda: session.run(None, dict(feeds))
    return calls
