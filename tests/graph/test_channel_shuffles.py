"""Channel shuffles read only by channel splits (pipelines/graph/channel_shuffles.py,
``tilecraft-slice-channel-shuffles``): numerics against onnxruntime for ShuffleNet-style units
chained so that one unit's shuffle is split by the next, with odd group and channel counts
and uneven splits, at one and two threads; and the IR fact, that no transpose of the whole
shuffled tensor is left where only splits read it."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402

SIZE = 6


def _unit(prefix: str, source: str, split: tuple[int, int], groups: int, rng, initializers: dict) -> tuple[list, str]:
    """One unit on ``source``: split into ``split`` channels, the second part through 1x1 conv
    + ReLU, 3x3 depthwise, 1x1 conv + ReLU, concatenated with the first and shuffled in
    ``groups`` groups; returns its nodes and its output's name."""
    keep, branch = split
    total = keep + branch
    p = prefix
    initializers.update({
        f"{p}split": np.array(split, np.int64),
        f"{p}w1": (rng.standard_normal((branch, branch, 1, 1)) / np.sqrt(branch)).astype(np.float32),
        f"{p}wd": (rng.standard_normal((branch, 1, 3, 3)) / 3).astype(np.float32),
        f"{p}w2": (rng.standard_normal((branch, branch, 1, 1)) / np.sqrt(branch)).astype(np.float32),
        f"{p}b2": rng.standard_normal(branch).astype(np.float32),
        f"{p}grouped": np.array([1, groups, total // groups, SIZE, SIZE], np.int64),
        f"{p}flat": np.array([1, total, SIZE, SIZE], np.int64)})
    nodes = [helper.make_node("Split", [source, f"{p}split"], [f"{p}x1", f"{p}x2"], axis=1),
             helper.make_node("Conv", [f"{p}x2", f"{p}w1"], [f"{p}c1"]),
             helper.make_node("Relu", [f"{p}c1"], [f"{p}r1"]),
             helper.make_node("Conv", [f"{p}r1", f"{p}wd"], [f"{p}d"], pads=[1, 1, 1, 1], group=branch),
             helper.make_node("Conv", [f"{p}d", f"{p}w2", f"{p}b2"], [f"{p}c2"]),
             helper.make_node("Relu", [f"{p}c2"], [f"{p}r2"]),
             helper.make_node("Concat", [f"{p}x1", f"{p}r2"], [f"{p}cat"], axis=1),
             helper.make_node("Reshape", [f"{p}cat", f"{p}grouped"], [f"{p}g"]),
             helper.make_node("Transpose", [f"{p}g"], [f"{p}t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", [f"{p}t", f"{p}flat"], [f"{p}y"])]
    return nodes, f"{p}y"


# Output channels of the final 1x1 convolution (``head="conv"``), odd on purpose.
HEAD_FILTERS = 7


def _units(splits: list[tuple[int, int]], groups: list[int], head: str, seed: int = 3):
    """Units chained, then a ReLU (``head="relu"``: the last shuffle read whole, transposed)
    or a 1x1 convolution (``"conv"``: ShuffleNet's final one, which reads the last shuffle's
    source on a permuted filter)."""
    rng = np.random.default_rng(seed)
    initializers: dict = {}
    nodes, source = [], "x"
    for index, (split, g) in enumerate(zip(splits, groups)):
        unit_nodes, source = _unit(f"u{index}_", source, split, g, rng, initializers)
        nodes += unit_nodes
    total = sum(splits[0])
    outputs = total
    if head == "conv":
        initializers["head_w"] = (rng.standard_normal((HEAD_FILTERS, total, 1, 1)) / np.sqrt(total)).astype(np.float32)
        nodes.append(helper.make_node("Conv", [source, "head_w"], ["y"]))
        outputs = HEAD_FILTERS
    else:
        nodes.append(helper.make_node("Relu", [source], ["y"]))
    graph = helper.make_graph(
        nodes, "shuffles",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, total, SIZE, SIZE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, outputs, SIZE, SIZE])],
        [numpy_helper.from_array(array, name) for name, array in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, rng.standard_normal((1, total, SIZE, SIZE)).astype(np.float32)


def _whole_shuffle_transposes(graph_ir: str, total: int) -> int:
    """Transposes whose result is a whole shuffled tensor: (g, total / g) -> (total / g, g)."""
    count = 0
    for match in re.finditer(r"linalg\.transpose ins\(%\S+ : tensor<1x\d+x\d+x(\d+)x(\d+)xf32>\)", graph_ir):
        if int(match.group(1)) * int(match.group(2)) == total:
            count += 1
    return count


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("head", ["relu", "conv"])
@pytest.mark.parametrize("splits,groups", [
    ([(58, 58), (58, 58), (58, 58)], [2, 2, 2]),      # ShuffleNet's halves (116 channels)
    ([(29, 29), (29, 29), (29, 29)], [2, 2, 2]),      # odd halves: across the groups, left alone
    ([(18, 27), (27, 18), (18, 27)], [3, 9, 5]),      # uneven splits, odd group counts
    ([(24, 40), (32, 32), (16, 48)], [4, 8, 16]),     # even ones, several group counts
])
def test_chained_units_match_onnxruntime(monkeypatch, threads, head, splits, groups):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model, x = _units(splits, groups, head)
    compiled = tilecraft.compile(model, keep_ir=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(compiled(x), expected, rtol=2e-4, atol=2e-4)
    total = sum(splits[0])
    # Each unit's split aligned to its input shuffle's groups reads a shuffle of its channels;
    # the last shuffle is transposed whole for the ReLU, and not at all for the convolution.
    aligned = all(keep % g == 0 for (keep, _), g in zip(splits[1:], groups))
    last = 1 if head == "relu" else 0
    assert _whole_shuffle_transposes(compiled.ir("graph"), total) == (last if aligned else len(groups) - 1 + last)


def test_shufflenet_units_on_avx2_and_avx512_targets(monkeypatch):
    """The same IR facts and numerics whatever the host: ShuffleNet's halves with its final
    1x1 convolution, compiled for the pinned AVX2 target (8 lanes: 232 filters stay 232) and,
    where the host runs it, the AVX-512 one (16 lanes: 240, copied into the concat)."""
    from pinned_targets import AVX2, AVX512, HOST_HAS_AVX512

    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    model, x = _units([(232, 232), (232, 232)], [2, 2], "conv")
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for target, filters in ((AVX2, 232), *(((AVX512, 240),) if HOST_HAS_AVX512 else ())):
        compiled = tilecraft.compile(model, cache=False, keep_ir=True, target=target)
        np.testing.assert_allclose(compiled(x), expected, rtol=2e-4, atol=2e-4)
        graph_ir = compiled.ir("graph")
        assert _whole_shuffle_transposes(graph_ir, 464) == 0
        assert f"tensor<1x1x232x{filters}xf32>" in graph_ir
