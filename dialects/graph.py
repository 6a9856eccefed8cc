"""The ``graph`` dialect: fusion groups and data layouts, defined in IRDL, loaded at run time.

The dialect lives in ``graph.irdl.mlir`` beside this file and is loaded into a context with
:func:`load` (``mlir.dialects.irdl.load_dialects``): no C++ build. IRDL checks result and
attribute *kinds*; what it cannot express (no traits in IRDL: the terminator, the anchor
being in the body, the signature matching the body) is checked by :func:`verify_group`.
Ops print in generic form only (IRDL has no custom assembly).

Ops and attributes (``docs/graph-dialect.md`` has an example of each):

- ``graph.fusion_group``: the linalg/tensor ops that become one kernel, in a one-block
  region that reads the values it needs from the enclosing block (no operands: IRDL cannot
  type a variadic list of different types, see ``graph.irdl.mlir``), ending in
  ``tosa.yield`` (IRDL cannot declare a terminator). Attributes ``kind`` (the fusion
  pattern, :data:`KINDS`), ``anchor`` (the anchor op's name or ``""``) and ``signature`` (a
  stable key for the computation, equal for equal groups: the tuning-task key).
- ``graph.layout_convert``: an explicit change of data layout (``src_layout`` ->
  ``dst_layout``, both ``#graph.layout<"...">``).
- ``#graph.layout<"NCHW8c">``: a TVM-style layout string.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from mlir import ir
from mlir._mlir_libs import _mlir
from mlir.dialects import irdl

from ..errors import GraphError

DIALECT_FILE = Path(__file__).with_name("graph.irdl.mlir")
FUSION_GROUP = "graph.fusion_group"
LAYOUT_CONVERT = "graph.layout_convert"
# The group body's terminator: IRDL cannot give a graph op the IsTerminator trait, and the
# verifier rejects a block ending in an op without it; tosa.yield has the trait and no
# parent constraint (checked with MLIR 22: gpu.yield works too; scf/shape/emitc yields name
# their parents; transform.yield and llvm.return reject tensors).
TERMINATOR = "tosa.yield"
# Fusion patterns, after TVM's OpPatternKind: a group's kind is its anchor's class, or the
# most general class of its ops when it has no anchor.
KINDS = ("conv", "matmul", "pooling", "reduction", "elementwise", "injective")
# Attribute names that are compiler bookkeeping, not computation: left out of signatures.
_BOOKKEEPING_PREFIX = "tilecraft."


# The bindings look up a Python module for each dialect they meet (``<prefix>.<namespace>``)
# and remember only the ones they found: without one for ``graph``, each graph op or
# attribute they touched searched sys.path for ``mlir.dialects.graph`` anew (2,000 failed
# imports, a second of CPU, in a ResNet-50 compile). This module is ``graph``'s module: found
# once, remembered; it registers no op classes.
if __package__ not in _mlir.globals.dialect_search_modules:
    _mlir.globals.append_dialect_search_prefix(__package__)


def load(context: ir.Context) -> None:
    """Load the graph dialect into ``context`` (idempotent: a second call does nothing).

    Why at run time: IRDL turns the ``.mlir`` definition into a dynamic dialect, so the ops
    parse and verify in any context without building MLIR."""
    if context.is_registered_operation(FUSION_GROUP):
        return
    with context, ir.Location.unknown():
        definition = ir.Module.parse(DIALECT_FILE.read_text())
        irdl.load_dialects(definition)


# --- layout ---------------------------------------------------------------------------------


def layout_attr(name: str, context: ir.Context | None = None) -> ir.Attribute:
    """``#graph.layout<"name">``; ``name`` is a TVM-style layout such as ``NCHW8c``."""
    if not name or not name.replace("_", "").isalnum():
        raise GraphError(f"layout {name!r} must be letters and digits, e.g. 'NCHW8c'")
    return ir.Attribute.parse(f'#graph.layout<"{name}">', context)


