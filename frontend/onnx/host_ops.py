"""Host implementations of string ops where onnx's reference implementation departs from
the ONNX specification (and from onnxruntime).

compiler/partitioned.py runs nodes on string tensors through ``onnx.reference``; the ops
here replace the reference's own (``ReferenceEvaluator(new_ops=HOST_OPS)``).

``StringNormalizer``: the reference strips accents ("café" becomes "cafe"), drops every
empty string of the input, removes stop words inside space-separated text instead of whole
elements, and calls ``locale.setlocale`` for the whole process on each run. The
specification and onnxruntime do none of that: whole elements equal to a stop word
(compared without case when ``is_case_sensitive`` is 0) are removed, the rest are
lowercased or uppercased, and an output left empty is one empty string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference.op_run import OpRun
from ...errors import OperandError

_CASE_ACTIONS = ("NONE", "LOWER", "UPPER")


def _simple_case(text: str, action: str) -> str:
    """Unicode's one-to-one case mapping, character by character, as C's ``towlower`` /
    ``towupper`` (onnxruntime's) map: "ß" stays "ß" where ``str.upper`` would write "SS".
    The ``locale`` attribute does not change it (no Turkish dotless i)."""
    if action == "NONE":
        return text
    convert = str.lower if action == "LOWER" else str.upper
    return "".join(mapped if len(mapped := convert(c)) == 1 else c for c in text)


class StringNormalizer(OpRun):
    """ONNX StringNormalizer (opset 10) as its specification reads; module docstring."""

    def __init__(self, onnx_node: Any, run_params: Any, schema: Any = None) -> None:
        super().__init__(onnx_node, run_params, schema)
        action = self.case_change_action or "NONE"  # type: ignore[attr-defined]
        if action not in _CASE_ACTIONS:
            raise OperandError(f"StringNormalizer: case_change_action {action!r} is not one of {_CASE_ACTIONS}")

    def _run(self, x: np.ndarray, case_change_action: str | None = None, is_case_sensitive: int | None = None,
             locale: str | None = None, stopwords: list[str] | None = None) -> tuple[np.ndarray]:
        if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
            raise OperandError(f"StringNormalizer takes shape [C] or [1, C], got {list(x.shape)}")
        action = case_change_action or "NONE"
        case_sensitive = bool(is_case_sensitive)
        stops = set(stopwords or ())
        if not case_sensitive:
            stops = {_simple_case(word, "LOWER") for word in stops}

        def is_stop(word: str) -> bool:
            return (word if case_sensitive else _simple_case(word, "LOWER")) in stops

        kept = [_simple_case(word, action) for word in x.reshape(-1).tolist() if not (stops and is_stop(word))]
        if not kept:
            kept = [""]
        result = np.empty(len(kept), dtype=object)
        result[:] = kept
        return (result.reshape((1, -1)) if x.ndim == 2 else result,)


# Passed to ``onnx.reference.ReferenceEvaluator(new_ops=...)``.
HOST_OPS: tuple[type[OpRun], ...] = (StringNormalizer,)
