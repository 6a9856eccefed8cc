"""Cutting an ONNX graph where its string tensors begin and end.

MLIR's builtin tensors hold numbers, so a node that reads or writes a STRING tensor
(StringNormalizer, StringSplit, StringConcat, RegexFullMatch, ``Equal`` on strings, a
LabelEncoder from or to strings, ``Cast`` to or from strings, a Reshape or Gather moving
strings) has no compiled form. Such nodes run on the host, as onnxruntime runs them on its
CPU provider; every other node is compiled as usual.

:func:`split_at_strings` orders the nodes into segments, each made of host nodes only or of
compiled nodes only, each an ONNX model of its own whose inputs are graph inputs or outputs
of earlier segments. ``compiler/partitioned.py`` compiles the numeric segments and runs all
of them in order. The cut is by values, not by op names, so a tokenizer in front of a
numeric model (strings in, embedding ids out) or a label lookup behind a classifier
(scores in, class names out) splits into a host prefix or suffix and one compiled body.

Models without string tensors never get here: :func:`has_string_tensors` is a cheap
look at where strings can originate (graph inputs and outputs, initializers, constants and
casts), checked before any shape inference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import onnx
from onnx import helper

from ...errors import ModelImportError
from .model import as_ir4_if_initializers_unlisted, checked_with_shapes, load_model, upgrade_old_opset

STRING = onnx.TensorProto.STRING
# ai.onnx.ml ops whose attributes can make string outputs from numbers (a LabelEncoder's
# values_strings, CategoryMapper's cats_strings, a classifier's classlabels_strings, ZipMap).
_ML_STRING_ATTRIBUTES = ("values_strings", "cats_strings", "classlabels_strings", "default_string")


@dataclass(frozen=True)
class Segment:
    """Consecutive nodes of one kind, as a model of their own.

    ``inputs`` and ``outputs`` name the values it reads and writes at its boundary, in the
    order of ``model``'s graph inputs and outputs; initializers it reads are inside
    ``model``.
    """

    on_host: bool
    model: onnx.ModelProto
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def op_types(self) -> list[str]:
        return sorted({node.op_type for node in self.model.graph.node})


@dataclass(frozen=True)
class StringPartition:
    """The segments of a model with string tensors and the model's own interface."""

    segments: tuple[Segment, ...]
    inputs: tuple[onnx.ValueInfoProto, ...]
    outputs: tuple[onnx.ValueInfoProto, ...]
    # Graph outputs that no node computes (an initializer returned as it is).
    constant_outputs: dict[str, onnx.TensorProto]


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == onnx.AttributeProto.GRAPHS:
            yield from attribute.graphs


def _is_string_tensor_type(value: onnx.ValueInfoProto) -> bool:
    return value.type.HasField("tensor_type") and value.type.tensor_type.elem_type == STRING


def _makes_strings(node: onnx.NodeProto) -> bool:
    """Whether the node can output strings without reading any: a string constant, a cast to
    strings, an ai.onnx.ml op with string labels."""
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type == STRING:
            return True
        if node.op_type == "Constant" and attribute.name in ("value_string", "value_strings"):
            return True
        if attribute.name == "to" and node.op_type == "Cast" and attribute.i == STRING:
            return True
        if node.domain == "ai.onnx.ml" and attribute.name in _ML_STRING_ATTRIBUTES:
            return True
    return node.domain == "ai.onnx.ml" and node.op_type == "ZipMap"


def _string_names(graph: onnx.GraphProto) -> set[str]:
    """Names of the string tensors a graph declares: typed values (after shape inference, all
    of them) and initializers."""
    names = {v.name for v in (*graph.input, *graph.output, *graph.value_info) if _is_string_tensor_type(v)}
    return names | {t.name for t in graph.initializer if t.data_type == STRING}


def _graph_may_hold_strings(graph: onnx.GraphProto) -> bool:
    if _string_names(graph):
        return True
    return any(_makes_strings(node) or any(_graph_may_hold_strings(g) for g in _subgraphs(node))
               for node in graph.node)


