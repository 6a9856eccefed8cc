"""Types, shapes, constants and elementwise ops with numpy broadcasting."""

from __future__ import annotations

from typing import Callable, Sequence

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .resources import resource_attr
from ..errors import OperandError, OperandTypeError

Size = "int | ir.Value"  # a static extent or an index-typed SSA value

# numpy dtype -> MLIR element type builder. Unsigned integers are signless in MLIR: the ops
# that care (division, comparison, conversion) take the signedness from the frontend.
_ELEMENT_TYPES: dict[np.dtype, Callable[[], ir.Type]] = {
    np.dtype(np.float16): ir.F16Type.get,
    np.dtype(np.float32): ir.F32Type.get,
    np.dtype(np.float64): ir.F64Type.get,
    np.dtype(np.bool_): lambda: ir.IntegerType.get_signless(1),
    np.dtype(np.int8): lambda: ir.IntegerType.get_signless(8),
    np.dtype(np.uint8): lambda: ir.IntegerType.get_signless(8),
    np.dtype(np.int16): lambda: ir.IntegerType.get_signless(16),
    np.dtype(np.uint16): lambda: ir.IntegerType.get_signless(16),
    np.dtype(np.int32): lambda: ir.IntegerType.get_signless(32),
    np.dtype(np.uint32): lambda: ir.IntegerType.get_signless(32),
    np.dtype(np.int64): lambda: ir.IntegerType.get_signless(64),
    np.dtype(np.uint64): lambda: ir.IntegerType.get_signless(64),
    # Small types (ml_dtypes): MLIR's own float types; sub-byte integers are signless iN.
    # Conversions to and from the float8 ones are bit manipulation (ir/small_types.py).
    np.dtype(ml_dtypes.bfloat16): ir.BF16Type.get,
    np.dtype(ml_dtypes.float8_e4m3fn): ir.Float8E4M3FNType.get,
    np.dtype(ml_dtypes.float8_e4m3fnuz): ir.Float8E4M3FNUZType.get,
    np.dtype(ml_dtypes.float8_e5m2): ir.Float8E5M2Type.get,
    np.dtype(ml_dtypes.float8_e5m2fnuz): ir.Float8E5M2FNUZType.get,
    # Sub-byte types are carried as i8 (why: ir/small_types.py).
    np.dtype(ml_dtypes.float4_e2m1fn): lambda: ir.IntegerType.get_signless(8),
    np.dtype(ml_dtypes.int4): lambda: ir.IntegerType.get_signless(8),
    np.dtype(ml_dtypes.uint4): lambda: ir.IntegerType.get_signless(8),
    np.dtype(ml_dtypes.int2): lambda: ir.IntegerType.get_signless(8),
    np.dtype(ml_dtypes.uint2): lambda: ir.IntegerType.get_signless(8),
}

# Arrays with more elements than this become dense_resource blobs (never printed as text).
RESOURCE_THRESHOLD = 64


_UNSIGNED_SUB_BYTE = (np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.uint2))


