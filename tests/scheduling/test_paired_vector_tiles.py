"""Two-vector convolution register tiles over an odd number of filter vectors, the last
channel tile peeled (schedule/conv_plan.py ``paired_vector_tile``): the planner's choices on
the pinned register files, its thread split (rows, never channels, for such layers), the
tuner's space holding the default, and compiled convolutions (fused epilogues, an
Inception-style concat of branches) against onnxruntime on one and two threads."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512
from tilecraft.pipelines.target import Target
from tilecraft.schedule.conv_plan import paired_vector_tile, tile_row_cycles


@pytest.mark.parametrize("width, filters, expected", [
    (14, 208, 7),     # 13 vectors: 6 x (7 x 2) + 7 x 1 per 7 pixels, not 13 x (7 x 1)
    (14, 112, 7),     # 7 vectors (Inception's 512 -> 112 1x1)
    (28, 208, 7),
    (56, 48, 8),      # 3 vectors
    (14, 256, None),  # an even count: two-vector tiles divide it already
    (14, 16, None),   # one vector
    (14, 24, None),   # no whole vector of 16: 8-lane tiles (conv_register_tile)
    (13, 144, None),  # 13 pixels: no two-vector pixel tile divides the row (a group peels one loop)
    (25, 80, None),   # the model ranks the 16 + 9 one-vector tiles faster (odd_extents)
])
def test_avx512_pairs_odd_vector_counts(width, filters, expected):
    """AVX-512: 32 registers of 16 lanes."""
    pixels = paired_vector_tile(width, filters, 16, 32)
    assert pixels == expected
    if pixels is not None:
        assert width % pixels == 0 and pixels * 2 + 2 + 1 <= 32


@pytest.mark.parametrize("reduction, expected", [(24, None), (40, None), (127, None), (128, 7), (864, 7)])
def test_short_reductions_keep_one_vector_tiles(reduction, expected):
    """A 1x1 expansion over few input channels (24 -> 144, 40 -> 240: batch norm and SiLU on
    the accumulators) ran slower on paired tiles in the model: its epilogue outweighs its
    reduction."""
    assert paired_vector_tile(14, 208, 16, 32, reduction) == expected


@pytest.mark.parametrize("width, filters, expected", [
    (24, 24, 6),      # 3 vectors of 8: 6 x 2 + a peeled 6 x 1 per tile row
    (28, 24, None),   # 6-pixel tiles do not divide 28
    (14, 208, None),  # 26 vectors of 8: even
])
def test_avx2_pairs_where_its_tiles_divide_the_row(width, filters, expected):
    """AVX2: 16 registers of 8 lanes; its two-vector tiles take at most 6 pixels."""
    assert paired_vector_tile(width, filters, 8, 16) == expected


def test_the_pairs_are_what_the_model_ranks_faster():
    """Per reduction step, 13 vectors on a 14-pixel row: paired tiles 94 cycles, one-vector
    ones 130 (``tile_row_cycles``)."""
    paired = 12 * tile_row_cycles(14, 7, 2) + tile_row_cycles(14, 7, 1)
    assert paired < 13 * tile_row_cycles(14, 7, 1)


def _plan(source: str, target: str, threads: int):
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks

    pinned = Target.parse(target)
    pinned = Target(mcpu=pinned.mcpu, num_threads=threads)
    (task,) = [t for t in extract_tasks(source, pinned) if t.kind.startswith("conv")]
    nest = task_nest(task)
    return nest, plan_default_schedule(nest, 3, vector_bits=pinned.vector_bits, num_threads=threads,
                                       caches=pinned.caches), task, pinned


@pytest.mark.parametrize("threads", [1, 2])
def test_paired_plan_peels_the_channels_and_splits_rows(threads):
    """96 -> 208 3x3 over 14 x 14 (Inception's 4b): the filter outweighs the image, which
    split the channels (13 one-vector tasks); a 32-channel tile does not divide 208, so the
    tasks split rows instead and the channel loop is the one peeled."""
    nest, plan, _task, _target = _plan(mt.conv_nhwc(1, 16, 16, 96, 3, 3, 208), AVX512, threads)
    oc, ow, oh = 3, 2, 1  # (n, oh, ow, oc, kh, kw, ic)
    assert plan.register_tiles[oc] == 32 and plan.register_tiles[ow] == 7
    assert plan.peeled_loops == (oc,)
    if threads == 2:
        assert plan.thread_tiles[oc] == 0 and 14 % plan.thread_tiles[oh] == 0


def test_rows_that_do_not_split_keep_one_vector_tiles():
    """7 rows on two threads split into no equal bands: the channels split, in whole
    one-vector tiles, as before."""
    _nest, plan, _task, _target = _plan(mt.conv_nhwc(1, 7, 7, 832, 1, 1, 48), AVX512, 2)
    assert plan.register_tiles[3] == 16 and not plan.peeled_loops


def test_the_tuning_space_holds_the_paired_default():
    """The tuner's convolution space plans the default point as the default schedule does,
    its peeled channel tile included, so tuning starts from the default."""
    from tilecraft.tuning import space_for

    _nest, expected, task, pinned = _plan(mt.conv_nhwc(1, 16, 16, 96, 3, 3, 208), AVX512, 1)
    space = space_for(task, pinned)
    default = space.default()
    assert default["reg_oc"] == 32 and space.is_valid(default)
    assert space.plan(space.validate(default), 3) == expected


# ---- compiled against onnxruntime ----------------------------------------------------------

def _branches_model(size: int, cin: int, branches: list[tuple[int, int]], concat: bool):
    """NCHW Conv + bias + Relu branches (filters, kernel) over one input, concatenated along
    the channels (Inception) or, with one branch, alone."""
    rng = np.random.default_rng(size + cin)
    nodes, inits, outs = [], [], []
    for i, (filters, k) in enumerate(branches):
        w = rng.standard_normal((filters, cin, k, k)) / np.sqrt(k * k * cin)
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(filters).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        outs.append(f"r{i}")
    total = sum(f for f, _ in branches)
    if concat:
        nodes.append(helper.make_node("Concat", outs, ["y"], axis=1))
    else:
        nodes.append(helper.make_node("Identity", outs[:1], ["y"]))
    graph = helper.make_graph(nodes, "branches",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, total, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}


def _compare(model, feeds, target="llvm"):
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True, target=target)
    np.testing.assert_allclose(compiled(**feeds), expected, rtol=1e-4, atol=1e-4)
    return compiled.ir("schedule")


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("size, cin, branches, concat", [
    (14, 96, [(208, 3)], False),                     # filter-heavy 3x3, 13 vectors
    (14, 256, [(112, 1)], False),                    # 1x1, 7 vectors
    (28, 32, [(48, 3)], False),                      # 3 vectors
    (14, 48, [(112, 1), (208, 3), (48, 3)], True),   # branches written into their concat
])
def test_paired_tiles_match_onnxruntime(size, cin, branches, concat, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    scheduled = _compare(*_branches_model(size, cin, branches, concat))
    if any((f // 16) % 2 and f // 16 >= 3 for f, _ in branches) and Target.parse("llvm").vector_bits >= 512:
        assert "vector<7x32xf32>" in scheduled or "vector<8x32xf32>" in scheduled


def test_avx2_paired_tiles_match_onnxruntime(monkeypatch):
    """AVX2 code (runs on any x86-64 host): 24 filters, 3 vectors of 8, on a 24-pixel row."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    scheduled = _compare(*_branches_model(24, 16, [(24, 3)], False), target=AVX2)
    assert "into vector<6x16xf32>" in scheduled and "into vector<6x8xf32>" in scheduled
