"""QDQ matmuls and convolutions as integer ones: ``MatMul(DequantizeLinear(a), DequantizeLinear(w))``.

A model in QDQ format (``quantize_static``'s default, and what QGemm expands to in
contrib.py) computes each quantized matmul in float between a DequantizeLinear of the 8-bit
activation and one of the 8-bit constant weight. Since

    sum_k (a - za) * sa * w * sw[n]  =  sa * sw[n] * sum_k (a - za) * w

the same value is the i32 ``MatMulInteger(a, w, za)`` scaled once per column. This module
rewrites such MatMul and Gemm nodes, before import, into exactly that::

    MatMulInteger(a, w, za) -> Cast(float) -> Mul(sa * sw)  [-> Add(C) for a Gemm's bias]

and a 2-D ungrouped Conv the same way, with ConvInteger (ops/nn.py runs it as an im2col
int8 matmul) and the scale and bias per output channel, shaped (F, 1, 1).

so that the product runs on the 8-bit operands (pipelines/tensor/int8_matmul.py: VNNI kernels on
CPUs that have them). The integer sum is exact where the float one rounds, so the result
is at least as close to the real-number value; onnxruntime runs these nodes on integers too.

A MaxPool of a DequantizeLinear pools the 8-bit values and dequantizes after
(``_integer_max_pool``), exact for a positive scale.

Rewritten only when nothing changes the meaning: the weight is a 2-D int8 initializer with no
(or an all-zero) zero point and a scale per tensor or per output column, the activation is
8-bit with a scale and zero point per tensor (initializers), the output is float32, and a
Gemm has ``transA = 0`` and ``alpha = beta = 1``. The DequantizeLinear nodes stay for any
other reader; the importer drops them when nothing reads them.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .contrib import element_types

_EIGHT_BIT = (TensorProto.UINT8, TensorProto.INT8)


class _Graph:
    """The top-level graph's producers and initializers, for the pattern tests."""

    def __init__(self, proto: onnx.ModelProto) -> None:
        graph = proto.graph
        self.producer = {out: node for node in graph.node for out in node.output}
        self.initializers = {t.name: t for t in graph.initializer}
        self.types = element_types(proto)
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str) -> np.ndarray | None:
        """Initializer ``name`` as numpy (converted once: scales and zero points are shared
        by many nodes, and a weight is read by more than one test)."""
        tensor = self.initializers.get(name)
        if tensor is None:
            return None
        if name not in self._arrays:
            self._arrays[name] = numpy_helper.to_array(tensor)
        return self._arrays[name]

    def dequantized(self, name: str) -> onnx.NodeProto | None:
        node = self.producer.get(name)
        if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
            return None
        return node


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _activation(graph: _Graph, node: onnx.NodeProto) -> tuple[str, float, str] | None:
    """(8-bit input, scale, zero-point name or '') of an activation's DequantizeLinear."""
    if graph.types.get(node.input[0]) not in _EIGHT_BIT:
        return None
    scale = graph.array(_input(node, 1))
    if scale is None or scale.size != 1 or scale.dtype != np.float32:
        return None
    zero = _input(node, 2)
    if zero and (graph.array(zero) is None or graph.array(zero).size != 1):
        return None
    return node.input[0], float(scale.reshape(())), zero


def _weights(graph: _Graph, node: onnx.NodeProto, rank: int, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 constant of ``rank`` dims, scale of shape () or (extent of ``axis``,)) of a
    weight's DequantizeLinear: no zero point (or an all-zero one), not blocked, the scale per
    tensor or along ``axis``."""
    weight, scale = graph.array(node.input[0]), graph.array(_input(node, 1))
    if weight is None or scale is None or weight.dtype != np.int8 or weight.ndim != rank or scale.dtype != np.float32:
        return None
    zero = _input(node, 2)
    if zero and (graph.array(zero) is None or np.any(graph.array(zero))):
        return None
    if any(a.name == "block_size" and a.i for a in node.attribute):
        return None
    if scale.size == 1:
        return weight, scale.reshape(())
    scale_axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    if scale.ndim != 1 or scale_axis % rank != axis or scale.size != weight.shape[axis]:
        return None
    return weight, scale


def _weight(graph: _Graph, node: onnx.NodeProto, transposed: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 weight as (K, N), scale of shape () or (N,)) of a matmul weight's DequantizeLinear."""
    found = _weights(graph, node, 2, 0 if transposed else 1)
    if found is None:
        return None
    weight, scale = found
    return (weight.T if transposed else weight), scale


