"""frontend/formats.py and the loader's dispatch: each format found from its suffix and its
content, a mismatch or an unknown format refused with the list of formats and extras, and
the CLI's --model-format."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import tilecraft  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tilecraft.errors import ModelFormatError, ModelImportError  # noqa: E402
from tilecraft.frontend.formats import FORMATS, detect_format  # noqa: E402
from tilecraft.tools.cli import MODEL_FORMATS, run_cli  # noqa: E402

MLIR_TEXT = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def _onnx_model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


class _Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("formats")
    paths = {"onnx": root / "m.onnx", "mlir": root / "m.mlir", "pt2": root / "m.pt2", "pt": root / "m.pt",
             "state": root / "state.pt", "tflite": root / "m.tflite", "h5": root / "m.h5"}
    onnx.save(_onnx_model(), str(paths["onnx"]))
    paths["mlir"].write_text(MLIR_TEXT)
    x = torch.ones(2, 4)
    torch.export.save(torch.export.export(_Net(), (x,)), str(paths["pt2"]))
    torch.jit.save(torch.jit.trace(_Net().eval(), (x,)), str(paths["pt"]))
    torch.save(torch.nn.Linear(2, 2).state_dict(), str(paths["state"]))
    paths["tflite"].write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(24))  # a flatbuffer's header only
    paths["h5"].write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(24))  # the HDF5 signature only
    return paths


def test_formats_by_suffix_and_content(files):
    assert detect_format(files["onnx"]) == "onnx"
    assert detect_format(files["mlir"]) == "mlir"
    assert detect_format(files["pt2"]) == "torch"
    assert detect_format(files["pt"]) == "torchscript"
    assert detect_format(files["tflite"]) == "tflite"
    assert detect_format(files["h5"]) == "keras"
    assert MODEL_FORMATS == tuple(FORMATS)  # the CLI's choices are the loader's formats


@pytest.mark.parametrize("content, suffix, says", [
    ("pt2", ".keras", "torch.export program"),
    ("pt", ".pt2", "TorchScript archive"),
    ("tflite", ".onnx", "TensorFlow Lite"),
    ("h5", ".pt", "Keras model"),
])
def test_a_suffix_that_disagrees_with_the_content_is_refused(files, tmp_path, content, suffix, says):
    renamed = tmp_path / f"model{suffix}"
    renamed.write_bytes(files[content].read_bytes())
    with pytest.raises(ModelFormatError, match=says) as error:
        tilecraft.load(str(renamed))
    assert "model_format=" in str(error.value)


def test_a_declared_format_that_disagrees_with_the_content_is_refused(files):
    with pytest.raises(ModelFormatError, match="model_format='keras'.*TorchScript"):
        tilecraft.load(files["pt"], model_format="keras")


def test_unknown_formats_name_every_format_and_its_extra(files, tmp_path):
    unknown = tmp_path / "model.bin"
    unknown.write_bytes(b"\x00\x01\x02\x03 no model here")
    with pytest.raises(ModelFormatError) as error:
        tilecraft.load(unknown)
    message = str(error.value)
    for name in FORMATS:
        assert f"  {name}: " in message
    assert "tilecraft[keras]" in message and "tilecraft[tflite]" in message
    with pytest.raises(ModelFormatError, match="unknown model format 'caffe'"):
        tilecraft.load(files["onnx"], model_format="caffe")


def test_a_declared_format_reads_a_file_of_any_suffix(files, tmp_path):
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(files["onnx"].read_bytes())
    model = tilecraft.load(str(renamed), model_format="onnx")
    assert [t.name for t in model.inputs] == ["x"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(tilecraft.compile(model)(x), x @ np.arange(12, dtype=np.float32).reshape(4, 3))


def test_truncated_and_non_program_archives_are_typed_errors(files, tmp_path):
    truncated = tmp_path / "cut.pt"
    data = files["pt"].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="damaged or truncated zip"):
        tilecraft.load(truncated)
    with pytest.raises(ModelFormatError, match="torch.save"):
        tilecraft.load(files["state"])
    empty = tmp_path / "empty.keras"
    empty.write_bytes(b"")
    with pytest.raises(ModelImportError):
        tilecraft.load(empty)


def test_tflite_without_its_frontend_is_a_typed_error(files):
    """Until frontend/tflite is present, a .tflite file is recognized and refused by name."""
    import importlib.util

    if importlib.util.find_spec("tilecraft.frontend.tflite") is None:
        with pytest.raises(ModelFormatError, match="TFLite frontend is not available"):
            tilecraft.load(files["tflite"])
    else:
        with pytest.raises(ModelImportError):  # a header without a model: the frontend refuses it
            tilecraft.load(files["tflite"])


def test_cli_model_format(files, tmp_path, capsys):
    renamed = tmp_path / "model.bin"
    renamed.write_bytes(files["onnx"].read_bytes())
    package = tmp_path / "m.tar"
    assert run_cli(["compile", str(renamed), "--model-format", "onnx", "-o", str(package)]) == 0
    assert package.is_file()
    assert run_cli(["compile", str(files["pt"]), "--model-format", "keras", "-o", str(package)]) != 0
    assert "TorchScript" in capsys.readouterr().err


def test_cli_torchscript_with_input_shapes(files, tmp_path, capsys):
    package = tmp_path / "ts.tar"
    assert run_cli(["compile", str(files["pt"]), "--input-shapes", "x:[2,4]", "-o", str(package)]) == 0
    assert "compiled m.pt" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("first", ["tensorflow", "mlir"])
def test_tensorflow_and_mlir_in_one_process_in_either_order(first):
    """Both carry LLVM: without the deep-binding import hook (runtime/library_isolation.py)
    the second one to load crashed the process (a segfault or an LLVM assertion)."""
    pytest.importorskip("tensorflow")
    compile_one = textwrap.dedent("""
        import numpy as np, tilecraft
        m = tilecraft.compile('''%s''')
        assert (m(np.ones(4, np.float32)) == 2).all()
    """) % MLIR_TEXT
    use_tensorflow = "import tensorflow as tf\nassert float(tf.reduce_sum(tf.ones(3))) == 3.0\n"
    script = (use_tensorflow + compile_one if first == "tensorflow"
              else compile_one + use_tensorflow + compile_one)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
