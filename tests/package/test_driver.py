"""tvmc's Python API: tilecraft.load -> Model (summary, save), tilecraft.run -> RunResult."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import tilecraft  # noqa: E402
from tilecraft.errors import ArgumentValueError, ModelImportError  # noqa: E402

EXAMPLES = Path(tilecraft.__file__).resolve().parent / "examples"
DIGITS = EXAMPLES / "digits_cnn.onnx"


def test_load_onnx_with_shapes_and_summary():
    model = tilecraft.load(DIGITS, shape_dict={"input": [7, 1, 16, 16]})
    assert [(t.name, t.dtype, t.shape) for t in model.inputs] == [("input", "float32", (7, 1, 16, 16))]
    assert [(t.name, t.shape) for t in model.outputs] == [("logits", (7, 10))]
    assert model.operators == {"Conv": 2, "Relu": 3, "MaxPool": 2, "Flatten": 1, "Gemm": 2}
    summary = model.summary()
    assert "input: float32 [7, 1, 16, 16]" in summary and "logits: float32 [7, 10]" in summary
    assert "operators (10 nodes):" in summary


def test_load_keeps_dynamic_dims_and_save_writes_the_overrides(tmp_path):
    model = tilecraft.load(str(DIGITS))
    assert model.inputs[0].shape == (None, 1, 16, 16)
    fixed = tilecraft.load(DIGITS, shape_dict={"input": [3, 1, 16, 16]})
    saved = fixed.save(tmp_path / "fixed.onnx")
    dims = onnx.load(str(saved)).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [3, 1, 16, 16]
    assert tilecraft.load(saved).inputs[0].shape == (3, 1, 16, 16)


def test_load_mlir_reads_the_entry_signature(tmp_path):
    model = tilecraft.load(EXAMPLES / "matmul_bias_relu.mlir")
    assert [t.name for t in model.inputs] == ["x", "w", "b"]
    assert model.outputs[0].shape == (512, 512)
    model.save(tmp_path / "copy.mlir")
    assert (tmp_path / "copy.mlir").read_text() == (EXAMPLES / "matmul_bias_relu.mlir").read_text()


@pytest.mark.parametrize(
    "source, shape_dict, message",
    [
        ("missing.onnx", None, "missing.onnx: no such file"),
        ("missing.mlir", None, "missing.mlir: no such file"),
        (DIGITS, {"image": [1, 1, 16, 16]}, "shape_dict names ['image'], which are not inputs"),
        (EXAMPLES / "matmul_bias_relu.mlir", {"x": [1]}, "shape_dict applies to ONNX models only"),
    ],
)
def test_load_errors(source, shape_dict, message):
    with pytest.raises(ModelImportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        tilecraft.load(source, shape_dict=shape_dict)


def test_load_rejects_a_file_that_is_not_onnx(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x01garbage" * 10)
    with pytest.raises(ModelImportError):
        tilecraft.load(tmp_path / "bad.onnx")


def test_run_checks_input_names(tmp_path):
    path = tmp_path / "digits.tar"
    tilecraft.compile(tilecraft.load(DIGITS, shape_dict={"input": [2, 1, 16, 16]}), package_path=path)
    with pytest.raises(ArgumentValueError, match=r"inputs \['image'\] are not inputs of the package"):
        tilecraft.run(path, {"image": np.zeros((2, 1, 16, 16), np.float32)})
    np.savez(tmp_path / "in.npz", input=np.zeros((2, 1, 16, 16), np.float32))
    result = tilecraft.run(path, tmp_path / "in.npz")
    assert result.outputs["logits"].shape == (2, 10) and result.timing is None
    result.save(tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["logits"], result.outputs["logits"])
