"""Keras layers as ONNX nodes: one translator per layer class, keyed by the class's name.

Layout: the model's own (``channels_last``: NHWC). ONNX convolutions and pools are NCHW, so
each one sits between a Transpose to channels-first and one back; consecutive layers leave
Transpose pairs that cancel (the graph layout pass removes them), and everything else
(Dense, normalizations, elementwise ops, Flatten's element order) runs on the model's layout
as Keras computes it. Weights are read from the layer in float32.

A translator takes a :class:`Call` and returns the ONNX values of the layer's outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import ModelImportError
from .graph import OnnxGraph


@dataclass
class Call:
    """One call of a layer in the model's graph: the layer, its input values and shapes."""

    graph: OnnxGraph
    layer: Any
    inputs: list[str]
    shapes: list[tuple[int | None, ...]]
    arguments: Any  # keras Node.arguments: the call's args and kwargs
    tensors: list[Any]  # the KerasTensors behind ``inputs``, in the same order

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def rank(self) -> int:
        return len(self.shapes[0])

    def node(self, op_type: str, inputs: Sequence[str], **attributes: Any) -> str:
        # values are named layer/Op: a Keras name has no '/', so outputs keep the layer names
        return self.graph.node(op_type, inputs, f"{self.name}/{op_type}", **attributes)

    def weight(self, variable: Any, suffix: str, transform: Callable[[np.ndarray], np.ndarray] | None = None) -> str:
        array = weight_array(variable)
        return self.graph.constant(f"{self.name}/{suffix}", transform(array) if transform else array)

    def refuse(self, why: str) -> ModelImportError:
        kind = type(self.layer).__name__
        return ModelImportError(f"Keras layer {self.name!r} ({kind}): {why}",
                                problems=[(self.name, kind, why)])


Translator = Callable[[Call], list[str]]
LAYERS: dict[str, Translator] = {}


def layer(*class_names: str) -> Callable[[Translator], Translator]:
    def register(function: Translator) -> Translator:
        for class_name in class_names:
            LAYERS[class_name] = function
        return function
    return register


def weight_array(variable: Any) -> np.ndarray:
    import keras

    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


# ---- activations ---------------------------------------------------------------------------

def _scaled(call: Call, x: str, scale: float) -> str:
    return call.node("Mul", [x, call.graph.constant(f"{call.name}/scale", scale)])


def activation(call: Call, x: str, function: Any) -> str:
    """``function`` (a ``keras.activations`` function) applied to ``x``."""
    name = getattr(function, "__name__", type(function).__name__)
    module = getattr(function, "__module__", "") or ""
    if not module.startswith("keras.") or name not in ACTIVATIONS:
        raise call.refuse(f"activation {name!r} is not supported; supported: {', '.join(sorted(ACTIVATIONS))}")
    return ACTIVATIONS[name](call, x)


ACTIVATIONS: dict[str, Callable[[Call, str], str]] = {
    "linear": lambda call, x: x,
    "relu": lambda call, x: call.node("Relu", [x]),
    "relu6": lambda call, x: call.node("Clip", [x, call.graph.constant("zero", 0.0), call.graph.constant("six", 6.0)]),
    "sigmoid": lambda call, x: call.node("Sigmoid", [x]),
    "tanh": lambda call, x: call.node("Tanh", [x]),
    "softmax": lambda call, x: call.node("Softmax", [x], axis=-1),
    "log_softmax": lambda call, x: call.node("LogSoftmax", [x], axis=-1),
    "gelu": lambda call, x: call.node("Gelu", [x], approximate="none"),
    "silu": lambda call, x: call.node("Mul", [x, call.node("Sigmoid", [x])]),
    "hard_silu": lambda call, x: call.node("HardSwish", [x]),
    "hard_sigmoid": lambda call, x: call.node("HardSigmoid", [x], alpha=1.0 / 6.0, beta=0.5),
    "elu": lambda call, x: call.node("Elu", [x], alpha=1.0),
    "selu": lambda call, x: call.node("Selu", [x]),
    "softplus": lambda call, x: call.node("Softplus", [x]),
    "softsign": lambda call, x: call.node("Softsign", [x]),
    "exponential": lambda call, x: call.node("Exp", [x]),
    "leaky_relu": lambda call, x: call.node("LeakyRelu", [x], alpha=0.2),
    "mish": lambda call, x: call.node("Mish", [x]),
}


