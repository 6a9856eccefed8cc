"""End to end: tilecraft beside onnxruntime and PyTorch eager on five models, measured in one run.

    make bench
    .venv/bin/python benchmarks/end_to_end.py
    .venv/bin/python benchmarks/end_to_end.py --models resnet50,bert --bert-layers 12 --repeat 20
    .venv/bin/python benchmarks/end_to_end.py --models resnet50,mobilenetv2 --kernels resnet50,mobilenetv2 --compare-kernels ort.md
    .venv/bin/python benchmarks/end_to_end.py --models bert,resnet50 --offload blas
    .venv/bin/python benchmarks/end_to_end.py --models bert --kernels bert --weight-panel 32
    .venv/bin/python benchmarks/end_to_end.py --models vit,mlp,unet,conv1d,c3d,fpn,bilinear --kernels '' --without tilecraft-pad-matmul-extents
    .venv/bin/python benchmarks/end_to_end.py --models regnet,squeezenet --kernels regnet,squeezenet
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/end_to_end.py --models embedding,digits_dyn,digits \
        --kernels '' --checks-cost --cpu-time --repeat 41

Models (random weights, built here; nothing is downloaded):

- ``resnet50``: the onnx wheel's light zoo ResNet-50 v1 (benchmarks/onnx_models.py
  randomizes its weights and exposes the logits), batch 1;
- ``resnet50_b8``: the same at batch 8 (the Reshape before the classifier rewritten), for
  throughput in images/s;
- ``bert``: a BERT-base-shaped encoder (seq 128, hidden 768, 12 heads, FFN 3072, GELU,
  post-norm), ``--bert-layers`` layers (default 2, to run in about a minute);
- ``mobilenetv2``: MobileNetV2 1.0 at 224x224 (inverted residual blocks: 1x1 expand + BN +
  ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN, residual add);
- ``digits``: the digits CNN of examples/ (batch 1);
- ``vit``, ``mlp``, ``unet``, ``conv1d``, ``c3d``, ``fpn`` and ``bilinear`` (not in the default run):
  shapes no earlier round tuned for: a ViT-B/16-shaped model (2 blocks, 197 tokens), an MLP
  of 1000 -> 500 -> 250 -> 10 features on 32 rows, two U-Net levels at 128x128 (a 2x2
  stride-2 ConvTranspose, a skip Concat), a keyword-spotting-style 1-D CNN, a C3D-style
  video net, two feature-pyramid levels (a 2x nearest upsampling), a 2x bilinear
  upsampling between convolutions;
- ``regnet`` and ``squeezenet`` (not in the default run): RegNet-style stages (3x3
  convolutions grouped by 16 channels, squeeze-excite; BatchNorm statistics calibrated on
  training-mode batches) and SqueezeNet's 13x13 head (Fire modules, a 1x1 classifier into
  1000 channels over 13x13 pixels);
- ``digits_dyn`` and ``embedding`` (not in the default run): the digits CNN with a dynamic
  batch (64 images), and a token embedding + MLP over a dynamic number of tokens (64):
  models whose sizes are known only at the call, so the run-time checks are compiled in.
  ``--checks-cost`` times every model also compiled with ``runtime_checks=False``.

BERT and MobileNetV2 are PyTorch modules exported with the TorchScript ONNX exporter
(``dynamo=False``: the torch.export-based one needs onnxscript), so PyTorch eager runs the
same weights; ResNet-50 and the digits CNN have no PyTorch version here (no torchvision).

Per model: compile time (``tilecraft.compile``, and by step: ``CompiledModule.compile_seconds``;
for onnxruntime, creating the session), the
peak resident memory of the compile above what the process held before (``/proc/self/statm``
sampled every 5 ms), median latency of tilecraft, onnxruntime and PyTorch with their calls
alternating (one of each per round, so a load change on the shared machine hits all
three; each runner's timed calls follow one untimed call of its own, see ``alternating``), the ratio tilecraft / onnxruntime (below 1: tilecraft is faster), and tilecraft's
outputs checked against onnxruntime's (rtol 1e-3, atol 1e-3 of the output's largest
magnitude, as benchmarks/onnx_models.py does).

Also printed: the per-call overhead of the Python entry on a one-Add model of [1, 16] floats
(argument checks, descriptors, output allocation: there is no work to hide it; measured by
benchmarks/call_overhead.py), numpy's
1024^3 float32 GEMM (the OpenBLAS anchor; run through ``make bench``, which unsets
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE), and for the models in ``--kernels`` the heaviest
kernels of tilecraft's profile (``compile(package_path=, profile=True)``, the
``tilecraft run --profile`` path) with their GFLOPS and ratio to that anchor.
``--compare-kernels FILE`` writes each profiled model's per-kernel table beside onnxruntime's own
profiler (``SessionOptions.enable_profiling``) as Markdown (docs/performance.md).
No thresholds: the figures are quoted in notes and compared across changes.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.runtime import timing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onnx_models  # noqa: E402

RTOL = 1e-3
# What the alternating rounds time: wall clock, or with --cpu-time the process's CPU time
# (all its threads), steadier on a loaded machine; compare runs of one clock only.
CLOCK: Callable[[], float] = time.perf_counter


# ---- models -------------------------------------------------------------------------------

@dataclass
class Case:
    """One benchmarked model: the ONNX graph all runtimes share, feeds, and the PyTorch
    module with its inputs when there is one."""

    name: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    torch_module: Any = None
    torch_inputs: tuple = ()
    images: int = 0  # > 0: report throughput in images/s for this batch


def _name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give unnamed nodes the label tilecraft's importer uses (``<OpType>_<position>``), so
    onnxruntime's profile and tilecraft's kernels name the same nodes alike."""
    for position, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{position}"
    return model


