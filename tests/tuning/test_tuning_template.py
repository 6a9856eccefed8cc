"""AutoTVM-style schedule templates: config spaces, typed errors, numerics of instantiated
configs, tuning with the model tuner's tuners and worker, and apply_history_best."""

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import ConfigSpaceError, KnobError, TemplateError, TilecraftError
from tilecraft.schedule.records import load_records
from tilecraft.scheduling import Schedule, compute, placeholder, reduce_axis, sum
from tilecraft.tuning import apply_history_best, get_config, make_tuner, task, template, tune_template
from tilecraft.tuning.measure import RunnerOptions

EXAMPLE = Path(tilecraft.__file__).resolve().parent / "examples" / "tutorials" / "autotvm_matmul.py"


@template("test/matmul")
def matmul(N, L, M, dtype):
    A = placeholder((N, L), dtype, name="A")
    B = placeholder((L, M), dtype, name="B")
    k = reduce_axis((0, L), "k")
    C = compute((N, M), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    s = Schedule(C)
    y, x, kk = s.get_loops(s.get_block("C"))
    cfg = get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2", max_factor=16)
    cfg.define_reorder("order", [kk, 0], policy="all")
    cfg.define_knob("vec", [0, 1])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    inner = cfg["order"].apply(s, C, [kk, yi])
    s.reorder(yo, xo, *inner, xi)
    if cfg["vec"].val:
        s.vectorize(xi)
    return s, [A, B, C]


def _inputs(n, l, m):
    rng = np.random.default_rng(0)
    return rng.random((n, l), dtype=np.float32), rng.random((l, m), dtype=np.float32)


def test_config_space_knobs_and_candidates():
    made = task("test/matmul", args=(16, 8, 32, "float32"))
    defs = made.config_space.defs
    assert [d.size for d in defs["tile_y"].candidates] == [(16, 1), (8, 2), (4, 4), (2, 8), (1, 16)]
    assert [d.size for d in defs["tile_x"].candidates] == [(32, 1), (16, 2), (8, 4), (4, 8), (2, 16)]
    assert [d.perm for d in defs["order"].candidates] == [(0, 1), (1, 0)]
    assert [d.val for d in defs["vec"].candidates] == [0, 1]
    assert len(made.config_space) == made.space.size == 5 * 5 * 2 * 2
    text = str(made.config_space)
    assert "len=100" in text and "tile_y: split" in text and "vec: knob" in text
    assert made.space.default() == {"tile_y": 0, "tile_x": 0, "order": 0, "vec": 0}


def test_split_with_three_outputs_covers_the_extent():
    space = tilecraft.tuning.ConfigSpace()
    cfg = tilecraft.tuning.ConfigEntity(space, defining=True)
    cfg.define_split("s", 12, num_outputs=3)
    sizes = [c.size for c in space.defs["s"].candidates]
    assert sizes[0] == (12, 1, 1) and all(np.prod(s) == 12 and len(s) == 3 for s in sizes)
    assert len(sizes) == len(set(sizes)) == 18
    cfg.define_annotate("a", [0, 0], policy="try_unroll_vec")
    assert [c.anns for c in space.defs["a"].candidates] == [
        ("none", "none"), ("none", "vec"), ("unroll", "none"), ("unroll", "vec")]


@pytest.mark.parametrize("config", [
    {"tile_y": 0, "tile_x": 0, "order": 0, "vec": 0},
    {"tile_y": 2, "tile_x": 3, "order": 1, "vec": 1},
    {"tile_y": 4, "tile_x": 4, "order": 0, "vec": 1},
])
def test_instantiated_configs_match_numpy(config):
    made = task("test/matmul", args=(16, 8, 32, "float32"))
    s, tensors = made.instantiate(config)
    assert [t.name for t in tensors] == ["A", "B", "C"]
    if config["tile_y"]:
        assert "scf.for" in s.ir()
    a, b = _inputs(16, 8, 32)
    np.testing.assert_allclose(tilecraft.build(s)(a, b), a @ b, rtol=1e-5)


def test_calling_the_template_outside_a_context_builds_the_default():
    s, _ = matmul(16, 8, 32, "float32")
    default, _ = task("test/matmul", args=(16, 8, 32, "float32")).instantiate()
    assert s.history == default.history  # every knob's first candidate
    assert "vectorize" not in "".join(s.history) and "sch.split(l1, factors=[16, 1])" in s.history[2]
    a, b = _inputs(16, 8, 32)
    np.testing.assert_allclose(tilecraft.build(s)(a, b), a @ b, rtol=1e-5)


def test_the_tuners_search_a_template_space():
    made = task("test/matmul", args=(16, 8, 32, "float32"))
    for name in ("grid", "random", "xgb"):
        tuner = make_tuner(name, made.space, seed=1)
        batch = tuner.next_batch(4)
        assert len(batch) == 4
        for config in batch:
            assert made.space.validate(config) == config
        tuner.update(batch, [1.0, 2.0, 3.0, 4.0])
        assert tuner.best_config == batch[0]
    features = made.space.features(made.space.point(7))
    assert len(features) == len(made.space.feature_names())
    moved = made.space.neighbour(made.space.default(), random.Random(0))
    assert [abs(moved[k] - v) for k, v in made.space.default().items()].count(1) == 1


def test_bad_input_gives_typed_errors():
    space = tilecraft.tuning.ConfigSpace()
    cfg = tilecraft.tuning.ConfigEntity(space, defining=True)
    for bad in (0, -2):
        with pytest.raises(ConfigSpaceError, match="num_outputs must be a positive int"):
            cfg.define_split("s", 16, num_outputs=bad)
    with pytest.raises(ConfigSpaceError, match="no candidates"):
        cfg.define_knob("k", [])
    cfg.define_knob("k", [1, 2])
    with pytest.raises(ConfigSpaceError, match="defined twice"):
        cfg.define_knob("k", [3])
    with pytest.raises(ConfigSpaceError, match="never defined knob 'nope'"):
        cfg["nope"]
    with pytest.raises(TemplateError, match="already registered"):
        template("test/matmul")(lambda: None)
    with pytest.raises(TemplateError, match="no template 'test/unknown'"):
        task("test/unknown", args=(1,))
    with pytest.raises(TemplateError, match="inside a @tilecraft.template"):
        get_config()
    made = task("test/matmul", args=(16, 8, 32, "float32"))
    with pytest.raises(KnobError, match="expected one of"):
        made.instantiate({"tile_y": 99, "tile_x": 0, "order": 0, "vec": 0})
    with pytest.raises(KnobError, match="missing"):
        made.instantiate({"tile_y": 0})
    assert issubclass(ConfigSpaceError, TilecraftError) and issubclass(TemplateError, TilecraftError)


@template("test/uses_undefined")
def _uses_undefined(n):
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i] * 2.0, name="B")
    s = Schedule(B)
    get_config()["tile"].apply(s, B, s.get_loops(s.get_block("B"))[0])
    return s, [A, B]


