"""The per-kernel profile attributes each kernel's time to the right name (issue: int8
ResNet-50's stem and downsample read ~0 us, their time under the QuantizeLinear after them).

Not timed: the profiled module's brackets are read from its IR (each encloses one op, and the
int8 convolutions' names sit on their kernel calls, not on a layout copy), and the profiled
package's every kernel runs once per call."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")  # tilecraft.quantize calibrates with it

from mlir import ir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.compiler.compile import _pipeline  # noqa: E402
from tilecraft.compiler.options import CompileOptions  # noqa: E402
from tilecraft.pipelines.profiling import profiling_pipeline  # noqa: E402
from tilecraft.runtime import package  # noqa: E402

CONVS = ("stem", "conv_b", "conv_c", "downsample")


def _stem_and_downsample() -> "onnx.ModelProto":
    """A 7x7 stride-2 stem, then a bottleneck tail whose shortcut is a stride-2 1x1
    convolution: relu(conv_c(relu(conv_b(s))) + downsample(s)), s = relu(stem(x))."""
    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    initializers = [weight("ws", (16, 3, 7, 7)), weight("bs", (16,)), weight("wb", (8, 16, 1, 1)), weight("bb", (8,)),
                    weight("wc", (32, 8, 1, 1)), weight("bc", (32,)), weight("wd", (32, 16, 1, 1)), weight("bd", (32,))]
    nodes = [helper.make_node("Conv", ["x", "ws", "bs"], ["s0"], strides=[2, 2], pads=[3, 3, 3, 3], name="stem"),
             helper.make_node("Relu", ["s0"], ["s"], name="stem_relu"),
             helper.make_node("Conv", ["s", "wb", "bb"], ["b"], strides=[2, 2], name="conv_b"),
             helper.make_node("Relu", ["b"], ["rb"], name="relu_b"),
             helper.make_node("Conv", ["rb", "wc", "bc"], ["c"], name="conv_c"),
             helper.make_node("Conv", ["s", "wd", "bd"], ["d"], strides=[2, 2], name="downsample"),
             helper.make_node("Add", ["c", "d"], ["sum"], name="add"),
             helper.make_node("Relu", ["sum"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "stem_and_downsample",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def quantized():
    rng = np.random.default_rng(1)
    samples = [{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    return tilecraft.quantize(_stem_and_downsample(), samples), samples


def _brackets(module: ir.Module) -> dict[int, list[ir.Operation]]:
    """Kernel id -> the ops of the entry between its begin and end (constants left out)."""
    entry = next(op.operation for op in module.body.operations
                 if op.operation.name == "func.func" and "sym_visibility" not in op.operation.attributes)
    enclosed: dict[int, list[ir.Operation]] = {}
    current = None
    for op in entry.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith("tilecraft_profile_"):
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            index = ir.IntegerAttr(op.operands[0].owner.attributes["value"]).value
            if callee.endswith("begin"):
                assert current is None, f"kernel {index} begins inside kernel {current}"
                current = index
                enclosed[index] = []
            else:
                assert current == index, f"kernel {index} ends inside kernel {current}"
                current = None
        elif current is not None and op.name != "arith.constant":
            enclosed[current].append(op)
    assert current is None
    return enclosed


def test_each_int8_convolution_is_named_on_its_own_kernel_call(quantized):
    qdq, _ = quantized
    compiled = tilecraft.compile(qdq, pipeline=profiling_pipeline(_pipeline(CompileOptions())), keep_ir=True)
    with ir.Context():
        module = ir.Module.parse(compiled.ir("schedule"))
        names = [ir.StringAttr(a).value for a in ir.ArrayAttr(module.operation.attributes["tilecraft.kernels"])]
        enclosed = _brackets(module)
        assert sorted(enclosed) == list(range(len(names)))
        assert all(len(ops) == 1 for ops in enclosed.values()), {i: [o.name for o in ops] for i, ops in enclosed.items()}
        for node in CONVS:
            kernels = [enclosed[i][0] for i, name in enumerate(names) if name == f"{node}/int8/conv(ConvInteger)"]
            calls = [op for op in kernels if op.name == "func.call"
                     and ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith("tilecraft_int8_matmul")]
            assert len(calls) == 1, f"{node}: {names}"


def test_every_kernel_of_the_int8_package_runs_once_per_call(quantized, tmp_path):
    qdq, samples = quantized
    path = tmp_path / "model.tar"
    compiled = tilecraft.compile(qdq, package_path=path, profile=True)
    loaded = package.load(path)
    outputs, times = loaded.profile(**samples[0])
    np.testing.assert_array_equal(np.asarray(outputs), np.asarray(compiled(**samples[0])))
    assert {kernel.calls for kernel in times} == {1}
    assert sum(kernel.seconds for kernel in times) > 0
    assert [t.name for t in times if t.name.endswith("(ConvInteger)")].count("stem/int8/conv(ConvInteger)") >= 1
