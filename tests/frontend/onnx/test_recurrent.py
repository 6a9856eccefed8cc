"""LSTM, GRU and RNN (frontend/onnx/ops/recurrent.py) against onnxruntime: every direction,
both layouts, biases, initial states, peepholes, sequence lengths, and a small speech-style
model (MFCC frames -> bidirectional LSTM -> GRU -> per-frame classifier)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tilecraft
from tilecraft.frontend.onnx import import_model

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from recurrent import speech_model  # noqa: E402  (the benchmark's model, checked here)

RNG = np.random.default_rng(17)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def weights(op: str, dirs: int, hidden: int, inputs: int) -> dict[str, np.ndarray]:
    g = GATES[op]
    return {
        "W": (RNG.standard_normal((dirs, g * hidden, inputs)) * 0.4).astype(np.float32),
        "R": (RNG.standard_normal((dirs, g * hidden, hidden)) * 0.4).astype(np.float32),
        "B": (RNG.standard_normal((dirs, 2 * g * hidden)) * 0.1).astype(np.float32),
    }


def compare(model: onnx.ModelProto, feeds: dict, rtol=1e-4, atol=1e-5, reference: str = "onnxruntime") -> None:
    """``reference="onnx"``: ONNX's reference evaluator, for what onnxruntime lacks (layout=1)."""
    model.ir_version = 8
    if reference == "onnx":
        expected = [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    else:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = session.run(None, feeds)
    for output, value in zip(model.graph.output, expected):  # declare what onnxruntime computed
        output.CopyFrom(helper.make_tensor_value_info(output.name, TensorProto.FLOAT, list(value.shape)))
    got = tilecraft.compile(model)(**feeds)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def one_node_model(op: str, *, direction: str, layout: int, with_states: bool, with_lens: bool,
                   seq: int = 6, batch: int = 3, inputs: int = 5, hidden: int = 4, **attributes):
    dirs = 2 if direction == "bidirectional" else 1
    constants = weights(op, dirs, hidden, inputs)
    x_shape = [batch, seq, inputs] if layout else [seq, batch, inputs]
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": RNG.standard_normal(x_shape).astype(np.float32)}
    names = ["X", "W", "R", "B", "", "", ""]
    if with_lens:
        feeds["lens"] = np.array([seq, seq - 2, 1][:batch], np.int32)
        names[4] = "lens"
    if with_states:
        feeds["h0"] = RNG.standard_normal(state_shape).astype(np.float32)
        names[5] = "h0"
        if op == "LSTM":
            feeds["c0"] = RNG.standard_normal(state_shape).astype(np.float32)
            names[6] = "c0"
    while names and not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, hidden_size=hidden, direction=direction, layout=layout, **attributes)
    graph = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [onnx.numpy_helper.from_array(a, n) for n, a in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), feeds


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_initial_states(op, direction):
    model, feeds = one_node_model(op, direction=direction, layout=0, with_states=True, with_lens=False)
    compare(model, feeds)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_batch_major_layout_and_sequence_lengths(op):
    # onnxruntime refuses layout=1; ONNX's reference ignores sequence_lens.
    model, feeds = one_node_model(op, direction="forward", layout=1, with_states=True, with_lens=False)
    compare(model, feeds, reference="onnx")
    model, feeds = one_node_model(op, direction="forward", layout=0, with_states=True, with_lens=True)
    compare(model, feeds)


def test_gru_linear_before_reset_and_lstm_clip():
    """onnxruntime clips the gates' inputs (not the cell state before the output tanh);
    ONNX's reference ignores ``clip``."""
    model, feeds = one_node_model("GRU", direction="bidirectional", layout=0, with_states=False, with_lens=False,
                                  linear_before_reset=1)
    compare(model, feeds)
    model, feeds = one_node_model("LSTM", direction="forward", layout=0, with_states=True, with_lens=False, clip=0.5)
    compare(model, feeds)


def test_the_time_loop_is_a_loop_not_unrolled():
    model, _ = one_node_model("LSTM", direction="bidirectional", layout=0, with_states=False, with_lens=False, seq=50)
    for output, shape in zip(model.graph.output, ([50, 2, 3, 4], [2, 3, 4], [2, 3, 4])):
        output.CopyFrom(helper.make_tensor_value_info(output.name, TensorProto.FLOAT, shape))
    text = str(import_model(model))
    assert text.count("scf.for") == 2  # one per direction, whatever the sequence length


def test_speech_style_model():
    """40 frames of 13 MFCCs, batch 2 -> bidirectional LSTM(32) -> GRU(24) -> linear -> softmax
    (benchmarks/recurrent.py's model), with the GRU's last state as a second output."""
    frames, batch, mfcc = 40, 2, 13
    model = speech_model(frames, batch, mfcc, seed=17)
    model.graph.output.append(helper.make_tensor_value_info("h2", TensorProto.FLOAT, None))
    compare(model, {"x": RNG.standard_normal((frames, batch, mfcc)).astype(np.float32)})


def test_unsupported_activation_is_named():
    model, _ = one_node_model("RNN", direction="forward", layout=0, with_states=False, with_lens=False,
                              activations=["Gelu"])
    for output in model.graph.output:
        output.CopyFrom(helper.make_tensor_value_info(output.name, TensorProto.FLOAT, [6, 1, 3, 4][:3]))
    with pytest.raises(tilecraft.ModelImportError, match="activation 'Gelu'"):
        tilecraft.compile(model)


# GatherElements keeps scalar loops (a known schedule fallback, see docs/onnx-conformance.md).
@pytest.mark.filterwarnings("ignore:tilecraft-schedule")
@pytest.mark.parametrize("time_axis, batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(time_axis, batch_axis):
    x = RNG.standard_normal((4, 4, 3)).astype(np.float32)
    lens = np.array([4, 1, 3, 0], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=batch_axis)
    graph = helper.make_graph(
        [node], "rev", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4, 3]),
                        helper.make_tensor_value_info("lens", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4, 3])],
    )
    compare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"x": x, "lens": lens},
            reference="onnx")
