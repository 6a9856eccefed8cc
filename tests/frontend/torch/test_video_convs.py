"""Video networks' 3-D convolutions through the PyTorch door: channel-separated (depthwise
3x3x3, as CSN and X3D use) and grouped (1x3x3) filters, strided in space and time. They are
computed as 2-D convolutions over stacked frames, one per depth tap (ir/conv.py,
``_conv_3d_as_2d``; tests/frontend/onnx/test_nn.py checks that IR); here the numbers, with
the BatchNorm and ReLU that follow them in a model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torch_testing import check


@pytest.mark.parametrize("conv", [
    nn.Conv3d(16, 16, 3, padding=1, groups=16),                                   # depthwise
    nn.Conv3d(16, 16, 3, padding=1, stride=(2, 2, 2), groups=16),                 # strided in time too
    nn.Conv3d(32, 32, (1, 3, 3), padding=(0, 1, 1), groups=4),                    # grouped, spatial only
    nn.Conv3d(32, 16, (3, 1, 1), padding=(2, 0, 0), dilation=(2, 1, 1), groups=2),  # temporal, dilated
])
def test_grouped_and_depthwise_conv3d_match_eager(conv):
    torch.manual_seed(0)
    model = nn.Sequential(conv, nn.BatchNorm3d(conv.out_channels), nn.ReLU())
    x = torch.randn(1, conv.in_channels, 6, 10, 10)
    check(model, x, rtol=1e-4, atol=1e-4)