@layer("Activation")
def _activation(call: Call) -> list[str]:
    return [activation(call, call.inputs[0], call.layer.activation)]


@layer("ReLU")
def _relu(call: Call) -> list[str]:
    layer_, x = call.layer, call.inputs[0]
    slope, ceiling, threshold = float(layer_.negative_slope), layer_.max_value, float(layer_.threshold)
    if threshold != 0.0:
        raise call.refuse("a ReLU threshold other than 0 is not supported")
    y = call.node("LeakyRelu", [x], alpha=slope) if slope else call.node("Relu", [x])
    if ceiling is not None:
        y = call.node("Min", [y, call.graph.constant(f"{call.name}/max_value", float(ceiling))])
    return [y]


@layer("LeakyReLU")
def _leaky_relu(call: Call) -> list[str]:
    return [call.node("LeakyRelu", [call.inputs[0]], alpha=float(call.layer.negative_slope))]


@layer("ELU")
def _elu(call: Call) -> list[str]:
    return [call.node("Elu", [call.inputs[0]], alpha=float(call.layer.alpha))]


@layer("PReLU")
def _prelu(call: Call) -> list[str]:
    return [call.node("PRelu", [call.inputs[0], call.weight(call.layer.alpha, "alpha")])]


@layer("Softmax")
def _softmax(call: Call) -> list[str]:
    axes = call.layer.axis
    axes = [axes] if isinstance(axes, int) else list(axes)
    if len(axes) != 1:
        raise call.refuse(f"softmax over several axes {axes} is not supported")
    if call.arguments.kwargs.get("mask") is not None or len(call.inputs) > 1:
        raise call.refuse("a softmax mask is not supported")
    return [call.node("Softmax", [call.inputs[0]], axis=int(axes[0]))]


# ---- dense and convolutions ----------------------------------------------------------------

def _bias_and_activation(call: Call, y: str, bias_variable: Any = None) -> list[str]:
    layer_ = call.layer
    if bias_variable is None and getattr(layer_, "use_bias", False):
        bias_variable = layer_.bias
    if bias_variable is not None:
        y = call.node("Add", [y, call.weight(bias_variable, "bias")])
    function = getattr(layer_, "activation", None)
    return [activation(call, y, function) if function is not None else y]


@layer("Dense")
def _dense(call: Call) -> list[str]:
    y = call.node("MatMul", [call.inputs[0], call.weight(call.layer.kernel, "kernel")])
    return _bias_and_activation(call, y)


def _channels_last(call: Call) -> bool:
    data_format = getattr(call.layer, "data_format", "channels_last")
    if data_format not in ("channels_last", "channels_first"):
        raise call.refuse(f"data_format {data_format!r} is not supported")
    return data_format == "channels_last"


def _to_channels_first(call: Call, x: str) -> str:
    if not _channels_last(call):
        return x
    rank = call.rank
    return call.node("Transpose", [x], perm=[0, rank - 1, *range(1, rank - 1)])


def _to_channels_last(call: Call, y: str) -> str:
    if not _channels_last(call):
        return y
    rank = call.rank
    return call.node("Transpose", [y], perm=[0, *range(2, rank), 1])


def _padding(call: Call, kernel: Sequence[int], dilation: Sequence[int], strides: Sequence[int]) -> dict[str, Any]:
    """ONNX padding attributes for Keras' ``padding``: TensorFlow's 'same' pads
    ``(ceil(n / s) - 1) * s + (k - 1) * d + 1 - n`` in total, the odd pixel after (explicit
    pads when the size is known or the stride is 1, else SAME_UPPER); 'causal' (Conv1D) pads
    the whole receptive field before."""
    padding = call.layer.padding
    count = len(kernel)
    if padding == "valid":
        return {"pads": [0] * (2 * count)}
    if padding == "causal":
        return {"pads": [(k - 1) * d for k, d in zip(kernel, dilation)] + [0] * count}
    if padding != "same":
        raise call.refuse(f"padding {padding!r} is not supported")
    first = 1 if _channels_last(call) else 2
    sizes = call.shapes[0][first:first + count]
    before, after = [], []
    for n, k, d, s in zip(sizes, kernel, dilation, strides):
        if n is None and s != 1:
            if any(d != 1 for d in dilation):
                raise call.refuse("'same' padding with a stride, a dilation and a dynamic size is not supported")
            return {"auto_pad": "SAME_UPPER"}
        total = max((k - 1) * d, 0) if s == 1 else max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return {"pads": before + after}


