"""The conformance cases: what exists, and the data one case needs to run.

Five groups, all shipped in the onnx wheel (nothing is downloaded):

- ``node``: ``onnx.backend.test.case.node.collect_testcases(None)``, one small model per
  case with its inputs, expected outputs and its own rtol/atol.
- ``pytorch-converted``, ``pytorch-operator``, ``simple``: folders under
  ``onnx/backend/test/data/<group>/test_*`` holding ``model.onnx`` and
  ``test_data_set_*/{input,output}_*.pb``; tolerances as ONNX's loader sets them (rtol 1e-3,
  atol 1e-7 unless the folder has a ``data.json``).
- ``light``: ``data/light/light_<model>.onnx`` (zoo models whose weights are ConstantOfShape
  fills) with ``light_<model>_output_0.pb`` beside; ONNX's runner feeds them the inputs its
  ``generate_dummy_data`` makes (``arange(n) / n``, unknown dims 1) and takes rtol/atol from
  ``data/real/test_<model>/data.json``. We do the same, so the expected outputs match.

The parent process loads a case into a :class:`Payload` (plain bytes and numpy arrays) and
sends it to a worker, so workers never repeat the few seconds ``collect_testcases`` takes.
"""

from __future__ import annotations

import glob
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import onnx
from onnx import numpy_helper

GROUPS = ("node", "pytorch-converted", "pytorch-operator", "simple", "light")
FOLDER_GROUPS = ("pytorch-converted", "pytorch-operator", "simple")

# Seconds one case may take (compile + every data set) before its worker is killed. The
# light models compile hundreds of ops; everything else is a handful.
DEFAULT_TIMEOUTS = {
    "node": 60.0,
    "pytorch-converted": 60.0,
    "pytorch-operator": 60.0,
    "simple": 60.0,
    "light": 1200.0,
}

# onnx.backend.test.loader.load_model_tests: the tolerances of a model folder without data.json.
FOLDER_RTOL = 1e-3
FOLDER_ATOL = 1e-7

DATA_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


@dataclass
class Payload:
    """Everything a worker needs to run one case; pickled to it over a pipe."""

    name: str
    model: bytes  # serialized onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]  # (inputs, expected outputs), graph order
    rtol: float
    atol: float


@dataclass(frozen=True)
class Case:
    """One conformance case; ``load`` builds its :class:`Payload` (in the parent process)."""

    name: str
    group: str
    op_types: tuple[str, ...]
    load: Callable[[], Payload] = field(compare=False, repr=False)


def op_types(graph: onnx.GraphProto) -> tuple[str, ...]:
    """Sorted op types of ``graph``, subgraphs (If/Loop/Scan bodies) included."""
    found: set[str] = set()
    pending = [graph]
    while pending:
        current = pending.pop()
        for node in current.node:
            found.add(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}")
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    pending.append(attribute.g)
                elif attribute.type == onnx.AttributeProto.GRAPHS:
                    pending.extend(attribute.graphs)
    return tuple(sorted(found))