def has_string_tensors(proto: onnx.ModelProto) -> bool:
    """Whether any tensor of the model can be a string tensor (see the module docstring)."""
    return _graph_may_hold_strings(proto.graph)


@dataclass(frozen=True)
class OnnxSource:
    """An ONNX model as ``compile`` and ``extract_tasks`` read it: once.

    Why: the string check needs the loaded graph, and reading a path again for the import
    cost 0.17 s on ResNet-50's 100 MB (seconds on larger models). ``name`` is the file path
    error messages give the model (None when a proto was given)."""

    proto: onnx.ModelProto
    shape_dict: Any
    name: str | None
    has_strings: bool

    def to_import(self, source: Any) -> tuple[Any, str | None]:
        """What to import for ``source`` (the value this was read from) and the name its
        messages give it: the proto read here and its path when it came from a file (not
        read again), else ``source`` itself, unnamed."""
        return (self.proto, self.name) if self.name is not None else (source, None)


def read_onnx_source(source: Any, shape_dict: Any = None) -> OnnxSource | None:
    """``source`` (anything ``tilecraft.compile`` takes; a
    :class:`~tilecraft.frontend.loader.Model` brings its shape_dict) read as an ONNX model,
    with whether it has string tensors; None for every other source."""
    from ..loader import Model, is_onnx_source, source_path

    if isinstance(source, Model):
        shape_dict = source.shape_dict if shape_dict is None else shape_dict
        source = source.source
    if not is_onnx_source(source):
        return None
    path = source_path(source)
    proto = load_model(source)
    return OnnxSource(proto, shape_dict, str(path) if path is not None else None, has_string_tensors(proto))


def _free_names(graph: onnx.GraphProto) -> list[str]:
    """Outer-scope values a subgraph reads (an If branch's captured tensors)."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    free: list[str] = []
    for node in graph.node:
        free.extend(name for name in _reads(node) if name not in defined)
        defined.update(node.output)
    free.extend(v.name for v in graph.output if v.name not in defined)
    return free


def _reads(node: onnx.NodeProto) -> list[str]:
    """Every value a node reads: its inputs and what its subgraphs capture."""
    names = [name for name in node.input if name]
    for graph in _subgraphs(node):
        names.extend(_free_names(graph))
    return names


def _touches_strings(node: onnx.NodeProto, strings: set[str]) -> bool:
    """Whether the node reads (subgraphs included) or writes a string tensor, or holds one."""
    if any(name in strings for name in (*_reads(node), *node.output)) or _makes_strings(node):
        return True
    return any(_graph_may_hold_strings(g) for g in _subgraphs(node))


def _schema_violation(node: onnx.NodeProto, types: dict[str, onnx.ValueInfoProto],
                      opsets: dict[str, int]) -> str | None:
    """Why a host node's operand types break its schema's type constraints, or None.

    The compiled path refuses such models in its handlers; the reference evaluator does not
    (``Add`` on two string tensors concatenates them as numpy does), so host nodes are checked
    here. Ops without a schema (model-local functions) are left to the evaluator."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except onnx.defs.SchemaError:
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for names, formals in ((node.input, schema.inputs), (node.output, schema.outputs)):
        for position, name in enumerate(names):
            if not name or name not in types or not formals:
                continue
            formal = formals[min(position, len(formals) - 1)]
            if position >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
                continue
            value_type = types[name].type
            if not value_type.HasField("tensor_type") or not value_type.tensor_type.elem_type:
                continue
            given = f"tensor({onnx.TensorProto.DataType.Name(value_type.tensor_type.elem_type).lower()})"
            permitted = allowed.get(formal.type_str, {formal.type_str})
            if given not in permitted:
                return f"{formal.name} {name!r} is {given}; the schema allows {', '.join(sorted(permitted))}"
    return None


