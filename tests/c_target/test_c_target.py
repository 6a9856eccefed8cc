"""The C target end to end: generated C99 built by the host ``cc`` (through the reference
``main.c``) against onnxruntime, the workspace plan, cross builds read back from their ELF
headers, and the typed errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.errors import CTargetShapeError, CTargetUnsupportedOpError, TargetError

ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no host C compiler")

ROOT = Path(tilecraft.__file__).resolve().parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from recurrent import speech_model  # noqa: E402  (the benchmark's recurrent model)
DIGITS = ROOT / "examples" / "digits_cnn.onnx"
DIGITS_SHAPE = {"input": [1, 1, 16, 16]}


def reference(model: "onnx.ModelProto | Path", inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"]).run(None, inputs)


@pytest.fixture(scope="module")
def digits() -> "tilecraft.targets.c.package.CModel":
    return tilecraft.compile(str(DIGITS), target="c", shape_dict=DIGITS_SHAPE)


def test_digits_cnn_matches_onnxruntime(digits):
    images = np.load(ROOT / "examples" / "digits_test.npz")["images"][:3].astype(np.float32)
    for image in images:
        x = image.reshape(1, 1, 16, 16)
        (got,) = digits.run(x)
        (want,) = reference(DIGITS, {"input": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert digits.workspace_size < digits.buffer_total
    header = digits.sources["model.h"]
    assert f"#define TC_MODEL_WORKSPACE_SIZE {digits.workspace_size}u" in header
    assert "int tc_model_run(const float *input, float *logits, void *workspace);" in header


def test_model_c_is_plain_c99(digits):
    """No malloc, no threads, weights as const arrays; libm only through the documented list."""
    source = digits.sources["model.c"]
    for banned in ("malloc(", "free(", "pthread", "#include <stdlib.h>", "std::", "nullptr"):
        assert banned not in source
    assert "static const float tc_model_weight0[" in source
    # one function per loop nest, its buffers restrict (disjoint by the workspace plan)
    assert "static void tc_model_nest0(float v1[restrict " in source
    assert "/* libm functions called: none */" in source


def _chain_model(length: int = 8, width: int = 32) -> onnx.ModelProto:
    """x -> (MatMul -> Tanh) x length: a long chain of intermediate buffers, and a libm call."""
    rng = np.random.default_rng(0)
    nodes, inits, previous = [], [], "x"
    for i in range(length):
        inits.append(numpy_helper.from_array((rng.standard_normal((width, width)) / width ** 0.5).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        previous = f"t{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [4, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_long_chain_reuses_the_workspace():
    model = _chain_model()
    compiled = tilecraft.compile(model, target="c", opt_level=0)
    # 8 intermediate buffers of 512 bytes (tanh runs in place); two at a time are alive
    assert compiled.buffer_count >= 8
    assert compiled.workspace_size < compiled.buffer_total
    assert compiled.workspace_size <= 2 * 512
    assert "tanhf" in compiled.sources["model.c"]
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    (got,) = compiled.run(x)
    (want,) = reference(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _conformance_folder(group: str, name: str) -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / group / name


@pytest.mark.parametrize("group, name", [
    ("simple", "test_single_relu_model"),
    ("simple", "test_sign_model"),
    ("pytorch-operator", "test_operator_conv"),
    ("pytorch-operator", "test_operator_maxpool"),
    ("pytorch-operator", "test_operator_pad"),  # reflect pad: signed index arithmetic
    ("pytorch-converted", "test_Softmax"),  # expf
    ("pytorch-converted", "test_Conv2d"),
    ("pytorch-converted", "test_ELU"),  # expf in a select
    ("pytorch-converted", "test_Softplus"),  # expf, logf
])
def test_conformance_models_match_onnxruntime(group, name):
    folder = _conformance_folder(group, name)
    model = onnx.load(str(folder / "model.onnx"))
    initializers = {i.name for i in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    arrays = [numpy_helper.to_array(onnx.load_tensor(str(folder / "test_data_set_0" / f"input_{i}.pb")))
              for i in range(len(inputs))]
    shapes = {v.name: list(a.shape) for v, a in zip(inputs, arrays)}
    compiled = tilecraft.compile(model, target="c", shape_dict=shapes)
    got = compiled.run(*arrays)
    want = reference(model, {v.name: a for v, a in zip(inputs, arrays)})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_cli_writes_a_tar_that_builds_with_its_makefile(tmp_path):
    out = tmp_path / "model_c.tar"
    completed = subprocess.run(
        [sys.executable, "-m", "tilecraft.tools.cli", "compile", str(DIGITS), "--target", "c",
         "--input-shapes", "input:[1,1,16,16]", "-o", str(out)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert "workspace" in completed.stdout
    with tarfile.open(out) as archive:
        assert sorted(archive.getnames()) == ["Makefile", "SHA256SUMS", "main.c", "model.c", "model.h"]
        archive.extractall(tmp_path / "src", filter="data")
    if shutil.which("make") is None:
        pytest.skip("no make")
    build = subprocess.run(["make", "-C", str(tmp_path / "src")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    x = np.load(ROOT / "examples" / "digits_test.npz")["images"][:1].astype("<f4").reshape(1, 1, 16, 16)
    x.tofile(tmp_path / "in.bin")
    run = subprocess.run([str(tmp_path / "src" / "model"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "out.bin", dtype="<f4").reshape(1, 10)
    np.testing.assert_allclose(got, reference(DIGITS, {"input": x})[0], rtol=1e-4, atol=1e-4)


def test_dynamic_shapes_are_a_typed_error():
    with pytest.raises(CTargetShapeError, match="static shapes"):
        tilecraft.compile(str(DIGITS), target="c")


def test_an_op_without_c_is_a_typed_error_naming_it():
    source = """
    func.func @f(%x: tensor<8xi32>) -> tensor<8xi32> {
      %e = tensor.empty() : tensor<8xi32>
      %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                           iterator_types = ["parallel"]} ins(%x : tensor<8xi32>) outs(%e : tensor<8xi32>) {
      ^bb0(%a: i32, %b: i32):
        %c = math.ctlz %a : i32
        linalg.yield %c : i32
      } -> tensor<8xi32>
      return %r : tensor<8xi32>
    }"""
    with pytest.raises(CTargetUnsupportedOpError, match="math.ctlz"):
        tilecraft.compile(source, target="c")


def test_target_string():
    assert str(tilecraft.Target.parse("c")) == "c"
    assert tilecraft.Target.parse("c").kind == "c"
    with pytest.raises(TargetError):
        tilecraft.Target.parse("c -mcpu=cortex-m4")


def _small(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


_vi = helper.make_tensor_value_info
_rng = np.random.default_rng(2)
SMALL_MODELS = {
    # a result that is an input: copied, not aliased
    "identity": (_small([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", TensorProto.FLOAT, [2, 3])],
                        [_vi("y", TensorProto.FLOAT, [2, 3])]), [_rng.random((2, 3), dtype=np.float32)]),
    "two_outputs": (_small([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["y"], ["z"])],
                           [_vi("x", TensorProto.FLOAT, [4])],
                           [_vi("y", TensorProto.FLOAT, [4]), _vi("z", TensorProto.FLOAT, [4])]),
                    [_rng.standard_normal(4).astype(np.float32)]),
    # a rank-0 result: a one-element array in C
    "scalar_output": (_small([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], [_vi("x", TensorProto.FLOAT, [3, 4])],
                             [_vi("y", TensorProto.FLOAT, [])]), [_rng.standard_normal((3, 4)).astype(np.float32)]),
    "gather_int64_negative_index": (
        _small([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
               [_vi("x", TensorProto.FLOAT, [5, 3]), _vi("i", TensorProto.INT64, [4])], [_vi("y", TensorProto.FLOAT, [4, 3])]),
        [_rng.standard_normal((5, 3)).astype(np.float32), np.array([0, 4, -1, 2], dtype=np.int64)]),
    "bool_output": (_small([helper.make_node("Greater", ["x", "z"], ["y"])],
                           [_vi("x", TensorProto.FLOAT, [6]), _vi("z", TensorProto.FLOAT, [6])], [_vi("y", TensorProto.BOOL, [6])]),
                    [_rng.standard_normal(6).astype(np.float32), _rng.standard_normal(6).astype(np.float32)]),
    "uint8_wraps": (_small([helper.make_node("Add", ["x", "z"], ["y"])],
                           [_vi("x", TensorProto.UINT8, [6]), _vi("z", TensorProto.UINT8, [6])], [_vi("y", TensorProto.UINT8, [6])]),
                    [np.arange(250, 256, dtype=np.uint8), np.arange(6, dtype=np.uint8) * 3]),
    "transpose_reshape_sigmoid": (
        _small([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Reshape", ["t", "s"], ["y"]),
                helper.make_node("Sigmoid", ["y"], ["w"])], [_vi("x", TensorProto.FLOAT, [4, 6])],
               [_vi("w", TensorProto.FLOAT, [3, 8])], [numpy_helper.from_array(np.array([3, 8], dtype=np.int64), "s")]),
        [_rng.standard_normal((4, 6)).astype(np.float32)]),
    # ONNX's test_convtranspose: the weight an input; unsigned index division and remainder
    "convtranspose": (
        _small([helper.make_node("ConvTranspose", ["x", "w"], ["y"])],
               [_vi("x", TensorProto.FLOAT, [1, 1, 3, 3]), _vi("w", TensorProto.FLOAT, [1, 2, 3, 3])],
               [_vi("y", TensorProto.FLOAT, [1, 2, 5, 5])]),
        [_rng.standard_normal((1, 1, 3, 3)).astype(np.float32), _rng.standard_normal((1, 2, 3, 3)).astype(np.float32)]),
    # an unused empty input (C has no zero-length array) and an f64 output
    "castlike_empty_like": (
        _small([helper.make_node("CastLike", ["x", "like"], ["y"])],
               [_vi("x", TensorProto.FLOAT, [3, 4]), _vi("like", TensorProto.DOUBLE, [0])], [_vi("y", TensorProto.DOUBLE, [3, 4])]),
        [_rng.standard_normal((3, 4)).astype(np.float32), np.zeros(0, dtype=np.float64)]),
    "libm_erf_sqrt_pow": (
        _small([helper.make_node("Erf", ["x"], ["e"]), helper.make_node("Div", ["e", "x"], ["y"]),
                helper.make_node("Sqrt", ["y"], ["q"]), helper.make_node("Pow", ["q", "x"], ["w"])],
               [_vi("x", TensorProto.FLOAT, [5])], [_vi("w", TensorProto.FLOAT, [5])]),
        [_rng.random(5, dtype=np.float32) + 0.1]),
}


def test_recurrent_time_loops_keep_their_state_in_the_workspace():
    """benchmarks/recurrent.py's speech model (bidirectional LSTM, GRU, classifier): each time
    loop carries its state in one workspace buffer, updated in place after the step
    (tilecraft-loop-carried-in-place), where bufferization had refused the fresh state each
    step yields ('Yield operand #0 is not equivalent to the corresponding iter bbArg')."""
    model = speech_model(frames=7, batch=2)
    x = np.random.default_rng(5).standard_normal((7, 2, 13)).astype(np.float32)
    compiled = tilecraft.compile(model, target="c")
    assert "malloc(" not in compiled.sources["model.c"]
    (got,) = compiled.run(x)
    (want,) = reference(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(SMALL_MODELS))
def test_small_models_match_onnxruntime(name):
    model, arrays = SMALL_MODELS[name]
    compiled = tilecraft.compile(model, target="c")
    got = compiled.run(*arrays)
    want = reference(model, {v.name: a for v, a in zip(model.graph.input, arrays)})
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_tensor_names_that_are_not_c_identifiers():
    model = _small([helper.make_node("Neg", ["float"], ["1.out"])], [_vi("float", TensorProto.FLOAT, [3])],
                   [_vi("1.out", TensorProto.FLOAT, [3])])
    compiled = tilecraft.compile(model, target="c")
    assert "int tc_model_run(const float *input_float, float *output_1_out, void *workspace);" in compiled.sources["model.h"]
    x = np.array([1, -2, 3], dtype=np.float32)
    np.testing.assert_array_equal(compiled.run(x)[0], -x)


@pytest.mark.parametrize("name", ["digits", "chain", *sorted(SMALL_MODELS)])
def test_sources_compile_without_warnings(name, tmp_path, digits):
    """-std=c99 -pedantic -Wall -Wextra -Werror: a firmware build with strict flags takes the files."""
    model = {"digits": digits, "chain": None}.get(name) or tilecraft.compile(
        _chain_model() if name == "chain" else SMALL_MODELS[name][0], target="c")
    model.write_sources(tmp_path)
    for source in ("model.c", "main.c"):
        completed = subprocess.run([os.environ.get("CC", "cc"), "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
                                    "-c", str(tmp_path / source), "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
        assert completed.returncode == 0, completed.stderr


def test_options_the_c_target_cannot_honour():
    with pytest.raises(tilecraft.errors.OptionError, match="offload"):
        tilecraft.compile(str(DIGITS), target="c", shape_dict=DIGITS_SHAPE, offload=["blas"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_light_zoo_models_match_onnxruntime(name):
    """The ONNX zoo's small models (onnx/backend/test/data/light) with seeded random weights, as
    benchmarks/onnx_models.py prepares them; the logits before the final Softmax are compared
    too (scaled tolerance: see that benchmark). About a minute each (a 20 MB model.c)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import onnx_models  # noqa: PLC0415  (the benchmark's light-model loader)

    model = onnx_models.expose_logits(onnx_models.randomize_weights(
        onnx.load(f"{onnx_models.LIGHT_DIR}/light_{name}.onnx"))[0])
    feeds = onnx_models.random_inputs(model)
    compiled = tilecraft.compile(model, target="c", shape_dict={k: list(v.shape) for k, v in feeds.items()})
    assert compiled.workspace_size < compiled.buffer_total / 2  # dozens of buffers, a few alive at a time
    got = compiled.run(*feeds.values())
    want = reference(model, feeds)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        scale = float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale)
