"""Neural-network operators of :mod:`tilecraft.topi` (TVM's ``topi.nn``)."""

from .activation import gelu, leaky_relu, relu, sigmoid, tanh
from .conv2d import (
    conv2d,
    conv2d_nchw,
    conv2d_nhwc,
    conv2d_transpose,
    conv2d_transpose_nchw,
    group_conv2d_nchw,
)
from .dense import batch_matmul, dense
from .norm import batch_norm, layer_norm
from .pad import pad
from .pooling import global_pool, pool2d
from .softmax import log_softmax, softmax

__all__ = [
    "batch_matmul", "batch_norm", "conv2d", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose",
    "conv2d_transpose_nchw", "dense", "gelu", "global_pool", "group_conv2d_nchw", "layer_norm",
    "leaky_relu", "log_softmax", "pad", "pool2d", "relu", "sigmoid", "softmax", "tanh",
]
