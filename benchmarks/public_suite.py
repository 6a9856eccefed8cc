"""The public-architecture suite (issue #43): the architectures users bring, written the
way users write them, against onnxruntime and PyTorch eager, measured in one run.

    .venv/bin/python benchmarks/public_suite.py                  # every model
    .venv/bin/python benchmarks/public_suite.py --quick          # the quick subset (make bench)
    .venv/bin/python benchmarks/public_suite.py --models resnext,swin --repeat 15
    .venv/bin/python benchmarks/public_suite.py --list
    .venv/bin/python benchmarks/public_suite.py --held-out       # only the held-out models

Held-out models (benchmarks/held_out.py: a U-Net, a YOLOv8-style detector, a wav2vec 2.0
feature encoder, an LSTM, diffusion ResBlocks with GroupNorm, an MLP-Mixer; since round 30 a
PointNet, a TCN, a transformer decoder, Conformer convolution modules) were added after
the defaults were fitted to the others; the table marks them and sums them apart, so that a
change that helps only the models it was fitted on shows.

Models: PyTorch definitions written here (torchvision does not import beside the CPU torch
wheel: /work/shared/STACK.md), random weights (seeded), BatchNorm statistics calibrated with
a few training-mode batches first (else activations vanish through a deep net and every
check passes on the classifier's bias), moderate sizes (each compiles in well under a
minute here). Each model is exported to ONNX with the TorchScript exporter
(``dynamo=False``, opset 17) and compiled with ``tilecraft.compile`` with the defaults; it
also goes through ``tilecraft.torch.compile`` (torch.export -> ATen import), whose refusals
are reported, not fatal.

Each model runs in a child process of its own (``--one``), so that the peak resident set of
its compile (``ru_maxrss`` and a 5 ms sampler above what the process held before) is that
model's. Per model: ``compile s`` is a cold ``tilecraft.compile`` into an empty cache folder
of the run (``TILECRAFT_CACHE_DIR``; ``--keep-cache`` keeps the user's), ``cached s`` the
same compile again (a hit of the compile cache, compiler/cache.py) in the same process, once
the entry's background store has finished (its seconds are in the JSON as ``store_s``);
``torch s`` the cold ``tilecraft.torch.compile``. Latencies are medians of calls timed in
blocks with a pause before each block, the runtimes alternating block by block
(runtime/timing.py's ``alternating``: onnxruntime's pool threads spin after a run, and
alternating call by call on two cores measured that spinning, not the code). Outputs are
checked: tilecraft against onnxruntime, tilecraft.torch against eager (rtol/atol 1e-3 of
the output's largest magnitude). No thresholds: the table goes into docs/performance.md.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import held_out  # noqa: E402  (the held-out architectures, benchmarks/held_out.py)
RTOL = 1e-3
# The quick subset: small, fast to compile, one of each family (`make bench`).
QUICK = ("resnet_basic", "mobilenet_v3", "shufflenet", "squeezenet", "gpt2", "llama")


# ---- the architectures ----------------------------------------------------------------------
# Each builder takes ``tiny`` (the smoke test's size: few channels, small inputs) and returns
# (module, example inputs).

def _torch():
    import torch
    from torch import nn
    import torch.nn.functional as F

    return torch, nn, F


def conv_bn(nn: Any, cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, dilation: int = 1,
            act: Any = "relu") -> Any:
    layers = [nn.Conv2d(cin, cout, k, stride, dilation * (k // 2), dilation=dilation, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act == "relu":
        layers.append(nn.ReLU(inplace=True))
    elif act is not None:
        layers.append(act)
    return nn.Sequential(*layers)


def _image(tiny: bool, size: int = 224, channels: int = 3) -> tuple:
    torch, _, _ = _torch()
    side = 32 if tiny else size
    return (torch.randn(1, channels, side, side),)


def resnet_basic(tiny: bool = False):
    """ResNet-18: plain residual blocks (two 3x3 convs), 1000 classes."""
    torch, nn, F = _torch()

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a = conv_bn(nn, cin, cout, 3, stride)
            self.b = conv_bn(nn, cout, cout, 3, 1, act=None)
            self.down = conv_bn(nn, cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            return F.relu(self.b(self.a(x)) + self.down(x))

    widths = [8, 16, 32, 64] if tiny else [64, 128, 256, 512]
    layers, cin = [], widths[0]
    for i, w in enumerate(widths):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    model = nn.Sequential(conv_bn(nn, 3, widths[0], 7, 2), nn.MaxPool2d(3, 2, 1), *layers,
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000))
    return model, _image(tiny)


def _bottleneck_net(tiny: bool, groups: int, width_per_group: int, blocks: list[int], se: bool = False):
    torch, nn, F = _torch()

    class SE(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))

    class Bottleneck(nn.Module):
        def __init__(self, cin, planes, stride):
            super().__init__()
            width = planes * width_per_group * groups // 64
            cout = planes * 4
            self.a = conv_bn(nn, cin, width, 1)
            self.b = conv_bn(nn, width, width, 3, stride, groups=groups)
            self.se = SE(width) if se else nn.Identity()
            self.c = conv_bn(nn, width, cout, 1, act=None)
            self.down = conv_bn(nn, cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            return F.relu(self.c(self.se(self.b(self.a(x)))) + self.down(x))

    planes = [16, 16, 32, 32] if tiny else [64, 128, 256, 512]
    stem = planes[0]
    layers, cin = [], stem
    for i, (p, n) in enumerate(zip(planes, blocks)):
        for j in range(n):
            layers.append(Bottleneck(cin, p, 2 if (j == 0 and i > 0) else 1))
            cin = p * 4
    model = nn.Sequential(conv_bn(nn, 3, stem, 7, 2), nn.MaxPool2d(3, 2, 1), *layers,
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000))
    return model, _image(tiny)


def resnet_bottleneck(tiny: bool = False):
    """ResNet-50's bottleneck blocks (1x1, 3x3, 1x1 with expansion 4), [2, 2, 2, 2] blocks."""
    return _bottleneck_net(tiny, 1, 64, [1, 1, 1, 1] if tiny else [2, 2, 2, 2])


