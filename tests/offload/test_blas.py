"""offload=["blas"]: GEMM-shaped ops to OpenBLAS, the rest compiled; numerics against numpy
and onnxruntime from Python, the CLI and a package run in a fresh process; the tuner sees no
offloaded op; an unknown backend is a typed error."""

from __future__ import annotations

import importlib
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy_openblas32")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import BackendError  # noqa: E402
from tilecraft.pipelines.offload import backend_named  # noqa: E402
from tilecraft.tools.cli import run_cli  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
import graph_models  # noqa: E402

EXAMPLES = Path(tilecraft.__file__).resolve().parent / "examples"


def onnxruntime_outputs(model, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString() if hasattr(model, "SerializeToString") else str(model),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def gemm_bias_relu(m: int = 64, k: int = 128, n: int = 96, seed: int = 0, softmax: bool = False):
    """Gemm(x, W^T, b) -> Relu (-> Softmax): transB and a bias; BLAS takes all but the
    softmax, which stays a compiled kernel (and a tuning task)."""
    rng = np.random.default_rng(seed)
    weights = numpy_helper.from_array(rng.standard_normal((n, k)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["r" if softmax else "y"])]
    if softmax:
        nodes.append(helper.make_node("Softmax", ["r"], ["y"], axis=-1))
    graph = helper.make_graph(nodes, "gemm_bias_relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                              [weights, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_matmul_against_numpy(rand, capsys):
    t = "tensor<96x80xf32>"
    source = f"""
    func.func @main(%a: tensor<96x64xf32>, %b: tensor<64x80xf32>) -> {t} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t}
      %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}
      %m = linalg.matmul ins(%a, %b : tensor<96x64xf32>, tensor<64x80xf32>) outs(%f : {t}) -> {t}
      return %m : {t}
    }}
    """
    module = tilecraft.compile(source, offload=["blas"])
    assert "offload blas: 1 ops (linalg.matmul 1)" in capsys.readouterr().err
    assert module.offloaded == {"blas": {"declined": 0, "linalg.matmul": 1}}
    assert 'tilecraft.offload = "blas:linalg.matmul"' in module.ir("graph")
    a, b = rand((96, 64)), rand((64, 80))
    np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_calls_split_over_the_shims_threads(rand, monkeypatch, threads):
    """The shim splits a call over its own threads (columns of a matmul in blocks of 16,
    batches of a batch matmul): column counts that do not divide, a transposed operand,
    fewer batches than threads, and two Python threads calling at once (the second runs
    its parts serially while the first holds the pool) all give numpy's values."""
    import threading

    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    source = """
    func.func @main(%a: tensor<64x96xf32>, %w: tensor<100x96xf32>, %q: tensor<3x40x64xf32>,
                    %k: tensor<3x50x64xf32>) -> (tensor<64x100xf32>, tensor<3x40x50xf32>) {
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<64x100xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x100xf32>) -> tensor<64x100xf32>
      %m = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                          affine_map<(d0, d1, d2) -> (d1, d2)>,
                                          affine_map<(d0, d1, d2) -> (d0, d1)>]
           ins(%a, %w : tensor<64x96xf32>, tensor<100x96xf32>) outs(%f : tensor<64x100xf32>) -> tensor<64x100xf32>
      %be = tensor.empty() : tensor<3x40x50xf32>
      %bf = linalg.fill ins(%zero : f32) outs(%be : tensor<3x40x50xf32>) -> tensor<3x40x50xf32>
      %b = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>,
                                                affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>,
                                                affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
           ins(%q, %k : tensor<3x40x64xf32>, tensor<3x50x64xf32>) outs(%bf : tensor<3x40x50xf32>) -> tensor<3x40x50xf32>
      return %m, %b : tensor<64x100xf32>, tensor<3x40x50xf32>
    }
    """
    module = tilecraft.compile(source, offload=["blas"])
    assert module.offloaded["blas"] == {"declined": 0, "linalg.matmul": 1, "linalg.batch_matmul": 1}
    inputs = [rand((64, 96)), rand((100, 96)), rand((3, 40, 64)), rand((3, 50, 64))]
    expected = (inputs[0] @ inputs[1].T, inputs[2] @ inputs[3].transpose(0, 2, 1))
    results: list = []

    def call() -> None:
        for _ in range(20):
            results.append(module(*inputs))

    workers = [threading.Thread(target=call) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(results) == 40
    for got in results:
        for value, reference in zip(got, expected):
            np.testing.assert_allclose(value, reference, rtol=1e-4, atol=1e-4)


def test_gemm_bias_relu_is_one_call(rng):
    """The bias add and the ReLU go with the matmul (one shim call applies them per block of
    columns); a NaN input stays NaN through the ReLU, as onnxruntime's does."""
    model = gemm_bias_relu()
    module = tilecraft.compile(model, offload=["blas"])
    assert module.offloaded["blas"] == {"declined": 0, "linalg.matmul": 1, "epilogue ops": 2}
    graph_ir = module.ir("graph")
    assert "call @tilecraft_blas_matmul_epilogue" in graph_ir and "linalg.matmul ins" not in graph_ir
    assert "= linalg.generic" not in graph_ir  # no compiled kernel left
    x = rng.standard_normal((64, 128)).astype(np.float32)
    x[5, 7] = np.nan
    (expected,) = onnxruntime_outputs(model, {"x": x})
    got = module(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def conv1x1_bias_clip(low: float, high: float) -> "onnx.ModelProto":
    """NCHW Conv 1x1 (48 -> 40 channels, 12x12) with a bias, then Clip(low, high)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((40, 48, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "b"),
             numpy_helper.from_array(np.float32(low), "low"), numpy_helper.from_array(np.float32(high), "high")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]),
             helper.make_node("Clip", ["c", "low", "high"], ["y"])]
    graph = helper.make_graph(nodes, "conv_clip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40, 12, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("low, high", [(0.0, 6.0), (-0.5, 0.25)])
def test_conv_bias_clip_against_onnxruntime(rng, monkeypatch, threads, low, high):
    """Each of the shim's parts applies the epilogue to its own columns."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    model = conv1x1_bias_clip(low, high)
    module = tilecraft.compile(model, offload=["blas"])
    assert module.offloaded["blas"] == {"declined": 0, "linalg.conv_2d_nhwc_hwcf": 1, "epilogue ops": 2}
    x = rng.standard_normal((1, 48, 12, 12)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    got = module(x)
    assert got.min() >= low and got.max() <= high
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_bert_layer_against_onnxruntime(rng):
    model = graph_models.bert_layer(seq=64, hidden=128, heads=4, ffn=256)
    module = tilecraft.compile(model, offload=["blas"])
    taken = module.offloaded["blas"]
    assert taken.get("linalg.matmul", 0) >= 4 and taken.get("linalg.batch_matmul", 0) == 2
    x = rng.standard_normal((64, 128)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.testing.assert_allclose(module(x), expected, rtol=1e-4, atol=1e-4)


@pytest.fixture
def offload_everything():
    """The blas backend with no size threshold, so the small digits CNN offloads too."""
    backend = backend_named("blas")
    saved = backend.min_macs
    backend.min_macs = 1
    yield backend
    backend.min_macs = saved


def test_digits_cnn_against_onnxruntime(offload_everything):
    with np.load(EXAMPLES / "digits_test.npz") as split:
        images = split["images"][:4]
    model_path = EXAMPLES / "digits_cnn.onnx"
    module = tilecraft.compile(str(model_path), shape_dict={"input": [4, 1, 16, 16]}, offload=["blas"])
    assert sum(n for op, n in module.offloaded["blas"].items() if op != "declined") >= 1
    (expected,) = onnxruntime_outputs(model_path, {"input": images})
    np.testing.assert_allclose(module(images), expected, rtol=1e-4, atol=1e-4)


def test_one_by_one_convolution(offload_everything, rng):
    weights = numpy_helper.from_array(rng.standard_normal((32, 16, 1, 1)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "pointwise",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32, 8, 8])],
                              [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    module = tilecraft.compile(model, offload=["blas"])
    assert any(op.startswith("linalg.conv") for op in module.offloaded["blas"]), module.offloaded
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.testing.assert_allclose(module(x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("build, target, taken", [
    (gemm_bias_relu, "blas, llvm", "offload blas: 1 ops"),
    # A BERT-shaped layer: matmuls and attention's batch matmuls, both externs of one shim;
    # a target with commas of its own after the composite's backend name.
    (lambda: graph_models.bert_layer(seq=64, hidden=128, heads=4, ffn=256),
     "blas, llvm -mattr=" + ("+sse2,+fma" if platform.machine() == "x86_64" else "+neon,+fp-armv8"),
     "linalg.batch_matmul 2"),
])
def test_cli_compile_and_package_in_a_fresh_process(tmp_path, rng, capsys, build, target, taken):
    model = build()
    onnx.save(model, tmp_path / "model.onnx")
    package = tmp_path / "model.tar"
    assert run_cli(["compile", str(tmp_path / "model.onnx"), "--target", target, "-o", str(package)]) == 0
    assert taken in capsys.readouterr().err
    x = rng.standard_normal((64, 128)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.savez(tmp_path / "io.npz", x=x, expected=expected)
    code = textwrap.dedent(f"""
        import sys, numpy as np
        import tilecraft.runtime as rt
        package = rt.load({str(package)!r})
        with np.load({str(tmp_path / 'io.npz')!r}) as io:
            np.testing.assert_allclose(package(io['x']), io['expected'], rtol=1e-4, atol=1e-4)
        assert 'mlir' not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_package_runs_on_the_threads_of_the_process_that_loads_it(tmp_path, rng, monkeypatch):
    """Compiled for 4 threads, run where TILECRAFT_NUM_THREADS=1: the shim starts no
    workers of its own (the compiled code's runtime starts its one worker)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "4")
    model = gemm_bias_relu(m=256, k=256, n=256)
    package = tmp_path / "gemm.tar"
    tilecraft.compile(model, offload=["blas"], package_path=str(package))
    x = rng.standard_normal((256, 256)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.savez(tmp_path / "io.npz", x=x, expected=expected)
    code = textwrap.dedent(f"""
        import os, numpy as np
        import tilecraft.runtime as rt
        package = rt.load({str(package)!r})
        before = len(os.listdir('/proc/self/task'))
        with np.load({str(tmp_path / 'io.npz')!r}) as io:
            np.testing.assert_allclose(package(io['x']), io['expected'], rtol=1e-4, atol=1e-4)
        started = len(os.listdir('/proc/self/task')) - before
        assert started <= 1, started
    """)
    environment = {**os.environ, "TILECRAFT_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr


def test_offloaded_ops_are_not_tuning_tasks():
    model = gemm_bias_relu(softmax=True)
    # Compiled, the Gemm is a matmul task (on weight panels: a linalg.generic of kind matmul).
    kinds = {task.kind for task in tilecraft.extract_tasks(model)}
    assert "matmul" in kinds
    offloaded = {task.kind for task in tilecraft.extract_tasks(model, offload=["blas"])}
    assert "matmul" not in offloaded


def test_tuning_with_offload_tunes_the_rest_and_its_records_apply(tmp_path, rng, monkeypatch):
    """tune(offload=...) measures only what stays compiled (here the softmax), and
    its end-to-end timing compiles the model with the same backends; compiling with them and
    the records gives onnxruntime's values."""
    tune_module = importlib.import_module("tilecraft.tuning.tune")

    pipelines = []
    real_lowered = tune_module._lowered

    def spy(model, pipeline, options):
        pipelines.append(pipeline)
        return real_lowered(model, pipeline, options)

    monkeypatch.setattr(tune_module, "_lowered", spy)
    # Lower both builds even when the search kept every default (tune then knows from the
    # records that they are equal and lowers neither): their pipelines are what is checked.
    monkeypatch.setattr(tune_module, "_only_defaults", lambda *args: False)
    model = gemm_bias_relu(softmax=True)
    records = tmp_path / "gemm.jsonl"
    result = tilecraft.tune(model, trials=3, tuning_records=str(records), offload=["blas"], progress=False,
                            tuner="random", validate_top=0, transfer=False)
    assert result.tasks and all(r.task.kind != "matmul" for r in result.tasks)
    assert len(pipelines) == 2 and all(any(e.startswith("tilecraft-offload{backends=blas")
                                           for e in p.pass_elements()) for p in pipelines)
    assert records.stat().st_size > 0
    module = tilecraft.compile(model, offload=["blas"], tuning_records=str(records))
    assert module.offloaded["blas"]["linalg.matmul"] == 1
    x = rng.standard_normal((64, 128)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, {"x": x})
    np.testing.assert_allclose(module(x), expected, rtol=1e-4, atol=1e-4)


def test_unknown_backend(capsys):
    with pytest.raises(BackendError, match=r"unknown offload backend 'cudnn'; known backends: (.*, )?blas\b"):
        tilecraft.compile(gemm_bias_relu(), offload=["cudnn"])
    assert run_cli(["compile", str(EXAMPLES / "digits_cnn.onnx"), "--offload", "cudnn", "-o", "x.tar"]) != 0
    assert "unknown offload backend 'cudnn'" in capsys.readouterr().err


@pytest.mark.slow
def test_resnet50_from_the_cli_in_a_fresh_process(tmp_path, capsys):
    """ResNet-50 v1 (the light zoo topology with random weights, as the benchmarks load it),
    compiled by ``tilecraft compile --offload blas`` into a package and run runtime-only in a
    fresh process: its 1x1 convolutions with their bias + ReLU, and the classifier, go to
    OpenBLAS; the rest is compiled."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import graph_passes  # noqa: PLC0415  (the benchmarks' ResNet-50 loader)

    model, feeds = graph_passes.resnet50()
    onnx.save(model, tmp_path / "resnet50.onnx")
    package = tmp_path / "resnet50.tar"
    assert run_cli(["compile", str(tmp_path / "resnet50.onnx"), "--offload", "blas", "-o", str(package)]) == 0
    summary = capsys.readouterr().err
    taken = re.search(r"offload blas: (\d+) ops .* with (\d+) epilogue ops", summary)
    assert taken and int(taken[1]) >= 20 and int(taken[2]) >= 20, summary
    expected = onnxruntime_outputs(model, feeds)
    np.savez(tmp_path / "io.npz", image=next(iter(feeds.values())),
             **{f"expected_{i}": value for i, value in enumerate(expected)})
    code = textwrap.dedent(f"""
        import sys, numpy as np
        import tilecraft.runtime as rt
        package = rt.load({str(package)!r})
        with np.load({str(tmp_path / 'io.npz')!r}) as io:
            got = package(io['image'])
            references = [io[f'expected_{{i}}'] for i in range({len(expected)})]
        for value, reference in zip(got if isinstance(got, tuple) else (got,), references, strict=True):
            scale = float(np.max(np.abs(reference)))
            np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-3 * scale)
        assert 'mlir' not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
