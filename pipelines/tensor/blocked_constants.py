"""Constant operands read in vector-wide column blocks, stored block-major:
``tilecraft-block-constant-reads``.

Why: a vectorized convolution reads its constant ``HWCF`` filter as ``vector<S x V>`` tiles
(``S`` input channels of ``V`` output channels, ``V`` = the register tile's channels) at
``[kh, kw, ic, oc]``. Its rows are ``F`` floats apart, so the tile of one block of output
channels walks the whole filter: at ResNet-50's 7x7 layers (3x3x512x512, 9.4 MB) every
reduction step touches four fresh 4 KB pages, and the one-thread kernel ran at half the
rate of the same layer with 32 output channels (rows 128 bytes apart, one contiguous
filter; docs/performance.md). Software prefetches of the next rows did not help (a page walk, not
a cache miss, stalls the load: this machine runs without huge pages); rows padded off the
power of two (the previous fix, docs/performance.md round 3) spread the cache sets, not the
pages. Stored as ``W'[oc / V, kh, kw, ic, oc % V]`` the block the tile reads is one
contiguous stream; onnxruntime (NCHWc) and IREE (data tiling) keep their filters the same
way.

The pass runs after the schedule, on vector reads: for each constant of rank >= 2 whose
every use is a ``vector.transfer_read`` of its trailing dims (minor-identity map, in
bounds) with the same last vector extent ``V`` at a last index that is provably a multiple
of ``V`` (loop bounds, steps and affine offsets: ``_known_divisor``), it adds the blocked
copy (computed here with numpy, once, at compile time) and rewrites each read to
``W'[last / V, i0, ..., 0]``. ``V`` is the widest read's width; a narrower read is served
when its last index is a constant multiple of ``V`` (a peeled last column tile, e.g. a
matrix-vector product's 8 columns after 31 tiles of 32: schedule/matmul_plan.py
``plan_matrix_vector``), reading a prefix of its (zero-padded) block. Without that, such a
weight stayed row-major and each 32-column tile walked all K rows 4000 bytes apart.
The original constant is dropped when nothing else reads it.
A constant with any other use, a read whose offset may straddle two blocks, or a last dim
of one block only is left alone. Matmul weights already arrive as panels
(graph/weight_panels.py): their last dim is one block.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith, vector

from ...ir import core
from ...ir.resources import constant_array
from ..ir_queries import WEIGHT_ARGUMENT, defined_functions, defining_op, ops_where, users
from ..passes import register_pass

# Element types whose constants are blocked.
_NUMPY_TYPES = {"f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
                "i32": np.int32, "i64": np.int64}


def _known_divisor(value: ir.Value, depth: int = 0) -> int:
    """A number ``value`` (an index) is known to be a multiple of: constants, ``scf.for``
    induction variables (lower bound and step), ``scf.forall`` ones (static bounds),
    ``arith.addi``/``muli`` and ``affine.apply`` of those; 1 when nothing is known. 0 means
    the value is 0 (a multiple of everything), so that ``gcd`` and products need no special
    case."""
    if depth > 16:
        return 1
    op = defining_op(value)
    if op is None:
        return _block_argument_divisor(value, depth)
    if op.name in ("arith.constant", "index.constant"):
        attr = op.attributes["value"]
        if not isinstance(attr, ir.IntegerAttr):
            return 1
        return abs(ir.IntegerAttr(attr).value)
    if op.name == "arith.addi":
        return math.gcd(*(_known_divisor(operand, depth + 1) for operand in op.operands))
    if op.name == "arith.muli":
        left, right = (_known_divisor(operand, depth + 1) for operand in op.operands)
        return left * right
    if op.name == "affine.apply":
        affine_map = ir.AffineMapAttr(op.attributes["map"]).value
        if len(affine_map.results) != 1:
            return 1
        operands = [_known_divisor(operand, depth + 1) for operand in op.operands]
        return _expr_divisor(affine_map.results[0], operands, affine_map.n_dims)
    return 1


def _expr_divisor(expr: ir.AffineExpr, operands: list[int], n_dims: int) -> int:
    # The bindings hand out results as their concrete subclasses.
    if isinstance(expr, ir.AffineConstantExpr):
        return abs(expr.value)
    if isinstance(expr, ir.AffineDimExpr):
        return operands[expr.position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return operands[n_dims + expr.position]
    if isinstance(expr, ir.AffineAddExpr):
        return math.gcd(_expr_divisor(expr.lhs, operands, n_dims), _expr_divisor(expr.rhs, operands, n_dims))
    if isinstance(expr, ir.AffineMulExpr):
        return _expr_divisor(expr.lhs, operands, n_dims) * _expr_divisor(expr.rhs, operands, n_dims)
    return 1  # floordiv, ceildiv, mod: not tracked


def _block_argument_divisor(value: ir.Value, depth: int) -> int:
    argument = ir.BlockArgument(value)
    parent = argument.owner.owner
    parent = parent.operation if hasattr(parent, "operation") else parent
    if parent.name == "scf.for" and argument.arg_number == 0:
        lower, _upper, step = list(parent.operands)[:3]
        return math.gcd(_known_divisor(lower, depth + 1), _known_divisor(step, depth + 1))
    if parent.name == "scf.forall" and "staticLowerBound" in parent.attributes:
        index = argument.arg_number
        lowers = list(ir.DenseI64ArrayAttr(parent.attributes["staticLowerBound"]))
        steps = list(ir.DenseI64ArrayAttr(parent.attributes["staticStep"]))
        if index >= len(lowers) or min(lowers[index], steps[index]) < 0:
            return 1  # a dynamic bound (ShapedType's dynamic marker is negative) or a shared output
        return math.gcd(lowers[index], steps[index])
    return 1


def _constant_index(value: ir.Value) -> int | None:
    """``value``'s integer if it is an ``arith.constant``, else None."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def _blockable_reads(value: ir.Value) -> tuple[int, list[ir.Operation]] | None:
    """(block width V, the reads) when every use of ``value`` (a constant, or a kernel's
    weight argument) is a vector read that a block-major copy serves (see the module
    docstring); ``None`` otherwise."""
    tensor_type = ir.RankedTensorType(value.type)
    rank = tensor_type.rank
    reads, widths = [], set()
    for use, read in zip(value.uses, users(value)):
        if read.name != "vector.transfer_read" or use.operand_number != 0 or len(read.operands) != rank + 2:
            return None  # another op, or a masked read
        vector_type = ir.VectorType(read.results[0].type)
        map_text = str(ir.AffineMapAttr(read.attributes["permutation_map"]).value)
        minor = ir.AffineMap.get_minor_identity(rank, vector_type.rank)
        in_bounds = [ir.BoolAttr(flag).value for flag in ir.ArrayAttr(read.attributes["in_bounds"])]
        if map_text != str(minor) or not all(in_bounds) or vector_type.rank < 1:
            return None
        reads.append(read)
        widths.add(vector_type.shape[-1])
    if not widths:
        return None
    width = max(widths)
    if width < 2 or tensor_type.shape[-1] <= width:
        return None
    for read in reads:
        last_index = read.operands[rank]  # operands: source, indices..., padding
        if _known_divisor(last_index) % width:
            return None
        if ir.VectorType(read.results[0].type).shape[-1] != width and _constant_index(last_index) is None:
            return None
    return width, reads


