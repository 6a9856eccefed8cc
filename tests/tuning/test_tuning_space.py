"""Tasks and schedule spaces: extraction, keys, the default point, knob validation, scripts."""

import random

import mlir_text
import pytest
from mlir import ir
from mlir.dialects.transform import interpreter
from tilecraft.errors import KnobError, TaskExtractionError
from tilecraft.pipelines.target import Target
from tilecraft.schedule.plan import plan_default_schedule
from tilecraft.schedule.apply import reproducer
from tilecraft.schedule.space import task_nest
from tilecraft.tuning import extract_tasks, space_for

TARGET = "llvm -mcpu=znver4"  # 512-bit vectors whatever the host


def two_matmuls() -> str:
    t = mlir_text.tensor
    return f"""
func.func @main(%a: {t((32, 64))}, %b: {t((64, 32))}, %c: {t((64, 32))}) -> ({t((32, 32))}, {t((32, 32))}) {{
{mlir_text.filled("z1", (32, 32), "0.0")}{mlir_text.filled("z2", (32, 32), "0.0")}
  %x = linalg.matmul ins(%a, %b : {t((32, 64))}, {t((64, 32))}) outs(%z1 : {t((32, 32))}) -> {t((32, 32))}
  %y = linalg.matmul ins(%a, %c : {t((32, 64))}, {t((64, 32))}) outs(%z2 : {t((32, 32))}) -> {t((32, 32))}
  return %x, %y : {t((32, 32))}, {t((32, 32))}
}}
"""


def test_identical_ops_are_one_task_with_a_count():
    (task,) = extract_tasks(two_matmuls(), TARGET)
    assert task.kind == "matmul" and task.count == 2
    assert task.ranges == (32, 32, 64) and task.flops == 2 * 32 * 32 * 64
    assert task.name == "matmul_32x32x64_f32"


def test_named_and_generic_spellings_share_a_key(matmul_64):
    generic = """
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @mm(%a: tensor<64x128xf32>, %b: tensor<128x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<64x128xf32>, tensor<128x64xf32>) outs(%init : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}
"""
    assert extract_tasks(matmul_64, TARGET)[0].key == extract_tasks(generic, TARGET)[0].key


def test_kernel_classes():
    sources = {
        "conv2d": mlir_text.conv_nchw(1, 16, 10, 10, 32, 3, 3),
        "depthwise_conv2d": mlir_text.depthwise_nhwc(1, 10, 10, 32, 3, 3),
        "pooling": mlir_text.pooling_nchw("max", 1, 16, 8, 8, 2),
        "reduction": mlir_text.reduce_2d((64, 128), 1, "arith.addf", "0.0"),
        "elementwise": mlir_text.elementwise((64, 128), 1, ["%e = math.exp %in0 : f32", "linalg.yield %e : f32"]),
    }
    for kind, source in sources.items():
        assert kind in {t.kind for t in extract_tasks(source, TARGET)}, kind


def test_dynamic_only_model_has_no_task():
    with pytest.raises(TaskExtractionError):
        extract_tasks(mlir_text.dynamic_matmul(), TARGET)


