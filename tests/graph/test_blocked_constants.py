"""``tilecraft-block-constant-reads`` (pipelines/tensor/blocked_constants.py) on whole models: the
filters of NHWC convolutions end up block-major ([output-channel block][kh][kw][ic][V]) and
the results still match onnxruntime, for filter-heavy 3x3 and 1x1 layers, channel counts
that are not a multiple of the block, and on one or two threads. The IR-level rules
(aligned offsets only, no other use) are checked in tests/lit/schedule/block-constant-reads.mlir.
Below them, ``tilecraft-prefetch-next-blocks`` (pipelines/buffer/prefetch_blocks.py), which reads of
those blocks feed: where it prefetches, and that results do not move (its IR rules:
tests/lit/pipelines/prefetch-next-blocks.mlir)."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _conv_relu(cin: int, cout: int, kernel: int, size: int):
    rng = np.random.default_rng(cin + 3 * cout + kernel)
    weights = [numpy_helper.from_array((rng.standard_normal((cout, cin, kernel, kernel))
                                        / np.sqrt(cin * kernel * kernel)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[kernel // 2] * 4),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, size, size])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("cin, cout, kernel, size", [
    (64, 256, 3, 7),    # filter-heavy 3x3 (ResNet's 7x7 stage, narrower)
    (256, 512, 1, 7),   # filter-heavy 1x1
    (32, 96, 3, 14),    # 96 channels: 3 blocks of 32, or 6 of 16
    (16, 48, 1, 28),    # 48 channels: one-vector tiles
])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_filters_match_onnxruntime(cin, cout, kernel, size, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    model = _conv_relu(cin, cout, kernel, size)
    x = np.random.default_rng(1).standard_normal((1, cin, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    # The filter [kernel, kernel, cin, cout] is now [cout / V, kernel, kernel, cin, V].
    scheduled = compiled.ir("schedule")
    blocked = re.findall(rf"tensor<(\d+)x{kernel}x{kernel}x{cin}x(\d+)xf32>", scheduled)
    assert blocked, "the filter was not blocked"
    assert all(int(blocks) * int(width) >= cout > int(width) for blocks, width in blocked)
    assert f"tensor<{kernel}x{kernel}x{cin}x{cout}xf32>, vector" not in scheduled


@pytest.mark.parametrize("threads", [1, 2])
def test_next_block_prefetched_on_first_pass(threads, monkeypatch):
    """``tilecraft-prefetch-next-blocks`` (pipelines/buffer/prefetch_blocks.py): a filter-heavy layer,
    whose tasks walk the filter block by block and reread each block per output row, gets
    a first-pass version of its reduction nest that prefetches the next block; results are
    unchanged. A layer whose tasks cycle through every block per pixel tile gets its
    prefetches in a first-pass version of that cycle only."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    x = np.random.default_rng(2).standard_normal((1, 64, 7, 7)).astype(np.float32)
    model = _conv_relu(64, 256, 3, 7)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    loops = compiled.ir("loops")
    prefetches = re.findall(r"memref\.prefetch %\w+\[(%\w+), .*locality<2>, data : memref<(\d+)x3x3x64x(\d+)xf32>",
                            loops)
    assert prefetches, "the next filter block was not prefetched"
    # Every prefetch is at the next block, clamped to the last: min(block + 1, blocks - 1).
    for block, _blocks, _width in prefetches:
        assert re.search(rf"{block} = arith\.minui ", loops), block
    assert re.search(r"scf\.if %\w+ -> \(vector<", loops), "the reduction nest was not versioned"

    small = _conv_relu(16, 48, 1, 28)
    x = np.random.default_rng(4).standard_normal((1, 16, 28, 28)).astype(np.float32)
    expected = ort.InferenceSession(small.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(small, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    loops = compiled.ir("loops")
    # One version per task: the prefetching copy of the pixel tile's block loop, and the
    # copy as it was; no prefetch outside the copy.
    assert "memref.prefetch" in loops
    versions = re.findall(r"scf\.if %\w+ \{", loops)
    assert versions, "the cycle through the blocks was not versioned"


@pytest.mark.parametrize("threads", [1, 2])
def test_weight_panels_prefetched_on_the_first_row_tile(threads, monkeypatch):
    """A matmul's weights as column panels (graph/weight_panels.py): each row tile of a task
    cycles through its panels, so the first row tile (the one that reads them from memory)
    prefetches the next panel's row as it reads one; the other row tiles run the loop as it
    was. Results match onnxruntime on one and two threads."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    rng = np.random.default_rng(5)
    weights = numpy_helper.from_array((rng.standard_normal((256, 512)) / 16).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 512])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    loops = compiled.ir("loops")
    panels = re.findall(r"memref\.prefetch %\w+\[(%\w+), %\w+, %\w+\], read, locality<2>, data : "
                        r"memref<(\d+)x256x(\d+)xf32>", loops)
    assert panels, "the next weight panel was not prefetched"
    for panel, count, width in panels:
        assert int(count) * int(width) == 512
        assert re.search(rf"{panel} = arith\.minui ", loops), panel
    assert re.search(r"scf\.if %\w+ \{", loops), "the first row tile was not versioned"


def test_prefetch_changes_no_result_on_a_chain_and_the_benchmark_runs():
    """benchmarks/conv_chain.py's chained filter-heavy layers: the build with next-block
    prefetches and the one without (its ``without_prefetch`` pipeline) compute the same bits, and
    the benchmark's row (onnxruntime, tilecraft, prefetch off; its own numerics check) runs.
    No timing is asserted; unknown cases are refused."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import conv_chain  # noqa: PLC0415  (the benchmark's model builder)

    case = conv_chain.Case(7, 96)
    model = conv_chain.chain(case, layers=2)
    x = np.random.default_rng(3).standard_normal(conv_chain.input_shape(case)).astype(np.float32)
    with_prefetch = tilecraft.compile(model, keep_ir=True)
    without = tilecraft.compile(model, keep_ir=True, pipeline=conv_chain.without_prefetch())
    assert "memref.prefetch" in with_prefetch.ir("loops")
    assert "memref.prefetch" not in without.ir("loops")
    np.testing.assert_array_equal(with_prefetch(x=x), without(x=x))
    row = conv_chain.run(case, layers=2, repeat=1)
    assert row.startswith(case.name) and len(row.split()) == 9
    with pytest.raises(SystemExit):
        conv_chain.main(["--cases", "3x3-nothing"])
