"""The entry function of a module: which one to call, and its signature read from the IR.

Why here and not in the runtime: reading a signature needs the MLIR bindings and the
dynamic-dimension analysis (dim_relations.py); the runtime only checks calls against the
:class:`EntrySignature` this module builds (deployed packages rebuild it from a manifest).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from mlir import ir

from ...errors import EntryPointError
from ...runtime.signature import (
    DTYPE_ATTRIBUTE,
    NAME_ATTRIBUTE,
    EntrySignature,
    TensorSpec,
    numpy_dtype,
)
from ..dim_relations import equal_argument_dims


def find_entry(module: ir.Module, entry: str | None) -> ir.Operation:
    """The public function to call: ``entry`` by name, or the only public one."""
    public = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
        if visibility is None or ir.StringAttr(visibility).value == "public":
            public.append(op)
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in public]
    if entry is not None:
        if entry not in names:
            raise EntryPointError(f"no public function @{entry}; public functions: {names or 'none'}")
        return public[names.index(entry)]
    if not public:
        raise EntryPointError("the module has no public func.func with a body to call")
    if len(public) > 1:
        raise EntryPointError(f"several public functions {names}; choose one with entry=")
    return public[0]


# Sub-byte types travel as i8 (one value per byte, as ml_dtypes stores them; see
# ir/small_types.py): ``tilecraft.dtype`` names which.
_SUB_BYTE = {np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2,
                                   ml_dtypes.float4_e2m1fn)}


def _overridden_dtype(name: str, natural: np.dtype, requested: str) -> np.dtype:
    """The dtype a ``tilecraft.dtype`` attribute asks for, if it has the same bits."""
    try:
        dtype = np.dtype(getattr(ml_dtypes, requested, requested))
    except TypeError:
        raise EntryPointError(f"{name}: {DTYPE_ATTRIBUTE} = {requested!r} is not a numpy dtype") from None
    if natural == np.dtype(np.int8) and dtype in _SUB_BYTE:
        return dtype
    if dtype.itemsize != natural.itemsize or dtype.kind not in "iu" or natural.kind not in "iu":
        raise EntryPointError(
            f"{name}: {DTYPE_ATTRIBUTE} = {requested!r} does not reinterpret {natural}"
        )
    return dtype


def tensor_spec(name: str, value_type: ir.Type, attributes: ir.DictAttr | None = None) -> TensorSpec:
    """The :class:`TensorSpec` of an argument or result of type ``value_type``."""
    if isinstance(value_type, ir.RankedTensorType):
        tensor = ir.RankedTensorType(value_type)
        shape = tuple(None if tensor.is_dynamic_dim(i) else tensor.shape[i] for i in range(tensor.rank))
        dtype = numpy_dtype(tensor.element_type)
        if attributes is not None and DTYPE_ATTRIBUTE in attributes:
            dtype = _overridden_dtype(name, dtype, ir.StringAttr(attributes[DTYPE_ATTRIBUTE]).value)
        return TensorSpec(name, dtype, shape, str(tensor.element_type))
    if isinstance(value_type, ir.ShapedType):
        raise EntryPointError(
            f"{name} has type {value_type}; entry functions take ranked tensors or scalars"
        )
    return TensorSpec(name, numpy_dtype(value_type), None, str(value_type))


def entry_signature(func: ir.Operation) -> EntrySignature:
    """The signature of ``func``: argument names (``tilecraft.name``), dtypes, shapes, and the
    dynamic dimensions that must agree on every call."""
    name = ir.StringAttr(func.attributes["sym_name"]).value
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    arg_attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
    res_attrs = func.attributes["res_attrs"] if "res_attrs" in func.attributes else None
    arguments = []
    for index, arg_type in enumerate(function_type.inputs):
        arg_name = f"arg{index}"
        attrs = ir.DictAttr(arg_attrs[index]) if arg_attrs is not None else None
        if attrs is not None and NAME_ATTRIBUTE in attrs:
            arg_name = ir.StringAttr(attrs[NAME_ATTRIBUTE]).value
        arguments.append(tensor_spec(arg_name, arg_type, attrs))
    results = []
    for index, result_type in enumerate(function_type.results):
        attrs = ir.DictAttr(res_attrs[index]) if res_attrs is not None else None
        spec = tensor_spec(f"result{index}", result_type, attrs)
        if spec.is_scalar:
            raise EntryPointError(
                f"@{name} returns a scalar {result_type} (result {index}); "
                "return a 0-d tensor instead"
            )
        results.append(spec)
    names = [a.name for a in arguments]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise EntryPointError(f"@{name} has several arguments named {duplicates}")
    return EntrySignature(name, tuple(arguments), tuple(results), equal_argument_dims(func))
