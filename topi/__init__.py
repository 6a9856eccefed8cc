"""TOPI: an operator library of TE computes, as TVM's ``tvm.topi``.

    from tilecraft import topi
    from tilecraft.scheduling import placeholder, Schedule, build

    x = placeholder((1, 3, 32, 32), name="x"); w = placeholder((8, 3, 3, 3), name="w")
    y = topi.nn.relu(topi.nn.conv2d(x, w, strides=1, padding=1, dilation=1))
    f = build(Schedule([x, w, y]))           # the default schedule: plain loops per stage
    print(y.flops)                           # arithmetic of the whole operator, for the tuner

Every operator returns a :class:`~tilecraft.schedule.te.Tensor` built from ``te.compute``
stages (TVM's signatures and stage names: ``pad_temp``, ``T_softmax_norm``...), so
``Schedule(outputs)`` schedules them like hand-written computes. The library sits above the
``schedule`` layer and below ``compiler`` (docs/architecture.md).
"""

from . import nn
from .broadcast import (
    abs,
    add,
    cast,
    divide,
    erf,
    exp,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    sigmoid,
    sqrt,
    subtract,
    tanh,
    where,
)
from .reduction import max, mean, min, prod, sum
from .transform import concatenate, reshape, split, take, transpose

__all__ = [
    "abs", "add", "cast", "concatenate", "divide", "erf", "exp", "log", "max", "maximum", "mean", "min",
    "minimum", "multiply", "negative", "nn", "prod", "reshape", "sigmoid", "split", "sqrt", "subtract",
    "sum", "take", "tanh", "transpose", "where",
]