def layout_name(attr: ir.Attribute) -> str:
    """The layout string of a ``#graph.layout`` attribute."""
    text = str(attr)
    prefix = '#graph.layout<"'
    if not text.startswith(prefix) or not text.endswith('">'):
        raise GraphError(f"{text} is not a #graph.layout attribute")
    return text[len(prefix):-2]


def layout_convert(value: ir.Value, src: str, dst: str, result_type: ir.Type | None = None, *,
                   loc: ir.Location | None = None, ip: ir.InsertionPoint | None = None) -> ir.Value:
    """Build ``graph.layout_convert`` of ``value`` from layout ``src`` to ``dst``.

    ``result_type`` defaults to ``value``'s type (a relabelling); a blocked layout changes the
    shape (NCHW 1x64x56x56 -> NCHW8c 1x8x56x56x8), so pass it then."""
    op = ir.Operation.create(
        LAYOUT_CONVERT,
        results=[result_type or value.type],
        operands=[value],
        attributes={"src_layout": layout_attr(src), "dst_layout": layout_attr(dst)},
        loc=loc, ip=ip,
    )
    return op.results[0]


# --- fusion groups --------------------------------------------------------------------------


def _op(owner: object) -> ir.Operation | None:
    if isinstance(owner, ir.Operation):
        return owner
    return getattr(owner, "operation", None) if owner is not None else None


