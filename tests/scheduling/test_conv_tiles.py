"""Convolution register tiles sized from the register file, not from the row's divisors
(schedule/conv_plan.py ``conv_register_tile``, ``register_row_tile``): the tiles chosen for
AVX2 and AVX-512, and compiled convolutions with odd widths against onnxruntime, fused
epilogues included (bias + batch norm + ReLU, residual add), depthwise and 1x1, on one and
two threads, with the peeled remainder's epilogue checked to stay on its accumulators."""

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512, needs_avx512_host
from tilecraft.schedule.conv_plan import conv_register_tile, register_row_tile, row_tiles, tile_row_cycles

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
import graph_models  # noqa: E402


@pytest.mark.parametrize("width, heavy, expected", [
    (32, False, (6, 16, 1)),   # 5 x 6 + 2 (12 accumulators), not 4 x 8 pixels x 1 vector
    (56, False, (6, 16, 1)),   # 9 x 6 + 2, not 7 x 8 x 1
    (33, False, (6, 16, 1)),   # 5 x 6 + 3, not 11 x 3
    (13, False, (5, 16, 1)),   # 5 + 5 + 3, not 13 x 1 pixel (13 is prime); a step of 2 does
    (97, False, (5, 16, 1)),   # not fit, 1 does. 19 x 5 + 2, not 97 x 1
    (65, False, (5, 16, 1)),   # 13 x 5: a divisor as fast as 6-pixel tiles, kept whole
    (8, False, (8, 8, 4)),     # one 8 x 1 tile is as fast as two 4 x 2 ones: kept
    (7, False, (7, 8, 4)),     # 7 x 1 as fast as 5 x 2 + 2 x 2: whole tiles win the tie
    (1, True, (1, 32, 1)),     # a filter-heavy 1x1 on 1 pixel: 4 vectors, the step drops to 1
])
def test_avx2_tiles_fill_the_register_file(width, heavy, expected):
    """AVX2: 16 registers of 8 lanes, 256 -> 256 channels."""
    pixels, channels, step = conv_register_tile(width, 256, 256, 8, 16, heavy)
    assert (pixels, channels, step) == expected
    vectors = channels // 8
    assert pixels * vectors + step * vectors + 1 <= 16


@pytest.mark.parametrize("width, out_channels, heavy, expected", [
    (56, 256, False, (8, 32, 4)),   # 8 divides 56: the former tile stays
    (28, 256, False, (7, 32, 4)),
    (14, 256, False, (7, 32, 4)),   # 7 + 7, not 8 + 6 (as fast, and whole)
    (7, 2048, True, (7, 32, 4)),    # 6 x 4 + 1 x 4 loses to 7 x 2
    (8, 2048, True, (8, 32, 4)),    # 8 x 2, not 4 x 4 (both 16 accumulators)
    (5, 2048, True, (5, 64, 1)),    # 5 x 4 stays; its step drops to 1 (2 did not fit either)
    (13, 256, False, (8, 32, 4)),   # no divisor: 8 + 5 peeled, not 13 x 1
    (33, 256, False, (7, 32, 4)),   # 4 x 7 + 5, not 11 x 3
])
def test_avx512_keeps_dividing_tiles(width, out_channels, heavy, expected):
    """AVX-512: 32 registers of 16 lanes; where the former divisor was as fast it is kept."""
    assert conv_register_tile(width, out_channels, 256, 16, 32, heavy) == expected


@pytest.mark.parametrize("width, expected", [
    (25, (16, 16, 1)),   # 16 + 9 peeled (13.5 cycles per step in the model), not 8 + 8 + 8 + 1 (20)
    (13, (13, 16, 1)),   # the whole row (7), not 8 + 5 (10)
    (27, (16, 16, 1)),   # 16 + 11, not 8 + 8 + 8 + 3
    (55, (15, 16, 1)),   # 3 x 15 + 10, not 6 x 8 + 7
    (97, (14, 16, 1)),   # 6 x 14 + 13, not 12 x 8 + 1
    (7, (7, 16, 1)),     # rows that the 8-pixel bound divides keep their tiles:
    (14, (7, 16, 1)),    # wider ones ran slower there with SiLU on the accumulators
    (28, (7, 16, 1)),
    (49, (7, 16, 1)),
    (56, (8, 16, 1)),
])
def test_avx512_one_vector_tiles_on_odd_rows_take_half_the_register_file(width, expected):
    """AVX-512, 37 -> 80 filters (odd_extents' 3x3 over 25x25 outputs): 5 vectors of 16, so
    no two-vector tile divides the filters and every tile has one vector. On a row that
    8-pixel tiles do not divide it may hold up to 16 pixels (half of the 32 registers as
    accumulators): an 8-pixel one-vector tile waits on its accumulators' latency and ends
    the row in a short peeled tile."""
    pixels, channels, step = conv_register_tile(width, 80, 37, 16, 32, False)
    assert (pixels, channels, step) == expected
    assert pixels + step + 1 <= 32
    former = register_row_tile(width, 1, 32)  # the 8-pixel bound
    assert (pixels == former) == (width % former == 0)
    assert tile_row_cycles(width, pixels, 1) <= tile_row_cycles(width, former, 1)
    # 144 filters (9 vectors) tile alike; 24 (one 8-lane vector) takes as many pixels.
    assert conv_register_tile(width, 144, 71, 16, 32, False)[0] == pixels
    assert conv_register_tile(width, 24, 64, 16, 32, False)[:2] == (pixels, 8)


