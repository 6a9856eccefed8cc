"""tilecraft.ir.maps: the indexing-map queries every pass uses, on ops parsed from MLIR."""

from __future__ import annotations

from mlir import ir

from tilecraft.ir.maps import (has_indexing_maps, indexing_map_texts, indexing_maps, operand_map, result_dims,
                               set_indexing_maps)

GENERIC = """
#row = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#skew = affine_map<(d0, d1) -> (d0, d0 + d1)>
func.func @f(%a: tensor<4xf32>, %b: tensor<4x12xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.generic {indexing_maps = [#row, #skew, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4xf32>, tensor<4x12xf32>) outs(%c : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %m = linalg.fill ins(%zero : f32) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""


def _ops(module: ir.Module) -> dict[str, ir.Operation]:
    body = module.body.operations[0].regions[0].blocks[0]
    return {op.operation.name: op.operation for op in body.operations}


def test_maps_are_read_per_operand_and_as_text():
    with ir.Context():
        ops = _ops(ir.Module.parse(GENERIC))
        generic = ops["linalg.generic"]
        assert has_indexing_maps(generic)
        assert indexing_map_texts(generic) == ["(d0, d1) -> (d0)", "(d0, d1) -> (d0, d0 + d1)", "(d0, d1) -> (d0, d1)"]
        assert str(operand_map(generic, -1)) == "(d0, d1) -> (d0, d1)"
        assert [m.n_dims for m in indexing_maps(generic)] == [2, 2, 2]
        # A named op without the attribute (a fill): nothing to read.
        assert not has_indexing_maps(ops["linalg.fill"])


def test_result_dims_only_for_plain_dims():
    with ir.Context():
        generic = _ops(ir.Module.parse(GENERIC))["linalg.generic"]
        row, skew, identity = indexing_maps(generic)
        assert result_dims(row) == [0]
        assert result_dims(identity) == [0, 1]
        assert result_dims(skew) is None  # d0 + d1 is no single dim


def test_set_indexing_maps_round_trips():
    with ir.Context():
        generic = _ops(ir.Module.parse(GENERIC))["linalg.generic"]
        maps = indexing_maps(generic)
        set_indexing_maps(generic, [maps[0], maps[2], maps[2]])
        assert indexing_map_texts(generic) == ["(d0, d1) -> (d0)", "(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0, d1)"]
        set_indexing_maps(generic, maps)
        assert indexing_maps(generic) == maps
