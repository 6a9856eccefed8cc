"""Small ONNX models for the graph-pass tests, built in memory with seeded random weights.

Why here and not a file: the tests need exact topologies (a conv + BatchNormalization +
ReLU block with a residual add; a BERT-style encoder layer whose Q/K/V projections share
their input), and torchvision does not import beside the CPU torch wheel (STACK.md).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def append_batch_norm_relu(nodes: list, inits: list, rng: np.random.Generator, filters: int, source: str,
                           batch_norm: bool = True) -> None:
    """Append an optional BatchNormalization (random statistics) and a Relu writing ``y`` after
    the node writing ``source``: the epilogue every conv test model of this folder ends in."""
    last = source
    if batch_norm:
        for name, values in (("scale", rng.uniform(0.5, 1.5, filters)), ("shift", rng.standard_normal(filters)),
                             ("mean", rng.standard_normal(filters)), ("var", rng.uniform(0.5, 2.0, filters))):
            inits.append(numpy_helper.from_array(values.astype(np.float32), name))
        nodes.append(helper.make_node("BatchNormalization", [source, "scale", "shift", "mean", "var"], ["n"]))
        last = "n"
    nodes.append(helper.make_node("Relu", [last], ["y"]))


def conv_bn_block(channels: int = 8, size: int = 10, seed: int = 0) -> onnx.ModelProto:
    """x -> Conv(pad 1) -> BatchNormalization -> Relu -> Conv -> BatchNormalization -> Add(x)
    -> Relu: a ResNet basic block, batch 1, NCHW."""
    rng = np.random.default_rng(seed)
    c = channels
    inits, nodes = [], []
    for i in (1, 2):
        inits += [
            _init(f"w{i}", rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))),
            _init(f"scale{i}", rng.uniform(0.5, 1.5, c)),
            _init(f"bias{i}", rng.uniform(-0.5, 0.5, c)),
            _init(f"mean{i}", rng.uniform(-0.5, 0.5, c)),
            _init(f"var{i}", rng.uniform(0.5, 1.5, c)),
        ]
    nodes += [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "scale1", "bias1", "mean1", "var1"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("BatchNormalization", ["c2", "scale2", "bias2", "mean2", "var2"], ["b2"], name="bn2"),
        helper.make_node("Add", ["b2", "x"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes, "conv_bn_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, size, size])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def unet_block(channels: int = 8, size: int = 12, seed: int = 0) -> onnx.ModelProto:
    """x -> Conv + Relu (the skip) -> MaxPool 2 -> Conv + Relu -> ConvTranspose 2x2 stride 2
    -> Concat(skip, up) on the channels -> Conv: a U-Net level, batch 1, NCHW."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = [_init("w1", rng.standard_normal((c, 3, 3, 3)) / np.sqrt(27)),
             _init("w2", rng.standard_normal((2 * c, c, 3, 3)) / np.sqrt(9 * c)),
             _init("wt", rng.standard_normal((2 * c, c, 2, 2)) / np.sqrt(2 * c)),
             _init("bt", rng.standard_normal(c)),
             _init("w3", rng.standard_normal((4, 2 * c, 3, 3)) / np.sqrt(18 * c))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["skip"]),
             helper.make_node("MaxPool", ["skip"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("ConvTranspose", ["r2", "wt", "bt"], ["up"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["skip", "up"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w3"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "unet_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, size, size])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def conv1d_net(channels: int = 8, length: int = 40, seed: int = 0) -> onnx.ModelProto:
    """x (N, C, W) -> Conv1d k5 pad 2 + Relu -> depthwise Conv1d k3 pad 1 dilation 2 ->
    pointwise Conv1d stride 2 + BatchNormalization: a keyword-spotting-style stack."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = [_init("w1", rng.standard_normal((2 * c, c, 5)) / np.sqrt(5 * c)),
             _init("b1", rng.standard_normal(2 * c)),
             _init("w2", rng.standard_normal((2 * c, 1, 3)) / np.sqrt(3)),
             _init("w3", rng.standard_normal((c, 2 * c, 1)) / np.sqrt(2 * c)),
             _init("scale", rng.uniform(0.5, 1.5, c)), _init("shift", rng.uniform(-0.5, 0.5, c)),
             _init("mean", rng.uniform(-0.5, 0.5, c)), _init("var", rng.uniform(0.5, 1.5, c))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[2, 2], dilations=[2], group=2 * c),
             helper.make_node("Conv", ["c2", "w3"], ["c3"], strides=[2]),
             helper.make_node("BatchNormalization", ["c3", "scale", "shift", "mean", "var"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv1d_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, length])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, length // 2])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def bert_layer(seq: int = 16, hidden: int = 32, heads: int = 4, ffn: int = 64,
               seed: int = 0) -> onnx.ModelProto:
    """One post-norm BERT encoder layer on [seq, hidden]: Q/K/V MatMuls sharing the input,
    per-head attention with Softmax, output projection, residual + LayerNormalization, a
    Gelu feed-forward, residual + LayerNormalization."""
    rng = np.random.default_rng(seed)
    d = hidden // heads
    w = lambda *shape: rng.standard_normal(shape) / np.sqrt(shape[0])  # noqa: E731
    inits = [
        _init("wq", w(hidden, hidden)), _init("bq", rng.uniform(-0.1, 0.1, hidden)),
        _init("wk", w(hidden, hidden)), _init("bk", rng.uniform(-0.1, 0.1, hidden)),
        _init("wv", w(hidden, hidden)), _init("bv", rng.uniform(-0.1, 0.1, hidden)),
        _init("wo", w(hidden, hidden)), _init("bo", rng.uniform(-0.1, 0.1, hidden)),
        _init("w1", w(hidden, ffn)), _init("b1", rng.uniform(-0.1, 0.1, ffn)),
        _init("w2", w(ffn, hidden)), _init("b2", rng.uniform(-0.1, 0.1, hidden)),
        _init("g1", rng.uniform(0.5, 1.5, hidden)), _init("beta1", rng.uniform(-0.1, 0.1, hidden)),
        _init("g2", rng.uniform(0.5, 1.5, hidden)), _init("beta2", rng.uniform(-0.1, 0.1, hidden)),
        numpy_helper.from_array(np.array([seq, heads, d], np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([seq, hidden], np.int64), "flat_shape"),
        _init("inv_sqrt_d", np.array(1.0 / np.sqrt(d))),
    ]
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}_mm"], name=f"{name}_proj"),
            helper.make_node("Add", [f"{name}_mm", f"b{name}"], [f"{name}_b"], name=f"{name}_bias"),
            helper.make_node("Reshape", [f"{name}_b", "heads_shape"], [f"{name}_r"], name=f"{name}_split"),
        ]
    nodes += [
        helper.make_node("Transpose", ["q_r"], ["q_t"], perm=[1, 0, 2]),
        helper.make_node("Transpose", ["k_r"], ["k_t"], perm=[1, 2, 0]),
        helper.make_node("Transpose", ["v_r"], ["v_t"], perm=[1, 0, 2]),
        helper.make_node("MatMul", ["q_t", "k_t"], ["scores_raw"], name="scores"),
        helper.make_node("Mul", ["scores_raw", "inv_sqrt_d"], ["scores_s"]),
        helper.make_node("Softmax", ["scores_s"], ["probs"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["probs", "v_t"], ["ctx"], name="context"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["ctx_t", "flat_shape"], ["ctx_f"]),
        helper.make_node("MatMul", ["ctx_f", "wo"], ["o_mm"], name="out_proj"),
        helper.make_node("Add", ["o_mm", "bo"], ["o_b"]),
        helper.make_node("Add", ["o_b", "x"], ["res1"], name="residual1"),
        helper.make_node("LayerNormalization", ["res1", "g1", "beta1"], ["ln1"], axis=-1, name="ln1"),
        helper.make_node("MatMul", ["ln1", "w1"], ["f1"], name="ffn1"),
        helper.make_node("Add", ["f1", "b1"], ["f1b"]),
        helper.make_node("Gelu", ["f1b"], ["f1g"], name="gelu") if False else
        helper.make_node("Relu", ["f1b"], ["f1g"], name="act"),
        helper.make_node("MatMul", ["f1g", "w2"], ["f2"], name="ffn2"),
        helper.make_node("Add", ["f2", "b2"], ["f2b"]),
        helper.make_node("Add", ["f2b", "ln1"], ["res2"], name="residual2"),
        helper.make_node("LayerNormalization", ["res2", "g2", "beta2"], ["y"], axis=-1, name="ln2"),
    ]
    graph = helper.make_graph(
        nodes, "bert_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, hidden])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def depthwise_pool_net(channels: int = 8, size: int = 12, classes: int = 5, grouped: bool = False,
                       seed: int = 0) -> onnx.ModelProto:
    """x -> Conv 3x3 (pad 1, bias) -> Relu -> depthwise Conv 3x3 (group = C, pad 1) -> Relu
    -> MaxPool 2x2 -> [grouped Conv 1x1, 2 groups] -> GlobalAveragePool -> Flatten -> Gemm:
    a MobileNet-style tail for the layout pass (depthwise, pooling, the reduction and the
    Flatten of ``1xCx1x1``). ``grouped`` adds a grouped 1x1 conv (2 groups)."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = [
        _init("w1", rng.standard_normal((c, 3, 3, 3)) * 0.3),
        _init("b1", rng.uniform(-0.5, 0.5, c)),
        _init("wd", rng.standard_normal((c, 1, 3, 3)) * 0.3),
        _init("fc", rng.standard_normal((c, classes)) * 0.3),
        _init("fcb", rng.uniform(-0.5, 0.5, classes)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "wd"], ["d"], pads=[1, 1, 1, 1], group=c, name="depthwise"),
        helper.make_node("Relu", ["d"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
    ]
    pooled = "p"
    if grouped:
        inits.append(_init("wg", rng.standard_normal((c, c // 2, 1, 1)) * 0.3))
        nodes.append(helper.make_node("Conv", ["p", "wg"], ["g"], group=2, name="grouped"))
        pooled = "g"
    nodes += [
        helper.make_node("GlobalAveragePool", [pooled], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "depthwise_pool_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# MobileNetV2's inverted residual stages: (expansion, output channels, blocks, first stride).
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(size: int = 224, width: float = 1.0, classes: int = 1000,
                 stages: tuple[tuple[int, int, int, int], ...] = MOBILENET_V2_STAGES,
                 seed: int = 0) -> onnx.ModelProto:
    """A MobileNetV2-style network, batch 1, NCHW, opset 17: a 3x3 stride-2 stem, inverted
    residual blocks (1x1 expand + BN + ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN,
    a residual Add where shapes allow), a 1x1 head + BN + ReLU6, GlobalAveragePool, Gemm.
    ``width`` scales the channel counts (not rounded to multiples of 8, so odd counts occur)."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    six = _init("six", np.array(6.0))
    zero = _init("zero", np.array(0.0))
    inits += [six, zero]

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, group: int, relu6: bool) -> str:
        i = len(nodes)
        w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (k * k * cin // group))
        inits.extend([_init(f"w{i}", w), _init(f"s{i}", rng.uniform(0.5, 1.5, cout)),
                      _init(f"b{i}", rng.uniform(-0.2, 0.2, cout)),
                      _init(f"m{i}", rng.uniform(-0.2, 0.2, cout)),
                      _init(f"v{i}", rng.uniform(0.5, 1.5, cout))])
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[k // 2] * 4,
                                      strides=[stride] * 2, group=group, name=f"conv{i}"))
        nodes.append(helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"],
                                      [f"n{i}"], name=f"bn{i}"))
        if not relu6:
            return f"n{i}"
        nodes.append(helper.make_node("Clip", [f"n{i}", "zero", "six"], [f"r{i}"], name=f"relu6_{i}"))
        return f"r{i}"

    channels = max(int(32 * width), 3)
    x = conv_bn("x", 3, channels, 3, 2, 1, True)
    for expansion, out, blocks, first_stride in stages:
        out = max(int(out * width), 3)
        for b in range(blocks):
            stride = first_stride if b == 0 else 1
            hidden = channels * expansion
            y = conv_bn(x, channels, hidden, 1, 1, 1, True) if expansion != 1 else x
            y = conv_bn(y, hidden, hidden, 3, stride, hidden, True)
            y = conv_bn(y, hidden, out, 1, 1, 1, False)
            if stride == 1 and channels == out:
                nodes.append(helper.make_node("Add", [y, x], [f"add{len(nodes)}"], name=f"add{len(nodes)}"))
                y = nodes[-1].output[0]
            x, channels = y, out
    head = max(int(1280 * width), 3)
    x = conv_bn(x, channels, head, 1, 1, 1, True)
    inits += [_init("fc", rng.standard_normal((head, classes)) / np.sqrt(head)),
              _init("fcb", rng.uniform(-0.1, 0.1, classes))]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fc", "fcb"], ["y"], name="fc")]
    graph = helper.make_graph(
        nodes, "mobilenet_v2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
