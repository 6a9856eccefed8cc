"""DFT (frontend/onnx/ops/spectral.py: one constant matrix product along the signal axis)
against ONNX's reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import tilecraft
from onnx_testing import check_node, make_model

RNG = np.random.default_rng(23)


@pytest.mark.parametrize("attributes", [{}, {"onesided": 1}, {"inverse": 1}, {"inverse": 1, "onesided": 1}])
@pytest.mark.parametrize("axis", [1, 2])
def test_dft_variants_along_each_axis(attributes, axis):
    components = 2 if attributes.get("inverse") else 1
    x = RNG.standard_normal((2, 8, 6, components)).astype(np.float32)
    check_node("DFT", {"x": x}, attributes={"axis": axis, **attributes}, opset=19, rtol=1e-4, atol=1e-4)


def test_dft_length_pads_and_truncates():
    x = RNG.standard_normal((1, 8, 2)).astype(np.float32)
    for length in (5, 12):
        check_node("DFT", {"x": x}, constants={"n": np.array(length, np.int64)}, attributes={"axis": 1},
                   opset=19, rtol=1e-4, atol=1e-4)


def test_dft_with_a_runtime_axis_matches_onnxruntime():
    x = RNG.standard_normal((1, 6, 4, 1)).astype(np.float32)
    model = make_model("DFT", {"x": x, "axis": np.array(2, np.int64)}, input_order=["x", "", "axis"], opset=20)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = tilecraft.compile(model)
    for axis in (1, 2, -2):
        feeds = {"x": x, "axis": np.array(axis, np.int64)}
        np.testing.assert_allclose(compiled(**feeds), session.run(None, feeds)[0], rtol=1e-4, atol=1e-4)
