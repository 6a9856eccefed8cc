"""Activations (TVM's ``topi.nn.relu`` ... ): one elementwise compute each."""

from __future__ import annotations

import math

from ...schedule import te
from ..utils import check_tensor, compute_nd


def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)``."""
    check_tensor(x, "relu", "x")
    return compute_nd(x.shape, lambda i: te.max(x[i], te.const(0, x.dtype)), "T_relu")


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    check_tensor(x, "leaky_relu", "x")
    return compute_nd(x.shape, lambda i: te.if_then_else(x[i] > 0.0, x[i], x[i] * alpha), "T_leaky_relu")


def gelu(x: te.Tensor) -> te.Tensor:
    """The exact GELU, ``0.5 * x * (1 + erf(x / sqrt(2)))`` (PyTorch's default)."""
    check_tensor(x, "gelu", "x")
    return compute_nd(x.shape, lambda i: x[i] * 0.5 * (1.0 + te.erf(x[i] * (1.0 / math.sqrt(2.0)))), "T_gelu")


def sigmoid(x: te.Tensor) -> te.Tensor:
    check_tensor(x, "sigmoid", "x")
    return compute_nd(x.shape, lambda i: te.sigmoid(x[i]), "T_sigmoid")


def tanh(x: te.Tensor) -> te.Tensor:
    check_tensor(x, "tanh", "x")
    return compute_nd(x.shape, lambda i: te.tanh(x[i]), "T_tanh")
