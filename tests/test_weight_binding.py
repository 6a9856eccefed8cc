"""Weights reach the JIT by address, not as LLVM constants (pipelines/jit/weights.py), read from
the arrays the frontend made them from (ir/resources.py); a resource tilecraft did not
make stays a constant; results are the same either way."""

import subprocess

import numpy as np
import onnx
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.ir import core
from tilecraft.frontend.loader import load_module
from tilecraft.ir.resources import ALIGNMENT, aligned, resource_array, resource_attr
from tilecraft.runtime.libraries import llvm_tool

K, N = 512, 256  # a 512 KiB weight: far larger than the code that reads it


def _matmul_model(weight: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, K])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, N])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _object_symbols(module: tilecraft.CompiledModule, path) -> tuple[int, str]:
    module.dump_object_file(str(path))
    symbols = subprocess.run([llvm_tool("llvm-nm"), str(path)], check=True, capture_output=True, text=True).stdout
    return path.stat().st_size, symbols


def test_weights_are_not_in_the_jit_object(rand, tmp_path):
    weight, bias = rand((K, N)), rand((N,))
    module = tilecraft.compile(_matmul_model(weight, bias), keep_ir=True)
    x = rand((4, K))
    np.testing.assert_allclose(module(x), x @ weight + bias, rtol=1e-5, atol=1e-5)
    # The lowered IR still holds the weight (the package path reads it there)...
    assert "dense_resource<" in module.ir("llvm")
    # ...but the machine code does not: its global is an undefined symbol the JIT bound.
    size, symbols = _object_symbols(module, tmp_path / "model.o")
    assert size < weight.nbytes / 4
    undefined = [line.split()[-1] for line in symbols.splitlines() if line.split()[0] == "U"]
    assert any(name.startswith("__constant_") for name in undefined), symbols


def test_weights_made_elsewhere_stay_constants(rand, tmp_path):
    """A dense_resource parsed from text has no array behind it in the table: the global
    keeps its value, LLVM emits it, and the result is the same. (16 columns: one weight panel
    and one vector row, so neither a packed nor a blocked copy replaces the constant.)"""
    weight = rand((64, 16))
    hex_data = "0x04000000" + weight.tobytes().hex().upper()
    text = f"""
    func.func @mm(%x: tensor<4x64xf32>) -> tensor<4x16xf32> {{
      %w = arith.constant dense_resource<w> : tensor<64x16xf32>
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x16xf32>
      %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
      %r = linalg.matmul ins(%x, %w : tensor<4x64xf32>, tensor<64x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
      return %r : tensor<4x16xf32>
    }}
    {{-#
      dialect_resources: {{ builtin: {{ w: "{hex_data}" }} }}
    #-}}
    """
    module = tilecraft.compile(text)
    x = rand((4, 64))
    np.testing.assert_allclose(module(x), x @ weight, rtol=1e-5, atol=1e-5)
    size, symbols = _object_symbols(module, tmp_path / "mm.o")
    assert size > weight.nbytes
    assert not any(line.split()[0] == "U" and "__constant_" in line for line in symbols.splitlines())


def test_folding_reads_the_table_and_matches_printed_weights(rand):
    """Conv + BatchNormalization: the folder reads its weights from the table. The same model
    as MLIR text (its resources parsed, so no array behind them: the folder reads them from
    the printed resource section) gives the same bytes."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w")]
    inits += [numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), n) for n in "somv"]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rand((1, 8, 12, 12))
    bound = tilecraft.compile(model)
    text = str(load_module(model, ir.Context()))
    assert "dialect_resources" in text
    embedded = tilecraft.compile(text)
    assert bound(x).tobytes() == embedded(x).tobytes()


def test_resource_attr_remembers_an_aligned_array():
    with ir.Context(), ir.Location.unknown():
        tensor_type = ir.RankedTensorType.get([100], ir.F32Type.get())
        data = np.arange(101, dtype=np.float32)[1:]  # 4 bytes past an allocation: misaligned
        attr = resource_attr(data, "w", tensor_type)
        again = resource_attr(data, "w", tensor_type)  # the same name: MLIR renames the blob
        assert str(attr) != str(again)
        for a in (attr, again):
            array = resource_array(a)
            assert array is not None and array.ctypes.data % ALIGNMENT == 0
            assert array.tobytes() == data.tobytes()
        parsed = ir.Attribute.parse("dense_resource<other> : tensor<2xf32>")
        assert resource_array(parsed) is None
        assert resource_array(ir.Attribute.parse("dense<1.0> : tensor<2xf32>")) is None
        # The same handle under a type of another byte size is not trusted.
        resized = ir.Attribute.parse(str(attr).replace("tensor<100xf32>", "tensor<50xf32>"))
        assert resource_array(resized) is None


def test_aligned_copies_only_when_needed():
    base = np.empty(1024, dtype=np.uint8)
    start = -base.ctypes.data % ALIGNMENT
    inside = base[start:start + 512].view(np.float32)
    assert aligned(inside) is inside
    shifted = base[start + 4:start + 4 + 512].view(np.float32)
    copy = aligned(shifted)
    assert copy is not shifted and copy.ctypes.data % ALIGNMENT == 0
    assert copy.tobytes() == shifted.tobytes()


def test_core_constant_goes_through_the_table(rand):
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            value = core.constant(rand((10, 10)), name="c")
        array = resource_array(value.owner.attributes["value"])
        assert array is not None and array.shape == (10, 10)


def _dense_chain(weights: list[np.ndarray]) -> onnx.ModelProto:
    nodes, inits, current = [], [], "x"
    for index, weight in enumerate(weights):
        inits.append(numpy_helper.from_array(weight, f"w{index}"))
        nodes += [helper.make_node("MatMul", [current, f"w{index}"], [f"m{index}"]),
                  helper.make_node("Relu", [f"m{index}"], [f"r{index}"])]
        current = f"r{index}"
    size = weights[0].shape[0]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, size])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, [256, size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_repeated_layers_share_their_kernels(rand):
    """Three layers of one shape (different weights) compile to the kernels of one layer:
    tilecraft-merge-identical-functions keeps one copy of each, and the result is right."""
    weights = [rand((256, 256)) for _ in range(3)]
    one = tilecraft.compile(_dense_chain(weights[:1]), keep_ir=True)
    three = tilecraft.compile(_dense_chain(weights), keep_ir=True)

    def kernels(module: tilecraft.CompiledModule) -> int:
        return sum(line.lstrip().startswith("llvm.func") and "@parallel_compute_fn" in line
                   for line in module.ir("llvm").splitlines())

    assert kernels(one) >= 1
    assert kernels(three) == kernels(one)
    x = rand((256, 256))
    expected = x
    for weight in weights:
        expected = np.maximum(expected @ weight, 0)
    # Float32 sums of 256 products in another order differ by about 1e-6 of the terms'
    # magnitude: an output that cancels to 0.3 among terms of several hundred is off by ~2e-4
    # (seen with AVX2 register tiles), so the absolute tolerance scales with the outputs.
    np.testing.assert_allclose(three(x), expected, rtol=1e-4, atol=2e-6 * float(np.abs(expected).max()))
