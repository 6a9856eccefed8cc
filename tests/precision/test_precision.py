"""Reduced precision from the float model: int8 (QDQ by onnxruntime's tool), bf16 weights,
the accuracy report against the f32 build, refusal above ``max_error``, bad calibration
data, the CLI flags and the compile cache's key (compiler/precision.py, frontend/quantize.py,
pipelines/tensor/bf16_weights.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.errors import AccuracyError, CalibrationError, OptionError, QuantizationError  # noqa: E402

EXAMPLES = Path(tilecraft.__file__).resolve().parent / "examples"
DIGITS = EXAMPLES / "digits_cnn.onnx"
SHAPES = {"input": [4, 1, 16, 16]}


@pytest.fixture(scope="module")
def calibration() -> list[dict[str, np.ndarray]]:
    with np.load(EXAMPLES / "digits_test.npz") as split:
        images = split["images"][:32]
    return [{"input": images[i:i + 4]} for i in range(0, 32, 4)]


@pytest.fixture(scope="module")
def digits_f32():
    return tilecraft.compile(DIGITS, shape_dict=SHAPES)


def _mlp(path: Path) -> Path:
    """Two MatMuls with a GELU-free ReLU between: the shape of a transformer's FFN."""
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 32)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_int8_calibrated_is_close_to_f32_and_reports_it(calibration, digits_f32):
    """Static quantization from the digits' own images; the report's figures recomputed."""
    module = tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="int8", calibration=calibration)
    report = module.accuracy
    assert report.precision == "int8" and report.inputs == "calibration" and report.samples == len(calibration)
    (output,) = report.outputs
    assert output.name == "logits"
    assert 0 < output.max_relative_error < 0.1
    # the report's figures are what the two builds compute, recomputed here
    expected = np.stack([digits_f32(s["input"]) for s in calibration]).astype(np.float64)
    actual = np.stack([module(s["input"]) for s in calibration]).astype(np.float64)
    difference = np.abs(actual - expected)
    assert output.max_relative_error == pytest.approx(difference.max() / np.abs(expected).max())
    assert output.mean_relative_error == pytest.approx(difference.mean() / np.abs(expected).max())
    agree = (actual.argmax(-1) == expected.argmax(-1)).mean()
    assert output.top1_agreement == pytest.approx(agree) and agree >= 0.9
    assert "top-1 agreement" in str(report)


def test_int8_model_has_quantized_weights(calibration, tmp_path):
    path = tmp_path / "digits_int8.onnx"
    proto = tilecraft.quantize(DIGITS, calibration, path)
    assert path.is_file()
    ops = [node.op_type for node in proto.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    int8 = [a for a in weights.values() if a.dtype == np.int8 and a.ndim >= 2]
    assert int8, "weights stored as int8"
    scales = [a for n, a in weights.items() if n.endswith("_scale") and a.ndim == 1 and a.size > 1]
    assert scales, "per-channel weight scales"
    # the written model runs in onnxruntime too
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (scores,) = session.run(None, calibration[0])
    assert scores.shape == (4, 10)


def test_int8_without_calibration_quantizes_matmuls_dynamically(tmp_path):
    model = _mlp(tmp_path / "ffn.onnx")
    module = tilecraft.compile(model, precision="int8")
    assert module.accuracy.inputs == "random" and module.accuracy.samples == 8
    assert 0 < module.accuracy.max_relative_error < 0.05
    ops = [node.op_type for node in tilecraft.quantize(model).graph.node]
    assert "DynamicQuantizeLinear" in ops and "MatMulInteger" in ops


def test_bf16_weights_are_stored_as_bf16_and_close(calibration, digits_f32):
    module = tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="bf16", calibration=calibration)
    graph_ir = module.ir("graph")
    # every conv and matmul weight (the 2 convs' filters and the 2 Gemms' weights) as bf16 blobs
    assert len(re.findall(r"arith.constant dense_resource<\w+> : tensor<[0-9x]+xbf16>", graph_ir)) == 4
    assert not re.findall(r"arith.constant dense_resource<\w+> : tensor<[0-9x]+xf32>", graph_ir)
    # read where they are used: by vdpbf16ps kernels on a CPU with AVX512-BF16 (every layer
    # here: the one-channel first convolution is a matmul of its windows), else widened to f32
    if Target.parse("llvm").has_avx512_bf16:
        assert "call @tilecraft_bf16_" in graph_ir
    else:
        assert "arith.extf %in : bf16 to f32" in graph_ir
    report = module.accuracy
    assert report.precision == "bf16"
    assert 0 < report.max_relative_error < 0.02  # 8 mantissa bits: ~0.4 % per weight at most
    assert report.outputs[0].top1_agreement == 1.0
    x = calibration[1]["input"]
    np.testing.assert_allclose(module(x), digits_f32(x), rtol=0, atol=0.02 * np.abs(digits_f32(x)).max())


def test_max_error_refuses_the_build(calibration):
    with pytest.raises(AccuracyError, match="above max_error=1e-09") as raised:
        tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="bf16", calibration=calibration, max_error=1e-9)
    assert raised.value.report.max_relative_error > 1e-9
    module = tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="bf16", calibration=calibration, max_error=0.5)
    assert module.accuracy.max_relative_error <= 0.5


def _images(count: int = 4) -> np.ndarray:
    return np.zeros((count, 1, 16, 16), np.float32)


