"""``ModelBuilder``: a model written in Python, op by op, compiled like an imported one.

The MLC course builds its end-to-end models with Relax's BlockBuilder: inputs, ``emit_te``
of TE computes (TOPI's or the user's own ``te.compute`` lambdas), numpy weights as
constants, ``call_dps_packed`` of extern functions such as ``env.linear``, outputs, then
``build``. This is that builder on tilecraft's parts:

- each ``emit_te`` turns its computes into a private function with
  :func:`~tilecraft.schedule.te.create_func` (so a TE function means here what it means to
  ``Schedule``) and calls it, as Relax's ``call_tir`` calls a PrimFunc;
- constants are ``ir/core.constant`` (large ones ``dense_resource`` blobs, as
  the importers make them);
- extern calls are emitted by ``pipelines/tensor/extern.py`` (the registry's signature checked
  on the spot, destination-passing style);
- :meth:`ModelBuilder.build` inlines the private functions into one ``func.func @main``
  and hands it to :func:`tilecraft.compile`.

Why inline and then compile, instead of a pipeline of its own: the model then takes the
graph passes (layout, constant folding, fusion groups), the default schedule and the
package writer every ONNX or PyTorch model takes, so ``build()`` returns the same
:class:`~tilecraft.CompiledModule` (and ``package_path=`` the same package) as
``tilecraft.compile``.
"""

from __future__ import annotations

import io
import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir, passmanager
from mlir.dialects import func

from ..compiler.compile import compile as compile_model
from ..errors import ExternSignatureError, ModelBuilderError
from ..ir import core
from ..pipelines.tensor.extern import emit_call
from ..compiler.options import CompileOptions
from ..runtime.extern import ELEMENT_TYPES, ExternFunction, lookup
from ..runtime.signature import NAME_ATTRIBUTE, SYMBOLS_ATTRIBUTE
from ..schedule.te import Tensor, create_func, placeholder
from ..schedule.te.symbolic import Var

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_builder_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class Value:
    """A tensor of the model being built: an input, a constant or the result of an
    ``emit_te`` / ``call_dps_packed``. Pass it to later calls of the same builder."""

    builder: int
    index: int
    name: str
    shape: "tuple[int | Var, ...]"
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Value({self.name!r}, shape=({dims}), dtype={self.dtype})"


@dataclass
class _Input:
    value: Value


@dataclass
class _Constant:
    value: Value
    array: np.ndarray


@dataclass
class _TeCall:
    """One ``emit_te``: the placeholders standing for ``arguments`` and the computes."""

    function_name: str
    arguments: list[Value]
    placeholders: list[Tensor]
    computes: list[Tensor]
    results: list[Value]


@dataclass
class _ExternCall:
    extern: ExternFunction
    arguments: list[Value]
    results: list[Value]


def _element(dtype: np.dtype) -> str:
    """The MLIR element type name of ``dtype`` as the extern registry spells it."""
    for element, (numpy_dtype, _, _) in ELEMENT_TYPES.items():
        if numpy_dtype == dtype:
            return element
    raise ExternSignatureError(f"extern calls take {sorted(ELEMENT_TYPES)} tensors, not {dtype}")


def _check_shape(shape: Any, where: str) -> "tuple[int | Var, ...]":
    try:
        dims = tuple(shape)
    except TypeError:
        raise ModelBuilderError(f"{where}: a shape is a sequence of sizes, got {shape!r}") from None
    for dim in dims:
        if isinstance(dim, Var):
            continue
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ModelBuilderError(f"{where}: sizes must be positive integers or tilecraft.var(...) "
                                    f"symbols, got {shape!r}")
    return tuple(d if isinstance(d, Var) else int(d) for d in dims)


