"""Generated spaces (schedule/sketch.py): derived from an op's loops, for op classes the hand
spaces give only generic knobs; every point is a schedule that compiles and matches numpy."""

from __future__ import annotations

import random

import mlir_text
import numpy as np
import pytest
from mlir import ir

import tilecraft
from tilecraft.errors import TuningError
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.schedule.sketch import SketchSpace, is_sketch_config
from tilecraft.tuning import TuneOptions, extract_tasks, space_generator_for
from tilecraft.tuning.space_generators import (GeneratedSpaceGenerator, HandSpaceGenerator,
                                               SketchSpaceGenerator)

TARGET = "llvm"
RNG = np.random.default_rng(0)


def cases():
    """(name, model, task kind, inputs, numpy reference)."""
    pool_x = RNG.standard_normal((1, 8, 16, 16)).astype(np.float32)
    dw_x = RNG.standard_normal((1, 15, 15, 16)).astype(np.float32)
    dw_w = RNG.standard_normal((3, 3, 16)).astype(np.float32)
    red_x = RNG.standard_normal((60, 90)).astype(np.float32)
    ew = [RNG.standard_normal((30, 45)).astype(np.float32) for _ in range(2)]
    bm = [RNG.standard_normal((3, 12, 28)).astype(np.float32),
          RNG.standard_normal((3, 28, 20)).astype(np.float32)]
    body = ["%m = arith.mulf %in0, %in1 : f32", "%r = arith.addf %m, %in0 : f32", "linalg.yield %r : f32"]
    return [
        ("max_pool", mlir_text.pooling_nchw("max", 1, 8, 16, 16, 2), "pooling", [pool_x],
         mlir_text.ref_pooling_nchw("max", pool_x, 2)),
        ("dilated_depthwise", mlir_text.depthwise_nhwc(1, 15, 15, 16, 3, 3, dilation=2), "depthwise_conv2d",
         [dw_x, dw_w], mlir_text.ref_depthwise_nhwc(dw_x, dw_w, dilation=2)),
        ("odd_row_sum", mlir_text.reduce_2d((60, 90), 1, "arith.addf", "0.0"), "reduction", [red_x],
         red_x.sum(axis=1)),
        ("odd_elementwise", mlir_text.elementwise((30, 45), 2, body), "elementwise", ew,
         ew[0] * ew[1] + ew[0]),
        ("small_batch_matmul", mlir_text.batch_matmul(3, 12, 20, 28), "matmul", bm,
         np.matmul(bm[0], bm[1])),
    ]


def heaviest(model, kind):
    tasks = extract_tasks(model, TARGET)
    chosen = [t for t in tasks if kind is None or t.kind == kind]
    assert chosen, [t.kind for t in tasks]
    return max(chosen, key=lambda t: t.flops * t.count)


@pytest.mark.parametrize("name, model, kind, inputs, expected",
                         [pytest.param(*case, id=case[0]) for case in cases()])
def test_generated_points_compile_and_match_numpy(tmp_path, name, model, kind, inputs, expected):
    task = heaviest(model, kind)
    space = SketchSpaceGenerator(TARGET).generate(task)
    default = space.default()
    assert is_sketch_config(default) and space.plan(default) == space.default_plan
    assert space.size > 1, f"{name}: a generated space must have something to search"
    # Knobs come from the loops: a thread and a register tile per parallel loop, a cache
    # block and a step per reduction loop.
    names = [k.name for k in space.knobs]
    assert any(n.startswith("sk_reg_d") for n in names)
    assert any(n.startswith("sk_step_d") for n in names) == bool(space.step_loops)
    assert space.step_loops == [d for d in space.reduction_loops if d not in space.pinned]
    baseline = tilecraft.compile(model, target=TARGET)
    rng = random.Random(1)
    picked = []
    while len(picked) < 2:
        config = space.random(rng)
        if config != default and config not in picked:
            picked.append(config)
    for config in picked:
        assert space.is_valid(config)
        # The cost models' rows: its own features and the cross-task ones.
        assert len(space.features(config)) == len(space.feature_names())
        assert len(space.transfer_features(config)) == len(space.transfer_feature_names())
        with ir.Context():  # the script is a transform module that parses
            ir.Module.parse(f"module attributes {{transform.with_named_sequence}} {{\n{space.script(config)}\n}}")
        path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.jsonl"
        with RecordWriter(path) as writer:
            writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3],
                                gflops=1.0, target=canonical_target(TARGET)))
        tuned = tilecraft.compile(model, target=TARGET, tuning_records=path)
        assert tuned.ir("schedule") != baseline.ir("schedule"), f"{name}: the record was not applied"
        np.testing.assert_allclose(tuned(*inputs), expected, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name} with {config}")