def _as_array(value: Any) -> Any:
    """ONNX's cases sometimes hold TensorProtos, or numpy scalars (``np.float32(-1)`` for
    Clip's min), where 0-d or n-d tensors are meant: both become arrays of the same dtype
    (tilecraft's calling convention takes arrays for tensor arguments). Sequences stay lists."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [_as_array(item) for item in value]
    return value


def _load_pb(path: str, value_type: onnx.TypeProto) -> Any:
    """A test-data ``.pb`` file as the runner reads it: tensor, sequence or optional."""
    with open(path, "rb") as stream:
        content = stream.read()
    if value_type.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(content)
        return numpy_helper.to_list(sequence)
    if value_type.HasField("optional_type"):
        optional = onnx.OptionalProto()
        optional.ParseFromString(content)
        return numpy_helper.to_optional(optional)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(content)
    return numpy_helper.to_array(tensor)


# --- node cases --------------------------------------------------------------------------

_NODE_CASES: list[Any] | None = None


def _node_testcases() -> list[Any]:
    """ONNX's node cases, collected once per process with a fixed numpy seed (several
    cases draw their inputs from ``np.random``; the seed makes a run reproducible)."""
    global _NODE_CASES
    if _NODE_CASES is None:
        from onnx.backend.test.case.node import collect_testcases

        state = np.random.get_state()
        np.random.seed(0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the case generators overflow on purpose
                _NODE_CASES = list(collect_testcases(None))
        finally:
            np.random.set_state(state)
    return _NODE_CASES


def _node_payload(testcase: Any) -> Payload:
    data_sets = [
        ([_as_array(x) for x in inputs], [_as_array(y) for y in outputs])
        for inputs, outputs in testcase.data_sets
    ]
    return Payload(testcase.name, testcase.model.SerializeToString(), data_sets,
                   float(testcase.rtol), float(testcase.atol))


def node_cases() -> list[Case]:
    return [
        Case(tc.name, "node", op_types(tc.model.graph), lambda tc=tc: _node_payload(tc))
        for tc in _node_testcases()
    ]


# --- model folders -------------------------------------------------------------------------


def _folder_tolerances(case_dir: str) -> tuple[float, float]:
    rtol, atol = FOLDER_RTOL, FOLDER_ATOL
    data_json = os.path.join(case_dir, "data.json")
    if os.path.exists(data_json):
        with open(data_json) as stream:
            data = json.load(stream)
        rtol, atol = data.get("rtol", rtol), data.get("atol", atol)
    return float(rtol), float(atol)


def _folder_payload(name: str, case_dir: str) -> Payload:
    """Like ``Runner._add_model_test.run``: input_i / output_i typed by graph input/output i."""
    model_path = os.path.join(case_dir, "model.onnx")
    model = onnx.load(model_path)
    data_sets = []
    for data_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set*"))):
        count_in = len(glob.glob(os.path.join(data_dir, "input_*.pb")))
        count_out = len(glob.glob(os.path.join(data_dir, "output_*.pb")))
        inputs = [_load_pb(os.path.join(data_dir, f"input_{i}.pb"), model.graph.input[i].type)
                  for i in range(count_in)]
        outputs = [_load_pb(os.path.join(data_dir, f"output_{i}.pb"), model.graph.output[i].type)
                   for i in range(count_out)]
        data_sets.append((inputs, outputs))
    with open(model_path, "rb") as stream:
        serialized = stream.read()
    rtol, atol = _folder_tolerances(case_dir)
    return Payload(name, serialized, data_sets, rtol, atol)


def folder_cases(group: str, data_dir: str = DATA_DIR) -> list[Case]:
    cases = []
    group_dir = os.path.join(data_dir, group)
    for name in sorted(os.listdir(group_dir)):
        case_dir = os.path.join(group_dir, name)
        model_path = os.path.join(case_dir, "model.onnx")
        if not os.path.isfile(model_path):
            continue
        graph = onnx.load(model_path, load_external_data=False).graph
        cases.append(Case(name, group, op_types(graph),
                          lambda name=name, case_dir=case_dir: _folder_payload(name, case_dir)))
    return cases


# --- light zoo models ----------------------------------------------------------------------


def dummy_input(value: onnx.ValueInfoProto) -> np.ndarray:
    """``Runner.generate_dummy_data(random=False)``: float32 ``arange(n) / n``, unknown dims 1."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in value.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def free_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers: what a caller passes."""
    weights = {tensor.name for tensor in graph.initializer}
    return [value for value in graph.input if value.name not in weights]


def _light_payload(name: str, model_path: str, rtol: float, atol: float) -> Payload:
    model = onnx.load(model_path)
    inputs = [dummy_input(value) for value in free_inputs(model.graph)]
    prefix = os.path.splitext(model_path)[0]
    outputs = [_load_pb(f"{prefix}_output_{i}.pb", output.type) for i, output in enumerate(model.graph.output)]
    with open(model_path, "rb") as stream:
        serialized = stream.read()
    return Payload(name, serialized, [(inputs, outputs)], rtol, atol)


def light_cases(data_dir: str = DATA_DIR) -> list[Case]:
    """The ``real`` group's cases whose url points into ``data/light`` (all nine of them)."""
    cases = []
    real_dir = os.path.join(data_dir, "real")
    for name in sorted(os.listdir(real_dir)):
        data_json = os.path.join(real_dir, name, "data.json")
        if not os.path.isfile(data_json):
            continue
        with open(data_json) as stream:
            data = json.load(stream)
        url = data.get("url", "")
        if not url.startswith("onnx/backend/test/data/light/"):
            continue
        model_path = os.path.join(data_dir, "light", os.path.basename(url))
        graph = onnx.load(model_path).graph
        rtol, atol = float(data.get("rtol", FOLDER_RTOL)), float(data.get("atol", FOLDER_ATOL))
        cases.append(Case(name, "light", op_types(graph),
                          lambda name=name, p=model_path, r=rtol, a=atol: _light_payload(name, p, r, a)))
    return cases


# --- selection -----------------------------------------------------------------------------


def discover(groups: Iterable[str] = GROUPS, pattern: str | None = None) -> list[Case]:
    """The cases of ``groups`` whose name matches the regular expression ``pattern``
    (``re.search``), in group order then name order."""
    groups = list(groups)
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise ValueError(f"unknown group(s) {unknown}; groups: {', '.join(GROUPS)}")
    regex = re.compile(pattern) if pattern else None
    cases: list[Case] = []
    for group in GROUPS:
        if group not in groups:
            continue
        if group == "node":
            found = node_cases()
        elif group == "light":
            found = light_cases()
        else:
            found = folder_cases(group)
        cases.extend(sorted((c for c in found if regex is None or regex.search(c.name)), key=lambda c: c.name))
    names = [case.name for case in cases]
    if len(names) != len(set(names)):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"case names are not unique across groups: {duplicates}")
    return cases