def test_a_cfg_key_used_but_never_defined():
    with pytest.raises(ConfigSpaceError, match="never defined knob 'tile'"):
        task("test/uses_undefined", args=(8,))


def test_tune_records_and_apply_history_best(tmp_path):
    records = tmp_path / "template.jsonl"
    made = task("test/matmul", args=(16, 8, 32, "float32"), flops=2 * 16 * 8 * 32)
    result = tune_template(made, tuner="random", trials=4, batch_size=2, records=records,
                           options=RunnerOptions(repeat=1, min_repeat_ms=1, timeout=120))
    assert result.trials == 4 and result.best_config is not None
    lines = load_records(records)
    assert len(lines) == 4 and lines[0].tuner == "default"
    assert {r.key for r in lines} == {made.key} and all(r.ok for r in lines)
    best = min(lines, key=lambda r: r.cost)
    assert best.config == result.best_config
    assert "tile_y=" in best.script and "transform.named_sequence" in best.script
    with apply_history_best(records) as history:
        assert history.lookup(made) == best.config
        s, _ = matmul(16, 8, 32, "float32")
    expected, _ = made.instantiate(best.config)
    assert s.history == expected.history
    a, b = _inputs(16, 8, 32)
    np.testing.assert_allclose(tilecraft.build(s)(a, b), a @ b, rtol=1e-5)
    with apply_history_best(records):  # another shape has no record: the default
        s, _ = matmul(8, 8, 8, "float32")
    assert s.history == task("test/matmul", args=(8, 8, 8, "float32")).instantiate()[0].history


@pytest.mark.slow
def test_autotvm_matmul_example_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--size", "64", "--trials", "5",
         "--records", str(tmp_path / "mm.jsonl")],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ConfigSpace (len=" in result.stdout and "relative error vs numpy" in result.stdout
    assert len(load_records(tmp_path / "mm.jsonl")) == 5


@template("test/sometimes_illegal")
def _sometimes_illegal(n):
    A = placeholder((n, n), name="A")
    B = compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    s = Schedule(B)
    i, j = s.get_loops(s.get_block("B"))
    if get_config().define_knob("bad", [0, 1]) is None and get_config()["bad"].val:
        s.vectorize(i)  # not the innermost loop: the schedule rejects it
    return s, [A, B]


def test_a_config_the_schedule_rejects_is_a_build_error_record(tmp_path):
    records = tmp_path / "illegal.jsonl"
    made = task("test/sometimes_illegal", args=(8,))
    result = tune_template(made, tuner="grid", trials=2, records=records,
                           options=RunnerOptions(repeat=1, min_repeat_ms=1, timeout=120))
    lines = load_records(records)
    assert [r.status for r in lines] == ["ok", "build_error"]
    assert "ScheduleError" in lines[1].error and "innermost" in lines[1].error
    assert result.best_config == {"bad": 0}
