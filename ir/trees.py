"""Tree ensembles (ONNX ai.onnx.ml TreeEnsemble, what scikit-learn, XGBoost and LightGBM
converters write): each sample walks each tree from its root to a leaf, and the leaves'
weights are aggregated per target.

The trees are known when the model is imported, so they become constant tables (per node:
feature, split, comparison, true/false successors and whether those are leaves; per tree:
root and the longest path) checked with numpy first: a successor out of range or a cycle
is an import error. Two ops then run them:

* a ``linalg.generic`` over (sample, tree) whose body walks the tree in an ``scf.for`` of
  at most the tree's longest path (bounded work whatever the input; NaN features follow
  ``nodes_missing_value_tracks_true``), giving the leaf reached;
* a reduction over the trees per (sample, target): sum, average, min or max of the
  weights of the leaves that belong to the target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from . import core
from .checks import check_extent
from .contraction import generic_op
from .movement import indexed_generic
from ..errors import OperandError

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
_MEMBER = 6


@dataclass(frozen=True)
class TreeEnsemble:
    """ONNX TreeEnsemble's attributes as arrays (node i, leaf j, tree t)."""

    features: np.ndarray        # [nodes] int64
    splits: np.ndarray          # [nodes] float
    modes: np.ndarray           # [nodes] uint8, index into MODES
    true_ids: np.ndarray        # [nodes] int64: a node, or a leaf where true_leafs
    false_ids: np.ndarray
    true_leafs: np.ndarray      # [nodes] bool
    false_leafs: np.ndarray
    missing_true: np.ndarray    # [nodes] bool
    leaf_targets: np.ndarray    # [leaves] int64
    leaf_weights: np.ndarray    # [leaves] float
    roots: np.ndarray           # [trees] int64
    targets: int
    aggregate: int              # index into AGGREGATES
    members: list[np.ndarray]   # per BRANCH_MEMBER node, in node order: its set

    def validate(self) -> np.ndarray:
        """The longest path (nodes visited) of each tree; ``ValueError`` for inconsistent
        tables, successors out of range, leaves of unknown targets, or cycles."""
        nodes, leaves = len(self.features), len(self.leaf_targets)
        per_node = [self.splits, self.modes, self.true_ids, self.false_ids, self.true_leafs, self.false_leafs,
                    self.missing_true]
        if any(len(a) != nodes for a in per_node) or len(self.leaf_weights) != leaves or nodes == 0:
            raise OperandError("TreeEnsemble: the node (and leaf) attributes must all have one entry per node (leaf)")
        if np.any(self.modes > _MEMBER) or np.any(self.features < 0):
            raise OperandError("TreeEnsemble: unknown node mode or negative feature id")
        if np.any((self.leaf_targets < 0) | (self.leaf_targets >= self.targets)):
            raise OperandError(f"TreeEnsemble: a leaf's target id is outside [0, {self.targets})")
        if len(self.members) != int(np.sum(self.modes == _MEMBER)):
            raise OperandError("TreeEnsemble: membership_values must hold one NaN-terminated set per BRANCH_MEMBER node")
        for ids, is_leaf in ((self.true_ids, self.true_leafs), (self.false_ids, self.false_leafs)):
            bound = np.where(is_leaf, leaves, nodes)
            if np.any((ids < 0) | (ids >= bound)):
                raise OperandError("TreeEnsemble: a successor id is outside the node or leaf tables")
        if len(self.roots) == 0 or np.any((self.roots < 0) | (self.roots >= nodes)):
            raise OperandError("TreeEnsemble: tree_roots must name nodes")
        depth = np.zeros(len(self.roots), np.int64)
        for t, root in enumerate(self.roots):
            pending, seen = [(int(root), 1)], set()
            while pending:
                node, level = pending.pop()
                if node in seen:
                    raise OperandError(f"TreeEnsemble: tree {t} reaches node {node} twice (a cycle or a shared subtree)")
                seen.add(node)
                depth[t] = max(depth[t], level)
                for ids, is_leaf in ((self.true_ids, self.true_leafs), (self.false_ids, self.false_leafs)):
                    if not is_leaf[node]:
                        pending.append((int(ids[node]), level + 1))
        return depth


