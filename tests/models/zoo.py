"""The model zoo of the PyTorch frontend, defined here (torchvision does not import beside
the CPU torch wheel): the FashionMNIST CNN of TVM's MLC course, ResNet-18/50 and MobileNetV2
with torchvision's topology, a BERT-style encoder and a GPT-2-style decoder block.

Weights are random (seeded); batch-norm statistics are randomized too, so inference-mode
batch norm does real work. ``ZOO`` maps a name to ``(build, example_inputs)``; the tests and
benchmarks/torch_models.py share it.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


class MlcCnn(nn.Module):
    """The FashionMNIST CNN of the MLC course (conv 1->32 3x3, relu, maxpool 2, flatten,
    linear 5408->100, relu, linear 100->10, softmax)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.fc1 = nn.Linear(5408, 100)
        self.fc2 = nn.Linear(100, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        x = torch.flatten(x, 1)
        return F.softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


# --- ResNet (torchvision's topology) -----------------------------------------------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


class ResNet(nn.Module):
    def __init__(self, block: type, layers: list[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(block, 64, layers[0])
        self.layer2 = self._layer(block, 128, layers[1], 2)
        self.layer3 = self._layer(block, 256, layers[2], 2)
        self.layer4 = self._layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _layer(self, block: type, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2])


def resnet50() -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3])


# --- MobileNetV2 (torchvision's topology) ------------------------------------------------------

def _conv_bn_relu6(inp: int, out: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(out), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = inp * expand_ratio
        self.use_residual = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn_relu6(inp, hidden, 1, 1))
        layers += [_conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, oup, 1, bias=False), nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        features: list[nn.Module] = [_conv_bn_relu6(3, 32, 3, 2)]
        inp = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                features.append(InvertedResidual(inp, c, s if i == 0 else 1, t))
                inp = c
        features.append(_conv_bn_relu6(inp, 1280, 1, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --- transformers ------------------------------------------------------------------------------

class BertEncoder(nn.Module):
    """A BERT-style encoder: token + position embeddings, LayerNorm, ``nn.TransformerEncoder``
    (post-norm, GELU), a padding mask, and a pooled tanh head."""

    def __init__(self, vocab: int = 1000, d_model: int = 256, heads: int = 4, layers: int = 2,
                 seq: int = 128) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(seq, d_model)
        self.norm = nn.LayerNorm(d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(d_model, d_model)

    def forward(self, ids: torch.Tensor, padding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.norm(self.tokens(ids) + self.positions(positions))
        x = self.encoder(x, src_key_padding_mask=padding)
        return x, torch.tanh(self.pooler(x[:, 0]))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Gpt2Block(nn.Module):
    """A GPT-2 decoder block (pre-norm, causal attention, GELU-tanh MLP) with embeddings and
    the tied LM head, so the whole next-token path is there."""

    def __init__(self, vocab: int = 1000, d_model: int = 256, heads: int = 4, seq: int = 128) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq, d_model)
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln_2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.ln_f = nn.LayerNorm(d_model)
        for module in self.modules():  # GPT-2's initialization (normal, std 0.02; zero biases)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        x = x + self.attn(self.ln_1(x))
        x = x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.T


# --- the zoo -----------------------------------------------------------------------------------

def randomize_batch_norm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random running statistics and affine parameters (fresh ones are 0/1: an identity)."""
    generator = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=generator) * 0.2 - 0.1)
            m.running_var.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
            m.bias.data.copy_(torch.rand(c, generator=generator) * 0.2 - 0.1)
    return model


def _build(factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(0)
        with torch.no_grad():
            return randomize_batch_norm(factory()).eval()
    return build


def _bert_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (2, 128), generator=generator)
    padding = torch.zeros(2, 128, dtype=torch.bool)
    padding[1, 100:] = True
    return ids, padding


def _inputs(*shape: int) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)


ZOO: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "mlc_cnn": (_build(MlcCnn), _inputs(4, 1, 28, 28)),
    "resnet18": (_build(resnet18), _inputs(1, 3, 224, 224)),
    "resnet50": (_build(resnet50), _inputs(1, 3, 224, 224)),
    "mobilenet_v2": (_build(MobileNetV2), _inputs(1, 3, 224, 224)),
    "bert_encoder": (_build(BertEncoder), _bert_inputs),
    "gpt2_block": (_build(Gpt2Block), lambda: (torch.randint(0, 1000, (2, 128),
                                                             generator=torch.Generator().manual_seed(1)),)),
}