def _blocked(array: np.ndarray, width: int) -> np.ndarray:
    """``array[..., n]`` as ``[ceil(n / width), ..., width]`` (the last block zero-padded)."""
    columns = array.shape[-1]
    blocks = -(-columns // width)
    if blocks * width != columns:
        pad = [(0, 0)] * (array.ndim - 1) + [(0, blocks * width - columns)]
        array = np.pad(array, pad)
    shaped = array.reshape(*array.shape[:-1], blocks, width)
    return np.ascontiguousarray(np.moveaxis(shaped, -2, 0))


def block_constant_reads(constant: ir.Operation) -> bool:
    """Give ``constant``'s vector reads a block-major copy to read; False when it does not
    qualify (nothing changed)."""
    found = _blockable_reads(constant.results[0])
    if found is None:
        return False
    width, reads = found
    array = constant_array(constant)
    with ir.InsertionPoint(constant), constant.location:
        blocked = core.constant(_blocked(array, width), name="blocked")
    _read_blocks(reads, blocked, width, ir.InsertionPoint(constant), constant.location)
    constant.erase()
    return True


def _read_blocks(reads: list[ir.Operation], blocked: ir.Value, width: int,
                 at: ir.InsertionPoint, location: ir.Location) -> None:
    """Rewrite ``reads`` (of a tensor of rank ``blocked``'s rank - 1) to read ``blocked``."""
    rank = ir.RankedTensorType(blocked.type).rank - 1
    with at, location:
        block_width = arith.constant(ir.IndexType.get(), width)
        zero = arith.constant(ir.IndexType.get(), 0)
    for read in reads:
        indices = list(read.operands)[1:rank + 1]
        padding = read.operands[rank + 1]
        vector_type = ir.VectorType(read.results[0].type)
        with ir.InsertionPoint(read), read.location:
            block = arith.divui(indices[-1], block_width)
            new = vector.transfer_read(
                vector_type, blocked, [block, *indices[:-1], zero],
                ir.AffineMap.get_minor_identity(rank + 1, vector_type.rank), padding,
                [True] * vector_type.rank)
        read.results[0].replace_all_uses_with(new)
        read.erase()


def block_argument_reads(function: ir.Operation, index: int, calls: list[ir.Operation]) -> bool:
    """Block-major weights through kernel calls: ``function``'s argument ``index`` (a weight
    argument, schedule/repeated_kernels.py) becomes the blocked type when its reads qualify
    and each of ``calls`` (all of the function's calls) passes a constant there, which is
    replaced by its blocked copy. Why: a kernel kept as a function reads its filter through
    an argument, and without this the convolutions of a model compiled with kernel calls read
    their filters row-major (docs/performance.md, "Each distinct kernel lowered once")."""
    constants = [defining_op(call.operands[index]) for call in calls]
    if not calls or not all(c is not None and _large_constant(c) for c in constants):
        return False
    body = function.regions[0].blocks[0]
    argument = body.arguments[index]
    found = _blockable_reads(argument)
    if found is None:
        return False
    width, reads = found
    copies: dict[ir.Operation, ir.Value] = {}  # a weight two calls pass is blocked once
    for call, constant in zip(calls, constants):
        if constant not in copies:
            with ir.InsertionPoint(constant), constant.location:
                copies[constant] = core.constant(_blocked(constant_array(constant), width), name="blocked")
        call.operands[index] = copies[constant]
    for constant in copies:
        if not list(constant.results[0].uses):
            constant.erase()
    blocked_type = next(iter(copies.values())).type
    argument.set_type(blocked_type)
    _read_blocks(reads, argument, width, ir.InsertionPoint.at_block_begin(body), function.location)
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    inputs = list(function_type.inputs)
    inputs[index] = blocked_type
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, function_type.results))
    return True


