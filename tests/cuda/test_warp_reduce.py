"""Block-per-row reductions combined with warp shuffles (``warp-reduce=1``,
targets/cuda/warp_reduce.py): which reductions are rewritten, which keep the one-thread
combination, and that ptxas accepts the shuffles without spilling. Numbers need a GPU
(benchmarks/cuda_device_check.py); here the IR and ptxas are what can be checked."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.errors import CompileError, GpuScheduleError
from tilecraft.pipelines.loop_nest import analyze_loop_nests
from tilecraft.targets.cuda import cuda_pipeline, find_ptxas
from tilecraft.targets.cuda.lowering import kernel_resources
from tilecraft.targets.cuda.schedule import GpuConfig, config_from_options, operand_maps_of
from tilecraft.targets.cuda.space import GpuScheduleSpace

TARGET = "cuda -arch=sm_90"


def _norm_and_reductions(dtype: int = TensorProto.FLOAT):
    """LayerNormalization over 256, then ReduceSum and ReduceMax of its rows: 4 row
    reductions (mean, variance, sum, max), each planned block-per-row."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16, 256])
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1),
             helper.make_node("ReduceSum", ["y", "axes"], ["s"], keepdims=0),
             helper.make_node("ReduceMax", ["y", "axes"], ["m"], keepdims=0)]
    weights = [numpy_helper.from_array(np.full(256, 1.5, np.float32), "g"),
               numpy_helper.from_array(np.full(256, 0.25, np.float32), "b"),
               numpy_helper.from_array(np.array([2], np.int64), "axes")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 16]) for n in ("s", "m")]
    graph = helper.make_graph(nodes, "g", [x], outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _integer_row_sum():
    """A row sum of int64: no 64-bit shuffle lowering, so it keeps the shared combination."""
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [32, 512])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [32])],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _compile(model, options: str, target: str = TARGET):
    return tilecraft.compile(model, target=target,
                             pipeline=cuda_pipeline(target, schedule_options=options))


def test_the_option_parses_and_refuses_other_values():
    assert config_from_options({"warp-reduce": "1"}) == GpuConfig(warp_reduce=True)
    assert config_from_options({}).warp_reduce is False
    with pytest.raises(GpuScheduleError, match="warp-reduce must be 0 or 1, got 'yes'"):
        config_from_options({"warp-reduce": "yes"})
    with pytest.raises(CompileError, match="warp-reduce must be 0 or 1"):
        _compile(_norm_and_reductions(), "warp-reduce=2")


def test_every_row_reduction_of_a_layer_norm_and_reduces_combines_with_shuffles():
    default, shuffled = _compile(_norm_and_reductions(), ""), _compile(_norm_and_reductions(), "warp-reduce=1")
    before, after = default.ir("map"), shuffled.ir("map")
    assert before.count("linalg.reduce") == 4 and "gpu.all_reduce" not in before
    assert after.count("gpu.all_reduce") == 4 and "linalg.reduce" not in after
    # Same kernels, same launches: only how each block combines its partials changed.
    assert after.count("gpu.launch ") == before.count("gpu.launch ")
    assert "shfl.sync" not in default.ptx()
    # Two butterflies of 5 steps per reduction (full warps, then the warps' values), and the
    # same again for a partial last warp: at least 10 shuffles for each of the 4.
    assert shuffled.ptx().count("shfl.sync.bfly") >= 40


def test_a_64_bit_reduction_keeps_the_one_thread_combination():
    module = _compile(_integer_row_sum(), "warp-reduce=1")
    text = module.ir("map")
    assert "linalg.reduce" in text and "gpu.all_reduce" not in text
    assert "tilecraft.warp_combine" not in text   # the request is dropped, not left behind
    assert "shfl.sync" not in module.ptx()


def test_the_tuner_space_offers_the_combination():
    text = tilecraft.compile(_norm_and_reductions(), target=TARGET).ir("input")
    with ir.Context():
        parsed = ir.Module.parse(text)
        nests = analyze_loop_nests(parsed.operation)
        maps = operand_maps_of(parsed.operation)
    spaces = [GpuScheduleSpace(nest, m) for (_, nest), m in zip(nests, maps)]
    rows = [s for s in spaces if s.kind == "row_reduction"]
    assert rows
    config = dict(rows[0].default(), warp_reduce=1)
    assert rows[0].plan(config).warp_combine
    assert "warp-reduce=1" in rows[0].pass_options(config)
    assert "tilecraft.warp_combine" in rows[0].script(config)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_shuffles_without_spills(arch):
    module = _compile(_norm_and_reductions(), "warp-reduce=1", f"cuda -arch={arch}")
    shuffling = 0
    for ptx in module.ptx_modules().values():
        for name, used in kernel_resources(ptx, arch).items():
            assert not used.spills, (name, used)
        shuffling += "shfl.sync" in ptx
    assert shuffling
