"""Expansion of ONNX function ops (RMSNormalization, SoftmaxCrossEntropyLoss, Attention, ...).

Many ONNX operators are defined by the standard as a *function*: a body of simpler ONNX ops,
sometimes built for the node's attributes and input types (a context-dependent function).
An op without a handler of its own is imported by expanding that body in place, with its
inputs, outputs and attribute references bound to the node's, and internal values renamed
under the node's name. The body's nodes then go through the importer like any other node
(and may expand again).
"""

from __future__ import annotations

import onnx
from onnx import defs

from .model import TensorInfo


def _schema(node: onnx.NodeProto, opset: int) -> "defs.OpSchema | None":
    try:
        return defs.get_schema(node.op_type, opset, node.domain or "")
    except (defs.SchemaError, TypeError):  # TypeError: an op_type that is not UTF-8 (bytes)
        return None


def has_function(node: onnx.NodeProto, opset: int) -> bool:
    """True when the standard defines ``node``'s op as a function at ``opset``."""
    schema = _schema(node, opset)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def _input_type(name: str, types: dict[str, onnx.TypeProto]) -> bytes:
    if name in types:
        return types[name].SerializeToString()
    return onnx.TypeProto().SerializeToString()


def function_body(
    node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]
) -> onnx.FunctionProto | None:
    """The function defining ``node`` (built for its attributes and input types), or None."""
    schema = _schema(node, opset)
    if schema is None:
        return None
    if schema.has_context_dependent_function:
        input_types = [_input_type(name, types) for name in node.input]
        try:
            serialized = schema.get_context_dependent_function_with_opset_version(
                opset, node.SerializeToString(), input_types
            )
        except Exception:  # the builder rejects this node/types combination
            serialized = b""
        if serialized:
            return onnx.FunctionProto.FromString(serialized)
    if schema.has_function:
        body = schema.get_function_with_opset_version(opset)
        if body is not None:
            return body if isinstance(body, onnx.FunctionProto) else onnx.FunctionProto.FromString(body)
    return None


def _schema_defaults(node: onnx.NodeProto, opset: int) -> dict[str, onnx.AttributeProto]:
    """The schema's attribute defaults: a function body may refer to an attribute the node
    leaves unset (BlackmanWindow's ``periodic``) while its FunctionProto carries no default."""
    schema = _schema(node, opset)
    if schema is None:
        return {}
    return {
        name: attribute.default_value
        for name, attribute in schema.attributes.items()
        if attribute.default_value.type != onnx.AttributeProto.UNDEFINED
    }


def expand(
    node: onnx.NodeProto, label: str, function: onnx.FunctionProto, opset: int
) -> list[onnx.NodeProto]:
    """The body of ``function`` as nodes wired to ``node``'s inputs, outputs and attributes
    (the node's own, else the function's defaults, else the schema's at ``opset``)."""
    names: dict[str, str] = {"": ""}
    for formal, actual in zip(function.input, node.input):
        names[formal] = actual
    for formal in function.input[len(node.input):]:
        names[formal] = ""  # optional input not given
    for formal, actual in zip(function.output, node.output):
        names[formal] = actual
    attributes = _schema_defaults(node, opset)
    attributes.update({a.name: a for a in function.attribute_proto})  # the function's defaults
    attributes.update({a.name: a for a in node.attribute})

    def rename(name: str) -> str:
        if name not in names:
            names[name] = f"{label}/{name}"
        return names[name]

    expanded = []
    for position, body_node in enumerate(function.node):
        new = onnx.NodeProto()
        new.CopyFrom(body_node)
        new.name = f"{label}/{body_node.name or body_node.op_type + str(position)}"
        del new.input[:]
        new.input.extend(rename(name) for name in body_node.input)
        del new.output[:]
        new.output.extend(rename(name) for name in body_node.output)
        del new.attribute[:]
        for attribute in body_node.attribute:
            if attribute.ref_attr_name:
                if attribute.ref_attr_name not in attributes:
                    continue  # an optional attribute the node does not set
                bound = onnx.AttributeProto()
                bound.CopyFrom(attributes[attribute.ref_attr_name])
                bound.name = attribute.name
                new.attribute.append(bound)
            else:
                new.attribute.append(attribute)
                if attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    for graph in [new.attribute[-1].g] if attribute.type == onnx.AttributeProto.GRAPH else new.attribute[-1].graphs:
                        _rename_graph(graph, rename)
        expanded.append(new)
    return expanded


def _rename_graph(graph: onnx.GraphProto, rename) -> None:
    """Apply the body's renaming inside a control-flow attribute (If branches, Loop/Scan
    bodies): they read the function's values by name, and define names of their own."""
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = rename(value.name)
    for initializer in graph.initializer:
        initializer.name = rename(initializer.name)
    for node in graph.node:
        renamed_inputs = [rename(n) for n in node.input]
        del node.input[:]
        node.input.extend(renamed_inputs)
        renamed_outputs = [rename(n) for n in node.output]
        del node.output[:]
        node.output.extend(renamed_outputs)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _rename_graph(attribute.g, rename)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    _rename_graph(sub, rename)


def tensor_type(info: TensorInfo) -> onnx.TypeProto:
    """A TypeProto for a value the importer knows (for context-dependent function builders)."""
    shape = None if info.shape is None else [d if d is not None else "?" for d in info.shape]
    return onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(info.dtype), shape)
