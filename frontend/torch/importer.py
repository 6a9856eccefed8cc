"""``torch.export`` program -> one ``func.func`` in linalg/tensor/arith/math.

The importer walks the FX graph of an :class:`torch.export.ExportedProgram` (decomposed to
the core ATen op set) once, keeping one map from FX node to what it is in the IR: an SSA
tensor, an ``index`` value (a symbolic size), an array or Python scalar known at import
time, or a tuple of those (multi-result ops). Parameters, buffers and lifted constants are
weights: ``core.constant`` turns them into ``dense_resource`` blobs, never IR text.

A node whose inputs are all known at import time (a transposed weight, a causal mask built
from ``arange``) is evaluated by PyTorch itself, like the ONNX importer folds with
``onnx.reference``: the IR then carries the result, and the compiled code does not redo it.
Every other node goes to its handler in ``ops.py`` under a location naming the FX node and
the Python source line that made it, so a failure deep in the pipeline points at the model.

A program that writes the caller's tensors (in-place ops on inputs or buffers) stays a pure
function here: ``@main`` returns the new values after the user outputs (:func:`mutations`)
and takes the written buffers as arguments (:func:`state_inputs`); the caller copies them
back (compiler/torch_module.py).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np
import torch
from mlir import ir
from mlir.dialects import func
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, OutputSpec

from ...errors import OperandTypeError, TorchImportError
from ...runtime.signature import DTYPE_ATTRIBUTE, NAME_ATTRIBUTE
from .. import build_module
from ...ir import complex_pairs, core
from ...errors import InternalError, OperandError, OperandTypeError, TilecraftError

ENTRY_NAME = "main"
# ``torch.export`` threads ops with side effects (``_linalg_check_errors``, which raises in
# eager) through effect tokens: a TOKEN input, ``with_effects(token, op, *args)`` calls and a
# TOKEN output. The compiled code keeps the ops' order anyway, so a token is this marker.
EFFECT_TOKEN = "effect-token"
WITH_EFFECTS = "with_effects"
# Handlers of nodes that read or make complex tensors are registered under this prefix
# (``complex:aten._fft_r2c.default``): inside the graph a complex tensor is a real one with
# a trailing dim of 2 (ir/complex_pairs.py), which a handler written for real
# tensors would misread, so such a node never reaches one.
COMPLEX_PREFIX = "complex:"
# Complex dtypes: their parts' numpy dtype (complex32 has no numpy dtype: refused by name).
TORCH_COMPLEX: dict[torch.dtype, np.dtype] = {
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}

# torch dtype -> numpy dtype (complex types have no numpy/MLIR path here). numpy has no
# bfloat16: its arrays are ml_dtypes', whose bits torch reads as int16 (to_numpy, from_numpy).
TORCH_TO_NUMPY: dict[torch.dtype, np.dtype] = {
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
}

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
# What the program may write into the caller's tensors (``x.add_(1)``, the running statistics
# of ``batch_norm(training=True)``): torch.export returns the new values as extra outputs.
MUTATIONS = (OutputKind.USER_INPUT_MUTATION, OutputKind.BUFFER_MUTATION)

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype; ``TypeError`` naming it if there is none.

    A complex dtype gives the dtype of its parts: that is the element type of its pairs."""
    if dtype in TORCH_COMPLEX:
        return complex_pairs.part_dtype(TORCH_COMPLEX[dtype])
    if dtype == torch.complex32:
        raise OperandTypeError("dtype torch.complex32 (chalf) is not supported: numpy has no complex "
                        "dtype with float16 parts to pass it in or out")
    if dtype not in TORCH_TO_NUMPY:
        raise OperandTypeError(f"dtype {dtype} is not supported (supported: "
                        f"{', '.join(str(d) for d in TORCH_TO_NUMPY)})")
    return TORCH_TO_NUMPY[dtype]


