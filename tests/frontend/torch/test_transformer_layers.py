"""PyTorch's own transformer layers with attention masks, through ``tilecraft.torch.compile``.

``nn.TransformerEncoder``/``Decoder`` compare a given mask with a causal one to pick eager's
causal kernel, a branch on tensor values that ``torch.export`` cannot trace; the export turns
that detection off (frontend/torch/export.py), the mask is applied as given."""

from __future__ import annotations

import torch
from torch import nn

import tilecraft

from torch_testing import check


def _causal(tokens: int) -> torch.Tensor:
    return torch.triu(torch.full((tokens, tokens), float("-inf")), 1)


class TextEncoder(nn.Module):
    """A CLIP-style text encoder: pre-norm layers with a causal mask made in forward."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True, dropout=0.0)
        self.layers = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x, mask=_causal(x.shape[1]))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 4, 64, batch_first=True, dropout=0.0), 2)

    def forward(self, target: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.layers(target, memory, tgt_mask=_causal(target.shape[1]))


def test_encoder_with_a_causal_mask_made_in_forward():
    torch.manual_seed(0)
    check(TextEncoder(), torch.randn(1, 9, 32), rtol=1e-4, atol=1e-4)


def test_decoder_with_a_causal_target_mask():
    torch.manual_seed(0)
    check(Decoder(), torch.randn(1, 7, 32), torch.randn(1, 5, 32), rtol=1e-4, atol=1e-4)


def test_the_detection_is_restored_after_export_even_when_it_fails():
    detect = torch.nn.modules.transformer._detect_is_causal_mask

    class Broken(nn.Module):
        def forward(self, x):
            return x[:, 5]  # out of range

    try:
        tilecraft.torch.compile(Broken().eval(), (torch.randn(2, 3),))
    except tilecraft.TilecraftError:
        pass
    assert torch.nn.modules.transformer._detect_is_causal_mask is detect
