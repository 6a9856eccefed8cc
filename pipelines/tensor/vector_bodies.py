"""An elementwise ``linalg.generic``'s body, cloned onto vectors inside a generated kernel.

The hand-written kernels (int8_matmul.py's VNNI kernels, attention_kernel.py's attention)
keep their accumulators in vector registers and apply the elementwise ops that surround
them in the graph (a requantization, an attention's scale and mask) to those vectors,
instead of storing the accumulators and letting a separate loop nest read them back. Each
arith / math op is elementwise on vectors as on scalars, so the body clones one for one,
with vector result types; constants captured from outside the body become splats.

Why a module of its own: both kernels take bodies by the same rules (which bodies are safe
to run on a vector's padding lanes, how the clone is made), and one place keeps them equal.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, func

from ..ir_queries import defining_op
from ...errors import InternalError

# Elementwise ops that may not run on the padding lanes of a partial vector: no integer
# division (LLVM scalarizes it, and a zero lane would trap).
TRAPPING_OPS = frozenset({"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
                          "arith.ceildivui", "arith.floordivsi"})


def is_identity(affine_map: ir.AffineMap) -> bool:
    """True for ``(d0, ..., dn) -> (d0, ..., dn)``."""
    return [str(e) for e in affine_map.results] == [f"d{i}" for i in range(affine_map.n_dims)]


def is_all_parallel(generic: ir.Operation) -> bool:
    """A ``linalg.generic`` with one result and only parallel loops."""
    return (generic.name == "linalg.generic" and len(generic.results) == 1
            and not any("reduction" in str(i) for i in ir.ArrayAttr(generic.attributes["iterator_types"])))


def clonable_body(generic: ir.Operation) -> bool:
    """True when the generic's body can run on vectors: arith / math ops without regions or
    integer divisions, reading only the block's inputs, each other and scalar constants from
    outside (not its output: the body must be a pure function of its inputs)."""
    block = generic.regions[0].blocks[0]
    if list(block.arguments[-1].uses):
        return False
    body = [op.operation for op in block.operations]
    inside = [result for op in body for result in op.results]
    for op in body[:-1]:  # the last is linalg.yield
        if not op.name.startswith(("arith.", "math.")) or op.name in TRAPPING_OPS or len(op.regions):
            return False
        for operand in op.operands:
            if isinstance(operand, ir.BlockArgument) or any(operand == r for r in inside):
                continue
            outer = defining_op(operand)  # captured from outside the body: a scalar constant
            if outer is None or outer.name != "arith.constant" or isinstance(operand.type, ir.ShapedType):
                return False
    return True


def vector_of(element: ir.Type, lanes: int) -> ir.VectorType:
    return ir.VectorType.get([lanes], element)


def clone_body(generic: ir.Operation, inputs: Sequence[ir.Value], lanes: int) -> ir.Value:
    """Clone the generic's body (``clonable_body``) at the current insertion point, its
    block's input arguments replaced by the vectors ``inputs``; return the vector it yields."""
    block = generic.regions[0].blocks[0]
    mapped: list[tuple[ir.Value, ir.Value]] = list(zip(list(block.arguments)[:-1], inputs))

    def lookup(value: ir.Value) -> ir.Value:
        for old, new in mapped:
            if old == value:
                return new
        constant = defining_op(value)  # from outside the body: a scalar constant
        splat = ir.DenseElementsAttr.get_splat(vector_of(value.type, lanes), constant.attributes["value"])
        new = arith.ConstantOp(vector_of(value.type, lanes), splat).result
        mapped.append((value, new))
        return new

    for op in block.operations:
        op = op.operation
        if op.name == "linalg.yield":
            return lookup(op.operands[0])
        operands = [lookup(v) for v in op.operands]
        clone = ir.Operation.create(op.name, results=[vector_of(r.type, lanes) for r in op.results],
                                    operands=operands,
                                    attributes={key: op.attributes[key] for key in op.attributes})
        mapped.extend(zip(op.results, clone.results))
    raise InternalError("a linalg.generic body ends with linalg.yield")


def declared_function(module: ir.Module, name: str) -> ir.Operation:
    """The ``func.func`` named ``name`` in ``module``'s body."""
    return next(op for op in module.body.operations
                if ir.StringAttr(op.operation.attributes["sym_name"]).value == name)


def define_vector_function(module: ir.Module, name: str, generic: ir.Operation, lanes: int) -> None:
    """The body of ``module``'s function declaration ``name``: the generic's body on vectors
    of ``lanes`` elements, returning what it yields."""
    function = declared_function(module, name)
    with generic.location:
        entry = function.add_entry_block()
    with ir.InsertionPoint(entry), generic.location:
        func.ReturnOp([clone_body(generic, list(entry.arguments), lanes)])