def _light_resnet50() -> onnx.ModelProto:
    original = onnx.load(os.path.join(onnx_models.LIGHT_DIR, "light_resnet50.onnx"))
    model, _ = onnx_models.randomize_weights(original)
    return _name_nodes(onnx_models.expose_logits(model))


def resnet50(batch: int = 1) -> Case:
    model = _light_resnet50()
    if batch != 1:
        # The classifier's Reshape has a constant [1, 2048]; the input and outputs batch 1.
        for tensor in model.graph.initializer:
            array = numpy_helper.to_array(tensor)
            if array.dtype == np.int64 and array.tolist() == [1, 2048]:
                tensor.CopyFrom(numpy_helper.from_array(np.array([batch, 2048], np.int64), tensor.name))
        for value in [*model.graph.input[:1], *model.graph.output]:
            value.type.tensor_type.shape.dim[0].dim_value = batch
        del model.graph.value_info[:]
    feeds = onnx_models.random_inputs(model)
    name = "resnet50" if batch == 1 else f"resnet50_b{batch}"
    return Case(name, model, feeds, images=batch if batch > 1 else 0)


def _torch_case(name: str, module: Any, inputs: tuple, input_names: list[str]) -> Case:
    import torch

    module = module.eval()
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17,
                          input_names=input_names, output_names=["output"], do_constant_folding=True)
    model = _name_nodes(onnx.load_from_string(buffer.getvalue()))
    feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
    return Case(name, model, feeds, torch_module=module, torch_inputs=inputs)


def bert(layers: int) -> Case:
    """A BERT-base-shaped encoder of ``layers`` post-norm layers on one 128-token sequence.
    The attention is written out (as tests/graph/graph_models.py's ``bert_layer`` builds it
    in ONNX) rather than ``nn.MultiheadAttention``, whose export adds batch-first reshapes."""
    import torch
    from torch import nn

    seq, hidden, heads, ffn = 128, 768, 12, 3072

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.ff1, self.ff2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = hidden // heads
            q = self.q(x).reshape(seq, heads, d).transpose(0, 1)
            k = self.k(x).reshape(seq, heads, d).permute(1, 2, 0)
            v = self.v(x).reshape(seq, heads, d).transpose(0, 1)
            probs = torch.softmax(torch.matmul(q, k) * (1.0 / math.sqrt(d)), dim=-1)
            context = torch.matmul(probs, v).transpose(0, 1).reshape(seq, hidden)
            x = self.ln1(x + self.o(context))
            return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    torch.manual_seed(0)
    module = nn.Sequential(*(Layer() for _ in range(layers)))
    x = torch.randn(seq, hidden)
    case = _torch_case("bert", module, (x,), ["x"])
    case.name = f"bert_{layers}l"
    return case


def mobilenetv2() -> Case:
    """MobileNetV2 1.0, 224x224, batch 1, with batch-norm statistics randomized (the
    defaults, mean 0 and variance 1, would make every BN an identity)."""
    import torch
    from torch import nn

    def conv_bn(cin: int, cout: int, kernel: int, stride: int, groups: int = 1, act: bool = True) -> list:
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU6()] if act else layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            layers = conv_bn(cin, mid, 1, 1) if expand != 1 else []
            layers += conv_bn(mid, mid, 3, stride, groups=mid) + conv_bn(mid, cout, 1, 1, act=False)
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x) if self.residual else self.body(x)

    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]
    torch.manual_seed(0)
    layers: list = conv_bn(3, 32, 3, 2)
    cin = 32
    for expand, cout, repeats, stride in settings:
        for index in range(repeats):
            layers.append(InvertedResidual(cin, cout, stride if index == 0 else 1, expand))
            cin = cout
    layers += conv_bn(cin, 1280, 1, 1) + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    module = nn.Sequential(*layers)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.rand(1, 3, 224, 224)
    return _torch_case("mobilenetv2", module, (x,), ["input"])


def vit(blocks: int = 2) -> Case:
    """A ViT-B/16-shaped model, ``blocks`` pre-norm encoder blocks: 16x16 patches of a
    224x224 image, a class token (197 tokens: no register tile divides them), hidden 768, 12
    heads, MLP 3072 with GELU, the class token's logits."""
    import torch
    from torch import nn

    hidden, heads, tokens = 768, 12, 197

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = hidden // heads
            q, k, v = (t.reshape(tokens, heads, d).transpose(0, 1) for t in self.qkv(self.ln1(x)).split(hidden, -1))
            probs = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(d)), dim=-1)
            x = x + self.proj(torch.matmul(probs, v).transpose(0, 1).reshape(tokens, hidden))
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patches = nn.Conv2d(3, hidden, 16, 16)
            self.cls = nn.Parameter(torch.randn(1, hidden) * 0.02)
            self.position = nn.Parameter(torch.randn(tokens, hidden) * 0.02)
            self.blocks = nn.Sequential(*(Block() for _ in range(blocks)))
            self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, 1000)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = torch.cat([self.cls, self.patches(image).flatten(2)[0].transpose(0, 1)]) + self.position
            return self.head(self.ln(self.blocks(x))[0])

    torch.manual_seed(0)
    case = _torch_case("vit", ViT(), (torch.rand(1, 3, 224, 224),), ["image"])
    case.name = f"vit_{blocks}b"
    return case