def resnet50(tiny: bool = False):
    """ResNet-50 (v1.5: the stride on the 3x3): bottleneck blocks [3, 4, 6, 3], 1000 classes.
    Not in ``ARCHITECTURES`` (``resnet_bottleneck`` stands for the family there):
    benchmarks/precision.py builds it for its accuracy and speed figures."""
    return _bottleneck_net(tiny, 1, 64, [1, 1, 1, 1] if tiny else [3, 4, 6, 3])


def resnext(tiny: bool = False):
    """ResNeXt-50 32x4d-style blocks: grouped 3x3 convs, 32 groups of 4-32 channels."""
    return _bottleneck_net(tiny, 4 if tiny else 32, 4, [1, 1, 1, 1] if tiny else [1, 2, 2, 1])


def regnet(tiny: bool = False):
    """RegNetY-style: grouped 3x3 convs with 8-16 channels per group and squeeze-excite."""
    torch, nn, F = _torch()

    class SE(nn.Module):
        def __init__(self, c, squeezed):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, squeezed, 1), nn.Conv2d(squeezed, c, 1)

        def forward(self, x):
            return x * torch.sigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride, group_width):
            super().__init__()
            self.a = conv_bn(nn, cin, cout, 1)
            self.b = conv_bn(nn, cout, cout, 3, stride, groups=cout // group_width)
            self.se = SE(cout, max(1, cin // 4))
            self.c = conv_bn(nn, cout, cout, 1, act=None)
            self.down = conv_bn(nn, cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            return F.relu(self.c(self.se(self.b(self.a(x)))) + self.down(x))

    widths, depths, group = ([8, 16, 32, 64], [1, 1, 1, 1], 8) if tiny else ([48, 104, 208, 440], [1, 3, 6, 2], 8)
    layers, cin = [], 32 if not tiny else 8
    for w, d in zip(widths, depths):
        for j in range(d):
            layers.append(Block(cin, w, 2 if j == 0 else 1, 16 if w % 16 == 0 and w >= 200 else group))
            cin = w
    model = nn.Sequential(conv_bn(nn, 3, 32 if not tiny else 8, 3, 2), *layers, nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(cin, 1000))
    return model, _image(tiny)


def _inverted_residual_net(tiny: bool, v3: bool, act_name: str):
    torch, nn, F = _torch()
    act = {"relu6": nn.ReLU6, "hardswish": nn.Hardswish, "silu": nn.SiLU}[act_name]

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            squeezed = max(8, c // 4)
            self.fc1, self.fc2 = nn.Conv2d(c, squeezed, 1), nn.Conv2d(squeezed, c, 1)
            self.gate = nn.Hardsigmoid() if act_name == "hardswish" else nn.Sigmoid()

        def forward(self, x):
            return x * self.gate(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, k, stride, expand, se):
            super().__init__()
            hidden = cin * expand
            self.use_residual = stride == 1 and cin == cout
            self.body = nn.Sequential(
                *([conv_bn(nn, cin, hidden, 1, act=act())] if expand != 1 else []),
                conv_bn(nn, hidden, hidden, k, stride, groups=hidden, act=act()),
                SE(hidden) if se else nn.Identity(),
                conv_bn(nn, hidden, cout, 1, act=None))

        def forward(self, x):
            y = self.body(x)
            return x + y if self.use_residual else y

    if v3:  # MobileNetV3-Large-style rows: k, expand, out, se, stride
        rows = [(3, 1, 16, False, 1), (3, 4, 24, False, 2), (3, 3, 24, False, 1), (5, 3, 40, True, 2),
                (5, 3, 40, True, 1), (3, 6, 80, False, 2), (3, 2, 80, False, 1), (3, 6, 112, True, 1),
                (5, 6, 160, True, 2), (5, 6, 160, True, 1)]
    else:  # MobileNetV2 / EfficientNet-B0-style rows
        se = act_name == "silu"
        rows = [(3, 1, 16, se, 1), (3, 6, 24, se, 2), (3, 6, 24, se, 1), (5 if se else 3, 6, 40 if se else 32, se, 2),
                (3, 6, 80 if se else 64, se, 2), (3, 6, 80 if se else 64, se, 1), (5 if se else 3, 6, 112 if se else 96, se, 1),
                (5 if se else 3, 6, 192 if se else 160, se, 2), (3, 6, 320, se, 1)]
    if tiny:
        rows = rows[:4]
    layers, cin = [conv_bn(nn, 3, 16 if v3 else 32, 3, 2, act=act())], 16 if v3 else 32
    for k, e, c, s, stride in rows:
        layers.append(InvertedResidual(cin, c, k, stride, e, s))
        cin = c
    head = 960 if v3 else 1280
    layers += [conv_bn(nn, cin, head, 1, act=act()), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(head, 1000)]
    return nn.Sequential(*layers), _image(tiny)


def mobilenet_v2(tiny: bool = False):
    """MobileNetV2: inverted residuals, depthwise 3x3, ReLU6."""
    return _inverted_residual_net(tiny, v3=False, act_name="relu6")


def mobilenet_v3(tiny: bool = False):
    """MobileNetV3-Large-style: squeeze-excite with hardsigmoid gates, hardswish, 5x5 depthwise."""
    return _inverted_residual_net(tiny, v3=True, act_name="hardswish")


def efficientnet(tiny: bool = False):
    """EfficientNet-B0-style MBConv: SiLU, squeeze-excite on every block."""
    return _inverted_residual_net(tiny, v3=False, act_name="silu")


def deeplab_aspp(tiny: bool = False):
    """Dilated (atrous) convolutions: a dilated residual trunk and an ASPP head (rates 6, 12,
    18, image pooling), logits upsampled bilinearly to the input size (21 classes)."""
    torch, nn, F = _torch()
    c = 16 if tiny else 64

    class ASPP(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.branches = nn.ModuleList([conv_bn(nn, cin, cout, 1)] +
                                          [conv_bn(nn, cin, cout, 3, dilation=r) for r in (6, 12, 18)])
            self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1), nn.ReLU())
            self.project = conv_bn(nn, cout * 5, cout, 1)

        def forward(self, x):
            pooled = F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
            return self.project(torch.cat([b(x) for b in self.branches] + [pooled], 1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(conv_bn(nn, 3, c, 3, 2), conv_bn(nn, c, c * 2, 3, 2), conv_bn(nn, c * 2, c * 4, 3, 2),
                                       conv_bn(nn, c * 4, c * 4, 3, dilation=2), conv_bn(nn, c * 4, c * 4, 3, dilation=4))
            self.aspp = ASPP(c * 4, c * 2)
            self.classifier = nn.Conv2d(c * 2, 21, 1)

        def forward(self, x):
            y = self.classifier(self.aspp(self.trunk(x)))
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    return Net(), _image(tiny, 256)


def segmentation_head(tiny: bool = False):
    """A MobileNetV3-style backbone with a LR-ASPP-style segmentation head: the 1/16 and
    1/8 features merged, bilinear upsampling (x2 and to the input size), 21 classes."""
    torch, nn, F = _torch()
    backbone, _ = _inverted_residual_net(tiny, v3=True, act_name="hardswish")
    features = list(backbone.children())

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.low = nn.Sequential(*features[:4])   # 1/8
            self.high = nn.Sequential(*features[4:-4])  # 1/16 or 1/32
            low_c = features[3].body[-1][0].out_channels
            high_c = features[-5].body[-1][0].out_channels
            self.cbr = conv_bn(nn, high_c, 128, 1)
            self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(high_c, 128, 1), nn.Sigmoid())
            self.low_classifier = nn.Conv2d(low_c, 21, 1)
            self.high_classifier = nn.Conv2d(128, 21, 1)

        def forward(self, x):
            low = self.low(x)
            high = self.high(low)
            y = self.cbr(high) * self.scale(high)
            y = F.interpolate(y, size=low.shape[-2:], mode="bilinear", align_corners=False)
            y = self.low_classifier(low) + self.high_classifier(y)
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    return Net(), _image(tiny, 256)


def shufflenet(tiny: bool = False):
    """ShuffleNetV2 1.0x: channel split, branches, concat, channel shuffle (reshape-transpose-reshape)."""
    torch, nn, F = _torch()

    def shuffle(x, groups=2):
        n, c, h, w = x.shape
        return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)

    class Unit(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.stride = stride
            half = cout // 2
            branch_in = cin if stride > 1 else half
            if stride > 1:
                self.left = nn.Sequential(conv_bn(nn, cin, cin, 3, stride, groups=cin, act=None), conv_bn(nn, cin, half, 1))
            self.right = nn.Sequential(conv_bn(nn, branch_in, half, 1), conv_bn(nn, half, half, 3, stride, groups=half, act=None),
                                       conv_bn(nn, half, half, 1))

        def forward(self, x):
            if self.stride == 1:
                a, b = x.chunk(2, dim=1)
                out = torch.cat([a, self.right(b)], 1)
            else:
                out = torch.cat([self.left(x), self.right(x)], 1)
            return shuffle(out)

    stages = [(116, 4), (232, 8), (464, 4)] if not tiny else [(16, 1), (32, 1)]
    layers, cin = [conv_bn(nn, 3, 24, 3, 2), nn.MaxPool2d(3, 2, 1)], 24
    for c, n in stages:
        for j in range(n):
            layers.append(Unit(cin, c, 2 if j == 0 else 1))
            cin = c
    layers += [conv_bn(nn, cin, 1024, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000)]
    return nn.Sequential(*layers), _image(tiny)


def squeezenet(tiny: bool = False):
    """SqueezeNet 1.1: Fire modules (1x1 squeeze, parallel 1x1/3x3 expand, concat) and a 1x1
    conv classifier over 13x13 pixels into 1000 channels."""
    torch, nn, F = _torch()

    class Fire(nn.Module):
        def __init__(self, cin, squeeze, expand):
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
            self.e1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
            self.e3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

        def forward(self, x):
            s = self.squeeze(x)
            return torch.cat([self.e1(s), self.e3(s)], 1)

    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 64), Fire(128, 16, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(128, 32, 128), Fire(256, 32, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(256, 48, 192), Fire(384, 48, 192), Fire(384, 64, 256), Fire(512, 64, 256),
        nn.Conv2d(512, 1000, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    # torchvision's initialization (SqueezeNet has no BatchNorm to calibrate): PyTorch's
    # default one shrinks each ReLU layer's activations, and after 26 of them the output no
    # longer depended on the input.
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    for conv in convs:
        if conv is convs[-1]:
            nn.init.normal_(conv.weight, mean=0.0, std=0.01)
        else:
            nn.init.kaiming_uniform_(conv.weight)
        nn.init.constant_(conv.bias, 0)
    return model, _image(tiny, 224)


def inception(tiny: bool = False):
    """GoogLeNet-style Inception modules: 1x1, 1x1->3x3, 1x1->5x5 (as two 3x3) and pool->1x1
    branches concatenated."""
    torch, nn, F = _torch()

    class Module(nn.Module):
        def __init__(self, cin, c1, c3r, c3, c5r, c5, pool):
            super().__init__()
            self.b1 = conv_bn(nn, cin, c1, 1)
            self.b2 = nn.Sequential(conv_bn(nn, cin, c3r, 1), conv_bn(nn, c3r, c3, 3))
            self.b3 = nn.Sequential(conv_bn(nn, cin, c5r, 1), conv_bn(nn, c5r, c5, 3), conv_bn(nn, c5, c5, 3))
            self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(nn, cin, pool, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)

    rows = [(192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "pool",
            (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64), (512, 256, 160, 320, 32, 128, 128),
            "pool", (832, 384, 192, 384, 48, 128, 128)]
    if tiny:
        rows = [(192, 16, 16, 16, 8, 8, 8)]
    layers = [conv_bn(nn, 3, 64, 7, 2), nn.MaxPool2d(3, 2, 1), conv_bn(nn, 64, 192, 3), nn.MaxPool2d(3, 2, 1)]
    cout = 192
    for row in rows:
        if row == "pool":
            layers.append(nn.MaxPool2d(3, 2, 1))
        else:
            layers.append(Module(*row))
            cout = row[1] + row[3] + row[5] + row[6]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cout, 1000)]
    return nn.Sequential(*layers), _image(tiny)


def densenet(tiny: bool = False):
    """DenseNet-121-style dense blocks (growth 32, bottleneck 4x) and transitions, two blocks
    of [6, 12] layers (the full net's first half)."""
    torch, nn, F = _torch()
    growth = 8 if tiny else 32

    class Layer(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 4 * growth, 1, bias=False),
                                      nn.BatchNorm2d(4 * growth), nn.ReLU(), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

        def forward(self, x):
            return torch.cat([x, self.body(x)], 1)

    c = 2 * growth
    layers = [conv_bn(nn, 3, c, 7, 2), nn.MaxPool2d(3, 2, 1)]
    for i, n in enumerate([2, 2] if tiny else [6, 12]):
        for _ in range(n):
            layers.append(Layer(c))
            c += growth
        if i == 0:
            layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
            c //= 2
    layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)]
    return nn.Sequential(*layers), _image(tiny)


def convnext(tiny: bool = False):
    """ConvNeXt-T-style blocks: depthwise 7x7, LayerNorm over channels (channels-last),
    an inverted 4x MLP with GELU, layer scale; [1, 1, 3, 1] blocks."""
    torch, nn, F = _torch()

    class LayerNorm2d(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = nn.LayerNorm(c, eps=1e-6)

        def forward(self, x):
            return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.full((c,), 0.5))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
            return x + y.permute(0, 3, 1, 2)

    dims = [16, 32, 64, 128] if tiny else [96, 192, 384, 768]
    depths = [1, 1, 1, 1] if tiny else [1, 1, 3, 1]
    layers = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
    for i, (d, n) in enumerate(zip(dims, depths)):
        if i > 0:
            layers += [LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)]
        layers += [Block(d) for _ in range(n)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], 1000)]
    return nn.Sequential(*layers), _image(tiny)


def swin(tiny: bool = False):
    """Swin-T-style stages: 7x7 window attention, shifted windows (torch.roll and a mask),
    a relative position bias, patch merging; [2, 2, 2] blocks at 224x224."""
    torch, nn, F = _torch()
    window = 7

    def partition(x, ws):
        b, h, w, c = x.shape
        x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, ws * ws, c)

    def reverse(windows, ws, h, w):
        c = windows.shape[-1]
        x = windows.view(-1, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, h, w, c)

    class Block(nn.Module):
        def __init__(self, dim, heads, resolution, shift):
            super().__init__()
            self.heads, self.shift, self.resolution = heads, shift, resolution
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.02)
            mask = torch.zeros(1, window * window, window * window)
            if shift:  # tokens rolled in from the other side of the map attend only among themselves
                labels = torch.zeros(1, resolution, resolution, 1)
                regions = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
                for count, (a, b) in enumerate((a, b) for a in regions for b in regions):
                    labels[:, a, b, :] = count
                windows = partition(labels, window).squeeze(-1)
                mask = (windows.unsqueeze(1) - windows.unsqueeze(2)).ne(0).float() * -100.0
            self.register_buffer("mask", mask)

        def forward(self, x):
            b, n, c = x.shape
            h = self.resolution
            y = self.norm1(x).view(b, h, h, c)
            if self.shift:
                y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
            windows = partition(y, window)
            q, k, v = self.qkv(windows).view(-1, window * window, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5 + self.bias
            scores = scores.view(-1, self.mask.shape[0], self.heads, window * window, window * window) \
                + self.mask.unsqueeze(1)
            attention = scores.view(-1, self.heads, window * window, window * window).softmax(-1)
            out = (attention @ v).transpose(1, 2).reshape(-1, window * window, c)
            y = reverse(self.proj(out), window, h, h)
            if self.shift:
                y = torch.roll(y, (self.shift, self.shift), (1, 2))
            x = x + y.reshape(b, n, c)
            return x + self.mlp(self.norm2(x))

    class Merge(nn.Module):
        def __init__(self, dim, resolution):
            super().__init__()
            self.resolution = resolution
            self.norm, self.reduction = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

        def forward(self, x):
            b, n, c = x.shape
            h = self.resolution
            x = x.view(b, h // 2, 2, h // 2, 2, c).permute(0, 1, 3, 4, 2, 5).reshape(b, -1, 4 * c)
            return self.reduction(self.norm(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            dim = 32 if tiny else 96
            resolution = 16 if tiny else 56
            self.embed = nn.Conv2d(3, dim, 4, 4)
            self.norm0 = nn.LayerNorm(dim)
            blocks = []
            heads = 2 if tiny else 3
            stages = 2 if tiny else 3
            for stage in range(stages):
                # the window divides every resolution (56, 28, 14; tiny: 16, 8); a map of one window is not shifted
                shift = window // 2 if resolution > window else 0
                blocks += [Block(dim, heads, resolution, 0), Block(dim, heads, resolution, shift)]
                if stage < stages - 1:
                    blocks.append(Merge(dim, resolution))
                    dim, resolution, heads = dim * 2, resolution // 2, heads * 2
            self.blocks = nn.Sequential(*blocks)
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 1000)

        def forward(self, x):
            x = self.norm0(self.embed(x).flatten(2).transpose(1, 2))
            x = self.norm(self.blocks(x))
            return self.head(x.mean(1))

    if tiny:
        window = 8
    return Net(), (_image(False, 64) if tiny else _image(False))


def _transformer(tiny: bool, *, tokens: int, dim: int, heads: int, layers: int, causal: bool, vocab: int,
                 kv_heads: int | None = None, rope: bool = False, rms: bool = False, gated: bool = False,
                 post_norm: bool = False):
    torch, nn, F = _torch()
    if tiny:
        tokens, dim, heads, layers, vocab = min(tokens, 16), 32, 4, 1, 64
        kv_heads = 2 if kv_heads else None
    kv_heads = kv_heads or heads
    head_dim = dim // heads

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    norm = RMSNorm if rms else nn.LayerNorm
    positions = torch.arange(tokens, dtype=torch.float32)
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(positions, inverse)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)

    def rotate_half(x):
        a, b = x[..., : head_dim // 2], x[..., head_dim // 2:]
        return torch.cat([-b, a], -1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(dim, heads * head_dim, bias=not rope)
            self.kv = nn.Linear(dim, 2 * kv_heads * head_dim, bias=not rope)
            self.o = nn.Linear(dim, dim, bias=not rope)
            self.register_buffer("cos", cos)
            self.register_buffer("sin", sin)

        def forward(self, x):
            b, n, _ = x.shape
            q = self.q(x).view(b, n, heads, head_dim).transpose(1, 2)
            k, v = self.kv(x).view(b, n, 2, kv_heads, head_dim).permute(2, 0, 3, 1, 4)
            if rope:
                q = q * self.cos + rotate_half(q) * self.sin
                k = k * self.cos + rotate_half(k) * self.sin
            if kv_heads != heads:
                k = k.repeat_interleave(heads // kv_heads, dim=1)
                v = v.repeat_interleave(heads // kv_heads, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.o(out.transpose(1, 2).reshape(b, n, dim))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.norm1, self.norm2 = norm(dim), norm(dim)
            hidden = 4 * dim if not gated else (8 * dim) // 3
            if gated:  # SwiGLU
                self.gate, self.up, self.down = (nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False),
                                                 nn.Linear(hidden, dim, bias=False))
            else:
                self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

        def mlp(self, x):
            if gated:
                return self.down(F.silu(self.gate(x)) * self.up(x))
            return self.down(F.gelu(self.up(x)))

        def forward(self, x):
            if post_norm:  # BERT
                x = self.norm1(x + self.attention(x))
                return self.norm2(x + self.mlp(x))
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.position = None if rope else nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.norm = norm(dim)
            self.head = nn.Linear(dim, vocab if causal else 2, bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            if self.position is not None:
                x = x + self.position
            x = self.norm(self.layers(x))
            return self.head(x if causal else x[:, 0])

    ids = torch.randint(0, vocab, (1, tokens))
    return Model(), (ids,)


def bert(tiny: bool = False):
    """A BERT-base-shaped encoder: post-norm, GELU, 128 tokens, width 768, 12 heads, 4 layers."""
    return _transformer(tiny, tokens=128, dim=768, heads=12, layers=4, causal=False, vocab=30522, post_norm=True)


def encoder_32(tiny: bool = False):
    """A DistilBERT-small-style pre-norm encoder at 32 tokens (width 512, 8 heads, 4 layers)."""
    return _transformer(tiny, tokens=32, dim=512, heads=8, layers=4, causal=False, vocab=8192)


def encoder_512(tiny: bool = False):
    """A long-sequence encoder: 512 tokens, width 256, 4 heads, 2 layers."""
    return _transformer(tiny, tokens=512, dim=256, heads=4, layers=2, causal=False, vocab=8192)


def gpt2(tiny: bool = False):
    """A GPT-2-style causal decoder: pre-norm, GELU, 128 tokens, width 768, 12 heads, 4 layers, LM head."""
    return _transformer(tiny, tokens=128, dim=768, heads=12, layers=4, causal=True, vocab=8192)


def llama(tiny: bool = False):
    """A Llama-style decoder: rotary embeddings, RMSNorm, grouped-query attention (8 query heads
    over 2 key/value heads), SwiGLU, 64 tokens, width 512, 4 layers."""
    return _transformer(tiny, tokens=64, dim=512, heads=8, layers=4, causal=True, vocab=8192, kv_heads=2,
                        rope=True, rms=True, gated=True)


def vit_b16(tiny: bool = False):
    """A ViT-B/16-shaped model: 16x16 patches of 224x224 (196 + class token = 197 tokens, a
    prime), width 768, 12 heads, nn.MultiheadAttention (sequence-first), 4 of the 12 layers."""
    torch, nn, F = _torch()
    dim, heads, layers, size = (32, 4, 1, 32) if tiny else (768, 12, 4, 224)
    tokens = (size // 16) ** 2 + 1

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attention = nn.MultiheadAttention(dim, heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):  # [tokens, batch, dim]
            y = self.norm1(x)
            x = x + self.attention(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, 16, 16)
            self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.position = nn.Parameter(torch.randn(tokens, 1, dim) * 0.02)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 1000)

        def forward(self, x):
            x = self.patch(x).flatten(2).permute(2, 0, 1)  # [196, 1, dim]
            x = torch.cat([self.cls.expand(-1, x.shape[1], -1), x], 0) + self.position
            return self.head(self.norm(self.layers(x))[0])

    return Net(), (torch.randn(1, 3, size, size),)


def speech_encoder(tiny: bool = False):
    """A Whisper/Conformer-style speech encoder: 80 mel bins x 400 frames, two Conv1d (the
    second stride 2) with GELU, sinusoid-free learned positions, 4 pre-norm attention layers
    (width 384, 6 heads) over 200 frames."""
    torch, nn, F = _torch()
    frames, dim, heads, layers = (32, 32, 4, 1) if tiny else (400, 384, 6, 4)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
            out = F.scaled_dot_product_attention(q, k, v)
            x = x + self.o(out.transpose(1, 2).reshape(b, n, dim))
            return x + self.mlp(self.norm2(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(80, dim, 3, padding=1)
            self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
            self.position = nn.Parameter(torch.randn(1, frames // 2, dim) * 0.02)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.norm = nn.LayerNorm(dim)

        def forward(self, mel):
            x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2) + self.position
            return self.norm(self.layers(x))

    return Net(), (torch.randn(1, 80, frames),)


def odd_extents(tiny: bool = False):
    """Odd extents everywhere: a 97x97 input, 13x13 feature maps, prime channel counts (37, 71,
    131) and 1000 classes from a 1x1 conv over 13x13 pixels."""
    torch, nn, F = _torch()
    c1, c2, c3 = (5, 7, 11) if tiny else (37, 71, 131)
    model = nn.Sequential(conv_bn(nn, 3, c1, 3, 2), conv_bn(nn, c1, c2, 3, 2), conv_bn(nn, c2, c3, 3, 2),
                          conv_bn(nn, c3, c3, 3, 1, groups=c3), conv_bn(nn, c3, c3, 1),
                          nn.Conv2d(c3, 1000, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    side = 25 if tiny else 97  # 97 -> 49 -> 25 -> 13
    return model, (torch.randn(1, 3, side, side),)


def video_csn(tiny: bool = False):
    """A channel-separated video network (CSN/X3D-style): 3-D stem, bottlenecks of pointwise
    Conv3d, depthwise 3x3x3 and grouped 1x3x3 convolutions, BatchNorm3d, hardswish, a (1, 3, 3)
    max pool, global average pooling, 400 classes, over 8 frames of 112x112."""
    torch, nn, F = _torch()
    frames, side, width = (4, 32, 16) if tiny else (8, 112, 48)

    def unit(cin: int, cout: int, stride: int, grouped: bool):
        middle = 2 * cout
        spatial = (nn.Conv3d(middle, middle, (1, 3, 3), (1, stride, stride), (0, 1, 1), groups=middle // 8, bias=False)
                   if grouped else
                   nn.Conv3d(middle, middle, 3, (1, stride, stride), 1, groups=middle, bias=False))
        return nn.Sequential(nn.Conv3d(cin, middle, 1, bias=False), nn.BatchNorm3d(middle), nn.Hardswish(),
                             spatial, nn.BatchNorm3d(middle), nn.Hardswish(),
                             nn.Conv3d(middle, cout, 1, bias=False), nn.BatchNorm3d(cout))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv3d(3, width, (3, 3, 3), (1, 2, 2), 1, bias=False),
                                      nn.BatchNorm3d(width), nn.ReLU(), nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)))
            self.units = nn.ModuleList([unit(width, width, 1, False), unit(width, 2 * width, 2, True),
                                        unit(2 * width, 2 * width, 1, False), unit(2 * width, 4 * width, 2, True)])
            self.head = nn.Linear(4 * width, 400)

        def forward(self, x):
            x = self.stem(x)
            for index, block in enumerate(self.units):
                x = block(x) + x if index % 2 == 0 else F.relu(block(x))
            return self.head(F.adaptive_avg_pool3d(x, 1).flatten(1))

    return Net(), (torch.randn(1, 3, frames, side, side),)


@dataclass(frozen=True)
class Architecture:
    name: str
    build: Callable[[bool], tuple[Any, tuple]]
    held_out: bool = False  # held_out.py: no default was fitted to it

    @property
    def summary(self) -> str:
        return (self.build.__doc__ or "").split("\n")[0]


ARCHITECTURES = {a.name: a for a in (
    Architecture("resnet_basic", resnet_basic), Architecture("resnet_bottleneck", resnet_bottleneck),
    Architecture("resnext", resnext), Architecture("regnet", regnet), Architecture("mobilenet_v2", mobilenet_v2),
    Architecture("mobilenet_v3", mobilenet_v3), Architecture("efficientnet", efficientnet),
    Architecture("deeplab_aspp", deeplab_aspp), Architecture("segmentation_head", segmentation_head),
    Architecture("shufflenet", shufflenet), Architecture("squeezenet", squeezenet), Architecture("inception", inception),
    Architecture("densenet", densenet), Architecture("convnext", convnext), Architecture("swin", swin),
    Architecture("bert", bert), Architecture("encoder_32", encoder_32), Architecture("encoder_512", encoder_512),
    Architecture("gpt2", gpt2), Architecture("llama", llama), Architecture("vit_b16", vit_b16),
    Architecture("speech_encoder", speech_encoder), Architecture("odd_extents", odd_extents),
    Architecture("video_csn", video_csn),
    *(Architecture(name, builder, held_out=True) for name, builder in held_out.BUILDERS.items()),
)}


def calibrate_batch_norm(module: Any, inputs: tuple, batches: int = 3, seed: int = 0) -> Any:
    """Running BatchNorm statistics from a few training-mode batches of random inputs (shaped
    like ``inputs``, batch 4), then eval mode. Why: the default statistics (mean 0, var 1)
    do not match random weights, and activations shrink or explode through a deep net.

    The statistics are the plain average over the batches (``momentum=None`` while
    calibrating, the running values reset first): with the default momentum of 0.1, three
    batches moved them only 27 % of the way from (0, 1), and a MobileNetV2's output no
    longer depended on its input (the classifier's bias, which every check passes)."""
    torch, nn, _ = _torch()
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return module.eval()
    momenta = [m.momentum for m in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    generator = torch.Generator().manual_seed(seed)
    module.train()
    with torch.no_grad():
        for _ in range(batches):
            batch = tuple(torch.randn((4, *x.shape[1:]), generator=generator) if x.is_floating_point() else x
                          for x in inputs)
            module(*batch)
    for norm, momentum in zip(norms, momenta):
        norm.momentum = momentum
    return module.eval()


def build(name: str, tiny: bool = False, seed: int = 0) -> tuple[Any, tuple]:
    """The model ``name`` with seeded random weights and calibrated BatchNorm, in eval mode."""
    torch, _, _ = _torch()
    torch.manual_seed(seed)
    module, inputs = ARCHITECTURES[name].build(tiny)
    return calibrate_batch_norm(module, inputs, seed=seed), inputs


def export_onnx(module: Any, inputs: tuple) -> bytes:
    """The TorchScript exporter's ONNX (opset 17, constants folded), as users export."""
    torch, _, _ = _torch()
    buffer = io.BytesIO()
    names = [f"input{i}" for i in range(len(inputs))]
    with torch.no_grad():
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17, input_names=names,
                          output_names=["output"], do_constant_folding=True)
    return buffer.getvalue()


# ---- one model, in its own process ------------------------------------------------------------

def _matches(got: Any, want: Any) -> tuple[bool, float]:
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    if got.shape != want.shape:
        return False, math.inf
    error = float(np.max(np.abs(got - want))) / scale if scale else 0.0
    return bool(np.allclose(got, want, rtol=RTOL, atol=RTOL * scale)), error


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:140]


def compile_torch_route(module: Any, inputs: tuple, eager_out: Any, result: dict[str, Any],
                        runners: dict[str, Callable[[], Any]]) -> None:
    """The model through ``tilecraft.torch.compile``: its compile time and check against
    eager go into ``result``, its call into ``runners`` (a refusal is recorded, not raised,
    so the other runtimes are still timed)."""
    import torch

    import tilecraft
    import tilecraft.torch

    try:
        started = time.perf_counter()
        through_torch = tilecraft.torch.compile(module, inputs, keep_ir=False, verbose=False)
        result["torch_compile_s"] = time.perf_counter() - started
        with torch.no_grad():
            result["torch_ok"], result["torch_error"] = _matches(through_torch(*inputs).numpy(), eager_out.numpy())
        runners["tilecraft.torch"] = lambda: through_torch(*inputs)
    except tilecraft.TilecraftError as error:
        result["torch_failed"] = _first_line(error)


def measure_one(name: str, repeat: int, threads: int) -> dict[str, Any]:
    """Everything the table shows for ``name``, measured in this process."""
    os.environ["TILECRAFT_NUM_THREADS"] = str(threads)
    import numpy as np
    import onnx
    import onnxruntime
    import torch

    from end_to_end import RUNNER_PAUSE_S, PeakRss, alternating  # noqa: E402

    import tilecraft
    from tilecraft.compiler import cache as compile_cache

    torch.set_num_threads(threads)
    module, inputs = build(name)
    proto = onnx.load_from_string(export_onnx(module, inputs))
    feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    arrays = list(feeds.values())
    result: dict[str, Any] = {"model": name}

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    reference = session.run(None, feeds)[0]
    with torch.no_grad():
        eager_out = module(*inputs)
    runners: dict[str, Callable[[], Any]] = {"onnxruntime": lambda: session.run(None, feeds)}
    runners["pytorch"] = lambda: module(*inputs)

    try:
        with PeakRss() as rss:
            started = time.perf_counter()
            compiled = tilecraft.compile(proto, keep_ir=False, verbose=False)
            result["compile_s"] = time.perf_counter() - started
        result["compile_rss_mb"] = rss.added_mb
        result["compile_steps"] = {k: round(v, 2) for k, v in (compiled.compile_seconds or {}).items()}
        started = time.perf_counter()
        compile_cache.wait_for_stores()  # the entry is written on a thread after the compile returns
        result["store_s"] = time.perf_counter() - started
        started = time.perf_counter()
        again = tilecraft.compile(proto, keep_ir=False, verbose=False)
        result["cached_s"] = time.perf_counter() - started
        result["cache_status"] = getattr(again, "cache_status", "?")
        result["ok"], result["error"] = _matches(compiled(*arrays), reference)
        runners["tilecraft"] = lambda: compiled(*arrays)
    except tilecraft.TilecraftError as error:
        result["failed"] = _first_line(error)

    compile_torch_route(module, inputs, eager_out, result, runners)

    with torch.no_grad():
        medians = alternating(runners, repeat, min_sample_s=0.05, pause_s=RUNNER_PAUSE_S)
    result.update({f"{k}_ms": v * 1e3 for k, v in medians.items()})
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


# ---- the table ---------------------------------------------------------------------------------

def _cell(value: Any, spec: str = ".2f", width: int = 8) -> str:
    return f"{'-' if value is None else format(value, spec):>{width}}"


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| model | tilecraft ms | onnxruntime ms | PyTorch ms | tc.torch ms | tc/ort | tc.torch/eager | "
             "compile s | cached s | torch compile s | compile RSS MB | check |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    ratios, torch_ratios, held_ratios = [], [], []
    for r in results:
        tc, ort, eager, tct = (r.get("tilecraft_ms"), r.get("onnxruntime_ms"), r.get("pytorch_ms"),
                               r.get("tilecraft.torch_ms"))
        ratio = tc / ort if tc and ort else None
        torch_ratio = tct / eager if tct and eager else None
        held = r["model"] in ARCHITECTURES and ARCHITECTURES[r["model"]].held_out
        if ratio:
            (held_ratios if held else ratios).append(ratio)
        if torch_ratio:
            torch_ratios.append(torch_ratio)
        checks = []
        if "failed" in r:
            checks.append(f"compile failed: {r['failed']}")
        elif "ok" in r:
            checks.append("ok" if r["ok"] else f"MISMATCH {r['error']:.1e}")
        if "torch_failed" in r:
            checks.append(f"torch: {r['torch_failed']}")
        elif "torch_ok" in r:
            checks.append("torch ok" if r["torch_ok"] else f"torch MISMATCH {r['torch_error']:.1e}")
        if "crashed" in r:
            checks.append(f"crashed: {r['crashed']}")
        lines.append("| " + " | ".join([
            r["model"] + (" (held out)" if held else ""), _cell(tc), _cell(ort), _cell(eager), _cell(tct), _cell(ratio, ".2f"), _cell(torch_ratio, ".2f"),
            _cell(r.get("compile_s"), ".1f"), _cell(r.get("cached_s"), ".2f"), _cell(r.get("torch_compile_s"), ".1f"),
            _cell(r.get("compile_rss_mb"), ".0f"), "; ".join(checks)]) + " |")
    if ratios:
        lines.append(f"\ngeometric mean tilecraft / onnxruntime: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} "
                     f"over {len(ratios)} models; worst {max(ratios):.2f}")
    if held_ratios:
        lines.append(f"held-out models: geometric mean {math.exp(sum(map(math.log, held_ratios)) / len(held_ratios)):.2f} "
                     f"over {len(held_ratios)}; worst {max(held_ratios):.2f}")
    if torch_ratios:
        lines.append(f"geometric mean tilecraft.torch / PyTorch eager: "
                     f"{math.exp(sum(map(math.log, torch_ratios)) / len(torch_ratios)):.2f} over {len(torch_ratios)} models")
    return "\n".join(lines)


def run_child(name: str, command: list[str], timeout: float, environment: dict[str, str]) -> dict[str, Any]:
    """One model measured in a process of its own (``command``, a ``--one`` run): the JSON row
    it prints last, or a row saying how it crashed or that it ran past ``timeout`` seconds,
    so that one model's abort or hang never loses the others' results."""
    try:
        child = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    except subprocess.TimeoutExpired:
        return {"model": name, "crashed": f"over {timeout:.0f} s"}
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (child.stderr.strip().splitlines() or [f"exit code {child.returncode}"])[-1]
    return {"model": name, "crashed": tail[:160]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="comma-separated names (default: all; --list shows them)")
    parser.add_argument("--quick", action="store_true", help=f"the quick subset: {', '.join(QUICK)}")
    parser.add_argument("--list", action="store_true", help="list the architectures and exit")
    parser.add_argument("--held-out", action="store_true", help="only the held-out architectures (held_out.py)")
    parser.add_argument("--repeat", type=int, default=9, help="timed blocks per runtime (median)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model's process")
    parser.add_argument("--keep-cache", action="store_true",
                        help="use the user's compile cache (compile s is then a hit for models compiled before)")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    parser.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args(argv)
    if args.list:
        for a in ARCHITECTURES.values():
            print(f"{a.name:<20} {a.summary}{'  [held out]' if a.held_out else ''}")
        return 0
    if args.one:
        print(json.dumps(measure_one(args.one, args.repeat, args.threads)))
        return 0
    if args.models:
        names = args.models.split(",")
    elif args.held_out:
        names = [a.name for a in ARCHITECTURES.values() if a.held_out]
    else:
        names = list(QUICK if args.quick else ARCHITECTURES)
    unknown = [n for n in names if n not in ARCHITECTURES]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; --list shows them")
    load = os.getloadavg()
    print(f"public-architecture suite: {len(names)} models, {args.threads} thread(s) per runtime, "
          f"median of {args.repeat} blocks; load average before {load[0]:.2f} on {os.cpu_count()} cores", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="tilecraft-suite-cache-") as cache:
        environment = dict(os.environ)
        if not args.keep_cache:
            environment["TILECRAFT_CACHE_DIR"] = cache
        environment.pop("TILECRAFT_COMPILE_CACHE", None)
        for name in names:
            command = [sys.executable, os.path.abspath(__file__), "--one", name, "--repeat", str(args.repeat),
                       "--threads", str(args.threads)]
            results.append(run_child(name, command, args.timeout, environment))
            print(f"  {name}: done ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
    print(table(results))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(results, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