def _root_is_leaf(model: TreeEnsemble) -> np.ndarray:
    """Per tree: its root is a leaf (both branches the same leaf), as ONNX's reference reads
    a one-leaf tree; the leaf is then the root's own index."""
    r = model.roots
    return model.true_leafs[r] & model.false_leafs[r] & (model.true_ids[r] == model.false_ids[r])


def tree_ensemble(x: ir.Value, model: TreeEnsemble) -> ir.Value:
    """``[N, F]`` samples to ``[N, targets]`` aggregated leaf weights, in ``x``'s type."""
    depth = model.validate()
    samples, features = core.sizes(x)
    element = core.tensor_type(x).element_type
    if not core.is_float(element):
        raise OperandError(f"TreeEnsemble takes float features; got {element}")
    if isinstance(features, int) and int(model.features.max()) >= features:
        raise OperandError(f"TreeEnsemble: a node tests feature {int(model.features.max())} of {features}")
    check_extent(int(model.features.max()) + 1, features, "TreeEnsemble: the nodes test {value} features, the "
                 "input has {bound}", at_most=True)
    dtype = {32: np.float32, 64: np.float64, 16: np.float16}[element.width]
    i64 = ir.IntegerType.get_signless(64)
    member_starts = np.zeros(len(model.features), np.int64)
    member_counts = np.zeros(len(model.features), np.int64)
    offset = 0
    for node, values in zip(np.flatnonzero(model.modes == _MEMBER), model.members):
        member_starts[node], member_counts[node] = offset, len(values)
        offset += len(values)
    flat_members = np.concatenate([*model.members, np.zeros(1)]).astype(dtype)

    def table(array: np.ndarray, kind: type, name: str) -> ir.Value:
        return core.constant(np.ascontiguousarray(array.astype(kind)), name=name)

    tables = {
        "feature": table(model.features, np.int64, "tree_features"),
        "split": table(model.splits, dtype, "tree_splits"),
        "mode": table(model.modes, np.int64, "tree_modes"),
        "true": table(model.true_ids, np.int64, "tree_true"),
        "false": table(model.false_ids, np.int64, "tree_false"),
        "true_leaf": table(model.true_leafs, np.int64, "tree_true_leafs"),
        "false_leaf": table(model.false_leafs, np.int64, "tree_false_leafs"),
        "missing": table(model.missing_true, np.int64, "tree_missing_true"),
        "member_start": table(member_starts, np.int64, "tree_member_starts"),
        "member_count": table(member_counts, np.int64, "tree_member_counts"),
    }
    members = table(flat_members, dtype, "tree_members")
    roots = table(model.roots, np.int64, "tree_roots")
    depths = table(depth, np.int64, "tree_depths")
    root_leaf = table(_root_is_leaf(model), np.int64, "tree_root_is_leaf")
    as_index = lambda v: arith.index_cast(ir.IndexType.get(), v)  # noqa: E731
    c64 = lambda v: core.scalar_constant(v, i64)  # noqa: E731

    def goes_true(node: ir.Value, value: ir.Value) -> ir.Value:
        at = [as_index(node)]
        split = tensor.extract(tables["split"], at)
        mode = tensor.extract(tables["mode"], at)
        predicates = [arith.CmpFPredicate.OLE, arith.CmpFPredicate.OLT, arith.CmpFPredicate.OGE,
                      arith.CmpFPredicate.OGT, arith.CmpFPredicate.OEQ, arith.CmpFPredicate.UNE]
        result = arith.constant(ir.IntegerType.get_signless(1), 0)
        for index, predicate in enumerate(predicates):
            chosen = arith.cmpi(arith.CmpIPredicate.eq, mode, c64(index))
            result = arith.select(chosen, arith.cmpf(predicate, value, split), result)
        if model.members:  # the set's scan, in the walk only when some node tests membership
            start = as_index(tensor.extract(tables["member_start"], at))
            count = as_index(tensor.extract(tables["member_count"], at))
            scan = scf.ForOp(start, arith.addi(start, count), core.index(1),
                             [arith.constant(ir.IntegerType.get_signless(1), 0)])
            with ir.InsertionPoint(scan.body):
                hit = arith.cmpf(arith.CmpFPredicate.OEQ, value, tensor.extract(members, [scan.induction_variable]))
                scf.YieldOp([arith.ori(scan.inner_iter_args[0], hit)])
            is_member = arith.cmpi(arith.CmpIPredicate.eq, mode, c64(_MEMBER))
            result = arith.select(is_member, scan.results[0], result)
        missing = arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, value, value),
                             arith.cmpi(arith.CmpIPredicate.ne, tensor.extract(tables["missing"], at), c64(0)))
        return arith.ori(result, missing)

    def walk(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        sample, tree = positions
        root = tensor.extract(roots, [tree])
        start = [root, c64(0), c64(-1)]  # node, done, leaf
        loop = scf.ForOp(core.index(0), as_index(tensor.extract(depths, [tree])), core.index(1), start)
        with ir.InsertionPoint(loop.body):
            node, done, leaf = loop.inner_iter_args
            step = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ne, done, c64(0)), [i64, i64, i64], has_else=True)
            with ir.InsertionPoint(step.then_block):
                scf.YieldOp([node, done, leaf])
            with ir.InsertionPoint(step.else_block):
                feature = as_index(tensor.extract(tables["feature"], [as_index(node)]))
                value = tensor.extract(x, [sample, feature])
                branch = goes_true(node, value)
                at = [as_index(node)]
                target = arith.select(branch, tensor.extract(tables["true"], at), tensor.extract(tables["false"], at))
                is_leaf = arith.select(branch, tensor.extract(tables["true_leaf"], at),
                                       tensor.extract(tables["false_leaf"], at))
                scf.YieldOp([target, is_leaf, arith.select(arith.cmpi(arith.CmpIPredicate.ne, is_leaf, c64(0)),
                                                           target, leaf)])
            scf.YieldOp(list(step.results))
        reached = loop.results[2]
        one_leaf = arith.cmpi(arith.CmpIPredicate.ne, tensor.extract(root_leaf, [tree]), c64(0))
        return arith.select(one_leaf, root, reached)

    trees = len(model.roots)
    leaves = indexed_generic([samples, trees], i64, walk)
    targets_table = table(model.leaf_targets, np.int64, "tree_leaf_targets")
    weights_table = table(model.leaf_weights, dtype, "tree_leaf_weights")
    kind = AGGREGATES[model.aggregate]
    info = np.finfo(dtype)
    start = {"AVERAGE": 0.0, "SUM": 0.0, "MIN": float(info.max), "MAX": float(info.min)}[kind]
    init = core.filled([samples, model.targets], start, element)
    d = [ir.AffineDimExpr.get(i) for i in range(3)]  # sample, target, tree

    def combine(leaf: ir.Value, accumulated: ir.Value) -> ir.Value:
        target = linalg.IndexOp(1).result
        leaf_at = [as_index(arith.maxsi(leaf, c64(0)))]  # a walk that found no leaf reads leaf 0, unused
        mine = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, leaf, c64(0)),
                          arith.cmpi(arith.CmpIPredicate.eq, tensor.extract(targets_table, leaf_at),
                                     arith.index_cast(i64, target)))
        weight = tensor.extract(weights_table, leaf_at)
        if kind == "AVERAGE":
            weight = arith.divf(weight, core.scalar_constant(float(trees), element))
        updated = {"AVERAGE": arith.addf, "SUM": arith.addf, "MIN": arith.minimumf,
                   "MAX": arith.maximumf}[kind](accumulated, weight)
        return arith.select(mine, updated, accumulated)

    return generic_op([leaves], init, [ir.AffineMap.get(3, 0, [d[0], d[2]]), ir.AffineMap.get(3, 0, [d[0], d[1]])],
                      2, 1, combine)