def _conv(call: Call, x: str, weight: str, kernel: Sequence[int], strides: Sequence[int],
          dilation: Sequence[int], groups: int) -> str:
    return call.node("Conv", [x, weight], kernel_shape=list(kernel), strides=list(strides),
                     dilations=list(dilation), group=groups, **_padding(call, kernel, dilation, strides))


def _oihw(kernel: np.ndarray) -> np.ndarray:
    """A Keras kernel (spatial..., in, out) as ONNX's (out, in, spatial...)."""
    spatial = kernel.ndim - 2
    return np.transpose(kernel, (spatial + 1, spatial, *range(spatial)))


def _depthwise_oihw(kernel: np.ndarray) -> np.ndarray:
    """A depthwise kernel (spatial..., in, multiplier) as a grouped ONNX kernel
    (in * multiplier, 1, spatial...); Keras' output channel ``c * multiplier + m``."""
    spatial = kernel.ndim - 2
    merged = kernel.reshape(*kernel.shape[:spatial], 1, kernel.shape[-2] * kernel.shape[-1])
    return _oihw(merged)


@layer("Conv1D", "Conv2D", "Conv3D")
def _convolution(call: Call) -> list[str]:
    layer_ = call.layer
    kernel = weight_array(layer_.kernel)
    weight = call.graph.constant(f"{call.name}/kernel", _oihw(kernel))
    y = _conv(call, _to_channels_first(call, call.inputs[0]), weight, kernel.shape[:-2], layer_.strides,
              layer_.dilation_rate, int(layer_.groups))
    return _bias_and_activation(call, _to_channels_last(call, y)) if _channels_last(call) else \
        _channels_first_bias(call, y)


def _channels_first_bias(call: Call, y: str, bias_variable: Any = None) -> list[str]:
    """Bias along axis 1 (a channels_first model), then the activation."""
    layer_ = call.layer
    if bias_variable is None and getattr(layer_, "use_bias", False):
        bias_variable = layer_.bias
    if bias_variable is not None:
        trailing = (1,) * (call.rank - 2)
        y = call.node("Add", [y, call.weight(bias_variable, "bias", lambda b: b.reshape(-1, *trailing))])
    function = getattr(layer_, "activation", None)
    return [activation(call, y, function) if function is not None else y]


def _finish_conv(call: Call, y: str, bias_variable: Any = None) -> list[str]:
    if _channels_last(call):
        return _bias_and_activation(call, _to_channels_last(call, y), bias_variable)
    return _channels_first_bias(call, y, bias_variable)


@layer("DepthwiseConv1D", "DepthwiseConv2D")
def _depthwise(call: Call) -> list[str]:
    layer_ = call.layer
    kernel = weight_array(layer_.kernel)
    weight = call.graph.constant(f"{call.name}/kernel", _depthwise_oihw(kernel))
    y = _conv(call, _to_channels_first(call, call.inputs[0]), weight, kernel.shape[:-2], layer_.strides,
              layer_.dilation_rate, kernel.shape[-2])
    return _finish_conv(call, y)


@layer("SeparableConv1D", "SeparableConv2D")
def _separable(call: Call) -> list[str]:
    layer_ = call.layer
    depthwise = weight_array(layer_.depthwise_kernel)
    pointwise = weight_array(layer_.pointwise_kernel)
    spatial = depthwise.shape[:-2]
    x = _to_channels_first(call, call.inputs[0])
    y = _conv(call, x, call.graph.constant(f"{call.name}/depthwise_kernel", _depthwise_oihw(depthwise)), spatial,
              layer_.strides, layer_.dilation_rate, depthwise.shape[-2])
    ones = [1] * len(spatial)
    y = call.node("Conv", [y, call.graph.constant(f"{call.name}/pointwise_kernel", _oihw(pointwise))],
                  kernel_shape=ones, strides=ones, pads=[0] * (2 * len(spatial)))
    return _finish_conv(call, y)


# ---- pooling -------------------------------------------------------------------------------

@layer("MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
       "AveragePooling3D")
def _pool(call: Call) -> list[str]:
    layer_ = call.layer
    pool_size = list(layer_.pool_size)
    strides = list(layer_.strides) if layer_.strides is not None else pool_size
    op_type = "MaxPool" if type(layer_).__name__.startswith("Max") else "AveragePool"
    attributes = _padding(call, pool_size, [1] * len(pool_size), strides)
    if op_type == "AveragePool":
        attributes["count_include_pad"] = 0  # TensorFlow averages over the real pixels only
    y = call.node(op_type, [_to_channels_first(call, call.inputs[0])], kernel_shape=pool_size,
                  strides=strides, **attributes)
    return [_to_channels_last(call, y)]