def mlp() -> Case:
    """An MLP with the sizes people pick: 32 rows of 1000 features, 500 -> 250 -> 10 (no
    multiple of 16 among them), ReLU and Tanh."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(1000, 500), nn.ReLU(), nn.Linear(500, 250), nn.Tanh(), nn.Linear(250, 10))
    return _torch_case("mlp", module, (torch.randn(32, 1000),), ["x"])


def unet() -> Case:
    """Two U-Net levels at 128x128: 3x3 convolutions + ReLU, a 2x2 max pool, a 2x2 stride-2
    ConvTranspose back up, the skip connection concatenated on the channels."""
    import torch
    from torch import nn

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down1 = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                                       nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
            self.down2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.out = nn.Sequential(nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 2, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            skip = self.down1(x)
            return self.out(torch.cat([skip, self.up(self.down2(skip))], 1))

    torch.manual_seed(0)
    return _torch_case("unet", UNet(), (torch.rand(1, 3, 128, 128),), ["x"])


def conv1d() -> Case:
    """A keyword-spotting-style 1-D CNN on 400 frames of 40 features: Conv1d k5 + BN +
    ReLU, a depthwise-separable Conv1d pair, max pooling, Conv1d k3, global pooling, a
    12-way classifier."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv1d(40, 128, 5, padding=2), nn.BatchNorm1d(128), nn.ReLU(),
        nn.Conv1d(128, 128, 5, padding=2, groups=128), nn.Conv1d(128, 256, 1), nn.BatchNorm1d(256), nn.ReLU(),
        nn.MaxPool1d(2), nn.Conv1d(256, 256, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(256, 12))
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return _torch_case("conv1d", module, (torch.randn(1, 40, 400),), ["x"])


def c3d() -> Case:
    """A C3D-style video net on 8 frames of 56x56: 3x3x3 convolutions + ReLU, a 2x2x2 max
    pool, global pooling, a 10-way classifier."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv3d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
                           nn.Conv3d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                           nn.Linear(64, 10))
    return _torch_case("c3d", module, (torch.randn(1, 3, 8, 56, 56),), ["x"])


def fpn() -> Case:
    """Two levels of a feature pyramid on a 256x256 image: strided 3x3 convolutions down,
    1x1 lateral convolutions, the coarse level upsampled 2x (nearest) and added, a 3x3
    output convolution."""
    import torch
    from torch import nn

    class Pyramid(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down1, self.down2 = nn.Conv2d(3, 64, 3, 2, 1), nn.Conv2d(64, 128, 3, 2, 1)
            self.lateral1, self.lateral2 = nn.Conv2d(64, 64, 1), nn.Conv2d(128, 64, 1)
            self.out = nn.Conv2d(64, 64, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            fine = torch.relu(self.down1(x))
            coarse = torch.relu(self.down2(fine))
            top = nn.functional.interpolate(self.lateral2(coarse), scale_factor=2.0, mode="nearest")
            return self.out(self.lateral1(fine) + top)

    torch.manual_seed(0)
    return _torch_case("fpn", Pyramid(), (torch.rand(1, 3, 256, 256),), ["x"])


def bilinear() -> Case:
    """A segmentation head's upsampling: a strided 3x3 convolution, a 2x bilinear
    ``interpolate`` (``align_corners=False``) back to 128x128, a 3x3 convolution."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down, self.out = nn.Conv2d(3, 64, 3, 2, 1), nn.Conv2d(64, 32, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            up = nn.functional.interpolate(torch.relu(self.down(x)), scale_factor=2.0, mode="bilinear",
                                           align_corners=False)
            return self.out(up)

    torch.manual_seed(0)
    return _torch_case("bilinear", Head(), (torch.rand(1, 3, 128, 128),), ["x"])


def _calibrate_batch_norms(module: Any, batch: Any, steps: int = 3) -> Any:
    """BatchNorm running statistics from a few training-mode batches of ``batch``, then eval
    mode: with the defaults (mean 0, variance 1) activations of random weights shrink or
    grow layer by layer and a deep net's output is its classifier's bias, which every
    comparison passes."""
    import torch

    module.train()
    with torch.no_grad():
        for _ in range(steps):
            module(batch)
    return module.eval()


