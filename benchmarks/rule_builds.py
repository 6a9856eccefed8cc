"""Builds of one model under switchable planner rules, beside a one-thread onnxruntime session:
the in-process A/B the schedule benchmarks share (conv_tiles.py, partial_tiles.py).

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
