"""Normalization with statistics of the batch itself (``_native_batch_norm_legit``): instance
norm (an eval-mode ``InstanceNorm2d`` without running statistics still normalizes each sample
by its own mean and variance) and ``batch_norm(training=True)`` without running buffers (with
them, the program writes its inputs: test_mutation.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.torch
from torch_testing import Lambda, check


def test_instance_norm_module():
    torch.manual_seed(0)
    module = torch.nn.InstanceNorm2d(4, affine=True).eval()
    with torch.no_grad():
        module.weight.normal_()
        module.bias.normal_()
    check(module, torch.randn(2, 4, 7, 5) * 3 + 1)


def test_instance_norm_functional_3d():
    check(Lambda(lambda v: F.instance_norm(v, eps=1e-3)), torch.randn(3, 2, 4, 5, 6))


def test_batch_norm_with_batch_statistics():
    x = torch.randn(5, 3, 4, 4)
    weight, bias = torch.randn(3), torch.randn(3)
    check(Lambda(lambda v, w, b: F.batch_norm(v, None, None, w, b, training=True)), x, weight, bias)

