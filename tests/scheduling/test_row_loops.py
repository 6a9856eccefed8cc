"""Contractions whose rows are several loops (schedule/matmul_plan.py ``split_outer_rows``):
Swin's window attention reads its tokens as windows x tokens ([1, 8, 8, 7, 7, C] at 56 x 56),
and its projections arrive at the schedule with four row loops. The thread level used to
split only the innermost (7 rows, one register tile): one task, one thread. Here: the task
counts the plan makes, and the numerics of window-shaped projections with bias and residual
(the epilogue the group now fuses into the tasks) against onnxruntime at one and two threads."""

import math
import re
import warnings

import numpy as np
import pytest
from mlir import ir

import tilecraft
from tilecraft.pipelines.loop_nest import analyze_loop_nests
from tilecraft.schedule.op_schedule import TASKS_PER_THREAD
from tilecraft.schedule.plan import plan_default_schedule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _window_contraction(rows: tuple[int, ...], k: int, panels: int) -> str:
    """``C[1, *rows, panels, 16] = A[1, *rows, k] x B[panels, k, 16]`` as a linalg.generic."""
    r = len(rows)
    dims = [f"d{i}" for i in range(r + 4)]  # d0 unit, rows, panel, column, k
    unit, row_dims, panel, column, red = dims[0], dims[1:r + 1], dims[r + 1], dims[r + 2], dims[r + 3]
    a_shape = "x".join(map(str, (1, *rows, k)))
    c_shape = "x".join(map(str, (1, *rows, panels, 16)))
    head = f"({', '.join(dims)})"
    maps = [f"affine_map<{head} -> ({', '.join([unit, *row_dims, red])})>",
            f"affine_map<{head} -> ({panel}, {red}, {column})>",
            f"affine_map<{head} -> ({', '.join([unit, *row_dims, panel, column])})>"]
    iterators = ", ".join(['"parallel"'] * (r + 3) + ['"reduction"'])
    return f"""
func.func @f(%a: tensor<{a_shape}xf32>, %b: tensor<{panels}x{k}x16xf32>) -> tensor<{c_shape}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{c_shape}xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<{c_shape}xf32>) -> tensor<{c_shape}xf32>
  %c = linalg.generic {{indexing_maps = [{", ".join(maps)}], iterator_types = [{iterators}]}}
      ins(%a, %b : tensor<{a_shape}xf32>, tensor<{panels}x{k}x16xf32>) outs(%i : tensor<{c_shape}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }} -> tensor<{c_shape}xf32>
  return %c : tensor<{c_shape}xf32>
}}"""


def _thread_tiles(rows: tuple[int, ...], k: int, panels: int, threads: int):
    with ir.Context():
        module = ir.Module.parse(_window_contraction(rows, k, panels))
        (nest,) = [nest for op, nest in analyze_loop_nests(module.operation) if op.name == "linalg.generic"]
        plan = plan_default_schedule(nest, 0, vector_bits=512, num_threads=threads)
    return nest, plan.thread_tiles