def _large_constant(op: ir.Operation) -> bool:
    if op.name != "arith.constant" or not isinstance(op.results[0].type, ir.RankedTensorType):
        return False
    tensor_type = ir.RankedTensorType(op.results[0].type)
    value = op.attributes["value"]
    splat = isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat
    return (tensor_type.rank >= 2 and tensor_type.has_static_shape and not splat
            and str(tensor_type.element_type) in _NUMPY_TYPES)


@register_pass(
    "tilecraft-block-constant-reads",
    "Constants read as vector-wide column blocks (convolution filters) stored block-major, "
    "so that one block's reads are one contiguous stream",
)
def block_constant_reads_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for constant in ops_where(function, _large_constant):
            block_constant_reads(constant)
    kernels = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in defined_functions(module)
               if "arg_attrs" in f.attributes}
    if not kernels:
        return
    calls: dict[str, list[ir.Operation]] = {name: [] for name in kernels}
    for call in ops_where(module, lambda op: op.name == "func.call"):
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if callee in calls:
            calls[callee].append(call)
    for name, function in kernels.items():
        for index, attrs in enumerate(ir.ArrayAttr(function.attributes["arg_attrs"])):
            if WEIGHT_ARGUMENT in ir.DictAttr(attrs):
                block_argument_reads(function, index, calls[name])
