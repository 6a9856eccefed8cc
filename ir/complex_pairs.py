"""Complex tensors as real tensors with a trailing dim of 2 (real part, imaginary part).

Why pairs and not ``complex<f32>`` elements throughout: every pass of the CPU pipeline
(tiling, vectorization, the register-tile kernels) handles ``f32``/``f64``; a
``linalg.generic`` on ``complex<f32>`` fails to vectorize, and the complex dialect's ops
would need their own lowering in every schedule. As pairs, a complex product or a DFT is
ordinary real arithmetic the existing schedules vectorize.

The module boundary keeps numpy's types: an entry argument or result of dtype
``complex64``/``complex128`` is ``tensor<...xcomplex<f32|f64>>`` (its memref elements are
two floats side by side, numpy's own layout), converted to and from pairs by the
``tensor.generate`` ops below. They bufferize to plain loops (no schedule touches them),
and the ``complex.re``/``im``/``create`` in them lower with ``convert-to-llvm``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, complex as complex_dialect, math, tensor

from ..errors import OperandTypeError
from . import core
from .movement import concat, select
from .reshapes import reshape

# numpy complex dtype -> the real dtype of its parts
PART_DTYPES = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def part_dtype(dtype: np.dtype) -> np.dtype:
    """The real dtype of ``dtype``'s parts; ``TypeError`` for a complex dtype without one."""
    dtype = np.dtype(dtype)
    if dtype not in PART_DTYPES:
        raise OperandTypeError(f"complex dtype {dtype} is not supported (supported: complex64, complex128)")
    return PART_DTYPES[dtype]


def complex_type(dtype: np.dtype) -> ir.Type:
    """The MLIR element type of a numpy complex dtype at the module boundary."""
    return ir.ComplexType.get(core.element_type(part_dtype(dtype)))


def as_pairs_array(array: np.ndarray) -> np.ndarray:
    """A numpy complex array as its pairs (a view: numpy stores complex values as pairs)."""
    return np.ascontiguousarray(array).view(part_dtype(array.dtype)).reshape(*array.shape, 2)


def _dynamic_extents(extents: Sequence[int | ir.Value]) -> list[ir.Value]:
    return [e for e in extents if not isinstance(e, int)]


def to_pairs(value: ir.Value) -> ir.Value:
    """``tensor<...xcomplex<fN>>`` -> ``tensor<...x2xfN>``."""
    element = ir.ComplexType(core.tensor_type(value).element_type).element_type
    extents = core.sizes(value)
    result_type = core.shape_type([*extents, 2], element)
    op = tensor.GenerateOp(result_type, _dynamic_extents(extents))
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * (len(extents) + 1))
    with ir.InsertionPoint(block):
        *position, part = block.arguments
        number = tensor.extract(value, list(position))
        is_real = arith.cmpi(arith.CmpIPredicate.eq, part, core.index(0))
        tensor.YieldOp(arith.select(is_real, complex_dialect.re(number), complex_dialect.im(number)))
    return op.result


def from_pairs(pairs: ir.Value) -> ir.Value:
    """``tensor<...x2xfN>`` -> ``tensor<...xcomplex<fN>>``."""
    part = core.tensor_type(pairs).element_type
    extents = core.sizes(pairs)[:-1]
    element = ir.ComplexType.get(part)
    op = tensor.GenerateOp(core.shape_type(extents, element), _dynamic_extents(extents))
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * len(extents))
    with ir.InsertionPoint(block):
        position = list(block.arguments)
        real_part = tensor.extract(pairs, [*position, core.index(0)])
        imaginary_part = tensor.extract(pairs, [*position, core.index(1)])
        tensor.YieldOp(complex_dialect.create_(element, real_part, imaginary_part))
    return op.result


def stack(real_part: ir.Value, imaginary_part: ir.Value) -> ir.Value:
    """Pairs from two real tensors of one shape."""
    extents = core.sizes(real_part)
    return concat([reshape(real_part, [*extents, 1]), reshape(imaginary_part, [*extents, 1])],
                  len(extents))


def real(pairs: ir.Value) -> ir.Value:
    return select(pairs, core.tensor_type(pairs).rank - 1, 0)


def imaginary(pairs: ir.Value) -> ir.Value:
    return select(pairs, core.tensor_type(pairs).rank - 1, 1)


def conjugate(pairs: ir.Value) -> ir.Value:
    negated = core.elementwise([imaginary(pairs)], core.tensor_type(pairs).element_type, arith.negf)
    return stack(real(pairs), negated)


def magnitude(pairs: ir.Value) -> ir.Value:
    """``|z|`` as ``sqrt(re^2 + im^2)``, the real tensor ``abs`` of a complex one gives."""
    element = core.tensor_type(pairs).element_type
    return core.elementwise([real(pairs), imaginary(pairs)], element,
                            lambda a, b: math.sqrt(arith.addf(arith.mulf(a, a), arith.mulf(b, b))))


def polar(radius: ir.Value, angle: ir.Value) -> ir.Value:
    """Pairs ``(r cos t, r sin t)`` (``torch.polar``), ``radius`` and ``angle`` broadcast."""
    element = core.tensor_type(radius).element_type
    extents = core.broadcast_extents([radius, angle])
    real_part = core.elementwise([radius, angle], element, lambda r, t: arith.mulf(r, math.cos(t)),
                                 extents=extents)
    imaginary_part = core.elementwise([radius, angle], element, lambda r, t: arith.mulf(r, math.sin(t)),
                                      extents=extents)
    return stack(real_part, imaginary_part)


def _parts(pairs: ir.Value) -> tuple[ir.Value, ir.Value]:
    return real(pairs), imaginary(pairs)


def add(a: ir.Value, b: ir.Value, b_factor: float = 1.0) -> ir.Value:
    """``a + b_factor * b`` of broadcast pairs (the pair dims line up: both are last)."""
    element = core.tensor_type(a).element_type
    if b_factor == 1.0:
        return core.elementwise([a, b], element, arith.addf)
    factor = core.scalar_constant(b_factor, element)
    return core.elementwise([a, b], element, lambda x, y: arith.addf(x, arith.mulf(y, factor)))


def multiply(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a * b`` of broadcast pairs: ``(ar br - ai bi, ar bi + ai br)``."""
    element = core.tensor_type(a).element_type
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    extents = core.broadcast_extents([ar, br])
    real_part = core.elementwise([ar, ai, br, bi], element,
                                 lambda w, x, y, z: arith.subf(arith.mulf(w, y), arith.mulf(x, z)), extents=extents)
    imaginary_part = core.elementwise([ar, ai, br, bi], element,
                                      lambda w, x, y, z: arith.addf(arith.mulf(w, z), arith.mulf(x, y)),
                                      extents=extents)
    return stack(real_part, imaginary_part)


def divide(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a / b`` of broadcast pairs: ``a * conj(b) / |b|^2`` (no rescaling against overflow)."""
    element = core.tensor_type(a).element_type
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    extents = core.broadcast_extents([ar, br])

    def part(numerator):
        def body(w, x, y, z):
            norm = arith.addf(arith.mulf(y, y), arith.mulf(z, z))
            return arith.divf(numerator(w, x, y, z), norm)
        return core.elementwise([ar, ai, br, bi], element, body, extents=extents)

    real_part = part(lambda w, x, y, z: arith.addf(arith.mulf(w, y), arith.mulf(x, z)))
    imaginary_part = part(lambda w, x, y, z: arith.subf(arith.mulf(x, y), arith.mulf(w, z)))
    return stack(real_part, imaginary_part)