def _tasks(nest, tiles) -> int:
    return math.prod(extent // tile for extent, tile in zip(nest.ranges, tiles) if tile)


@pytest.mark.parametrize("rows, k, panels, tiles_of_rows", [
    ((8, 8, 7, 7), 96, 18, (1, 0, 0, 7)),   # Swin-T stage 1 qkv: 8 tasks, one per window row
    ((8, 7, 8, 7), 384, 6, (1, 0, 0, 7)),   # stage 1 mlp.2 (reverse-window layout): 8 tasks
    ((4, 4, 7, 7), 192, 36, (1, 2, 0, 7)),  # stage 2: 4 x 2 tasks
    ((2, 2, 7, 7), 384, 72, (1, 1, 0, 7)),  # stage 3: 4 tasks (28 would be more than 8 per thread)
])
def test_outer_row_loops_make_the_tasks(rows, k, panels, tiles_of_rows):
    nest, tiles = _thread_tiles(rows, k, panels, threads=2)
    assert tiles[1:len(rows) + 1] == tiles_of_rows
    assert _tasks(nest, tiles) >= 2 * 2
    assert _tasks(nest, tiles) <= 8 * 2


def test_enough_tasks_from_the_inner_rows_leave_the_outer_loops_whole():
    # 56 rows in the innermost loop already make the tasks: the outer loop stays whole
    nest, tiles = _thread_tiles((2, 56), 64, 4, threads=2)
    assert tiles[1] == 0 and _tasks(nest, tiles) >= TASKS_PER_THREAD


def window_mlp(rows: tuple[int, ...], width: int, hidden: int) -> "onnx.ModelProto":
    """x [1, *rows, width] -> MatMul + bias -> Relu -> MatMul + bias + x: both projections
    with rows as ``len(rows)`` loops, the second reading the first's panels."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((width, hidden)) / np.sqrt(width)).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal((hidden, width)) / np.sqrt(hidden)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "b2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["y"])]
    shape = [1, *rows, width]
    graph = helper.make_graph(nodes, "window_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("rows, expected_tasks", [((8, 8, 7, 7), 8), ((4, 4, 7, 7), 8)])
def test_window_projections_match_onnxruntime(monkeypatch, rand, threads, rows, expected_tasks):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = window_mlp(rows, 32, 128)
    x = rand((1, *rows, 32))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a schedule falling back to scalar loops
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    got = compiled(x=x)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    if threads == "2":  # both projections split into tasks, at least two per thread
        assert _contraction_tasks(compiled.ir("schedule")) == [expected_tasks] * 2


def _contraction_tasks(schedule_ir: str) -> list[int]:
    """The task counts of the ``scf.forall`` loops whose bodies hold a ``vector.contract``."""
    counts, open_count, contracts = [], None, False
    for line in schedule_ir.splitlines():
        found = re.search(r"scf\.forall \([^)]*\) in \(([\d, ]+)\)", line)
        if found:
            open_count, contracts = math.prod(int(x) for x in found.group(1).split(",")), False
        elif "vector.contract" in line:
            contracts = True
        elif "scf.forall.in_parallel" in line and open_count is not None:
            if contracts:
                counts.append(open_count)
            open_count = None
    return counts


@pytest.mark.parametrize("rows, k, panels, register_panels", [
    ((56, 56), 96, 24, 3),     # ConvNeXt-T stage 1 fc1, channels-last: rows (H, W)
    ((28, 28), 192, 48, 3),    # stage 2 fc1
    ((7, 7), 768, 192, 3),     # stage 4 fc1
    ((8, 8, 7, 7), 96, 18, 3),  # Swin-T stage 1 qkv, windows x tokens
    ((13, 11), 40, 10, 2),     # odd rows; 10 panels take 2 side by side
    ((5, 9), 24, 7, 1),        # 7 panels: one
])
def test_several_row_loops_keep_the_weight_panels(rows, k, panels, register_panels):
    """A contraction whose rows are several loops (a Linear on a channels-last image or on
    windows) is planned on its weight panels like a 2-D matmul: up to three panels side by
    side in the register tile. It used to be planned as if B were not packed, one 16-column
    panel per tile (7 x 16 accumulators on AVX-512): ConvNeXt's MLP matmuls ran about 10 %
    behind onnxruntime's at one thread (docs/performance.md, "Channels-last MLPs")."""
    with ir.Context():
        module = ir.Module.parse(_window_contraction(rows, k, panels))
        (nest,) = [nest for op, nest in analyze_loop_nests(module.operation) if op.name == "linalg.generic"]
        plan = plan_default_schedule(nest, 0, vector_bits=512, num_threads=1)
    panel, column = len(rows) + 1, len(rows) + 2
    assert plan.register_tiles[panel] == register_panels
    assert plan.register_tiles[column] == 16
    assert plan.register_tiles[len(rows)] in (7, 8)  # the innermost row loop's tile
    assert all(tile == 1 for tile in plan.register_tiles[1:len(rows)])  # outer rows: one at a time


@pytest.mark.parametrize("rows", [(13, 11), (5, 9), (2, 7, 7)])
def test_odd_image_mlps_match_onnxruntime(rand, rows):
    model = window_mlp(rows, 48, 192)
    x = rand((1, *rows, 48))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(tilecraft.compile(model, cache=False)(x=x), want, rtol=2e-4, atol=2e-4)