class ModelBuilder:
    """Build a model from inputs, TE computes, constants and extern calls; see the module
    docstring. ``name`` is the entry function's name (``main``)."""

    def __init__(self, name: str = "main") -> None:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ModelBuilderError(f"the entry function's name must be an identifier, got {name!r}")
        self.name = name
        self._id = next(_builder_ids)
        self._nodes: list[Any] = []
        self._values: list[Value] = []
        self._names: set[str] = {name}
        self._outputs: list[Value] | None = None

    # ---- building ------------------------------------------------------------------------

    def input(self, name: str, shape: "Sequence[int | Var]", dtype: Any = "float32") -> Value:
        """An input of the model (an argument of ``main``, in the order of these calls);
        a ``tilecraft.var("n")`` in ``shape`` makes that dimension dynamic."""
        if any(isinstance(node, (_Constant, _TeCall, _ExternCall)) for node in self._nodes):
            raise ModelBuilderError(f"input {name!r}: declare every input before the first constant or call")
        if not isinstance(name, str) or not _IDENTIFIER.match(name) or name in self._names:
            raise ModelBuilderError(f"input name {name!r}: inputs are called by name, so each needs a "
                                    "distinct identifier")
        shape, dtype = _check_shape(shape, f"input {name!r}"), self._dtype(dtype, f"input {name!r}")
        self._names.add(name)
        value = self._new_value(name, shape, dtype)
        self._nodes.append(_Input(value))
        return value

    def const(self, array: Any, name: str = "const") -> Value:
        """A constant tensor (a weight): ``array`` is copied now, so later changes to it are
        not seen."""
        array = np.array(array, copy=True)
        if array.ndim == 0:
            raise ModelBuilderError(f"constant {name!r}: give a tensor of rank >= 1 (np.reshape(x, (1,)))")
        dtype = self._dtype(array.dtype, f"constant {name!r}")
        value = self._new_value(self._unique(name, "constant"), tuple(int(d) for d in array.shape), dtype)
        self._nodes.append(_Constant(value, array))
        return value

    def emit_te(self, fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
        """Call the TE function ``fn`` (``te.compute`` code: a ``tilecraft.topi`` op or the
        user's own) with a placeholder for each :class:`Value` in ``args`` / ``kwargs``
        (also inside lists and tuples; other arguments pass as they are) and add the
        computes it returns. Returns a :class:`Value`, or a tuple of them when ``fn``
        returns several tensors. ``name`` names the function (default: ``fn``'s name)."""
        if not callable(fn):
            raise ModelBuilderError(f"emit_te takes a TE function first, got {fn!r}")
        placeholders: dict[int, Tensor] = {}
        arguments: list[Value] = []

        def to_te(item: Any) -> Any:
            if isinstance(item, Value):
                self._check_own(item, "emit_te")
                if id(item) not in placeholders:
                    placeholders[id(item)] = placeholder(item.shape, item.dtype, name=item.name)
                    arguments.append(item)
                return placeholders[id(item)]
            if isinstance(item, (list, tuple)):
                return type(item)(to_te(x) for x in item)
            return item

        te_args = [to_te(a) for a in args]
        te_kwargs = {k: to_te(v) for k, v in kwargs.items()}
        function_name = self._unique(name or getattr(fn, "__name__", "te_func"), "function")
        result = fn(*te_args, **te_kwargs)
        computes = [result] if isinstance(result, Tensor) else list(result) if isinstance(result, (list, tuple)) else None
        if not computes or not all(isinstance(t, Tensor) for t in computes):
            raise ModelBuilderError(f"emit_te({function_name}): the function must return a TE tensor "
                                    f"(te.compute) or a list of them, got {result!r}")
        inputs = [placeholders[id(v)] for v in arguments]
        for tensor in computes:
            if tensor.is_placeholder:
                raise ModelBuilderError(f"emit_te({function_name}): returned the placeholder {tensor.name!r} "
                                        "itself; return computes (use the Value directly instead)")
        results = [self._new_value(self._unique(t.name, "value"), t.shape, t.dtype) for t in computes]
        self._nodes.append(_TeCall(function_name, arguments, inputs, computes, results))
        return results[0] if isinstance(result, Tensor) else tuple(results)

    def call_dps_packed(self, name: str, args: Sequence[Value], out_shape: Sequence[Any],
                        dtype: Any = "float32") -> Any:
        """Call the registered extern ``name`` (``tilecraft.extern.register_python`` or
        ``register_c``; dotted names such as ``env.linear`` included) on ``args`` in
        destination-passing style: the compiled code allocates the ``out_shape`` result
        and the extern fills it (Relax's ``R.call_dps_packed``). For an extern with several
        outputs, ``out_shape`` is a list of shapes (and ``dtype`` one dtype or a list) and
        the result a tuple of :class:`Value` s. The registered signature is checked here."""
        extern = lookup(name)
        where = f"call_dps_packed({name!r})"
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        for value in args:
            self._check_own(value, where)
        several = isinstance(out_shape, (list, tuple)) and bool(out_shape) and \
            all(isinstance(s, (list, tuple)) for s in out_shape)
        shapes = [_check_shape(s, f"{where} out_shape") for s in (out_shape if several else [out_shape])]
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(shapes)
        if len(dtypes) != len(shapes):
            raise ModelBuilderError(f"{where}: {len(shapes)} result shape(s) but {len(dtypes)} dtype(s)")
        dtypes = [self._dtype(d, where) for d in dtypes]
        if any(isinstance(d, Var) for shape in shapes for d in shape):
            raise ModelBuilderError(f"{where}: result shapes must be static (the compiled code allocates "
                                    f"them), got {out_shape!r}")
        if len(args) != len(extern.inputs) or len(shapes) != len(extern.outputs):
            raise ExternSignatureError(
                f"{where}: {len(args)} argument(s) and {len(shapes)} result(s), but the extern is "
                f"registered with {len(extern.inputs)} input(s) and {len(extern.outputs)} output(s)")
        for index, (value, spec) in enumerate(zip(args, extern.inputs)):
            dims = tuple(None if isinstance(d, Var) else d for d in value.shape)
            if not spec.accepts(_element(value.dtype), dims):
                raise ExternSignatureError(f"{where}: argument {index} ({value!r}) does not match the "
                                           f"registered {spec}")
        for shape, result_dtype, spec in zip(shapes, dtypes, extern.outputs):
            if not spec.accepts(_element(result_dtype), shape):
                raise ExternSignatureError(f"{where}: a {result_dtype} result of shape {shape} does not "
                                           f"match the registered {spec}")
        results = [self._new_value(self._unique(name.replace(".", "_"), "value"), shape, result_dtype)
                   for shape, result_dtype in zip(shapes, dtypes)]
        self._nodes.append(_ExternCall(extern, args, results))
        return tuple(results) if several else results[0]

    def output(self, *values: Value) -> None:
        """The model's results, in order (once)."""
        if self._outputs is not None:
            raise ModelBuilderError("output() was called already; give every result in one call")
        if not values:
            raise ModelBuilderError("output() needs at least one Value")
        for value in values:
            self._check_own(value, "output")
        self._outputs = list(values)

    # ---- the module ------------------------------------------------------------------------

    def module(self, context: ir.Context | None = None) -> ir.Module:
        """The model as MLIR: one public ``func.func`` (the TE functions inlined), weights
        as constants, extern calls in destination-passing style."""
        if self._outputs is None:
            raise ModelBuilderError("the model has no outputs: call output(...) before building")
        context = context or ir.Context()
        with context, ir.Location.unknown():
            module = ir.Module.create()
            inputs = [node.value for node in self._nodes if isinstance(node, _Input)]
            with ir.InsertionPoint(module.body):
                entry = func.FuncOp(self.name, ir.FunctionType.get(
                    [self._tensor_type(v) for v in inputs], [self._tensor_type(v) for v in self._outputs]))
                entry.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(self._arg_attributes(v)) for v in inputs])
                block = entry.add_entry_block()
            values: dict[int, ir.Value] = {id(v): block.arguments[i] for i, v in enumerate(inputs)}
            for node in self._nodes:
                if isinstance(node, _TeCall):
                    self._emit_te_call(module, block, node, values, context)
                    continue
                with ir.InsertionPoint(block):
                    if isinstance(node, _Constant):
                        values[id(node.value)] = core.constant(node.array, name=node.value.name)
                    elif isinstance(node, _ExternCall):
                        operands = [values[id(v)] for v in node.arguments]
                        made = emit_call(module.operation, node.extern, operands,
                                         [self._tensor_type(v) for v in node.results])
                        values.update((id(v), result) for v, result in zip(node.results, made))
            with ir.InsertionPoint(block):
                func.ReturnOp([values[id(v)] for v in self._outputs])
            passmanager.PassManager.parse("builtin.module(inline,symbol-dce)").run(module.operation)
            module.operation.verify()
        return module

    def ir(self) -> str:
        """The module as text (large weights elided, with the emptied resource section), for reading."""
        text = self.module().operation.get_asm(large_elements_limit=16, large_resource_limit=16)
        return text.split("\n{-#", 1)[0].rstrip() + "\n"

    def build(self, options: CompileOptions | None = None, **overrides: Any) -> Any:
        """Compile the model with :func:`tilecraft.compile` (``options`` / keyword overrides
        as there: ``target=``, ``opt_level=``, ``package_path=``, ``fast_math=``...)."""
        buffer = io.BytesIO()
        self.module().operation.write_bytecode(buffer)
        return compile_model(buffer.getvalue(), options, **overrides)

    # ---- helpers -----------------------------------------------------------------------------

    def _emit_te_call(self, module: ir.Module, block: ir.Block, node: _TeCall, values: dict[int, ir.Value],
                      context: ir.Context) -> None:
        made = create_func([*node.placeholders, *node.computes], name=node.function_name, context=context)
        function = made.body.operations[0]
        function.operation.attributes["sym_visibility"] = ir.StringAttr.get("private")
        function.operation.move_before(module.body.operations[0])
        result_types = ir.FunctionType(ir.TypeAttr(function.operation.attributes["function_type"]).value).results
        with ir.InsertionPoint(block):
            call = func.CallOp(list(result_types), ir.FlatSymbolRefAttr.get(node.function_name),
                               [values[id(v)] for v in node.arguments])
        for value, result in zip(node.results, call.results):
            values[id(value)] = result

    def _new_value(self, name: str, shape: "tuple[int | Var, ...]", dtype: np.dtype) -> Value:
        value = Value(self._id, len(self._values), name, shape, dtype)
        self._values.append(value)
        return value

    def _unique(self, name: str, what: str) -> str:
        if not isinstance(name, str) or not name:
            raise ModelBuilderError(f"a {what} name must be a non-empty string, got {name!r}")
        base = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if not _IDENTIFIER.match(base):
            base = "_" + base
        unique, suffix = base, 1
        while unique in self._names:
            unique, suffix = f"{base}_{suffix}", suffix + 1
        self._names.add(unique)
        return unique

    def _dtype(self, dtype: Any, where: str) -> np.dtype:
        try:
            resolved = np.dtype(dtype)
        except TypeError:
            resolved = None
        if resolved is None or resolved.kind not in "fiub":
            raise ModelBuilderError(f"{where}: unsupported dtype {dtype!r} (give a numpy float, int or bool type)")
        return resolved

    def _check_own(self, value: Any, where: str) -> None:
        if not isinstance(value, Value):
            raise ModelBuilderError(f"{where}: expected a Value of this builder, got {value!r}")
        if value.builder != self._id:
            raise ModelBuilderError(f"{where}: {value!r} belongs to another ModelBuilder")

    @staticmethod
    def _tensor_type(value: Value) -> ir.RankedTensorType:
        dynamic = ir.ShapedType.get_dynamic_size()
        return ir.RankedTensorType.get([dynamic if isinstance(d, Var) else d for d in value.shape],
                                       core.element_type(value.dtype))

    @staticmethod
    def _arg_attributes(value: Value) -> dict[str, ir.Attribute]:
        attributes = {NAME_ATTRIBUTE: ir.StringAttr.get(value.name)}
        if any(isinstance(d, Var) for d in value.shape):
            attributes[SYMBOLS_ATTRIBUTE] = ir.ArrayAttr.get(
                [ir.StringAttr.get(d.name if isinstance(d, Var) else "") for d in value.shape])
        return attributes