@pytest.mark.parametrize("calibration, message", [
    ([], "no samples"),
    ({"input": _images()}, "wrap it in a list"),
    ([{"image": _images()}], r"unknown input\(s\) \['image'\], missing input\(s\) \['input'\]"),
    ([{"input": _images(), "extra": _images()}], r"unknown input\(s\) \['extra'\]"),
    ([{"input": np.zeros((4, 3, 16, 16), np.float32)}], "expected shape 4x1x16x16, got 4x3x16x16"),
    ([{"input": _images().astype(np.float64)}], "expected element type float32, got float64"),
    ([{"input": [[1.0]]}], "expected a numpy array"),
    ([_images()], "must be a dict"),
    (42, "got int"),
    ("no/such/file.npz", "no such file"),
])
def test_bad_calibration_is_a_typed_error(calibration, message):
    with pytest.raises(CalibrationError, match=message):
        tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="int8", calibration=calibration)


def test_calibration_npz_stacked_and_broken(tmp_path):
    stacked = tmp_path / "stacked.npz"
    np.savez(stacked, input=np.zeros((3, 4, 1, 16, 16), np.float32))
    proto = tilecraft.quantize(onnx.load(DIGITS), calibration=stacked)
    assert any(node.op_type == "QuantizeLinear" for node in proto.graph.node)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip archive")
    with pytest.raises(CalibrationError, match="not a readable .npz"):
        tilecraft.quantize(DIGITS, calibration=broken)


def test_options_are_checked():
    with pytest.raises(OptionError, match="precision must be one of"):
        tilecraft.CompileOptions(precision="fp8")
    with pytest.raises(OptionError, match="max_error must be"):
        tilecraft.CompileOptions(precision="bf16", max_error=-1)
    with pytest.raises(OptionError, match="calibration is read by reduced-precision"):
        tilecraft.CompileOptions(calibration=[{}])
    with pytest.raises(OptionError, match="CPU targets"):
        tilecraft.CompileOptions(precision="int8", target="c")
    with pytest.raises(QuantizationError, match="rewrites ONNX models"):
        tilecraft.quantize("func.func @f() { return }")


def test_cache_key_includes_precision():
    from tilecraft.compiler.cache import cache_key

    options = tilecraft.CompileOptions()
    assert cache_key("model", options) != cache_key("model", tilecraft.CompileOptions(precision="bf16"))


def test_cli_compiles_int8_with_calibration_and_prints_the_report(tmp_path, capsys, calibration):
    from tilecraft.tools.cli import run_cli

    data = tmp_path / "calibration.npz"
    np.savez(data, input=np.stack([sample["input"] for sample in calibration]))
    out = tmp_path / "digits_int8.tar"
    assert run_cli(["compile", str(DIGITS), "--input-shapes", "input:[4,1,16,16]", "--precision", "int8",
                    "--calibration", str(data), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "accuracy of int8 vs f32 on 8 calibration input(s)" in printed and "top-1 agreement" in printed
    from tilecraft.runtime.package import load

    assert load(out)(calibration[0]["input"]).shape == (4, 10)
    assert run_cli(["compile", str(DIGITS), "--input-shapes", "input:[4,1,16,16]", "--precision", "bf16",
                    "--max-error", "1e-9", "-o", str(tmp_path / "refused.tar")]) != 0
    assert "above max_error" in capsys.readouterr().err
    assert run_cli(["compile", str(DIGITS), "--calibration", str(data), "-o", str(tmp_path / "f32.tar")]) != 0
    assert "calibration is read by reduced-precision compiles" in capsys.readouterr().err


def test_a_cached_f32_build_still_names_the_outputs(calibration):
    """The report's f32 build may come from the compile cache, whose modules carry no
    output names: the loaded model's names are used."""
    from tilecraft.compiler import cache as compile_cache

    tilecraft.compile(DIGITS, shape_dict=SHAPES, cache=True)
    compile_cache.wait_for_stores()  # stored on a thread of its own
    module = tilecraft.compile(DIGITS, shape_dict=SHAPES, precision="bf16", calibration=calibration[:2], cache=True)
    compile_cache.wait_for_stores()
    assert [output.name for output in module.accuracy.outputs] == ["logits"]


def test_torch_modules_take_bf16_and_report_it():
    """``tilecraft.torch.compile`` passes ``precision`` on; int8 needs an ONNX model."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    x = torch.randn(4, 64)
    compiled = tilecraft.torch.compile(module, (x,), precision="bf16")
    assert 0 < compiled.accuracy.max_relative_error < 0.02
    np.testing.assert_allclose(compiled(x).numpy(), module(x).detach().numpy(), rtol=0, atol=0.05)
    assert tilecraft.torch.compile(module, (x,)).accuracy is None
    with pytest.raises(QuantizationError, match="rewrites ONNX models"):
        tilecraft.torch.compile(module, (x,), precision="int8")


def test_a_nan_error_is_over_any_max_error():
    from tilecraft.compiler.precision import AccuracyReport, OutputAccuracy

    report = AccuracyReport("bf16", 1, "random", (OutputAccuracy("a", 0.01, 0.001), OutputAccuracy("b", float("nan"), 0.0)))
    assert report.max_relative_error != report.max_relative_error
    assert not report.max_relative_error <= 1.0  # what compile_reduced's refusal tests