@layer("GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
       "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D")
def _global_pool(call: Call) -> list[str]:
    rank = call.rank
    axes = list(range(1, rank - 1)) if _channels_last(call) else list(range(2, rank))
    op_type = "ReduceMax" if "Max" in type(call.layer).__name__ else "ReduceMean"
    if call.arguments.kwargs.get("mask") is not None or len(call.inputs) > 1:
        raise call.refuse("a pooling mask is not supported")
    keepdims = int(bool(getattr(call.layer, "keepdims", False)))
    return [call.node(op_type, [call.inputs[0], call.graph.ints(f"{call.name}/axes", axes)], keepdims=keepdims)]


# ---- normalization -------------------------------------------------------------------------

def _axes(call: Call, axis: Any) -> list[int]:
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % call.rank for a in axes)


def _broadcast_shape(call: Call, axes: Sequence[int]) -> list[int]:
    shape = [1] * call.rank
    for a in axes:
        shape[a] = call.shapes[0][a]
    return shape[1:] if 0 not in axes else shape


@layer("BatchNormalization")
def _batch_norm(call: Call) -> list[str]:
    """Inference batch norm folded into one multiply and one add per channel."""
    layer_ = call.layer
    axes = _axes(call, layer_.axis)
    mean = weight_array(layer_.moving_mean).astype(np.float64)
    variance = weight_array(layer_.moving_variance).astype(np.float64)
    gamma = weight_array(layer_.gamma).astype(np.float64) if layer_.scale else np.ones_like(mean)
    beta = weight_array(layer_.beta).astype(np.float64) if layer_.center else np.zeros_like(mean)
    scale = gamma / np.sqrt(variance + float(layer_.epsilon))
    shift = beta - mean * scale
    shape = _broadcast_shape(call, axes)
    y = call.node("Mul", [call.inputs[0], call.graph.constant(f"{call.name}/scale", scale.reshape(shape))])
    return [call.node("Add", [y, call.graph.constant(f"{call.name}/shift", shift.reshape(shape))])]


@layer("LayerNormalization")
def _layer_norm(call: Call) -> list[str]:
    layer_ = call.layer
    axes = _axes(call, layer_.axis)
    if axes != list(range(axes[0], call.rank)):
        raise call.refuse(f"normalizing over axes {axes} (not the trailing ones) is not supported")
    if getattr(layer_, "rms_scaling", False):
        raise call.refuse("rms_scaling is not supported")
    norm_shape = [call.shapes[0][a] for a in axes]
    if any(d is None for d in norm_shape):
        raise call.refuse(f"the normalized axes {axes} must have static sizes, got {norm_shape}")
    gamma = weight_array(layer_.gamma).reshape(norm_shape) if layer_.scale else np.ones(norm_shape, np.float32)
    beta = weight_array(layer_.beta).reshape(norm_shape) if layer_.center else np.zeros(norm_shape, np.float32)
    return [call.node("LayerNormalization",
                      [call.inputs[0], call.graph.constant(f"{call.name}/gamma", gamma),
                       call.graph.constant(f"{call.name}/beta", beta)],
                      axis=axes[0], epsilon=float(layer_.epsilon))]


@layer("Rescaling")
def _rescaling(call: Call) -> list[str]:
    layer_ = call.layer
    y = call.node("Mul", [call.inputs[0], call.graph.constant(f"{call.name}/scale", layer_.scale)])
    return [call.node("Add", [y, call.graph.constant(f"{call.name}/offset", layer_.offset)])]


@layer("Normalization")
def _normalization(call: Call) -> list[str]:
    """``(x - mean) / max(sqrt(variance), epsilon)`` (Keras' adapted statistics)."""
    import keras

    layer_ = call.layer
    if getattr(layer_, "invert", False):
        raise call.refuse("invert=True is not supported")
    mean = weight_array(layer_.mean).astype(np.float64)
    deviation = np.maximum(np.sqrt(weight_array(layer_.variance).astype(np.float64)), keras.config.epsilon())
    y = call.node("Sub", [call.inputs[0], call.graph.constant(f"{call.name}/mean", mean)])
    return [call.node("Mul", [y, call.graph.constant(f"{call.name}/inverse_deviation", 1.0 / deviation)])]