def panel_matmul(panels: int = 8) -> str:
    """A matmul on weight panels (pipelines/graph/weight_panels.py): C'[m, nb, j] += A[m, k] * B'[nb, k, j]."""
    return f"""
func.func @main(%a: tensor<128x256xf32>, %w: tensor<{panels}x256x32xf32>) -> tensor<128x{panels}x32xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x{panels}x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128x{panels}x32xf32>) -> tensor<128x{panels}x32xf32>
  %c = linalg.generic {{indexing_maps = [affine_map<(m, nb, j, k) -> (m, k)>, affine_map<(m, nb, j, k) -> (nb, k, j)>, affine_map<(m, nb, j, k) -> (m, nb, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
       ins(%a, %w : tensor<128x256xf32>, tensor<{panels}x256x32xf32>) outs(%f : tensor<128x{panels}x32xf32>) {{
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<128x{panels}x32xf32>
  return %c : tensor<128x{panels}x32xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_default_point_is_the_default_schedule(threads, matmul_64):
    sources = [matmul_64, mlir_text.conv_nchw(1, 16, 10, 10, 32, 3, 3),
               mlir_text.depthwise_nhwc(1, 10, 10, 32, 3, 3),
               mlir_text.pooling_nchw("max", 1, 16, 8, 8, 2),
               mlir_text.softmax(64, 256), mlir_text.elementwise((64, 128), 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"]),
               panel_matmul(), panel_matmul(24)]
    target = Target.parse(TARGET)
    target = Target(mcpu=target.mcpu, num_threads=threads)
    for source in sources:
        for task in extract_tasks(source, target):
            space = space_for(task, target)
            default = space.default()
            assert space.is_valid(default), task.name
            expected = plan_default_schedule(task_nest(task), 3, vector_bits=512,
                                             num_threads=threads, caches=target.caches)
            assert space.plan(space.validate(default), 3) == expected, task.name


def test_points_without_a_thread_level_keep_the_column_blocks():
    """On one thread a matmul's default plan keeps its column blocks (8 of 24 panels) as a
    cache level outside the K block (matmul_plan.py ``column_blocks``); so does every other point
    of its space, whatever its register tiles."""
    target = Target.parse(TARGET)
    target = Target(mcpu=target.mcpu, num_threads=1)
    (task,) = [t for t in extract_tasks(panel_matmul(24), target) if t.kind == "matmul"]
    space = space_for(task, target)
    panel = space.panels[0]
    assert space.default_plan.thread_tiles is None
    assert space.default_plan.cache_tiles[panel] == 8
    other = space.validate({**space.default(), "reg_m": 4})
    assert space.plan(other).cache_tiles[panel] == 8


def test_packing_one_panel_per_task_is_not_a_point(matmul_64):
    """A task of one register tile's columns has one B panel: the copy would buy nothing
    (and its one-trip copy loop did not bufferize), so such points are invalid."""
    space = space_for(extract_tasks(matmul_64, TARGET)[0], TARGET)
    point = {**space.default(), "pack_a": 0, "pack_b": 1, "reg_n": 32, "cache_k": 64}
    assert not space.is_valid({**point, "par_n": 32})
    assert space.is_valid({**point, "par_n": 64})
    assert not space.is_valid({**point, "pack_a": 1, "pack_b": 0, "reg_m": 8, "par_m": 8})


def test_bad_knobs_raise_knob_error(matmul_64):
    space = space_for(extract_tasks(matmul_64, TARGET)[0], TARGET)
    default = space.default()
    with pytest.raises(KnobError, match="unknown"):
        space.validate({**default, "tile_z": 4})
    with pytest.raises(KnobError, match="reg_m"):
        space.validate({**default, "reg_m": 5})
    with pytest.raises(KnobError, match="missing"):
        space.validate({k: v for k, v in default.items() if k != "pack_b"})
    with pytest.raises(KnobError):
        space.validate({**default, "pack_b": True})


@pytest.mark.parametrize("source", [
    mlir_text.matmul(64, 64, 128),
    mlir_text.batch_matmul(2, 32, 32, 64),
    mlir_text.conv_nchw(1, 16, 10, 10, 32, 3, 3),
    mlir_text.pooling_nchw("max", 1, 16, 8, 8, 2),
    mlir_text.softmax(64, 256),
    panel_matmul(),
], ids=["matmul", "batch_matmul", "conv", "pool", "softmax", "weight_panels"])
def test_random_points_apply_with_the_transform_interpreter(source):
    """Every valid point renders a script the interpreter accepts (no JIT: fast)."""
    rng = random.Random(0)
    for task in extract_tasks(source, TARGET):
        space = space_for(task, TARGET)
        for _ in range(4):
            config = space.random(rng)
            text = reproducer(task, config, TARGET)
            with ir.Context():
                module = ir.Module.parse(text)
                payload, script = list(module.body.operations)[:-1], list(module.body.operations)[-1]
                main = [op for op in script.regions[0].blocks[0].operations
                        if "__transform_main" in str(op.attributes["sym_name"])][0]
                interpreter.apply_named_sequence(module.operation, main, script)
                plan = space.plan(config)
                # One-element tiles vectorize to vector<1x...x1>, which canonicalization
                # folds back to scalar extracts; wider tiles must stay vectors.
                if plan.vectorize and plan.register_tiles and plan.register_tiles[-1] > 1:
                    assert "vector.transfer_read" in str(payload[0]), (task.name, config)


def test_features_have_one_value_per_name(matmul_64):
    space = space_for(extract_tasks(matmul_64, TARGET)[0], TARGET)
    config = space.random(random.Random(1))
    assert len(space.features(config)) == len(space.feature_names())


def test_loop_order_knob_renders_an_interchange(matmul_64):
    space = space_for(extract_tasks(matmul_64, TARGET)[0], TARGET)
    script = space.script({**space.default(), "pack_a": 0, "n_outer": 1})
    assert "interchange = [1, 0, 2]" in script
    assert "interchange" not in space.script(space.default())