@pytest.mark.parametrize("width", [7, 13, 14, 25, 27, 28, 55, 56])
def test_two_vector_tiles_and_avx2_keep_the_eight_pixel_bound(width):
    """Where the filters make two-vector tiles (256 on AVX-512), the wider one-vector tile is
    not offered (13 x 1 and 27 x 1 measured slower than 8 x 2 and 7 x 2); on AVX2 half the
    register file is 8 pixels, the bound as before: these tiles are what they were."""
    assert conv_register_tile(width, 256, 256, 16, 32, False)[0] <= 8
    assert conv_register_tile(width, 256, 256, 16, 32, False)[1] == 32
    for filters in (24, 72, 256):  # one 8-lane vector, 9 (odd) and 32 vectors of 8
        pixels, channels, step = conv_register_tile(width, filters, 64, 8, 16, False)
        assert pixels <= 8
        assert pixels * (channels // 8) + step * (channels // 8) + 1 <= 16


@pytest.mark.parametrize("width, pixels", [(65, 8), (33, 8), (56, 8), (28, 7), (14, 7), (7, 7), (13, 8)])
def test_depthwise_rows_take_the_fewest_tiles(width, pixels):
    assert register_row_tile(width, 1, 16, depthwise=True) == pixels


def test_row_tiles_end_with_the_partial_tile():
    assert row_tiles(32, 6) == [6, 6, 6, 6, 6, 2]
    assert row_tiles(30, 6) == [6] * 5


# ---- compiled against onnxruntime ----------------------------------------------------------

def _conv_model(kind: str, width: int, channels: int = 32, rows: int = 3):
    """NCHW ONNX models, batch 1: ``bn_relu`` 3x3 conv + bias + BatchNormalization + Relu,
    ``residual`` 3x3 conv + bias + Add(x) + Relu, ``depthwise`` 3x3 group conv + bias + Relu,
    ``pointwise`` 1x1 conv + bias + Relu."""
    rng = np.random.default_rng(width)
    c = channels
    groups = c if kind == "depthwise" else 1
    k = 1 if kind == "pointwise" else 3
    w = rng.standard_normal((c, c // groups, k, k)) / np.sqrt(k * k * c // groups)
    inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")]
    pads = [k // 2] * 4
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads, group=groups)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, rows, width])]
    if kind == "bn_relu":
        graph_models.append_batch_norm_relu(nodes, inits, rng, c, "c")
    elif kind == "residual":
        nodes += [helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, kind, inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, rows, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((1, c, rows, width)).astype(np.float32)}


def _compare(model, feeds):
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(**feeds), expected, rtol=1e-4, atol=1e-4)
    return compiled.ir("schedule")