def _within(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether ``op`` is ``ancestor`` or nested in it."""
    while op is not None:
        if op == ancestor:
            return True
        parent = op.parent
        op = _op(parent) if parent is not None else None
    return False


def _walk_values(ops: Sequence[ir.Operation]) -> tuple[set[ir.Value], list[ir.Value]]:
    """``(values defined in ops, values they use from outside, in first-use order)``."""
    inside: set[ir.Value] = set()
    used: list[ir.Value] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        used.extend(op.operands)
        inside.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                inside.update(block.arguments)
        return ir.WalkResult.ADVANCE

    for op in ops:
        op.walk(visit, ir.WalkOrder.PRE_ORDER)
    captured: list[ir.Value] = []
    for value in used:
        if value not in inside and value not in captured:
            captured.append(value)
    return inside, captured


@dataclass(frozen=True)
class FusionGroup:
    """A view of one ``graph.fusion_group`` op, for passes and for task extraction.

    ``inputs`` are the values the body reads from outside (the kernel's arguments: the
    activations and weights); ``op.results`` its outputs; ``signature`` the task key."""

    op: ir.Operation

    def __post_init__(self) -> None:
        if self.op.name != FUSION_GROUP:
            raise GraphError(f"expected {FUSION_GROUP}, got {self.op.name}")

    @property
    def kind(self) -> str:
        return ir.StringAttr(self.op.attributes["kind"]).value

    @property
    def anchor_name(self) -> str:
        """The anchor op's name (``linalg.conv_2d_nchw_fchw``), ``""`` for no anchor."""
        return ir.StringAttr(self.op.attributes["anchor"]).value

    @property
    def signature(self) -> str:
        return ir.StringAttr(self.op.attributes["signature"]).value

    @property
    def body(self) -> ir.Block:
        return self.op.regions[0].blocks[0]

    @property
    def ops(self) -> list[ir.Operation]:
        """The group's top-level ops, terminator excluded, in order."""
        return [o.operation for o in self.body.operations][:-1]

    @property
    def terminator(self) -> ir.Operation:
        return [o.operation for o in self.body.operations][-1]

    @property
    def anchor(self) -> ir.Operation | None:
        """The anchor op inside the body (the first named ``anchor_name``), if any."""
        return next((o for o in self.ops if o.name == self.anchor_name), None) if self.anchor_name else None

    @property
    def inputs(self) -> list[ir.Value]:
        """Values from outside the group that its body reads, in first-use order."""
        return _walk_values(self.ops)[1]

    @property
    def input_types(self) -> list[ir.Type]:
        return [v.type for v in self.inputs]

    @property
    def output_types(self) -> list[ir.Type]:
        return [r.type for r in self.op.results]

    def compute_signature(self) -> str:
        return group_signature(self.kind, self.body)

    def verify(self) -> None:
        verify_group(self.op)


def _attribute_text(op: ir.Operation) -> str:
    attributes = op.attributes
    items = sorted(
        (attributes[i].name, str(attributes[i].attr)) for i in range(len(attributes))
        if not attributes[i].name.startswith(_BOOKKEEPING_PREFIX)
    )
    return ",".join(f"{name}={value}" for name, value in items)


def group_signature(kind: str, body: ir.Block) -> str:
    """A stable key for the computation in ``body``: ``<kind>-<16 hex digits>``.

    Why not the printed IR: SSA names and locations vary between otherwise equal groups.
    The key hashes, walking the body in order, each op's name, result types, attributes
    (compiler bookkeeping ``tilecraft.*`` excluded) and operands as positions (``c<n>:<type>``
    for the n-th value read from outside, ``o<i>.<r>`` for result r of the i-th op, ``a<d>.<n>``
    for block arguments of nested regions); nested regions are walked the same way. Equal
    keys mean equal kernels: the tuner can measure one and reuse it everywhere.
    """
    numbering: dict[ir.Value, str] = {}
    parts: list[str] = [kind]

    def name(value: ir.Value) -> str:
        if value not in numbering:
            numbering[value] = f"c{sum(1 for v in numbering.values() if v.startswith('c'))}:{value.type}"
        return numbering[value]

    def visit_block(block: ir.Block, depth: int) -> None:
        for index, arg in enumerate(block.arguments):
            numbering[arg] = f"a{depth}.{index}"
            parts.append(f"arg {arg.type}")
        for op in block.operations:
            op = op.operation
            position = len(parts)
            operands = ",".join(name(v) for v in op.operands)
            parts.append(f"{op.name}({operands})[{_attribute_text(op)}]->"
                         + ",".join(str(r.type) for r in op.results))
            for number, result in enumerate(op.results):
                numbering[result] = f"o{position}.{number}"
            for region in op.regions:
                for inner in region.blocks:
                    visit_block(inner, depth + 1)

    visit_block(body, 0)
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{kind}-{digest}"


def verify_group(op: ir.Operation) -> None:
    """Check what IRDL cannot: one block without arguments ending in a ``tosa.yield`` whose
    types are the results', a known kind, the named anchor present in the body, and a
    signature equal to the one the body computes. Raises :class:`GraphError` naming the op."""
    group = FusionGroup(op)
    where = f"{FUSION_GROUP} at {op.location}"
    if len(op.regions[0].blocks) != 1 or len(group.body.arguments) != 0:
        raise GraphError(f"{where}: the body must be exactly one block without arguments")
    if group.kind not in KINDS:
        raise GraphError(f"{where}: kind {group.kind!r} is not one of {', '.join(KINDS)}")
    ops = [o.operation for o in group.body.operations]
    if not ops or ops[-1].name != TERMINATOR:
        raise GraphError(f"{where}: the body must end in {TERMINATOR}")
    yielded = [v.type for v in ops[-1].operands]
    if yielded != group.output_types:
        raise GraphError(f"{where}: {TERMINATOR} yields {yielded}, the group returns {group.output_types}")
    if group.anchor_name and group.anchor is None:
        raise GraphError(f"{where}: anchor {group.anchor_name} is not in the body")
    if group.signature != group.compute_signature():
        raise GraphError(f"{where}: signature {group.signature!r} does not match the body "
                         f"({group.compute_signature()!r})")


def fusion_groups(module: ir.Operation) -> list[FusionGroup]:
    """Every ``graph.fusion_group`` in ``module``, in walk order."""
    found: list[FusionGroup] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == FUSION_GROUP:
            found.append(FusionGroup(op))
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _is_cloneable_constant(op: ir.Operation | None) -> bool:
    """Scalar ``arith.constant``s are copied into each group that uses them (a kernel carries
    its literals); tensor constants (weights) stay outside, inputs the signature types."""
    return (op is not None and op.name == "arith.constant"
            and not isinstance(op.results[0].type, ir.ShapedType))


def outline_group(ops: Sequence[ir.Operation], *, kind: str, anchor: ir.Operation | None = None,
                  loc: ir.Location | None = None) -> FusionGroup:
    """Move ``ops`` (top-level ops of one block, in block order) into a new fusion group.

    The group is created where the last of ``ops`` was; values used after the group become
    its results (they must share one type: an IRDL limit, see the module docstring); scalar
    constants the ops use are cloned into the body. The caller guarantees the set is convex
    (no path leaves it and re-enters) and that no outside user of a result precedes the
    last op.
    """
    if not ops:
        raise GraphError("a fusion group needs at least one op")
    if kind not in KINDS:
        raise GraphError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    members = list(ops)
    _inside, captured = _walk_values(members)

    def outside(owner: ir.Operation) -> bool:
        return not any(_within(owner, m) for m in members)

    outputs = [r for op in members for r in op.results
               if any(outside(_op(use.owner)) for use in r.uses)]
    if len({str(v.type) for v in outputs}) > 1:
        raise GraphError(f"a fusion group's results must share one type (IRDL variadic), got "
                         f"{', '.join(str(v.type) for v in outputs)}")
    last = members[-1]
    group_op = ir.Operation.create(
        FUSION_GROUP,
        results=[v.type for v in outputs],
        attributes={"kind": ir.StringAttr.get(kind),
                    "anchor": ir.StringAttr.get(anchor.name if anchor is not None else ""),
                    "signature": ir.StringAttr.get("")},
        regions=1,
        loc=loc or last.location,
        ip=ir.InsertionPoint(last),
    )
    block = group_op.regions[0].blocks.append()
    for value, result in zip(outputs, group_op.results):
        for use in list(value.uses):
            owner = _op(use.owner)
            if outside(owner):
                owner.operands[use.operand_number] = result
    terminator = ir.Operation.create(TERMINATOR, operands=outputs, ip=ir.InsertionPoint(block),
                                     loc=last.location)
    clones: dict[ir.Value, ir.Value] = {}
    for value in captured:
        if _is_cloneable_constant(_op(value.owner)):
            clones[value] = _op(value.owner).clone(ip=ir.InsertionPoint(terminator)).results[0]
    for op in members:
        op.move_before(terminator)

    def rewire(op: ir.Operation) -> ir.WalkResult:
        for number, value in enumerate(op.operands):
            if value in clones:
                op.operands[number] = clones[value]
        return ir.WalkResult.ADVANCE

    if clones:
        for op in members:
            op.walk(rewire, ir.WalkOrder.PRE_ORDER)
    group = FusionGroup(group_op)
    group_op.attributes["signature"] = ir.StringAttr.get(group.compute_signature())
    return group


def inline_group(group: FusionGroup, *, marker: Iterable[tuple[str, ir.Attribute]] = ()) -> list[ir.Operation]:
    """Move the body of ``group`` back in front of it and erase it; returns the moved ops.

    Each moved op gets the ``marker`` attributes: the lowering names the group its ops came
    from, so later stages can keep them together."""
    marker = list(marker)
    op = group.op
    terminator = group.terminator
    members = group.ops
    for result, yielded in zip(op.results, terminator.operands):
        result.replace_all_uses_with(yielded)
    # Erased through Python first: erasing the group would free it behind the back of a
    # live Python object for it.
    terminator.erase()
    moved = []
    for inner in members:
        inner.move_before(op)
        for name, attr in marker:
            inner.attributes[name] = attr
        moved.append(inner)
    op.erase()
    return moved