def regnet() -> Case:
    """RegNetX/Y-style stages at 56x56 -> 14x14: bottleneck blocks whose 3x3 convolution is
    grouped with 16 channels per group (stride 2 in each stage's first block), squeeze-excite
    after it, a residual (a strided 1x1 projection where the shape changes). Grouped
    convolutions of 8-64 channels per group are what ResNeXt and RegNet are made of."""
    import torch
    from torch import nn

    def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True) -> list:
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU()] if act else layers

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, group_width: int = 16) -> None:
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 1), *conv_bn(cout, cout, 3, stride, cout // group_width))
            self.squeeze = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, cin // 4, 1), nn.ReLU(),
                                         nn.Conv2d(cin // 4, cout, 1), nn.Sigmoid())
            self.project = nn.Sequential(*conv_bn(cout, cout, 1, act=False))
            self.shortcut = (nn.Sequential(*conv_bn(cin, cout, 1, stride, act=False))
                             if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            return torch.relu(self.shortcut(x) + self.project(y * self.squeeze(y)))

    torch.manual_seed(0)
    stages = [(32, 48, 2), (48, 112, 2), (112, 256, 2)]
    layers: list = conv_bn(3, 32, 3, 2)
    for cin, cout, depth in stages:
        layers += [Block(cin if i == 0 else cout, cout, 2 if i == 0 else 1) for i in range(depth)]
    module = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1000))
    _calibrate_batch_norms(module, torch.rand(4, 3, 112, 112))
    return _torch_case("regnet", module, (torch.rand(1, 3, 112, 112),), ["x"])


def squeezenet() -> Case:
    """SqueezeNet 1.1's head at 13x13: a Fire module (1x1 squeeze, parallel 1x1 / 3x3
    expand, channel concat) and the classifier, a 1x1 convolution over 13x13 pixels into
    1000 channels then global pooling. 13 (a prime) has no register tile of pixels."""
    import torch
    from torch import nn

    class Fire(nn.Module):
        def __init__(self, cin: int, squeeze: int, expand: int) -> None:
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
            self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
            self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = self.squeeze(x)
            return torch.cat([self.expand1(s), self.expand3(s)], 1)

    torch.manual_seed(0)
    module = nn.Sequential(Fire(384, 64, 256), Fire(512, 64, 256), nn.Conv2d(512, 1000, 1), nn.ReLU(),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return _torch_case("squeezenet", module, (torch.rand(1, 384, 13, 13),), ["x"])


def digits() -> Case:
    model = _name_nodes(onnx.load(os.path.join(HERE, "..", "examples", "digits_cnn.onnx")))
    for value in [*model.graph.input, *model.graph.output]:  # batch 1 (the file's is dynamic)
        value.type.tensor_type.shape.dim[0].dim_value = 1
    x = np.random.default_rng(0).random((1, 1, 16, 16)).astype(np.float32)
    return Case("digits", model, {"input": x})


def digits_dynamic(batch: int = 64) -> Case:
    """The digits CNN with the file's dynamic batch dim kept, called with ``batch`` images:
    its sizes are known only at the call, so the run-time shape checks are compiled in."""
    model = _name_nodes(onnx.load(os.path.join(HERE, "..", "examples", "digits_cnn.onnx")))
    x = np.random.default_rng(0).random((batch, 1, 16, 16)).astype(np.float32)
    return Case("digits_dyn", model, {"input": x}, images=batch)


def embedding(tokens: int = 64, vocab: int = 8192, width: int = 256, hidden: int = 1024) -> Case:
    """A token embedding (Gather of run-time ids) and a two-layer MLP over a dynamic number
    of tokens: an index range check on the ids and shape checks on the matmuls."""
    rng = np.random.default_rng(0)
    weights = {"table": rng.standard_normal((vocab, width)).astype(np.float32) * 0.1,
               "w1": rng.standard_normal((width, hidden)).astype(np.float32) * 0.05,
               "w2": rng.standard_normal((hidden, width)).astype(np.float32) * 0.05}
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
         helper.make_node("MatMul", ["e", "w1"], ["h"], name="fc1"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")], "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["tokens"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["tokens", width])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return Case("embedding", model, {"ids": rng.integers(0, vocab, tokens).astype(np.int64)})


# ---- measuring ----------------------------------------------------------------------------

class PeakRss:
    """Peak resident set size while the block runs, sampled from /proc/self/statm (a
    process-wide ``ru_maxrss`` cannot be reset between models)."""

    PAGE = os.sysconf("SC_PAGE_SIZE")

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.before = self.peak = 0
        self._stop = threading.Event()

    @classmethod
    def rss(cls) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * cls.PAGE

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRss":
        self.before = self.peak = self.rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def added_mb(self) -> float:
        return (self.peak - self.before) / 2**20


# Quiet time before each runner's turn when models alternate. onnxruntime's pool threads and
# PyTorch's OpenMP threads spin on after a call returns, and the runner after them lost
# the CPU to that spinning: of two tilecraft builds of MobileNetV2 timed in one process,
# whichever ran right after onnxruntime was 15-30% slower (two runs, order swapped); with
# 0.2 s of pause they ran within 3% of each other. Every runner gets the same pause.
RUNNER_PAUSE_S = 0.2


def alternating(runners: dict[str, Callable[[], Any]], repeat: int, min_sample_s: float = 0.02,
                pause_s: float = 0.0) -> dict[str, float]:
    """``tilecraft.runtime.timing.alternating`` on this run's clock (``--cpu-time``)."""
    return timing.alternating(runners, repeat, min_sample_s, clock=CLOCK, pause_s=pause_s)


def numpy_gemm_gflops(n: int = 1024, repeat: int = 10) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    seconds = alternating({"numpy": lambda: a @ b}, repeat)["numpy"]
    return 2 * n**3 / seconds / 1e9


def _matches(got: np.ndarray, reference: np.ndarray) -> bool:
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    return got.shape == reference.shape and np.allclose(got, reference, rtol=RTOL, atol=RTOL * scale)


def _scaled_error(got: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    return float(np.max(np.abs(got.astype(np.float64) - reference))) / scale if scale else 0.0


# ---- kernels: tilecraft's profile, FLOPs, onnxruntime's profile -----------------------------

def node_flops(model: onnx.ModelProto) -> dict[str, tuple[str, float]]:
    """Node label -> (op type, multiply-adds x 2) for Conv, Gemm and MatMul nodes."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value for d in dims]
    for tensor in model.graph.initializer:
        shapes[tensor.name] = list(tensor.dims)
    flops = {}
    for node in model.graph.node:
        out = shapes.get(node.output[0])
        if not out:
            continue
        if node.op_type == "Conv":
            weight = shapes.get(node.input[1])
            if weight:
                flops[node.name] = ("Conv", 2.0 * math.prod(out) * math.prod(weight[1:]))
        elif node.op_type in ("Gemm", "MatMul"):
            a = shapes.get(node.input[0])
            if a:
                trans_a = any(attr.name == "transA" and attr.i for attr in node.attribute)
                k = a[0] if trans_a and node.op_type == "Gemm" else a[-1]
                flops[node.name] = (node.op_type, 2.0 * math.prod(out) * k)
    return flops


def _label(kernel_name: str) -> str:
    """``Conv_12(Conv)`` -> ``Conv_12``."""
    return kernel_name.split("(", 1)[0]


# Ops a fusion group ends with after its contraction (its kernel takes the last one's name).
_EPILOGUE_OPS = frozenset({"Add", "Sum", "Relu", "Clip", "Mul", "BatchNormalization", "Sigmoid",
                           "Div", "Erf", "Tanh", "Identity", "Reshape", "Flatten"})


def kernel_anchors(model: onnx.ModelProto, labels: "set[str]",
                   stop: "set[str] | frozenset[str]" = frozenset()) -> dict[str, str]:
    """Label -> the Conv/Gemm/MatMul node it computes (else the labelled node itself). A
    label names a node or the tensor a node produces. A fused kernel is named after its last op (tilecraft's group
    ``Relu_5``: the conv, its folded batch norm and the ReLU; onnxruntime's ``<output>_nchwc``),
    so the label is followed back breadth-first through epilogue producers to the nearest
    contraction, never through nodes in ``stop`` (those another kernel computes)."""
    by_name = {node.name: node for node in model.graph.node}
    producers = {output: node for node in model.graph.node for output in node.output}
    anchors = {}
    for label in labels:
        start = by_name.get(label) or producers.get(label)
        queue = [start] if start is not None else []
        seen: set[str] = set()
        while queue:
            node = queue.pop(0)
            if node is None or node.name in seen:
                continue
            seen.add(node.name)
            if node.op_type in ("Conv", "Gemm", "MatMul"):
                anchors[label] = node.name
                break
            if node is not start and node.name in stop:
                continue  # computed by a kernel of its own (a residual's other input)
            if node.op_type in _EPILOGUE_OPS:
                queue.extend(producers.get(name) for name in node.input)
        if label not in anchors and start is not None:
            anchors[label] = start.name  # no contraction (pooling, softmax): the node itself
    return anchors


@dataclass
class Profiles:
    """Per-kernel times of one model from both runtimes, taken in the same rounds."""

    kernels: dict[str, float]  # tilecraft kernel name -> median seconds per call
    wall: float  # median seconds of tilecraft's profiled calls
    ort_nodes: dict[str, tuple[str, float]] | None = None  # node -> (op type, mean seconds per run)
    ort_wall: float | None = None


def profile_side_by_side(case: Case, ort: Any = None, runs: int = 10) -> Profiles:
    """tilecraft's kernels (the package's profiling variant) and, given ``ort``, onnxruntime's
    nodes (its profiler's JSON), profiled in alternating rounds with :data:`RUNNER_PAUSE_S`
    before each call.

    Why alternating: profiled one after the other, minutes apart, the two sums came out equal
    (ResNet-50: 46.2 against 45.8 ms) while the models timed side by side differed by 1.29x;
    taken in the same rounds the kernel sums differed as the models did (64.0 against 53.9
    ms). On this machine the speed drifts by tens of percent between minutes."""
    from tilecraft.runtime import load

    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "model.tar")
        tilecraft.compile(case.model, keep_ir=False, package_path=path, profile=True)
        package = load(path)
        session = None
        if ort is not None:
            options = ort.SessionOptions()
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(scratch, "ort")
            session = ort.InferenceSession(case.model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
            session.run(None, case.feeds)  # in the profile too: counted below
        package.profile(**case.feeds)
        samples: dict[str, list[float]] = {}
        walls: list[float] = []
        ort_walls: list[float] = []
        for _ in range(runs):
            time.sleep(RUNNER_PAUSE_S)
            start = time.perf_counter()
            _, kernels = package.profile(**case.feeds)
            walls.append(time.perf_counter() - start)
            totals: dict[str, float] = {}
            for kernel in kernels:
                totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.seconds
            for name, seconds in totals.items():
                samples.setdefault(name, []).append(seconds)
            if session is not None:
                time.sleep(RUNNER_PAUSE_S)
                start = time.perf_counter()
                session.run(None, case.feeds)
                ort_walls.append(time.perf_counter() - start)
        profiles = Profiles({name: statistics.median(values) for name, values in samples.items()},
                            statistics.median(walls))
        if session is not None:
            with open(session.end_profiling()) as handle:
                events = json.load(handle)
            nodes: dict[str, tuple[str, float]] = {}
            for event in events:
                if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
                    continue
                name = event["name"][: -len("_kernel_time")]
                op, seconds = nodes.get(name, (event.get("args", {}).get("op_name", "?"), 0.0))
                nodes[name] = (op, seconds + event["dur"] * 1e-6 / (runs + 1))
            profiles.ort_nodes, profiles.ort_wall = nodes, statistics.median(ort_walls)
    return profiles


def kernel_flops(model: onnx.ModelProto, flops: dict[str, tuple[str, float]],
                 anchored: "set[str]") -> dict[str, float]:
    """Contraction a kernel is anchored at -> the flops its kernel computes: its own, plus
    those of parallel Gemm/MatMul nodes of the same type on the same input that no kernel
    is anchored at (``tilecraft-combine-parallel-matmul`` computes them in one matmul, named
    after the first: BERT's Q/K/V kernel is labelled Q's Gemm and does three times Q's work)."""
    totals = {name: flops[name][1] for name in anchored if name in flops}
    by_name = {node.name: node for node in model.graph.node}
    for node in model.graph.node:
        if node.name in anchored or node.name not in flops or node.op_type not in ("Gemm", "MatMul"):
            continue
        siblings = [name for name in totals if by_name[name].op_type == node.op_type
                    and by_name[name].input[0] == node.input[0]]
        if len(siblings) == 1:
            totals[siblings[0]] += flops[node.name][1]
    return totals


def print_kernels(case: Case, kernels: dict[str, float], anchor: float, top: int = 10) -> None:
    flops = node_flops(case.model)
    labels = {_label(name) for name in kernels}
    anchors = kernel_anchors(case.model, labels, stop=labels)
    computed = kernel_flops(case.model, flops, set(anchors.values()))
    # A contraction computed by several kernels (a relayout, then the conv's group) is rated
    # on their summed time.
    per_anchor: dict[str, float] = {}
    for name, seconds in kernels.items():
        key = anchors.get(_label(name), _label(name))
        per_anchor[key] = per_anchor.get(key, 0.0) + seconds
    total = sum(kernels.values()) or 1.0
    print(f"\n{case.name}: heaviest kernels of tilecraft's profile "
          f"(sum {total * 1e3:.1f} ms; GFLOPS of the Conv/Gemm/MatMul computed, over all its "
          f"kernels; vs numpy GEMM {anchor:.0f} GFLOPS)")
    print(f"  {'kernel':<34} {'ms':>8} {'share':>6} {'GFLOPS':>8} {'/numpy':>7} contraction")
    for name, seconds in sorted(kernels.items(), key=lambda kv: -kv[1])[:top]:
        contraction = anchors.get(_label(name))
        op_flops = computed.get(contraction) if contraction else None  # None: not a contraction
        rate = op_flops / per_anchor[contraction] / 1e9 if op_flops and seconds else None
        rate_text = f"{rate:8.1f} {rate / anchor:7.2f} {contraction}" if rate else f"{'-':>8} {'-':>7}"
        print(f"  {name[:34]:<34} {seconds * 1e3:8.3f} {seconds / total:6.1%} {rate_text}")


def compare_kernels(case: Case, profiles: Profiles, anchor: float, path: str) -> None:
    """Write tilecraft's kernels beside onnxruntime's, largest gap first, as Markdown.

    Both sides are joined on the contraction node, through :func:`kernel_anchors`:
    tilecraft's fusion groups and onnxruntime's fused Conv (+ BatchNormalization + Relu +
    Add) nodes. What is left on either side is listed by time under the
    table; so are both runtimes' profiled calls, timed in the same rounds."""
    kernels, ort_kernels = profiles.kernels, profiles.ort_nodes or {}
    flops = node_flops(case.model)
    labels = {_label(name) for name in kernels}
    anchors = kernel_anchors(case.model, labels, stop=labels)
    ours: dict[str, float] = {}
    for name, seconds in kernels.items():
        key = anchors.get(_label(name), _label(name))
        ours[key] = ours.get(key, 0.0) + seconds
    # onnxruntime's fused nodes: "<output>_nchwc" (its NCHWc layout) or the node's own name.
    ort_labels = {name: name.removesuffix("_nchwc") for name in ort_kernels}
    ort_anchors = kernel_anchors(case.model, set(ort_labels.values()))
    theirs_by_node: dict[str, tuple[str, float]] = {}
    for name, (op, seconds) in ort_kernels.items():
        key = ort_anchors.get(ort_labels[name], name)
        _, total = theirs_by_node.get(key, (op, 0.0))
        theirs_by_node[key] = (op, total + seconds)
    ort_kernels = theirs_by_node
    rows = []
    for label, seconds in ours.items():
        if label in ort_kernels:
            op, theirs = ort_kernels[label]
            rows.append((seconds - theirs, label, op, seconds, theirs))
    rows.sort(reverse=True)
    matched = {row[1] for row in rows}
    lines = [
        f"| # | node | op | GFLOP | tilecraft ms | onnxruntime ms | gap ms | ratio | tilecraft GFLOPS | /numpy | what was done |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, (gap, label, op, seconds, theirs) in enumerate(rows, 1):
        gflop = flops.get(label, ("", 0.0))[1] / 1e9
        rate = gflop / seconds if gflop and seconds else 0.0
        lines.append(
            f"| {index} | {label} | {op} | {gflop:.3f} | {seconds * 1e3:.3f} | {theirs * 1e3:.3f} | "
            f"{gap * 1e3:+.3f} | {seconds / theirs if theirs else float('inf'):.2f} | "
            f"{rate:.1f} | {rate / anchor:.2f} | |"
        )
    rest_ours = sorted(((s, n) for n, s in ours.items() if n not in matched), reverse=True)
    rest_theirs = sorted(((s, n, op) for n, (op, s) in ort_kernels.items() if n not in matched), reverse=True)
    lines += [
        "",
        f"Matched {len(rows)} nodes: tilecraft {sum(r[3] for r in rows) * 1e3:.2f} ms, "
        f"onnxruntime {sum(r[4] for r in rows) * 1e3:.2f} ms. "
        f"Unmatched tilecraft kernels ({len(rest_ours)}, {sum(s for s, _ in rest_ours) * 1e3:.2f} ms): "
        + ", ".join(f"{n} {s * 1e3:.3f}" for s, n in rest_ours[:8])
        + f". Unmatched onnxruntime nodes ({len(rest_theirs)}, {sum(s for s, _, _ in rest_theirs) * 1e3:.2f} ms): "
        + ", ".join(f"{n} ({op}) {s * 1e3:.3f}" for s, n, op in rest_theirs[:8]) + ".",
        "",
        f"Profiled calls in the same alternating rounds (medians): tilecraft {profiles.wall * 1e3:.2f} ms, "
        f"onnxruntime {(profiles.ort_wall or 0.0) * 1e3:.2f} ms.",
    ]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print(f"\nper-kernel comparison with onnxruntime written to {path}")


# ---- the run --------------------------------------------------------------------------------

def edited_pipeline(panel: int = 0, without: Sequence[str] = ()) -> "tilecraft.Pipeline | None":
    """The default pipeline with constant matmul weights packed as ``panel``-column panels
    (``tilecraft-pack-weight-panels{panel=N}``; 32 builds what the default built before
    16-column panels, one panel per register tile: docs/performance.md, round 14) and the
    graph-stage elements ``without`` left out (``tilecraft-pad-matmul-extents``: the build
    before round 15); ``None`` when neither is asked for."""
    if not panel and not without:
        return None
    pipeline = tilecraft.cpu_pipeline("llvm", opt_level=3)
    graph = pipeline.stage("graph").passes
    element = "tilecraft-pack-weight-panels"
    names = [e.split("{", 1)[0] for e in graph]  # an element's pass, without its options
    for name in (*without, *((element,) if panel else ())):
        if name not in names:
            raise SystemExit(f"the default graph stage has no {name}; it has {list(graph)}")
    graph = [e for e, name in zip(graph, names) if name not in without]
    if panel:
        graph = [f"{element}{{panel={panel}}}" if e == element else e for e in graph]
    return pipeline.replace("graph", graph)


def benchmark(case: Case, ort: Any, repeat: int, threads: int,
              offload: tuple[str, ...] = (), checks_cost: bool = False,
              pipeline: "tilecraft.Pipeline | None" = None) -> tuple[str, Any]:
    import gc

    gc.collect()
    with PeakRss() as memory:
        start = time.perf_counter()
        try:
            # --checks-cost measures the checks of the dynamic code: no static compile per
            # call shape (compiler/specialized.py), whose extents need few checks.
            compiled = tilecraft.compile(case.model, keep_ir=False, pipeline=pipeline, cache=False,
                                         **({"specialize_shapes": 0} if checks_cost else {}))
        except Exception as error:  # report and go on with the next model
            return f"{case.name:<12} compile failed: {onnx_models._first_line(error)}", None
        compile_s = time.perf_counter() - start
    start = time.perf_counter()
    session = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_init = time.perf_counter() - start
    inputs = list(case.feeds.values())
    reference = session.run(None, case.feeds)
    got = compiled(*inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    ok = len(got) == len(reference) and all(_matches(g, r) for g, r in zip(got, reference))
    worst = max((_scaled_error(g, r) for g, r in zip(got, reference) if g.shape == r.shape), default=float("nan"))

    runners: dict[str, Callable[[], Any]] = {
        "tilecraft": lambda: compiled(*inputs),
        "onnxruntime": lambda: session.run(None, case.feeds),
    }
    offload_text = ""
    if offload:
        # The same model with matched ops offloaded (docs/backends.md), timed in the same rounds.
        with_offload = tilecraft.compile(case.model, keep_ir=False, offload=list(offload))
        outputs = with_offload(*inputs)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
        offload_ok = all(_matches(g, r) for g, r in zip(outputs, reference))
        runners["offload"] = lambda: with_offload(*inputs)
    checks_text = ""
    if checks_cost:
        # The same model without run-time checks (CompileOptions(runtime_checks=False),
        # docs/robustness.md), timed in the same rounds: what the checks cost.
        # Timed in rounds of their own: onnxruntime's pool threads spin on after a run and
        # would slow (or, by CPU time, be billed to) whichever runner follows it.
        unchecked = tilecraft.compile(case.model, keep_ir=False, runtime_checks=False, specialize_shapes=0)
        unchecked(*inputs)
        pair = alternating({"checked": lambda: compiled(*inputs), "unchecked": lambda: unchecked(*inputs)}, repeat)
        checks_text = (f" | runtime checks cost {(pair['checked'] / pair['unchecked'] - 1) * 100:+.1f} % "
                       f"({pair['checked'] * 1e3:.3f} ms with, {pair['unchecked'] * 1e3:.3f} ms without; "
                       f"checks in code: {'yes' if compiled._function.check_table else 'none'})")
    if case.torch_module is not None:
        import torch

        torch.set_num_threads(threads)

        def torch_call() -> Any:
            with torch.inference_mode():
                return case.torch_module(*case.torch_inputs)

        runners["torch"] = torch_call
    medians = alternating(runners, repeat, pause_s=RUNNER_PAUSE_S)
    ours, theirs = medians["tilecraft"], medians["onnxruntime"]
    torch_text = f"{medians['torch'] * 1e3:9.2f}" if "torch" in medians else f"{'-':>9}"
    if case.images:
        speed = (f"{case.images / ours:7.1f} img/s vs {case.images / theirs:7.1f} img/s"
                 + (f", torch {case.images / medians['torch']:.1f}" if "torch" in medians else ""))
    else:
        speed = ""
    check = "ok" if ok else "MISMATCH"
    if offload:
        offload_text = (f" | --offload {','.join(offload)}: {medians['offload'] * 1e3:.2f} ms, "
                        f"{medians['offload'] / theirs:.2f}x ort, {'ok' if offload_ok else 'MISMATCH'}")
    line = (f"{case.name:<12} {compile_s:8.2f} {memory.added_mb:8.0f} {ort_init:8.2f} {ours * 1e3:9.2f} "
            f"{theirs * 1e3:9.2f} {torch_text} {ours / theirs:6.2f}  {check} (error {worst:.1e}) {speed}"
            f"{offload_text}{checks_text}")
    return line, compiled


CASES: dict[str, Callable[[argparse.Namespace], Case]] = {
    "resnet50": lambda args: resnet50(1),
    "bert": lambda args: bert(args.bert_layers),
    "mobilenetv2": lambda args: mobilenetv2(),
    "digits": lambda args: digits(),
    "resnet50_b8": lambda args: resnet50(8),
    "digits_dyn": lambda args: digits_dynamic(),
    "embedding": lambda args: embedding(),
    "vit": lambda args: vit(),
    "mlp": lambda args: mlp(),
    "unet": lambda args: unet(),
    "conv1d": lambda args: conv1d(),
    "c3d": lambda args: c3d(),
    "fpn": lambda args: fpn(),
    "bilinear": lambda args: bilinear(),
    "regnet": lambda args: regnet(),
    "squeezenet": lambda args: squeezenet(),
}
# The default run (the models with dynamic sizes are for --checks-cost).
DEFAULT_MODELS = ("resnet50", "bert", "mobilenetv2", "digits", "resnet50_b8")


def call_overhead(repeat: int) -> str:
    """The per-call line: benchmarks/call_overhead.py's one-Add model in CPU time, blocks
    alternating (that script prints the whole table: 8 inputs and 4 outputs, io binding)."""
    import call_overhead as calls  # noqa: PLC0415 - beside this file

    figures = calls.onnx_runners("add", 2000, max(repeat, 3))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    return (f"per-call overhead (one Add of [1, 16] floats, CPU median): tilecraft package "
            f"{medians['package(*arrays)']:.1f} us, CompiledModule {medians['CompiledModule(*arrays)']:.1f} us, "
            f"onnxruntime {medians['ort run']:.1f} us")


def checks_overhead(repeat: int) -> str:
    """The per-call cost of the run-time checks where nothing hides it: a Gather of four
    run-time indices from a 4x4 table (one index check), compiled with and without checks."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="g")], "tiny_gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    checked = tilecraft.compile(model, keep_ir=False)
    unchecked = tilecraft.compile(model, keep_ir=False, runtime_checks=False)
    ids = np.array([0, 3, -1, 2])
    medians = alternating({"checked": lambda: checked(ids), "unchecked": lambda: unchecked(ids)}, repeat)
    return (f"per-call cost of run-time checks (Gather of 4 run-time indices, median): "
            f"{medians['checked'] * 1e6:.1f} us with, {medians['unchecked'] * 1e6:.1f} us without")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help=f"comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--repeat", type=int, default=10, help="alternating rounds per model (median reported)")
    parser.add_argument("--bert-layers", type=int, default=2, help="encoder layers of the BERT model (BERT-base: 12)")
    parser.add_argument("--kernels", default="resnet50",
                        help="models whose heaviest kernels are profiled (comma-separated; '' for none)")
    parser.add_argument("--offload", default="",
                        help="also time each model with these offload backends (e.g. blas), same rounds")
    parser.add_argument("--compare-kernels", metavar="FILE",
                        help="write each --kernels model's per-kernel table beside onnxruntime's "
                             "profiler to FILE (FILE-<model>.md when several are profiled)")
    parser.add_argument("--checks-cost", action="store_true",
                        help="also time each model compiled with runtime_checks=False, same rounds, "
                             "and print what the run-time checks cost")
    parser.add_argument("--weight-panel", type=int, default=0, metavar="N",
                        help="pack constant matmul weights as N-column panels (default: the "
                             "pipeline's, 16; 32 builds the layout before round 14)")
    parser.add_argument("--without", action="append", default=[], metavar="PASS",
                        help="leave this graph-stage pass out of the pipeline (repeatable), for "
                             "A/B runs: --without tilecraft-pad-matmul-extents")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time calls by the process's CPU time (time.process_time) instead of the "
                             "wall clock: steadier on a loaded machine; with one thread "
                             "(TILECRAFT_NUM_THREADS=1) for --checks-cost")
    args = parser.parse_args(argv)
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    selected = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in selected if m not in CASES]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(CASES)}")
    import onnxruntime as ort

    for variable in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if variable in os.environ:
            print(f"warning: {variable}={os.environ[variable]} is set; it slows numpy's anchor "
                  "(run through `make bench`, which unsets it)")
    threads = tilecraft.Target.parse("llvm").num_threads
    anchor = numpy_gemm_gflops()
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    print(f"tilecraft target llvm ({threads} thread(s)); onnxruntime {ort.__version__} "
          f"(CPUExecutionProvider); PyTorch {torch_version} eager; median of {args.repeat} alternating rounds")
    print(f"numpy 1024^3 float32 GEMM: {anchor:.1f} GFLOPS")
    print(call_overhead(args.repeat))
    if args.checks_cost:
        print(checks_overhead(args.repeat))
    print()
    print(f"{'model':<12} {'compile':>8} {'RSS +MB':>8} {'ort init':>8} {'tc ms':>9} {'ort ms':>9} "
          f"{'torch ms':>9} {'tc/ort':>6}  check")
    profiled = {m.strip() for m in args.kernels.split(",") if m.strip()}
    cases = {}
    steps: dict[str, dict[str, float]] = {}
    for name in selected:
        case = CASES[name](args)
        offload = tuple(b.strip() for b in args.offload.split(",") if b.strip())
        pipeline = edited_pipeline(args.weight_panel, args.without)
        line, compiled = benchmark(case, ort, args.repeat, threads, offload, args.checks_cost, pipeline)
        print(line, flush=True)
        cases[name] = case
        if compiled is not None and compiled.compile_seconds:
            steps[case.name] = compiled.compile_seconds
    if steps:
        print("\ncompile seconds by step (CompiledModule.compile_seconds; graph includes the "
              "constant folder's JITs)")
        for name, seconds in steps.items():
            print(f"  {name:<12} " + "  ".join(f"{step} {value:.2f}" for step, value in seconds.items()
                                              if value >= 0.005))
    compared = [name for name in selected if name in profiled]
    for name in compared:
        profiles = profile_side_by_side(cases[name], ort if args.compare_kernels else None)
        print_kernels(cases[name], profiles.kernels, anchor)
        if args.compare_kernels:
            path = Path(args.compare_kernels)
            if len(compared) > 1:
                path = path.with_name(f"{path.stem}-{name}{path.suffix}")
            compare_kernels(cases[name], profiles, anchor, str(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
