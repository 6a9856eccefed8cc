"""How the default schedule applies its transform sequences: once, on the module itself,
with the module restored from a checkpoint when a sequence fails part way."""

import warnings

import pytest
from mlir import ir
from tilecraft.schedule.apply import apply_if_valid, apply_or_warn

PAYLOAD = """
func.func @mm(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = linalg.matmul {tilecraft.op_id = 0 : i64} ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
"""

# @tile_then_fail tiles the matmul (the payload changes), then fails: a matched op
# count of 2 is asserted where there is one.
SEQUENCES = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match attributes {tilecraft.op_id = 0 : i64} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:3 = transform.structured.tile_using_for %mm tile_sizes [4, 4, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
  transform.named_sequence @tile_then_fail(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match attributes {tilecraft.op_id = 0 : i64} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:3 = transform.structured.tile_using_for %mm tile_sizes [4, 4, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %fors = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
    %n = transform.num_associations %fors : (!transform.any_op) -> !transform.param<i64>
    %two = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %n, %two : !transform.param<i64>
    transform.yield
  }
}
"""


@pytest.fixture
def modules():
    with ir.Context(), ir.Location.unknown():
        yield ir.Module.parse(PAYLOAD), ir.Module.parse(SEQUENCES)


def test_a_sequence_that_succeeds_is_applied(modules):
    payload, sequences = modules
    assert apply_if_valid(payload.operation, sequences, "tile") is None
    assert str(payload).count("scf.for") == 3
    payload.operation.verify()


def test_a_failed_sequence_leaves_the_module_as_it_was(modules):
    payload, sequences = modules
    before = str(payload)
    error = apply_if_valid(payload.operation, sequences, "tile_then_fail")
    assert error is not None
    assert str(payload) == before
    payload.operation.verify()
    # The restored module is a working payload: the next sequence applies to it.
    assert apply_if_valid(payload.operation, sequences, "tile") is None
    assert str(payload).count("scf.for") == 3


def test_a_failed_sequence_warns_that_the_op_keeps_scalar_loops(modules):
    payload, sequences = modules
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not apply_or_warn(payload.operation, sequences, "tile_then_fail")
    assert any("tile_then_fail failed, the op keeps scalar loops" in str(w.message) for w in caught)