def _filter(graph: _Graph, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 filter (F, C, KH, KW), scale of shape () or (F, 1, 1)) of a convolution
    filter's DequantizeLinear."""
    found = _weights(graph, node, 4, 0)
    if found is None:
        return None
    weight, scale = found
    return weight, scale if scale.ndim == 0 else scale.reshape(-1, 1, 1)


def _gemm_plain(node: onnx.NodeProto) -> bool | None:
    """``transB`` of a Gemm whose other attributes leave it a matmul plus bias, else None."""
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attributes.get("transA", 0) or attributes.get("alpha", 1.0) != 1.0 or attributes.get("beta", 1.0) != 1.0:
        return None
    return bool(attributes.get("transB", 0))


def _integer_conv(graph: _Graph, node: onnx.NodeProto, position: int
                  ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None:
    """A QDQ Conv (2-D, ungrouped) as ConvInteger, Cast, Mul by ``x_scale * w_scale[f]`` and
    Add of the bias reshaped to (F, 1, 1); ``None`` when it does not qualify."""
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    x_node, w_node = (graph.dequantized(_input(node, i)) for i in (0, 1))
    if attributes.get("group", 1) != 1 or x_node is None or w_node is None \
            or graph.types.get(node.output[0]) != TensorProto.FLOAT:
        return None
    activation, weight = _activation(graph, x_node), _filter(graph, w_node)
    if activation is None or weight is None:
        return None
    x, x_scale, x_zero = activation
    w, w_scale = weight
    label = f"{node.name or 'Conv_' + str(position)}/int8"
    names = {key: f"{label}/{key}" for key in ("weight", "scale", "product", "float", "scaled", "shape", "bias")}
    initializers = [numpy_helper.from_array(w, names["weight"]),
                    numpy_helper.from_array((np.float32(x_scale) * w_scale).astype(np.float32), names["scale"])]
    bias = _input(node, 2)
    result = node.output[0]
    nodes = [
        helper.make_node("ConvInteger", [x, names["weight"], *([x_zero] if x_zero else [])], [names["product"]],
                         name=f"{label}/conv", **{k: v for k, v in attributes.items() if k != "group"}),
        helper.make_node("Cast", [names["product"]], [names["float"]], to=TensorProto.FLOAT, name=f"{label}/cast"),
        helper.make_node("Mul", [names["float"], names["scale"]], [names["scaled"] if bias else result],
                         name=f"{label}/scale"),
    ]
    if bias:
        initializers.append(numpy_helper.from_array(np.array([-1, 1, 1], np.int64), names["shape"]))
        nodes += [helper.make_node("Reshape", [bias, names["shape"]], [names["bias"]], name=f"{label}/bias_shape"),
                  helper.make_node("Add", [names["scaled"], names["bias"]], [result], name=f"{label}/bias")]
    return nodes, initializers


def _integer_max_pool(graph: _Graph, node: onnx.NodeProto, position: int
                      ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None:
    """``MaxPool(DequantizeLinear(q))`` as ``DequantizeLinear(MaxPool(q))``: the pool on the
    8-bit values. Why: dequantizing is increasing for a positive scale, so the maximum of
    the dequantized window is the dequantized maximum, exactly, and the pool's padding (the
    smallest 8-bit value, dequantized the smallest value) never wins over the real element
    every window holds. A QDQ CNN's stem (Conv, ReLU, QuantizeLinear, DequantizeLinear,
    MaxPool, QuantizeLinear) then keeps 8-bit values from its convolution's kernel to the
    next one: a quarter of the bytes in the pool and its padding copy (ResNet-50: a 113 x 113
    x 64 f32 pad and pool a call), as onnxruntime's QDQ MaxPool does. Not with the Indices
    output (it keeps its float pool)."""
    if len(node.output) > 1 and node.output[1]:
        return None
    dequantize = graph.dequantized(_input(node, 0))
    if dequantize is None or graph.types.get(node.output[0]) != TensorProto.FLOAT:
        return None
    activation = _activation(graph, dequantize)
    if activation is None or not (np.isfinite(activation[1]) and activation[1] > 0):
        return None
    values, _, zero = activation
    label = f"{node.name or node.op_type + '_' + str(position)}/int8"
    pool = onnx.NodeProto()
    pool.CopyFrom(node)
    pool.name = f"{label}/pool"
    pool.input[0] = values
    del pool.output[:]
    pool.output.append(f"{label}/pooled")
    dequantized = helper.make_node("DequantizeLinear", [f"{label}/pooled", dequantize.input[1], *([zero] if zero else [])],
                                   [node.output[0]], name=f"{label}/dequantize")
    return [pool, dequantized], []


def integer_qdq_matmuls(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with each QDQ MatMul/Gemm (module docstring) as an integer matmul and a
    scale (the model itself when it has none)."""
    # Every rewrite needs a DequantizeLinear producer: without one, the types (a whole-model
    # shape inference, half a second for ResNet-50's 100 MB) are not worth computing.
    if not any(n.op_type in ("MatMul", "Gemm", "Conv", "MaxPool") for n in proto.graph.node) or \
            not any(n.op_type == "DequantizeLinear" and n.domain in ("", "ai.onnx") for n in proto.graph.node):
        return proto
    graph = _Graph(proto)
    rewrites: dict[int, tuple[list[onnx.NodeProto], list[onnx.TensorProto]]] = {}
    for position, node in enumerate(proto.graph.node):
        if node.op_type == "Conv" and node.domain in ("", "ai.onnx"):
            rewrite = _integer_conv(graph, node, position)
            if rewrite is not None:
                rewrites[position] = rewrite
            continue
        if node.op_type == "MaxPool" and node.domain in ("", "ai.onnx"):
            rewrite = _integer_max_pool(graph, node, position)
            if rewrite is not None:
                rewrites[position] = rewrite
            continue
        if node.op_type not in ("MatMul", "Gemm") or node.domain not in ("", "ai.onnx"):
            continue
        transposed = False if node.op_type == "MatMul" else _gemm_plain(node)
        a_node, w_node = (graph.dequantized(_input(node, i)) for i in (0, 1))
        if transposed is None or a_node is None or w_node is None or graph.types.get(node.output[0]) != TensorProto.FLOAT:
            continue
        activation, weight = _activation(graph, a_node), _weight(graph, w_node, transposed)
        if activation is None or weight is None:
            continue
        a, a_scale, a_zero = activation
        w, w_scale = weight
        label = f"{node.name or node.op_type + '_' + str(position)}/int8"
        names = {key: f"{label}/{key}" for key in ("weight", "scale", "product", "float", "scaled")}
        initializers = [numpy_helper.from_array(np.ascontiguousarray(w), names["weight"]),
                        numpy_helper.from_array((np.float32(a_scale) * w_scale).astype(np.float32), names["scale"])]
        bias = _input(node, 2) if node.op_type == "Gemm" else ""
        result = node.output[0]
        nodes = [
            helper.make_node("MatMulInteger", [a, names["weight"], *([a_zero] if a_zero else [])], [names["product"]],
                             name=f"{label}/matmul"),
            helper.make_node("Cast", [names["product"]], [names["float"]], to=TensorProto.FLOAT, name=f"{label}/cast"),
            helper.make_node("Mul", [names["float"], names["scale"]], [names["scaled"] if bias else result],
                             name=f"{label}/scale"),
        ]
        if bias:
            nodes.append(helper.make_node("Add", [names["scaled"], bias], [result], name=f"{label}/bias"))
        rewrites[position] = (nodes, initializers)
    if not rewrites:
        return proto
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    nodes: list[onnx.NodeProto] = []
    for position, node in enumerate(proto.graph.node):
        if position in rewrites:
            new_nodes, initializers = rewrites[position]
            nodes.extend(new_nodes)
            proto.graph.initializer.extend(initializers)
        else:
            nodes.append(node)
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    return proto