@pytest.mark.parametrize("width", [1, 5, 7, 13, 33, 65, 97])
@pytest.mark.parametrize("kind", ["bn_relu", "residual", "depthwise", "pointwise"])
def test_odd_widths_match_onnxruntime(kind, width, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    _compare(*_conv_model(kind, width))


@pytest.mark.parametrize("width", [7, 13, 14, 25, 27, 28, 55, 56])
@pytest.mark.parametrize("kind", ["bn_relu", "pointwise"])
def test_one_vector_filters_on_odd_widths_match_onnxruntime(kind, width, monkeypatch):
    """80 filters (5 vectors of 16 on AVX-512: one-vector tiles of up to 16 pixels, peeled
    where they do not divide the row; 10 of 8 on AVX2), on the host, two rows."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    _compare(*_conv_model(kind, width, channels=80, rows=2))


# ---- the schedule's partial tiles on linalg (no frontend widening) -----------------------------
#
# These tests give the schedule linalg convolutions of the odd widths directly (no frontend in
# between), with each epilogue form the fusion groups carry.

def _conv_epilogue(width: int, kind: str, rows: int = 2, channels: int = 16, filters: int = 32) -> str:
    """NHWC ``@main(x, w, bias, scale[, residual])``: a 3x3 convolution (``conv``, ``residual``),
    a 1x1 one (``pointwise``) or a depthwise 3x3 one (``depthwise``, as many filters as
    channels), then ``y = max((acc + bias) * scale [+ residual], 0)``: bias, folded batch
    norm, residual add and ReLU in one elementwise op, the conv's fusion group."""
    k = 1 if kind == "pointwise" else 3
    depthwise = kind == "depthwise"
    f = channels if depthwise else filters
    x, out = (1, rows + k - 1, width + k - 1, channels), (1, rows, width, f)
    filt = (k, k, channels) if depthwise else (k, k, channels, f)
    op = "linalg.depthwise_conv_2d_nhwc_hwc" if depthwise else "linalg.conv_2d_nhwc_hwcf"
    residual = kind == "residual"
    vec = mt.tensor((f,))
    args = f"%x: {mt.tensor(x)}, %w: {mt.tensor(filt)}, %b: {vec}, %s: {vec}" + (
        f", %r: {mt.tensor(out)}" if residual else "")
    maps = ["affine_map<(n,i,j,c)->(n,i,j,c)>", "affine_map<(n,i,j,c)->(c)>", "affine_map<(n,i,j,c)->(c)>"]
    ins, types, block = "%y, %b, %s", f"{mt.tensor(out)}, {vec}, {vec}", "%a: f32, %bb: f32, %ss: f32"
    body = "    %t = arith.addf %a, %bb : f32\n    %u = arith.mulf %t, %ss : f32\n"
    if residual:
        maps.append(maps[0])
        ins, types, block = ins + ", %r", types + f", {mt.tensor(out)}", block + ", %rr: f32"
        body += "    %v = arith.addf %u, %rr : f32\n"
    else:
        body += "    %v = arith.addf %u, %zero : f32\n"
    maps.append(maps[0])
    return (
        f"func.func @main({args}) -> {mt.tensor(out)} {{\n"
        "  %zero = arith.constant 0.0 : f32\n"
        + mt.filled("acc", out, "0.0")
        + f"  %y = {op} {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}\n"
        f"      ins(%x, %w : {mt.tensor(x)}, {mt.tensor(filt)}) outs(%acc : {mt.tensor(out)}) -> {mt.tensor(out)}\n"
        f"  %e = tensor.empty() : {mt.tensor(out)}\n"
        f"  %o = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{mt.parallel(4)}]}}\n"
        f"      ins({ins} : {types}) outs(%e : {mt.tensor(out)}) {{\n"
        f"  ^bb0({block}, %out: f32):\n" + body
        + "    %m = arith.maximumf %v, %zero : f32\n    linalg.yield %m : f32\n"
        f"  }} -> {mt.tensor(out)}\n  return %o : {mt.tensor(out)}\n}}\n"
    )


def _run_epilogue(width: int, kind: str, rows: int = 2, target: str = "llvm") -> str:
    """Compile ``_conv_epilogue`` for ``target``, compare with numpy, return the scheduled IR."""
    rng = np.random.default_rng(width)
    text = _conv_epilogue(width, kind, rows)
    k = 1 if kind == "pointwise" else 3
    channels, f = 16, 16 if kind == "depthwise" else 32
    x = rng.standard_normal((1, rows + k - 1, width + k - 1, channels)).astype(np.float32)
    if kind == "depthwise":
        w = rng.standard_normal((k, k, channels)).astype(np.float32)
        acc = mt.ref_depthwise_nhwc(x, w)
    else:
        w = (rng.standard_normal((k, k, channels, f)) / np.sqrt(k * k * channels)).astype(np.float32)
        acc = mt.ref_conv_nhwc(x, w)
    b, s = rng.standard_normal(f).astype(np.float32), rng.uniform(0.5, 1.5, f).astype(np.float32)
    args = [x, w, b, s]
    expected = (acc + b) * s
    if kind == "residual":
        r = rng.standard_normal(expected.shape).astype(np.float32)
        args.append(r)
        expected = expected + r
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(text, cache=False, keep_ir=True, target=target)
    np.testing.assert_allclose(compiled(*args), np.maximum(expected, 0), rtol=1e-4, atol=1e-4)
    return compiled.ir("schedule")


@pytest.mark.parametrize("width", [1, 5, 7, 13, 33, 65, 97])
@pytest.mark.parametrize("kind", ["conv", "residual", "pointwise", "depthwise"])
def test_odd_widths_with_fused_epilogues_match_numpy(kind, width, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    _run_epilogue(width, kind)


@pytest.mark.parametrize("target, rows, tile, peeled", [
    (AVX2, 4, (6, 16), (3, 16)),
    (AVX2, 16, (6, 16), (3, 16)),
    # One 32-channel tile holds all the filters: at 4 rows there is no channel split and the
    # lone task's small output stays three loop nests (fill, conv, epilogue) by design.
    pytest.param(AVX512, 16, (7, 32), (5, 32), marks=needs_avx512_host),
])
@pytest.mark.parametrize("kind", ["conv", "residual"])
def test_peeled_remainder_keeps_its_epilogue_on_the_accumulators(kind, target, rows, tile, peeled, monkeypatch):
    """33 pixels, two threads (a group of one thread is one loop nest only where its output
    outgrows a quarter of L2): on AVX2 5 tiles of 6 pixels x 2 vectors and a peeled 3-pixel
    tile, on AVX-512 4 tiles of 7 pixels x 2 vectors and a peeled 5-pixel one; both are
    convolved, biased, scaled (and added to the residual) and rectified as vectors and stored
    once, and no op of the group is left as a linalg op (the group did not fall back to its
    ops' own loop nests). 4 rows: the filter outweighs the image, tasks split the channels
    and the channel loop is outermost; 16: rows."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    scheduled = _run_epilogue(33, kind, rows=rows, target=target)
    for pixels, channels in (tile, peeled):
        vector = f"vector<{pixels}x{channels}xf32>"
        assert f"into {vector}" in scheduled
        assert re.search(rf"arith.maximumf .*: {vector}", scheduled)
        assert f": {vector}, tensor<1x1x{pixels}x{channels}xf32>" in scheduled  # the one store
    assert "linalg.conv_2d" not in scheduled and "linalg.generic" not in scheduled


@pytest.mark.parametrize("source", [mt.conv_nhwc(1, 4, 35, 16, 3, 3, 32), mt.depthwise_nhwc(1, 4, 67, 16, 3, 3)])
def test_the_tuning_space_holds_the_peeled_default(source):
    """The tuner's convolution space (schedule/space.py) plans the default point as the
    default schedule does, its peeled pixel loop included (33 and 65 pixels on AVX2)."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    target = Target.parse("llvm -mcpu=haswell")
    target = Target(mcpu=target.mcpu, num_threads=1)
    (task,) = [t for t in extract_tasks(source, target) if t.kind.startswith("conv") or "depthwise" in t.kind]
    space = space_for(task, target)
    default = space.default()
    assert space.is_valid(default)
    expected = plan_default_schedule(task_nest(task), 3, vector_bits=256, num_threads=1, caches=target.caches)
    assert expected.peeled_loops
    assert space.plan(space.validate(default), 3) == expected


@pytest.mark.parametrize("target, source, reg_ow, peeled", [
    (AVX512, mt.conv_nhwc(1, 27, 27, 37, 3, 3, 80), 16, True),   # 16 + 9: the one-vector tile, peeled
    (AVX512, mt.conv_nhwc(1, 15, 15, 64, 3, 3, 144), 13, False),  # the whole 13-pixel row
    (AVX2, mt.conv_nhwc(1, 27, 27, 37, 3, 3, 80), 5, False),      # 10 vectors of 8: 5 x 2, as before
])
def test_the_tuning_space_holds_the_one_vector_default(target, source, reg_ow, peeled):
    """The tuner's convolution space plans the default point as the default schedule does
    where the filters allow one vector only (80 = 5 x 16, 144 = 9 x 16 on AVX-512), its
    wider pixel tile and peeled remainder included, so tuning starts from the default."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    pinned = Target.parse(target)
    pinned = Target(mcpu=pinned.mcpu, num_threads=1)
    (task,) = [t for t in extract_tasks(source, pinned) if t.kind.startswith("conv")]
    space = space_for(task, pinned)
    default = space.default()
    assert default["reg_ow"] == reg_ow and space.is_valid(default)
    expected = plan_default_schedule(task_nest(task), 3, vector_bits=pinned.vector_bits, num_threads=1,
                                     caches=pinned.caches)
    assert bool(expected.peeled_loops) == peeled
    assert space.plan(space.validate(default), 3) == expected