# ---- merging -------------------------------------------------------------------------------

def _fold(call: Call, op_type: str) -> str:
    value = call.inputs[0]
    for other in call.inputs[1:]:
        value = call.node(op_type, [value, other])
    return value


@layer("Add")
def _add(call: Call) -> list[str]:
    return [_fold(call, "Add")]


@layer("Multiply")
def _multiply(call: Call) -> list[str]:
    return [_fold(call, "Mul")]


@layer("Maximum")
def _maximum(call: Call) -> list[str]:
    return [call.node("Max", call.inputs)]


@layer("Minimum")
def _minimum(call: Call) -> list[str]:
    return [call.node("Min", call.inputs)]


@layer("Average")
def _average(call: Call) -> list[str]:
    return [call.node("Mean", call.inputs)]


@layer("Subtract")
def _subtract(call: Call) -> list[str]:
    return [call.node("Sub", call.inputs)]


@layer("Concatenate")
def _concatenate(call: Call) -> list[str]:
    return [call.node("Concat", call.inputs, axis=int(call.layer.axis))]


# ---- shapes --------------------------------------------------------------------------------

@layer("Reshape")
def _reshape(call: Call) -> list[str]:
    target = [int(d) for d in call.layer.target_shape]
    # 0 copies the batch dimension; Keras' -1 (at most one) is ONNX's -1.
    return [call.node("Reshape", [call.inputs[0], call.graph.ints(f"{call.name}/shape", [0, *target])])]


@layer("Flatten")
def _flatten(call: Call) -> list[str]:
    x = call.inputs[0]
    if not _channels_last(call) and call.rank > 2:
        x = call.node("Transpose", [x], perm=[0, *range(2, call.rank), 1])  # Keras flattens channels last
    return [call.node("Flatten", [x], axis=1)]


@layer("Permute")
def _permute(call: Call) -> list[str]:
    return [call.node("Transpose", [call.inputs[0]], perm=[0, *(int(d) for d in call.layer.dims)])]


@layer("RepeatVector")
def _repeat_vector(call: Call) -> list[str]:
    y = call.node("Unsqueeze", [call.inputs[0], call.graph.ints(f"{call.name}/axis", [1])])
    return [call.node("Tile", [y, call.graph.ints(f"{call.name}/repeats", [1, int(call.layer.n), 1])])]


@layer("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
       "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Identity")
def _identity(call: Call) -> list[str]:
    """Training-only layers: the identity at inference."""
    return [call.inputs[0]]


def _spatial_pairs(call: Call, values: Any, count: int) -> list[tuple[int, int]]:
    if isinstance(values, int):
        return [(values, values)] * count
    pairs = [(v, v) if isinstance(v, int) else (int(v[0]), int(v[1])) for v in values]
    if len(pairs) != count:
        raise call.refuse(f"expected {count} spatial paddings, got {values!r}")
    return pairs


@layer("ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D")
def _zero_padding(call: Call) -> list[str]:
    spatial = call.rank - 2
    pairs = _spatial_pairs(call, call.layer.padding, spatial)
    first = 1 if _channels_last(call) else 2
    before, after = [0] * call.rank, [0] * call.rank
    for offset, (low, high) in enumerate(pairs):
        before[first + offset], after[first + offset] = low, high
    return [call.node("Pad", [call.inputs[0], call.graph.ints(f"{call.name}/pads", before + after)])]


@layer("Cropping1D", "Cropping2D", "Cropping3D")
def _cropping(call: Call) -> list[str]:
    spatial = call.rank - 2
    pairs = _spatial_pairs(call, call.layer.cropping, spatial)
    first = 1 if _channels_last(call) else 2
    axes, starts, ends = [], [], []
    for offset, (low, high) in enumerate(pairs):
        size = call.shapes[0][first + offset]
        axes.append(first + offset)
        starts.append(low)
        ends.append(size - high if size is not None else (-high if high else np.iinfo(np.int64).max))
    return [call.node("Slice", [call.inputs[0], call.graph.ints(f"{call.name}/starts", starts),
                                call.graph.ints(f"{call.name}/ends", ends),
                                call.graph.ints(f"{call.name}/axes", axes)])]


