"""ONNX graph -> one ``func.func`` in linalg/tensor/arith/math.

The importer walks the (topologically sorted) nodes once, keeping one map from ONNX value
name to what it is in the IR: an SSA tensor, or an array known at import time. Nodes whose
inputs are all known are evaluated at import (``folding.py``); the others go to their
handler from the table in ``registry.py``. Every op is emitted under a location naming its
ONNX node, so an error deep in the pipeline points back at the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import func

from ...errors import ModelImportError
from ...errors import InternalError, OperandError, TilecraftError
from ...runtime.limits import Limits
from ...runtime.signature import DTYPE_ATTRIBUTE, NAME_ATTRIBUTE, numpy_dtype
from .. import build_module
from ...ir import core, small_types
from . import folding, functions
from .contrib import expand_contrib_ops
from .gradient import expand_gradients
from .model import (
    TensorInfo, as_ir4_if_initializers_unlisted, checked_with_shapes, default_opset, upgrade_old_opset,
    initializers, load_model, onnx_dtype, value_infos,
)
from .node import HandlerError, NodeContext
from .qdq import integer_qdq_matmuls
from .registry import DEFAULT_DOMAINS, lookup

ENTRY_NAME = "main"


def _node_label(node: onnx.NodeProto, position: int) -> str:
    return node.name or f"{node.op_type}_{position}"


# Domains besides the default whose ops import only through their ONNX function bodies.
FUNCTION_DOMAINS = frozenset({"ai.onnx.preview"})


def unsupported_nodes(graph: onnx.GraphProto, opset: int,
                      domain_opsets: dict[str, int] | None = None) -> list[tuple[str, str, str]]:
    """Every node no handler covers, as (node name, op type, reason); ``domain_opsets``
    versions the ops of other domains (ai.onnx.ml)."""
    problems = []
    for position, node in enumerate(graph.node):
        if node.domain in FUNCTION_DOMAINS and functions.has_function(node, opset):
            continue  # expanded from its function body (ai.onnx.preview's FlexAttention)
        if node.domain not in DEFAULT_DOMAINS:
            version = (domain_opsets or {}).get(node.domain, 1)
            if lookup(node.op_type, version, node.domain) is None:
                problems.append((_node_label(node, position), node.op_type, f"domain {node.domain!r}"))
        elif lookup(node.op_type, opset) is None and not functions.has_function(node, opset):
            problems.append((_node_label(node, position), node.op_type, f"opset {opset}"))
    return problems


# Ops that may take int4/uint4/int2/uint2/float4 (carried as i8) or float8 operands:
# conversions and data movement, which never compute on the stored value.
SUB_BYTE_OPS = frozenset({
    "Cast", "CastLike", "DequantizeLinear", "QuantizeLinear", "Identity", "Reshape", "Flatten",
    "Squeeze", "Unsqueeze", "Transpose", "Concat", "Slice", "Gather", "Shape", "Size",
})


class GraphImporter:
    """Imports one ONNX graph into a function of ``module``."""

    def __init__(self, proto: onnx.ModelProto, module: ir.Module | None, source_name: str) -> None:
        self.proto = proto
        self.graph = proto.graph
        self.module = module
        self.source_name = source_name
        self.opset = default_opset(proto)
        self.infos = value_infos(self.graph)
        self.domain_opsets = {entry.domain: entry.version for entry in proto.opset_import}
        self.values: dict[str, ir.Value | np.ndarray] = {}
        # id(array) -> (array, its constant in the entry block): see materialize
        self._constants: dict[int, tuple[np.ndarray, ir.Value]] = {}
        self._entry: ir.Block | None = None
        # Bytes constant folding has made so far; past TILECRAFT_MAX_TOTAL nothing more is
        # folded (the nodes are emitted), so folding cannot exhaust memory however many nodes.
        self.folded_bytes = 0
        self.fold_budget = Limits.current().max_total_bytes

    def bind(self, name: str, value: ir.Value | np.ndarray) -> None:
        if name in self.values:
            raise ModelImportError(f"value {name!r} is defined twice in the graph")
        self.values[name] = value

    def materialize(self, array: np.ndarray, name: str) -> ir.Value:
        """An SSA constant for ``array`` (a weight becomes a dense_resource blob), made once
        in the function's entry block: every later reader there gets the same constant.

        Why: a weight several nodes read (ALBERT's one layer applied 12 times, tied
        embeddings; the exporter writes one initializer and Identity nodes naming it) was
        materialized once per reader, each a blob of its own that the graph stage then packed
        again; the compiled library held ALBERT's layer weights 12 times (docs/performance.md,
        round 27). Only in the function's entry block, which lives as long as the import:
        a constant made in an If/Loop body would not dominate the rest of the function, and
        such bodies are built in placeholder blocks that are erased afterwards.
        """
        if self._entry is None or ir.InsertionPoint.current.block != self._entry:
            return self._constant(array, name)
        cached = self._constants.get(id(array))
        if cached is None or cached[0] is not array:
            # The entry keeps the array alive, so its id cannot be reused by another one.
            cached = self._constants[id(array)] = (array, self._constant(array, name))
        return cached[1]

    @staticmethod
    def _constant(array: np.ndarray, name: str) -> ir.Value:
        return core.constant(array, name=name.replace("/", "_").replace(":", "_") or "constant")

    def _input_type(self, value: onnx.ValueInfoProto) -> ir.RankedTensorType:
        info = self.infos.get(value.name)
        if info is None:
            dtype = onnx_dtype(value.type.tensor_type.elem_type, f"input {value.name!r}")
            raise ModelImportError(f"input {value.name!r} ({dtype}) has no shape: pass shape_dict")
        if info.shape is None:
            raise ModelImportError(f"input {value.name!r} has unknown rank: pass shape_dict")
        dims = [d if d is not None else ir.ShapedType.get_dynamic_size() for d in info.shape]
        return ir.RankedTensorType.get(dims, core.element_type(info.dtype))

    def import_graph(self) -> func.FuncOp:
        weights = initializers(self.graph)
        graph_inputs = [v for v in self.graph.input if v.name not in weights]
        arg_types = [self._input_type(v) for v in graph_inputs]
        location = ir.Location.file(self.source_name, 0, 0)
        with location, ir.InsertionPoint(self.module.body):
            function = func.FuncOp(ENTRY_NAME, ir.FunctionType.get(arg_types, []))
            function.arg_attrs = ir.ArrayAttr.get(
                [self._boundary_attributes(v.name, name=True) for v in graph_inputs]
            )
            entry = function.add_entry_block()
        self._entry = entry
        for name, array in weights.items():
            self.bind(name, array)
        for value, argument in zip(graph_inputs, entry.arguments):
            info = self.infos.get(value.name)
            if info is not None and small_types.is_sub_byte(info.dtype):
                # The caller's bytes hold the value in their low bits only.
                with location, ir.InsertionPoint(entry):
                    argument = core.elementwise(
                        [argument], core.tensor_type(argument).element_type,
                        lambda v, dtype=info.dtype: small_types.normalize(v, dtype),
                    )
            self.bind(value.name, argument)
        with ir.InsertionPoint(entry):
            for position, node in enumerate(self.graph.node):
                label = _node_label(node, position)
                with ir.Location.name(f"{label}({node.op_type})", childLoc=location):
                    self._import_node(node, label)
            with location:
                results = [self._result(output.name) for output in self.graph.output]
                func.ReturnOp(results)
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results])
        )
        function.attributes["res_attrs"] = ir.ArrayAttr.get(
            [self._boundary_attributes(output.name, name=False) for output in self.graph.output]
        )
        return function

    def _boundary_attributes(self, value_name: str, *, name: bool) -> ir.DictAttr:
        """Argument/result attributes: the ONNX name and, for unsigned integers, the dtype.

        Why the dtype: MLIR integers are signless, so a ``uint8`` input is an ``i8`` argument;
        ``tilecraft.dtype`` tells the runtime to accept and return ``uint8`` arrays.
        """
        attributes = {}
        if name:
            attributes[NAME_ATTRIBUTE] = ir.StringAttr.get(value_name)
        info = self.infos.get(value_name)
        if info is not None and (core.is_unsigned_dtype(info.dtype) or small_types.is_sub_byte(info.dtype)):
            attributes[DTYPE_ATTRIBUTE] = ir.StringAttr.get(info.dtype.name)
        return ir.DictAttr.get(attributes)

    def _result(self, name: str) -> ir.Value:
        value = self.values.get(name)
        if value is None:
            raise ModelImportError(f"graph output {name!r} is never produced")
        if not isinstance(value, (ir.Value, np.ndarray)):  # a sequence (ops/sequence.py)
            raise ModelImportError(
                f"graph output {name!r} is a {type(value).__name__}: only tensors cross the "
                "function boundary"
            )
        # A fresh constant per output: two results must not share one buffer.
        return self._constant(value, name) if isinstance(value, np.ndarray) else value

    def _import_node(self, node: onnx.NodeProto, label: str) -> None:
        inputs: list[ir.Value | np.ndarray | None] = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name not in self.values:
                raise ModelImportError(
                    f"node {label!r} ({node.op_type}) reads {name!r}, which no earlier node produces",
                    problems=[(label, node.op_type, f"undefined input {name!r}")],
                )
            else:
                inputs.append(self.values[name])
        output_shapes = [info.shape if (info := self.infos.get(name)) else None for name in node.output]
        foldable = self.folded_bytes < self.fold_budget and folding.can_fold(node, inputs, output_shapes)
        outputs = folding.fold(node, inputs, self.opset) if foldable else None
        if outputs is not None:
            self.folded_bytes += sum(a.nbytes for a in outputs if isinstance(a, np.ndarray))
        if outputs is None and (node.domain in FUNCTION_DOMAINS
                                or lookup(node.op_type, self._opset_of(node), node.domain) is None):
            self._import_function(node, label, inputs)
            return
        if outputs is None:
            outputs = self._emit(node, label, inputs)
        for name, value in zip(node.output, outputs):
            if name and value is not None:
                self.bind(name, value)

    def _info(self, name: str, value: "ir.Value | np.ndarray | None") -> TensorInfo | None:
        """The declared/inferred type of a value, else what its IR type or array says.

        Values made inside an expanded function body have no inferred type; an unsigned
        integer among them reads as signed (MLIR's integers are signless).
        """
        if name in self.infos:
            return self.infos[name]
        if isinstance(value, np.ndarray):
            return TensorInfo(name, value.dtype, value.shape)
        if isinstance(value, ir.Value):
            element = core.tensor_type(value).element_type
            return TensorInfo(name, numpy_dtype(element), tuple(core.static_shape(value)))
        return None

    def _import_function(self, node: onnx.NodeProto, label: str, inputs: list) -> None:
        """Import an op without a handler through its ONNX function body (functions.py)."""
        types = {}
        for name, value in zip(node.input, inputs):
            info = self._info(name, value)
            if info is not None:
                types[name] = functions.tensor_type(info)
        # A function of another domain (ai.onnx.preview) is versioned by that domain's opset.
        opset = self.domain_opsets.get(node.domain, self.opset) if node.domain not in ("", "ai.onnx") else self.opset
        body = functions.function_body(node, opset, types)
        if body is None:
            raise ModelImportError(
                f"node {label!r} ({node.op_type}, opset {self.opset}): no handler, and ONNX "
                "could not build its function body for these inputs",
                problems=[(label, node.op_type, "function body unavailable")],
            )
        for position, body_node in enumerate(functions.expand(node, label, body, opset)):
            with ir.Location.name(f"{body_node.name}({body_node.op_type})"):
                self._import_node(body_node, body_node.name or f"{label}/{position}")

    def _check_sub_byte(self, node: onnx.NodeProto, label: str, infos: list[TensorInfo | None]) -> None:
        """int4/int2/float4 tensors are ``i8`` in IR (ir/small_types.py): only ops that
        convert or move them may see one; arithmetic on the storage would be a wrong answer.
        float8 arithmetic would reach LLVM, which has no float8 types: refused here too."""
        if node.op_type in SUB_BYTE_OPS:
            return
        for info in infos:
            if info is not None and (small_types.is_sub_byte(info.dtype) or info.dtype.name.startswith("float8")):
                raise ModelImportError(
                    f"node {label!r} ({node.op_type}): {info.dtype} operands are supported by "
                    f"{', '.join(sorted(SUB_BYTE_OPS))} only",
                    problems=[(label, node.op_type, f"{info.dtype} operand")],
                )

    def import_subgraph(self, graph: onnx.GraphProto, bindings: Mapping[str, object], label: str) -> list:
        """Import a control-flow body's nodes at the current insertion point and return its
        outputs (SSA values, arrays or sequences). ``bindings`` gives its inputs; outer
        values stay visible by name (ONNX names are unique across a model's graphs)."""
        for name, array in initializers(graph).items():
            self.values[name] = array
        for name, value in bindings.items():
            self.values[name] = value
        for name, info in value_infos(graph).items():
            if name not in bindings:
                self.infos.setdefault(name, info)
        for position, node in enumerate(graph.node):
            node_label = f"{label}/{_node_label(node, position)}"
            with ir.Location.name(f"{node_label}({node.op_type})"):
                self._import_node(node, node_label)
        results = []
        for output in graph.output:
            if output.name not in self.values:
                raise ModelImportError(f"node {label!r}: body output {output.name!r} is never produced")
            results.append(self.values[output.name])
        return results

    def _opset_of(self, node: onnx.NodeProto) -> int:
        """The opset version ``node``'s domain is imported at."""
        return self.opset if node.domain in DEFAULT_DOMAINS else self.domain_opsets.get(node.domain, 1)

    def _emit(self, node: onnx.NodeProto, label: str, inputs: list) -> Sequence[object]:
        opset = self._opset_of(node)
        handler = lookup(node.op_type, opset, node.domain)
        if handler is None:  # checked up front; kept for nodes reached another way
            raise ModelImportError(f"node {label!r}: {node.op_type} is not supported")
        input_infos = [self._info(name, value) for name, value in zip(node.input, inputs)]
        self._check_sub_byte(node, label, input_infos)
        context = NodeContext(
            node=node,
            opset=opset,
            inputs=inputs,
            input_infos=input_infos,
            output_infos=[self.infos.get(name) for name in node.output],
            materialize=self.materialize,
            subgraph=lambda graph, bindings: self.import_subgraph(graph, bindings, label),
        )
        try:
            outputs = list(handler.emit(context))
        except (HandlerError, OperandError) as error:  # the model's fault, as the handler found
            raise ModelImportError(
                f"node {label!r} ({node.op_type}, opset {opset}): {error}",
                problems=[(label, node.op_type, str(error))],
            ) from error
        except TilecraftError:
            raise  # typed already (a body graph's node, a size limit): keeps its own type
        except Exception as error:  # anything else is a bug in the handler, not a bad model
            raise InternalError(
                f"node {label!r} ({node.op_type}, opset {opset}): the {node.op_type} converter "
                f"failed, a bug in tilecraft: {type(error).__name__}: {error}"
            ) from error
        if len(outputs) < len([o for o in node.output if o]):
            raise ModelImportError(
                f"node {label!r} ({node.op_type}): handler produced {len(outputs)} outputs, "
                f"the node has {len(node.output)}"
            )
        return outputs


def import_graph_here(graph: onnx.GraphProto, bindings: Mapping[str, object], *, opset: int,
                      label: str) -> list:
    """Import the nodes of ``graph`` (a synthesized ONNX graph at ``opset``) at the current
    insertion point and return its outputs (SSA values or arrays).

    ``bindings`` gives the values of the names the graph reads but does not define (SSA
    tensors or arrays, which fold as a model's initializers do). Why: another frontend
    reuses a computation written once as ONNX nodes: ``aten.lstm`` imports the same time
    loop as ONNX's LSTM (frontend/recurrent.py). Errors are the ONNX importer's
    (``ModelImportError`` naming ``label``)."""
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    return GraphImporter(model, module=None, source_name=label).import_subgraph(graph, bindings, label)


def import_model(
    model: "str | Path | bytes | onnx.ModelProto",
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
    *,
    context: ir.Context | None = None,
    name: str | None = None,
) -> ir.Module:
    """Import an ONNX model as an MLIR module with one public function ``@main``.

    Args:
      model: a path, serialized bytes or an ``onnx.ModelProto``.
      shape_dict: input name -> shape, overriding the model's; ``None`` entries stay dynamic.
      context: the MLIR context to build in (a new one by default).
      name: what error messages call the model (default: its path, else ``model.onnx``);
        a caller that read the file already passes the proto and the path.

    Raises:
      ModelImportError: the model cannot be read, uses unsupported operators (all of them
        are listed, with node names), or a node cannot be imported (named in the message).
    """
    source_name = name or (str(model) if isinstance(model, (str, Path)) else "model.onnx")
    proto = upgrade_old_opset(load_model(model))
    opset = default_opset(proto)
    proto = expand_gradients(proto, opset)
    proto = expand_contrib_ops(proto)
    problems = unsupported_nodes(proto.graph, opset, {entry.domain: entry.version for entry in proto.opset_import})
    if problems:
        listing = "; ".join(f"{op} (node {name!r}, {why})" for name, op, why in problems)
        raise ModelImportError(
            f"{len(problems)} unsupported operator(s) in {source_name}: {listing}", problems=problems
        )
    proto = as_ir4_if_initializers_unlisted(proto)  # for shape inference too, not only the check
    proto = integer_qdq_matmuls(proto)  # after: its pattern tests read inferred element types
    proto = checked_with_shapes(proto, shape_dict)
    return build_module(
        context, lambda module: GraphImporter(proto, module, source_name).import_graph(), ModelImportError
    )