def _segment_numbers(nodes: Iterable[onnx.NodeProto], on_host: list[bool]) -> list[int]:
    """Per node, the number of its segment: even numbers are compiled segments, odd ones
    host segments, and every node comes after the nodes it reads from (in a later segment
    when their kinds differ). The smallest such numbers, so kinds alternate as rarely as the
    data flow allows."""
    producer_segment: dict[str, int] = {}
    numbers: list[int] = []
    for node, host in zip(nodes, on_host):
        parity = 1 if host else 0
        lowest = parity
        for name in _reads(node):
            if name not in producer_segment:
                continue  # a graph input or an initializer: there from the start
            earlier = producer_segment[name]
            earliest = earlier if earlier % 2 == parity else earlier + 1
            lowest = max(lowest, earliest)
        numbers.append(lowest)
        for name in node.output:
            if name:
                producer_segment[name] = lowest
    return numbers


def split_at_strings(model: "onnx.ModelProto", shape_dict: "dict[str, list[int | None]] | None" = None) -> StringPartition:
    """The model's segments (module docstring); ``shape_dict`` fixes input shapes first.

    Raises:
      ModelImportError: the model cannot be read or typed, or a value crossing between host
        and compiled nodes has no known element type.
    """
    proto = as_ir4_if_initializers_unlisted(upgrade_old_opset(load_model(model)))
    proto = checked_with_shapes(proto, shape_dict)
    graph = proto.graph
    strings = _string_names(graph)
    initializers = {t.name: t for t in graph.initializer}
    types: dict[str, onnx.ValueInfoProto] = {v.name: v for v in (*graph.value_info, *graph.input, *graph.output)}
    for tensor in graph.initializer:
        types.setdefault(tensor.name, helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))

    nodes = list(graph.node)
    on_host = [_touches_strings(node, strings) for node in nodes]
    opsets = {("" if entry.domain == "ai.onnx" else entry.domain): entry.version for entry in proto.opset_import}
    problems = [(node.name, node.op_type, why) for node, host in zip(nodes, on_host) if host
                for why in [_schema_violation(node, types, opsets)] if why]
    if problems:
        listing = "; ".join(f"{op} (node {name!r}): {why}" for name, op, why in problems)
        raise ModelImportError(f"{len(problems)} node(s) on string tensors break their op's types: {listing}",
                               problems=problems)
    numbers = _segment_numbers(nodes, on_host)
    readers: dict[str, list[int]] = {}
    for node, number in zip(nodes, numbers):
        for name in _reads(node):
            readers.setdefault(name, []).append(number)
    graph_outputs = {v.name for v in graph.output}

    segments: list[Segment] = []
    for number in sorted(set(numbers)):
        members = [node for node, n in zip(nodes, numbers) if n == number]
        produced = [name for node in members for name in node.output if name]
        produced_set = set(produced)
        outputs = tuple(name for name in produced
                        if name in graph_outputs or any(r > number for r in readers.get(name, ())))
        if not outputs:
            continue  # nodes nothing reads
        read = list(dict.fromkeys(name for node in members for name in _reads(node) if name not in produced_set))
        inputs = tuple(name for name in read if name not in initializers)
        untyped = [name for name in (*inputs, *outputs)
                   if name not in types or not types[name].type.tensor_type.elem_type]
        if untyped:
            raise ModelImportError(
                f"values {untyped} pass between string (host) and numeric (compiled) nodes but "
                "ONNX shape inference gave them no element type; declare them in the graph's value_info")
        sub_graph = helper.make_graph(
            members, f"{graph.name or 'model'}_segment{len(segments)}",
            [types[name] for name in inputs], [types[name] for name in outputs],
            initializer=[initializers[name] for name in read if name in initializers],
            value_info=[types[name] for name in produced if name in types and name not in outputs],
        )
        sub_model = helper.make_model(sub_graph, opset_imports=proto.opset_import, functions=proto.functions)
        sub_model.ir_version = proto.ir_version
        segments.append(Segment(on_host=number % 2 == 1, model=sub_model, inputs=inputs, outputs=outputs))

    computed = {name for s in segments for name in s.outputs}
    weights = {t.name for t in graph.initializer}
    return StringPartition(
        segments=tuple(segments),
        inputs=tuple(v for v in graph.input if v.name not in weights),
        outputs=tuple(graph.output),
        constant_outputs={v.name: initializers[v.name] for v in graph.output
                          if v.name not in computed and v.name in initializers},
    )