@layer("UpSampling1D", "UpSampling2D", "UpSampling3D")
def _upsampling(call: Call) -> list[str]:
    layer_ = call.layer
    size = [int(layer_.size)] if isinstance(layer_.size, int) else [int(s) for s in layer_.size]
    rank = call.rank
    first = 1 if _channels_last(call) else 2
    scales = [1.0] * rank
    for offset, factor in enumerate(size):
        scales[first + offset] = float(factor)
    interpolation = getattr(layer_, "interpolation", "nearest")
    if interpolation == "nearest":  # a repeat: floor of the asymmetric source coordinate
        attributes = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    elif interpolation == "bilinear":  # TensorFlow's resize: half-pixel centers, no antialias
        attributes = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    else:
        raise call.refuse(f"interpolation {interpolation!r} is not supported (nearest, bilinear are)")
    return [call.node("Resize", [call.inputs[0], "", call.graph.constant(f"{call.name}/scales", scales)],
                      **attributes)]


@layer("Embedding")
def _embedding(call: Call) -> list[str]:
    indices = call.node("Cast", [call.inputs[0]], to=7)  # int64, as Keras casts to an integer type
    return [call.node("Gather", [call.weight(call.layer.embeddings, "embeddings"), indices], axis=0)]


# ---- attention -----------------------------------------------------------------------------

@layer("MultiHeadAttention")
def _multi_head_attention(call: Call) -> list[str]:
    """Keras' MultiHeadAttention on (batch, sequence, features) inputs: the query, key and
    value projections, softmax(q k^T / sqrt(key_dim)) per head, and the output projection."""
    layer_ = call.layer
    args, kwargs = list(call.arguments.args), dict(call.arguments.kwargs)
    names = ["query", "value", "key", "query_mask", "value_mask", "key_mask", "attention_mask",
             "return_attention_scores", "training", "use_causal_mask"]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    for mask in ("query_mask", "value_mask", "key_mask", "attention_mask"):
        if bound.get(mask) is not None:
            raise call.refuse(f"{mask} is not supported")
    if bound.get("use_causal_mask") or bound.get("return_attention_scores"):
        raise call.refuse("use_causal_mask and return_attention_scores are not supported")
    if getattr(layer_, "_attention_axes", None) not in (None, (1,), [1]) or call.rank != 3:
        raise call.refuse("only (batch, sequence, features) inputs attending over the sequence are supported")
    value_of = {id(t): v for t, v in zip(call.tensors, call.inputs)}
    query = value_of[id(bound["query"])]
    value = value_of[id(bound["value"])]
    key = value_of[id(bound["key"])] if bound.get("key") is not None else value
    heads, key_dim = int(layer_.num_heads), int(layer_.key_dim)
    if getattr(layer_, "_output_shape", None) not in (None,):
        raise call.refuse("a custom output_shape is not supported")

    def project(x: str, dense: Any, suffix: str) -> str:
        kernel = weight_array(dense.kernel)  # (features, heads, dim)
        y = call.node("MatMul", [x, call.graph.constant(f"{call.name}/{suffix}_kernel",
                                                        kernel.reshape(kernel.shape[0], -1))])
        if dense.bias is not None:
            y = call.node("Add", [y, call.weight(dense.bias, f"{suffix}_bias", lambda b: b.reshape(-1))])
        split = call.node("Reshape", [y, call.graph.ints(f"{call.name}/{suffix}_heads",
                                                          [0, 0, kernel.shape[1], kernel.shape[2]])])
        return split

    q = call.node("Transpose", [project(query, layer_._query_dense, "query")], perm=[0, 2, 1, 3])
    k = call.node("Transpose", [project(key, layer_._key_dense, "key")], perm=[0, 2, 3, 1])
    v = call.node("Transpose", [project(value, layer_._value_dense, "value")], perm=[0, 2, 1, 3])
    q = _scaled(call, q, 1.0 / math.sqrt(key_dim))
    scores = call.node("Softmax", [call.node("MatMul", [q, k])], axis=-1)
    attended = call.node("Transpose", [call.node("MatMul", [scores, v])], perm=[0, 2, 1, 3])
    output = layer_._output_dense
    kernel = weight_array(output.kernel)  # (heads, value_dim, features)
    merge = call.graph.ints(f"{call.name}/merge_heads", [0, 0, heads * kernel.shape[1]])
    merged = call.node("Reshape", [attended, merge])
    y = call.node("MatMul", [merged, call.graph.constant(f"{call.name}/output_kernel",
                                                         kernel.reshape(heads * kernel.shape[1], -1))])
    if output.bias is not None:
        y = call.node("Add", [y, call.weight(output.bias, "output_bias")])
    return [y]
