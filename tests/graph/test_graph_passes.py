"""End-to-end checks of the graph passes: every model compiled with and without them gives
the same outputs (and matches onnxruntime), and the passes do what they claim (BN folded,
Q/K/V combined, softmax and layer norm one group each). The outlined ``graph.fusion_group``
form (signatures, the dialect API) is tested in tests/lit/graph, one process per file."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir

import graph_models
import tilecraft
from tilecraft.dialects import graph
from tilecraft.errors import GraphError
from tilecraft.frontend.loader import load_module
from tilecraft.pipelines.graph import graph_pass_elements
from tilecraft.pipelines.graph.weight_panels import PANEL_COLUMNS
from tilecraft.pipelines.graph.fusion import ANCHOR_ATTR, GROUP_ATTR, count_groups
from tilecraft.pipelines.pipeline import run_pass_elements


def _reference(model, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _graph_ir(model, elements: list[str]) -> ir.Module:
    context = ir.Context()
    graph.load(context)
    module = load_module(model, context)
    with context:
        run_pass_elements(module, elements)
    return module


@pytest.fixture(scope="module")
def block():
    model = graph_models.conv_bn_block()
    x = np.random.default_rng(1).standard_normal((1, 8, 10, 10)).astype(np.float32)
    return model, x


@pytest.fixture(scope="module")
def bert():
    model = graph_models.bert_layer()
    x = np.random.default_rng(2).standard_normal((16, 32)).astype(np.float32)
    return model, x


@pytest.mark.parametrize("name", ["block", "bert"])
def test_outputs_equal_with_and_without_graph_passes(name, request):
    model, x = request.getfixturevalue(name)
    reference = _reference(model, x)
    results = {level: tilecraft.compile(model, opt_level=level)(x) for level in (0, 2, 3)}
    for level, y in results.items():
        np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-4, err_msg=f"opt_level={level}")
    np.testing.assert_allclose(results[3], results[0], rtol=1e-4, atol=1e-4)


def test_group_count_reported(block, bert):
    # 2 conv kernels + the NCHW <-> NHWC transposes at the input and output (layout.py).
    assert tilecraft.compile(block[0], opt_level=3).group_count == 4
    assert tilecraft.compile(bert[0], opt_level=3).group_count == 9
    assert tilecraft.compile(block[0], opt_level=2).group_count is None


def test_each_fusion_group_is_one_loop_nest(monkeypatch):
    """A BERT layer big enough for a thread level: 9 groups, one loop nest for each that
    computes (each layer norm included), against 26 with one loop nest per op. The attention
    (matmuls and softmax) is a kernel of its own (pipelines/tensor/fused_attention.py) that reads Q
    and V in place from the projection's result: their groups are slices of it, views with
    no loop nest. 7 loop nests and the attention kernel."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = graph_models.bert_layer(seq=128, hidden=256, heads=4, ffn=1024)
    x = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)
    fused = tilecraft.compile(model, opt_level=3)
    assert fused.group_count == 9 and fused.kernel_count == 7 + 1
    pipeline = tilecraft.cpu_pipeline("llvm", opt_level=3)
    per_op = pipeline.replace("schedule", [p.replace(" fuse-groups=1", "")
                                           for p in pipeline.stage("schedule").passes])
    unfused = tilecraft.compile(model, pipeline=per_op)
    assert unfused.kernel_count > 2 * fused.kernel_count
    reference = _reference(model, x)
    np.testing.assert_allclose(fused(x), reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(unfused(x), reference, rtol=1e-4, atol=1e-4)


def test_opt_level_selects_passes():
    assert graph_pass_elements(0) == []
    assert "tilecraft-fold-constants" not in graph_pass_elements(1)
    assert "tilecraft-fuse-ops" not in graph_pass_elements(2)
    assert "tilecraft-mark-groups" not in graph_pass_elements(3)
    # Partitioned once, after elementwise fusion: the schedule reads these tags.
    assert tilecraft.cpu_pipeline("llvm", opt_level=3).stage("simplify").passes[-1] == "tilecraft-mark-groups"
    assert "tilecraft-mark-groups" not in tilecraft.cpu_pipeline("llvm", opt_level=2).pass_elements()
    with pytest.raises(ValueError):
        graph_pass_elements(4)
    stages = tilecraft.cpu_pipeline("llvm", opt_level=3).stage_names
    assert stages.index("graph") < stages.index("simplify") < stages.index("schedule")
    assert "graph" not in tilecraft.cpu_pipeline("llvm").stage_names


def test_batch_norm_folded_into_conv(block):
    model, _ = block
    before = str(_graph_ir(model, ["canonicalize", "cse"]))
    after = str(_graph_ir(model, graph_pass_elements(2)))
    # BatchNormalization was a per-channel x * a + b pass; folded, only the bias add remains.
    assert before.count("arith.mulf") > after.count("arith.mulf")
    assert "math.sqrt" in before and "math.sqrt" not in after
    assert after.count("linalg.conv_2d_nchw_fchw") == 2


def _tagged_groups(module: ir.Module) -> list[list[ir.Operation]]:
    """The ops of each group ``tilecraft-mark-groups`` tagged, by group number.

    The default pipeline tags groups (``tilecraft-mark-groups``); the outlined form is
    covered by tests/lit/graph."""
    groups: dict[int, list[ir.Operation]] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if GROUP_ATTR in op.attributes:
            groups.setdefault(ir.IntegerAttr(op.attributes[GROUP_ATTR]).value, []).append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return [groups[k] for k in sorted(groups)]


def _anchor(ops: list[ir.Operation]) -> ir.Operation | None:
    return next((op for op in ops if ANCHOR_ATTR in op.attributes), None)


def test_conv_block_groups(block):
    module = _graph_ir(block[0], [*graph_pass_elements(3), "tilecraft-mark-groups"])  # keeps the ops alive
    groups = _tagged_groups(module)
    anchored = [g for g in groups if _anchor(g) is not None]
    # The other two: the input and output layout transposes (tilecraft-convert-layout).
    assert [[op.name for op in g] for g in groups if _anchor(g) is None] == [
        ["tensor.empty", "linalg.transpose"]] * 2
    assert [_anchor(g).name for g in anchored] == ["linalg.conv_2d_nhwc_hwcf"] * 2
    for group in anchored:
        names = [op.name for op in group]
        assert "tensor.pad" in names and "linalg.fill" in names  # pad and init fused in
        assert "linalg.generic" in names  # the bias add (folded BN) and ReLU / residual


def test_bert_qkv_combined_softmax_layernorm_one_group(bert):
    module = _graph_ir(bert[0], [*graph_pass_elements(3), "tilecraft-mark-groups"])
    groups = _tagged_groups(module)
    anchors = [_anchor(g) for g in groups]
    # Matmuls with constant weights read them as column panels (weight_panels.py): a
    # 3-D generic marked tilecraft.weight_panels, its result (m, n / P, P).
    panels = [a is not None and "tilecraft.weight_panels" in a.attributes for a in anchors]
    matmuls = [a for a, p in zip(anchors, panels) if a is not None and (p or a.name == "linalg.matmul")]
    # Q, K, V in one matmul of width 3 * hidden, then out projection, FFN1, FFN2.
    assert len(matmuls) == 4
    assert str(matmuls[0].results[0].type) in (
        "tensor<16x96xf32>", f"tensor<16x{96 // PANEL_COLUMNS}x{PANEL_COLUMNS}xf32>")
    reductions = [g for g, a, p in zip(groups, anchors, panels)
                  if a is not None and a.name == "linalg.generic" and not p]
    assert len(reductions) == 3  # softmax, layer norm 1, layer norm 2
    for group in reductions:
        assert sum(1 for op in group if op.name == "linalg.generic"
                   and "reduction" in str(op.attributes["iterator_types"])) == 2
    assert len(groups) == 9
    assert count_groups(module.operation) == 9


def test_outline_rejects_bad_input():
    with pytest.raises(GraphError, match="at least one op"):
        graph.outline_group([], kind="matmul")
    context = ir.Context()
    graph.load(context)
    with context, ir.Location.unknown():
        module = ir.Module.parse("func.func @f() { return }")
        op = module.body.operations[0].operation
        with pytest.raises(GraphError, match="kind 'fused'"):
            graph.outline_group([op], kind="fused")
        with pytest.raises(GraphError, match="expected graph.fusion_group"):
            graph.FusionGroup(op)