def _is_complex(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype.is_complex


def touches_complex(node: fx.Node) -> bool:
    """True when ``node`` reads or makes a complex tensor (its handler then works on pairs)."""
    metas = [node.meta.get("val")]
    metas += [arg.meta.get("val") for arg in node.all_input_nodes]
    return any(_is_complex(m) or (isinstance(m, (list, tuple)) and any(_is_complex(v) for v in m))
               for m in metas)


def table_key(node: fx.Node) -> str:
    """The op table's key for ``node``: its op name, prefixed for complex operands; for a
    ``with_effects`` call, the name of the op it wraps."""
    name = op_name(node.target)
    if name == WITH_EFFECTS and len(node.args) > 1:
        return op_name(node.args[1])
    return COMPLEX_PREFIX + name if touches_complex(node) else name


def op_name(target: Any) -> str:
    """The key of an FX call target in the op table: ``aten.add.Tensor``, ``operator.getitem``."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    return getattr(target, "__name__", str(target))


def source_location(node: fx.Node) -> tuple[str, int] | None:
    """The innermost model source line of ``node`` (from its ``stack_trace``), skipping
    frames inside torch itself so ``nn.Linear`` points at the model that used it."""
    trace = node.meta.get("stack_trace") or ""
    frames = [(path, int(line)) for path, line in _FRAME.findall(trace)]
    if not frames:
        return None
    outside_torch = [f for f in frames if "/torch/" not in f[0]]
    return (outside_torch or frames)[-1]


def describe_location(node: fx.Node) -> str:
    where = source_location(node)
    return f"{where[0]}:{where[1]}" if where else "unknown source location"


@dataclass
class OpContext:
    """What a handler sees of its node: the node's metadata and a way to make tensors."""

    node: fx.Node
    importer: "ProgramImporter"

    @property
    def meta(self) -> Any:
        """The node's result as a FakeTensor (or a tuple of them), shapes possibly symbolic."""
        return self.node.meta.get("val")

    def result_dtype(self, index: int | None = None) -> np.dtype:
        meta = self.meta if index is None else self.meta[index]
        return numpy_dtype(meta.dtype)

    def result_element(self, index: int | None = None) -> ir.Type:
        return core.element_type(self.result_dtype(index))

    def arg_meta(self, position: int) -> Any:
        """The FakeTensor (or Python scalar) of positional argument ``position``."""
        arg = self.node.args[position]
        return arg.meta.get("val") if isinstance(arg, fx.Node) else arg

    def tensor(self, value: Any, dtype: np.dtype | None = None) -> ir.Value:
        """``value`` (SSA tensor, import-time array or Python scalar) as a tensor value,
        converted to ``dtype`` when given."""
        return self.importer.as_tensor(value, dtype)


Handler = Callable[..., Any]


class ProgramImporter:
    """Imports one exported program into the function ``@main`` of ``module``."""

    def __init__(self, program: ExportedProgram, module: ir.Module,
                 table: "dict[str, Handler]") -> None:
        self.program = program
        self.graph = program.graph
        self.module = module
        self.table = table
        self.values: dict[fx.Node, Any] = {}
        # id(array) -> (array, its materialized constant): each weight is emitted once
        self._constants: dict[int, tuple[np.ndarray, ir.Value]] = {}

    # --- values ---------------------------------------------------------------------------

    def bind(self, node: fx.Node, value: Any) -> None:
        if node in self.values:
            raise TorchImportError(f"FX node {node.name!r} is defined twice")
        self.values[node] = value

    def as_tensor(self, value: Any, dtype: np.dtype | None = None) -> ir.Value:
        from ...ir import elementwise

        if isinstance(value, np.ndarray):
            array = value if dtype is None else value.astype(dtype, copy=False)
            cached = self._constants.get(id(array))
            if cached is None or cached[0] is not array:
                # the entry keeps the array alive, so its id cannot be reused by another one
                cached = (array, core.constant(array, name="weight"))
                self._constants[id(array)] = cached
            return cached[1]
        if isinstance(value, (bool, int, float)):
            if dtype is None:
                raise OperandTypeError(f"a scalar {value!r} needs a dtype to become a tensor")
            return core.constant(np.array(value, dtype=dtype))
        if isinstance(value, ir.Value) and isinstance(value.type, ir.RankedTensorType):
            if dtype is None:
                return value
            target = core.element_type(dtype)
            if core.tensor_type(value).element_type == target:
                return value
            return core.elementwise([value], target, lambda s: elementwise.cast(
                s, target, target_unsigned=dtype.kind == "u"))
        raise OperandTypeError(f"expected a tensor, got {type(value).__name__}")

    def _known(self, value: Any) -> bool:
        """True when ``value`` holds nothing computed at run time."""
        if isinstance(value, ir.Value):
            return False
        if isinstance(value, (list, tuple)):
            return all(self._known(v) for v in value)
        if isinstance(value, dict):
            return all(self._known(v) for v in value.values())
        return True

    # --- the graph ------------------------------------------------------------------------

    def unsupported(self) -> list[tuple[str, str, str]]:
        """Every call no handler covers, as (FX node, op, source location); the op of a
        ``with_effects`` call is the one it wraps."""
        return [
            (node.name, table_key(node), describe_location(node))
            for node in self.graph.nodes
            if node.op == "call_function" and table_key(node) not in self.table
            and op_name(node.target) != "operator.getitem"
        ]

    def _weights(self) -> dict[str, np.ndarray]:
        """Parameters, buffers and lifted constants by placeholder name."""
        signature = self.program.graph_signature
        state = {spec.arg.name for spec in state_inputs(self.program)}
        weights = {}
        for spec in signature.input_specs:
            if spec.kind in (InputKind.USER_INPUT, InputKind.TOKEN) or spec.arg.name in state:
                continue
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                tensor = self.program.state_dict.get(spec.target)
                if tensor is None:  # a non-persistent buffer lives with the constants
                    tensor = self.program.constants[spec.target]
            elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
                tensor = self.program.constants[spec.target]
            else:
                raise TorchImportError(f"input {spec.arg.name!r} of kind {spec.kind.name} is not supported")
            if not isinstance(tensor, torch.Tensor):
                raise TorchImportError(f"{spec.target!r} is a {type(tensor).__name__}, not a tensor")
            weights[spec.arg.name] = to_numpy(tensor)
        return weights

    def _argument_type(self, node: fx.Node) -> ir.RankedTensorType:
        meta = node.meta.get("val")
        if not isinstance(meta, torch.Tensor):
            raise TorchImportError(
                f"input {node.name!r} is a {type(meta).__name__}; only tensor inputs are supported")
        dims = [d if isinstance(d, int) else ir.ShapedType.get_dynamic_size() for d in meta.shape]
        try:
            element = (complex_pairs.complex_type(TORCH_COMPLEX[meta.dtype]) if meta.dtype in TORCH_COMPLEX
                       else core.element_type(numpy_dtype(meta.dtype)))
        except OperandTypeError as error:  # a dtype with no MLIR element type
            raise TorchImportError(f"input {node.name!r}: {error}") from None
        return ir.RankedTensorType.get(dims, element)

    def import_program(self) -> func.FuncOp:
        problems = self.unsupported()
        if problems:
            listing = "; ".join(f"{op} (node {name!r} at {where})" for name, op, where in problems)
            raise TorchImportError(f"{len(problems)} unsupported ATen op(s): {listing}", problems=problems)
        for spec in self.program.graph_signature.output_specs:
            if spec.kind not in (OutputKind.USER_OUTPUT, OutputKind.TOKEN, *MUTATIONS):
                raise TorchImportError(
                    f"the program updates {spec.target!r} ({spec.kind.name}): a training graph "
                    "(gradients, a loss) cannot be compiled for inference")
        weights = self._weights()
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        by_name = {n.name: n for n in placeholders}
        # the user inputs in call order, then the buffers the program writes (arguments, not
        # constants: each call must read what the previous one wrote)
        user_inputs = [by_name[spec.arg.name] for spec in self.program.graph_signature.input_specs
                       if spec.kind == InputKind.USER_INPUT]
        user_inputs += [by_name[spec.arg.name] for spec in state_inputs(self.program)]
        tokens = {spec.arg.name for spec in self.program.graph_signature.input_specs
                  if spec.kind == InputKind.TOKEN}
        arg_types = [self._argument_type(n) for n in user_inputs]
        location = ir.Location.file("torch.export", 0, 0)
        with location, ir.InsertionPoint(self.module.body):
            function = func.FuncOp(ENTRY_NAME, ir.FunctionType.get(arg_types, []))
            function.arg_attrs = ir.ArrayAttr.get([_boundary_attributes(n, n.name) for n in user_inputs])
            entry = function.add_entry_block()
        for node in placeholders:
            if node.name in weights:
                self.bind(node, weights[node.name])
            elif node.name in tokens:
                self.bind(node, EFFECT_TOKEN)
        results: list[ir.Value] = []
        with ir.InsertionPoint(entry):
            for node, argument in zip(user_inputs, entry.arguments):
                if isinstance(core.tensor_type(argument).element_type, ir.ComplexType):
                    with location:
                        argument = complex_pairs.to_pairs(argument)
                self.bind(node, argument)
            for node in self.graph.nodes:
                if node.op == "call_function":
                    with self._location(node):
                        self._import_node(node)
                elif node.op == "output":
                    with location:
                        results = self._results(node)
                    func.ReturnOp(results, loc=location)
                elif node.op != "placeholder":
                    raise TorchImportError(f"FX node {node.name!r}: {node.op} nodes are not supported")
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results]))
        outputs = _returned(self.program, [n for n in self.graph.nodes if n.op == "output"][0].args[0])
        function.attributes["res_attrs"] = ir.ArrayAttr.get([_boundary_attributes(o, None) for o in outputs])
        return function

    def _location(self, node: fx.Node) -> ir.Location:
        where = source_location(node)
        child = ir.Location.file(where[0], where[1], 0) if where else ir.Location.unknown()
        return ir.Location.name(f"{node.name}({op_name(node.target)})", childLoc=child)

    def _results(self, node: fx.Node) -> list[ir.Value]:
        outputs = _returned(self.program, node.args[0])
        results = []
        for position, output in enumerate(outputs):
            value = self.values.get(output) if isinstance(output, fx.Node) else output
            if isinstance(value, (np.ndarray, ir.Value)) and (
                    isinstance(value, np.ndarray) or isinstance(value.type, ir.RankedTensorType)):
                meta = output.meta.get("val") if isinstance(output, fx.Node) else None
                results.append(complex_pairs.from_pairs(self.as_tensor(value)) if _is_complex(meta)
                               else self.as_tensor(value))
            else:
                raise TorchImportError(
                    f"output {position} is a {type(value).__name__}, not a tensor: compiled "
                    "modules return tensors only")
        return results

    def _import_node(self, node: fx.Node) -> None:
        args = fx.node.map_arg(node.args, lambda n: self.values[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: self.values[n])
        name = table_key(node)
        if op_name(node.target) == WITH_EFFECTS:  # (token, op, *args): the op's results after the token
            token, _target, *args = args
            context = OpContext(node, self)
            value = self._call_handler(node, name, context, args, kwargs)
            self.bind(node, (token, *(value if isinstance(value, tuple) else () if value is None else (value,))))
            return
        # complex results stay in the graph: an import-time complex array has no pairs form
        # that torch could take back as an argument
        if op_name(node.target) == "operator.getitem" or (self._known((args, kwargs)) and _foldable(node.target)
                                                          and not touches_complex(node)):
            try:
                self.bind(node, _evaluate(node.target, args, kwargs))
                return
            except TorchImportError:
                raise
            except Exception:  # not evaluable eagerly (symbolic input): emit it instead
                pass
        context = OpContext(node, self)
        self.bind(node, self._call_handler(node, name, context, args, kwargs))

    def _call_handler(self, node: fx.Node, name: str, context: OpContext, args: Any, kwargs: Any) -> Any:
        try:
            return self.table[name](context, *args, **kwargs)
        except OperandError as error:  # the converter found the program's fault
            raise TorchImportError(
                f"node {node.name!r} ({name}) at {describe_location(node)}: {error}",
                problems=[(node.name, name, str(error))]) from error
        except TilecraftError:
            raise  # typed already: keeps its own type
        except Exception as error:  # anything else is a bug in the converter, not a bad program
            raise InternalError(
                f"node {node.name!r} ({name}) at {describe_location(node)}: the {name} converter "
                f"failed, a bug in tilecraft: {type(error).__name__}: {error}") from error


def _returned(program: ExportedProgram, outputs: Any) -> list[Any]:
    """What ``@main`` returns of the output node's values: the user outputs, then the new
    values of the inputs and buffers the program writes (in :func:`mutations` order);
    effect tokens are dropped."""
    specs = program.graph_signature.output_specs
    if len(specs) != len(outputs):
        return list(outputs)
    return ([o for o, spec in zip(outputs, specs) if spec.kind == OutputKind.USER_OUTPUT]
            + [o for o, spec in zip(outputs, specs) if spec.kind in MUTATIONS])


def mutations(program: ExportedProgram) -> list[OutputSpec]:
    """The program's writes into the caller's tensors, in the order ``@main`` returns their
    new values after the user outputs: ``USER_INPUT_MUTATION`` (``target``: the input's
    placeholder name) and ``BUFFER_MUTATION`` (``target``: the buffer's name in the module).

    Why results: the compiled code is functional (it never writes its arguments), so the
    caller (compiler/torch_module.py) copies these into the tensors, as eager leaves them."""
    return [spec for spec in program.graph_signature.output_specs if spec.kind in MUTATIONS]


def state_inputs(program: ExportedProgram) -> list[InputSpec]:
    """The buffers the program writes, in input order: ``@main`` takes them as arguments after
    the user inputs instead of baking them in as constants."""
    written = {spec.target for spec in mutations(program) if spec.kind == OutputKind.BUFFER_MUTATION}
    return [spec for spec in program.graph_signature.input_specs
            if spec.kind == InputKind.BUFFER and spec.target in written]


def _boundary_attributes(node: Any, name: str | None) -> ir.DictAttr:
    """An argument's or result's attributes: its name and, for unsigned integers, its dtype.

    Why the dtype: MLIR integers are signless, so a ``uint8`` tensor is ``i8`` in the IR;
    ``tilecraft.dtype`` tells the runtime to take and return ``uint8`` arrays.
    """
    attributes = {} if name is None else {NAME_ATTRIBUTE: ir.StringAttr.get(name)}
    meta = node.meta.get("val") if isinstance(node, fx.Node) else None
    if isinstance(meta, torch.Tensor) and meta.dtype in TORCH_TO_NUMPY and core.is_unsigned_dtype(
            TORCH_TO_NUMPY[meta.dtype]):
        attributes[DTYPE_ATTRIBUTE] = ir.StringAttr.get(TORCH_TO_NUMPY[meta.dtype].name)
    return ir.DictAttr.get(attributes)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array with ``tensor``'s contents (a view where torch allows one)."""
    tensor = tensor.detach()
    if tensor.dtype in TORCH_COMPLEX:  # as pairs, the form complex values have in the graph
        return complex_pairs.as_pairs_array(tensor.cpu().resolve_conj().contiguous().numpy())
    if tensor.dtype not in TORCH_TO_NUMPY:
        raise TorchImportError(f"dtype {tensor.dtype} is not supported")
    return tensor_view(tensor.cpu().contiguous())


def tensor_view(tensor: torch.Tensor) -> np.ndarray:
    """``tensor.numpy()`` (a view of its memory), bfloat16 included: numpy has no bfloat16,
    torch no ml_dtypes, so its bits go through int16."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy(array)`` (no copy), an ml_dtypes bfloat16 array included (as
    :func:`tensor_view`, through int16); a tensor of shape ``()`` for a numpy scalar."""
    array = np.asarray(array)
    if array.dtype == BFLOAT16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _foldable(target: Any) -> bool:
    """Ops PyTorch may evaluate at import time: deterministic ATen ops."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def _evaluate(target: Any, args: Any, kwargs: Any) -> Any:
    """Run ``target`` eagerly on import-time values; arrays go in and come out as numpy."""
    if target is operator.getitem:
        container, position = args
        return container[position]
    to_torch = lambda v: from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v  # noqa: E731
    args = torch.utils._pytree.tree_map(to_torch, args)
    kwargs = torch.utils._pytree.tree_map(to_torch, kwargs)
    result = target(*args, **kwargs)
    return torch.utils._pytree.tree_map(
        lambda v: to_numpy(v) if isinstance(v, torch.Tensor) else v, result)


def import_program(program: ExportedProgram, table: "dict[str, Handler]",
                   context: ir.Context | None = None) -> ir.Module:
    """The module with one public function ``@main`` computing ``program``'s user outputs
    from its user inputs; ``TorchImportError`` lists every unsupported op at once."""
    return build_module(
        context, lambda module: ProgramImporter(program, module, table).import_program(), TorchImportError
    )