def is_unsigned_dtype(dtype: np.dtype | type) -> bool:
    """numpy's unsigned integers and ml_dtypes' uint4/uint2 (whose kind is ``V``)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "u" or dtype in _UNSIGNED_SUB_BYTE


def element_type(dtype: np.dtype | type) -> ir.Type:
    """The MLIR element type for a numpy dtype; ``TypeError`` if there is none."""
    dtype = np.dtype(dtype)
    if dtype not in _ELEMENT_TYPES:
        raise OperandTypeError(f"no MLIR element type for numpy dtype {dtype}")
    return _ELEMENT_TYPES[dtype]()


def is_float(element: ir.Type) -> bool:
    return isinstance(element, ir.FloatType)


def tensor_type(value: ir.Value) -> ir.RankedTensorType:
    if not isinstance(value.type, ir.RankedTensorType):
        raise OperandTypeError(f"expected a ranked tensor, got {value.type}")
    return value.type


def static_shape(value: ir.Value) -> list[int | None]:
    """Extents of a tensor value, ``None`` where dynamic."""
    t = tensor_type(value)
    return [None if t.is_dynamic_dim(i) else t.shape[i] for i in range(t.rank)]


def index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def sizes(value: ir.Value) -> list[int | ir.Value]:
    """Extents of a tensor value: ints where static, ``tensor.dim`` values where dynamic."""
    return [d if d is not None else tensor.dim(value, index(i)) for i, d in enumerate(static_shape(value))]


def shape_type(extents: Sequence[int | ir.Value], element: ir.Type) -> ir.RankedTensorType:
    dims = [e if isinstance(e, int) else ir.ShapedType.get_dynamic_size() for e in extents]
    return ir.RankedTensorType.get(dims, element)


def empty(extents: Sequence[int | ir.Value], element: ir.Type) -> ir.Value:
    """``tensor.empty`` with the given static/dynamic extents."""
    return tensor.empty(list(extents), element)


def scalar_constant(value: float | int | bool, element: ir.Type) -> ir.Value:
    if is_float(element):
        return arith.constant(element, float(value))
    if isinstance(element, ir.IntegerType) and element.width == 1:
        return arith.constant(element, int(bool(value)))
    return arith.constant(element, int(value))


def filled(extents: Sequence[int | ir.Value], value: float | int | bool, element: ir.Type) -> ir.Value:
    """A tensor of the given extents filled with ``value``."""
    return linalg.fill(scalar_constant(value, element), outs=[empty(extents, element)])


def constant(array: np.ndarray, *, name: str = "constant") -> ir.Value:
    """Materialize a numpy array as a tensor constant.

    Large arrays become ``dense_resource`` blobs: the weights travel as binary data, are
    never printed into IR text, and cost no parse time. Large splats become a fill.
    """
    array = np.asarray(array, order="C")  # not ascontiguousarray: that makes 0-d arrays 1-d
    ttype = ir.RankedTensorType.get(list(array.shape), element_type(array.dtype))
    if array.dtype.kind == "V" or array.dtype == np.dtype(ml_dtypes.float8_e5m2):
        return _small_type_constant(array, ttype, name)
    if array.size > RESOURCE_THRESHOLD and (array == array.flat[0]).all():
        # A large splat (e.g. ConstantOfShape weights) is filled at run time: as a global it
        # would put every element into the object code.
        return filled(list(array.shape), array.flat[0].item(), ttype.element_type)
    if array.dtype == np.bool_:
        bits = np.packbits(array.reshape(-1), bitorder="little")
        return arith.constant(ttype, ir.DenseElementsAttr.get(bits, type=ttype))
    if array.dtype.kind == "u":
        array = array.view(np.dtype(f"i{array.dtype.itemsize}"))
    if array.size > RESOURCE_THRESHOLD:
        attr = resource_attr(array, name, ttype)  # its bytes stay readable (ir/resources.py)
    else:
        attr = ir.DenseElementsAttr.get(array, type=ttype)
    return arith.constant(ttype, attr)


def _small_type_constant(array: np.ndarray, ttype: ir.RankedTensorType, name: str) -> ir.Value:
    """An ml_dtypes array (bfloat16, float8, float4, int4, int2) as a tensor constant.

    Types of whole bytes take their bits as a same-width integer buffer; sub-byte ones are
    ``i8`` constants (see ir/small_types.py).
    """
    element = ttype.element_type
    if array.dtype.name not in ("float4_e2m1fn", "int4", "uint4", "int2", "uint2"):
        bits = array.view(np.dtype(f"i{array.dtype.itemsize}"))
        if array.size > RESOURCE_THRESHOLD:
            return arith.constant(ttype, ir.DenseResourceElementsAttr.get_from_buffer(bits, name, ttype))
        return arith.constant(ttype, ir.DenseElementsAttr.get(bits, type=ttype))
    if array.dtype.name == "float4_e2m1fn":
        codes = (array.view(np.uint8) & 0xF).astype(np.int8)
    else:  # int4/int2 values sign-extended, uint4/uint2 values zero-extended
        codes = array.astype(np.int16).astype(np.int8)
    return constant(codes, name=name)


def broadcast_extents(values: Sequence[ir.Value]) -> list[int | ir.Value]:
    """numpy broadcasting of the operands' shapes; dynamic extents come from the operands.

    A dynamic extent is assumed to match the others (as ONNX and PyTorch do after their own
    shape checks); a static mismatch raises ``ValueError``.
    """
    rank = max(tensor_type(v).rank for v in values)
    result: list[int | ir.Value] = []
    for axis in range(rank):
        static_dims, dynamic_source = [], None
        for v in values:
            shape = static_shape(v)
            pos = axis - (rank - len(shape))
            if pos < 0:
                continue
            if shape[pos] is None:
                dynamic_source = dynamic_source or (v, pos)
            else:
                static_dims.append(shape[pos])
        non_one = {d for d in static_dims if d != 1}
        if len(non_one) > 1:
            shapes = [static_shape(v) for v in values]
            raise OperandError(f"shapes {shapes} do not broadcast (axis {axis}: {sorted(non_one)})")
        if non_one:
            result.append(non_one.pop())
        elif dynamic_source is not None:
            result.append(tensor.dim(dynamic_source[0], index(dynamic_source[1])))
        else:
            result.append(1)
    return result


def _broadcast_map(value: ir.Value, out_rank: int, out_extents: Sequence[int | ir.Value]) -> ir.AffineMap:
    shape = static_shape(value)
    offset = out_rank - len(shape)
    exprs = []
    for pos, extent in enumerate(shape):
        out = out_extents[offset + pos]
        broadcast = extent == 1 and not (isinstance(out, int) and out == 1)
        exprs.append(ir.AffineConstantExpr.get(0) if broadcast else ir.AffineDimExpr.get(offset + pos))
    return ir.AffineMap.get(out_rank, 0, exprs)


def elementwise(
    inputs: Sequence[ir.Value],
    result_element: ir.Type,
    body: Callable[..., ir.Value],
    *,
    extents: Sequence[int | ir.Value] | None = None,
) -> ir.Value:
    """``linalg.generic`` computing ``body(*scalars)`` over the broadcast of ``inputs``.

    ``body`` receives one scalar ``ir.Value`` per input and returns the result scalar; it
    builds arith/math ops at the insertion point it is called at.
    """
    out_extents = list(extents) if extents is not None else broadcast_extents(inputs)
    rank = len(out_extents)
    maps = [_broadcast_map(v, rank, out_extents) for v in inputs]
    maps.append(ir.AffineMap.get_identity(rank))
    init = empty(out_extents, result_element)
    op = linalg.GenericOp(
        [init.type],
        list(inputs),
        [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
    )
    block = op.regions[0].blocks.append(
        *[tensor_type(v).element_type for v in inputs], result_element
    )
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments[: len(inputs)])])
    return op.result


def convert_scalar(value: ir.Value, to: ir.Type, *, unsigned: bool = False) -> ir.Value:
    """Convert one scalar between element types (inside a linalg body), C-style.

    ``unsigned`` says the *source* integer is unsigned (ONNX uintN; MLIR is signless).
    Float -> int truncates toward zero; int -> i1 and float -> i1 compare with zero.
    """
    source = value.type
    if source == to:
        return value
    if is_float(source) and is_float(to):
        return arith.extf(to, value) if to.width > source.width else arith.truncf(to, value)
    if isinstance(to, ir.IntegerType) and to.width == 1:
        zero = scalar_constant(0, source)
        if is_float(source):
            return arith.cmpf(arith.CmpFPredicate.UNE, value, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, value, zero)
    if is_float(source):
        # Through i64: a value that fits an unsigned narrow type (200.0 -> ui8) is out of
        # range for a signed one of the same width, and fptosi would give poison.
        if to.width < 64:
            return arith.trunci(to, arith.fptosi(ir.IntegerType.get_signless(64), value))
        return arith.fptosi(to, value)
    if is_float(to):
        unsigned = unsigned or source.width == 1
        return arith.uitofp(to, value) if unsigned else arith.sitofp(to, value)
    if to.width > source.width:
        unsigned = unsigned or source.width == 1
        return arith.extui(to, value) if unsigned else arith.extsi(to, value)
    return arith.trunci(to, value)


def transpose(value: ir.Value, permutation: Sequence[int]) -> ir.Value:
    """``linalg.transpose``: result dim ``i`` is input dim ``permutation[i]``.

    The identity permutation returns ``value`` itself (no copy to schedule).
    """
    if list(permutation) == list(range(len(permutation))):
        return value
    extents = sizes(value)
    init = empty([extents[p] for p in permutation], tensor_type(value).element_type)
    if 0 in static_shape(value):
        return init  # nothing to move (and tiling an empty loop asserts in MLIR)
    return linalg.transpose(value, outs=[init], permutation=list(permutation)).results[0]



def pad_constant(
    value: ir.Value, low: Sequence[int], high: Sequence[int], fill: float | int | bool
) -> ir.Value:
    """``tensor.pad`` with a constant: ``low[i]`` / ``high[i]`` elements before/after dim ``i``."""
    if not any(low) and not any(high):
        return value
    element = tensor_type(value).element_type
    extents = sizes(value)
    result = []
    for extent, lo, hi in zip(extents, low, high):
        result.append(extent + lo + hi if isinstance(extent, int) else ir.ShapedType.get_dynamic_size())
    result_type = ir.RankedTensorType.get(result, element)
    pad = tensor.PadOp(result_type, value, [], [], list(low), list(high))
    block = pad.regions[0].blocks.append(*[ir.IndexType.get()] * len(extents))
    with ir.InsertionPoint(block):
        tensor.YieldOp(scalar_constant(fill, element))
    return pad.result
