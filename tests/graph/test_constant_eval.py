"""The constant folder's numpy evaluation (pipelines/graph/constant_eval.py): every value it
computes is bit for bit what the JIT computes for the same ops (the folder's other path,
``constant_folding._evaluate``), and what it does not handle is left to the JIT."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

import graph_models
import tilecraft
from tilecraft.dialects import graph
from tilecraft.pipelines.graph import constant_folding
from tilecraft.pipelines.graph.constant_eval import evaluate_constants


def _dense(array: np.ndarray) -> str:
    """``array`` as the raw-data form of a ``dense`` attribute (exact bits)."""
    return f'dense<"0x{np.ascontiguousarray(array).tobytes().hex().upper()}">'


def _function_ops(text: str) -> tuple[ir.Context, ir.Module, list[ir.Operation], list[ir.Value]]:
    """The ops of ``@f``'s body (without the return) and the values it returns."""
    context = ir.Context()
    graph.load(context)
    module = ir.Module.parse(text, context)
    body = module.body.operations[0].regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    return context, module, ops[:-1], list(ops[-1].operands)


def _jit_values(context: ir.Context, ops: list[ir.Operation], leaves: list[ir.Value]) -> list[np.ndarray]:
    return constant_folding._evaluate([(ops, leaves)], context, {})


_BN_LIKE = """
#c = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f() -> (tensor<384xf32>, tensor<24x16xf32>) {{
  %w = arith.constant {w} : tensor<16x24xf32>
  %v = arith.constant {v} : tensor<16xf32>
  %eps = arith.constant 1.0e-05 : f32
  %e = tensor.empty() : tensor<24x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x24xf32>) outs(%e : tensor<24x16xf32>) permutation = [1, 0]
  %g = linalg.generic {{indexing_maps = [#id, #c, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%t, %v : tensor<24x16xf32>, tensor<16xf32>) outs(%e : tensor<24x16xf32>) {{
  ^bb0(%a: f32, %b: f32, %out: f32):
    %half = arith.constant 0.5 : f32
    %0 = arith.addf %b, %eps : f32
    %1 = math.sqrt %0 : f32
    %2 = arith.divf %a, %1 : f32
    %3 = arith.mulf %2, %half : f32
    %4 = arith.subf %3, %b : f32
    %5 = arith.negf %4 : f32
    linalg.yield %5 : f32
  }} -> tensor<24x16xf32>
  %flat = tensor.collapse_shape %g [[0, 1]] : tensor<24x16xf32> into tensor<384xf32>
  %back = tensor.expand_shape %flat [[0, 1]] output_shape [24, 16] : tensor<384xf32> into tensor<24x16xf32>
  return %flat, %back : tensor<384xf32>, tensor<24x16xf32>
}}
"""


def test_values_are_the_jits_bit_for_bit():
    rng = np.random.default_rng(0)
    # Values with long mantissas, signed zeros and a divisor of zero (an infinity): any
    # difference in rounding or order of operations would show in the bits.
    w = (rng.standard_normal((16, 24)) * 1e3).astype(np.float32)
    w[0, 0], w[1, 1] = -0.0, 0.0
    v = rng.uniform(0.01, 2.0, 16).astype(np.float32)
    v[0] = -1.0e-05  # sqrt(v + eps) = 0
    context, _module, ops, leaves = _function_ops(_BN_LIKE.format(w=_dense(w), v=_dense(v)))
    with context, ir.Location.unknown():
        known = evaluate_constants(ops, {}, leaves)
        assert all(leaf in known for leaf in leaves)
        expected = _jit_values(context, ops, leaves)
    for leaf, reference in zip(leaves, expected):
        ours = np.ascontiguousarray(known[leaf])
        assert ours.shape == reference.shape and ours.dtype == reference.dtype
        assert ours.tobytes() == reference.tobytes()
    assert np.isinf(expected[0]).any()  # the zero divisor was exercised


_UNSUPPORTED = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f() -> (tensor<2xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {{
  %w = arith.constant {w} : tensor<2x3xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<2xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%w : tensor<2x3xf32>) outs(%acc : tensor<2xf32>) {{
  ^bb0(%a: f32, %out: f32):
    %0 = arith.addf %a, %out : f32
    linalg.yield %0 : f32
  }} -> tensor<2xf32>
  %e = tensor.empty() : tensor<2x3xf32>
  %fast = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%w : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {{
  ^bb0(%a: f32, %out: f32):
    %0 = arith.mulf %a, %a fastmath<fast> : f32
    linalg.yield %0 : f32
  }} -> tensor<2x3xf32>
  %after = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%fast : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {{
  ^bb0(%a: f32, %out: f32):
    %0 = arith.addf %a, %a : f32
    linalg.yield %0 : f32
  }} -> tensor<2x3xf32>
  return %sum, %fast, %after : tensor<2xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}}
"""


def test_what_numpy_does_not_evaluate_is_left_to_the_jit():
    """A reduction (its order of additions is the JIT's), a fast-math op and what reads it
    get no value here; the weight itself does."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    context, _module, ops, leaves = _function_ops(_UNSUPPORTED.format(w=_dense(w)))
    with context, ir.Location.unknown():
        known = evaluate_constants(ops, {}, [ops[0].results[0], *leaves])
    assert ops[0].results[0] in known
    assert not any(leaf in known for leaf in leaves)


@pytest.mark.parametrize("channels", [8, 13])
def test_folded_model_outputs_unchanged(monkeypatch, channels):
    """A conv + BatchNormalization block compiled with the numpy evaluation and with the JIT
    alone gives the same outputs, bit for bit (BN folded into the filters either way)."""
    model = graph_models.conv_bn_block(channels=channels, size=6)
    x = np.random.default_rng(1).standard_normal((1, channels, 6, 6)).astype(np.float32)
    with_numpy = tilecraft.compile(model, cache=False, keep_ir=False)(x)
    monkeypatch.setattr(constant_folding, "evaluate_constants", lambda ops, weights, wanted: {})
    jit_only = tilecraft.compile(model, cache=False, keep_ir=False)(x)
    assert with_numpy.tobytes() == jit_only.tobytes()