def test_the_generated_generator_keeps_hand_spaces_for_contractions(matmul_64):
    (matmul,) = extract_tasks(matmul_64, TARGET)
    generated = GeneratedSpaceGenerator(TARGET)
    assert generated.generate(matmul).kind == "matmul"
    pool = heaviest(mlir_text.pooling_nchw("max", 1, 8, 16, 16, 2), "pooling")
    assert isinstance(generated.generate(pool), SketchSpace)
    assert not isinstance(HandSpaceGenerator(TARGET).generate(pool), SketchSpace)
    assert isinstance(space_generator_for(TARGET, "sketch").generate(matmul), SketchSpace)
    with pytest.raises(TuningError, match="unknown space 'ansor'"):
        space_generator_for(TARGET, "ansor")
    with pytest.raises(TuningError, match="space must be one of hand, generated, sketch"):
        TuneOptions(space="ansor")


def test_tune_searches_a_generated_space_and_compile_applies_it(tmp_path):
    model = mlir_text.pooling_nchw("max", 1, 8, 16, 16, 2)
    records = tmp_path / "pool.jsonl"
    result = tilecraft.tune(model, TARGET, trials=6, tuning_records=records, tuner="random",
                            space="generated", validate_top=0, progress=False, end_to_end=False,
                            transfer=False, tasks=[heaviest(model, "pooling")])
    (task,) = result.tasks
    assert task.trials == 6 and task.failures < 6
    written = [r for r in tilecraft.tuning.load_records(records, target=TARGET)]
    assert written and all(is_sketch_config(r.config) for r in written)
    x = RNG.standard_normal((1, 8, 16, 16)).astype(np.float32)
    tuned = tilecraft.compile(model, target=TARGET, tuning_records=records)
    np.testing.assert_allclose(tuned(x), mlir_text.ref_pooling_nchw("max", x, 2), rtol=1e-5)


def test_a_user_compute_gets_a_generated_space_through_the_auto_scheduler(tmp_path):
    """A user's TE compute that is no matmul or convolution (a row-wise sum of squares with
    odd extents) is tuned over its derived space, and apply_best builds the best point."""
    from tilecraft import auto_scheduler
    from tilecraft.schedule import te

    @auto_scheduler.register_workload("sketch_row_norm", override=True)
    def row_norm(n, m):
        x = te.placeholder((n, m), name="x", dtype="float32")
        k = te.reduce_axis(m, name="k")
        return [x, te.compute((n,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="norm")]

    records = tmp_path / "norm.json"
    task = auto_scheduler.SearchTask(func="sketch_row_norm", args=(36, 75), target=TARGET)
    result = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=4, verbose=0, tuner="random",
        measure_callbacks=[auto_scheduler.RecordToFile(records)]))
    assert sum(t.trials for t in result.tasks) == 4
    written = tilecraft.tuning.load_records(records, target=TARGET)
    assert written and all(is_sketch_config(r.config) for r in written)
    x = RNG.standard_normal((36, 75)).astype(np.float32)
    np.testing.assert_allclose(task.apply_best(records)(x), (x * x).sum(axis=1), rtol=1e-4)
