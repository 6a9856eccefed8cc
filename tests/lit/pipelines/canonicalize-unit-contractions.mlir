// tilecraft-canonicalize-unit-contractions: a vector.contract reducing over several dims of
// extent 1 (a GRU's input projection over an LSTM's [direction, hidden]) becomes a 2-D outer
// product between shape casts, the form LLVM's contraction lowering vectorizes; a contraction
// with one reduction dim is left alone.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-canonicalize-unit-contractions | FileCheck %s

// CHECK-LABEL: func.func @two_unit_reductions
// CHECK-SAME: (%[[A:.*]]: vector<1x2x1x1xf32>, %[[B:.*]]: vector<1x1x24xf32>, %[[C:.*]]: vector<1x2x24xf32>)
// CHECK-DAG: %[[A2:.*]] = vector.shape_cast %[[A]] : vector<1x2x1x1xf32> to vector<2x1xf32>
// CHECK-DAG: %[[B2:.*]] = vector.shape_cast %[[B]] : vector<1x1x24xf32> to vector<1x24xf32>
// CHECK-DAG: %[[C2:.*]] = vector.shape_cast %[[C]] : vector<1x2x24xf32> to vector<2x24xf32>
// CHECK: %[[R:.*]] = vector.contract {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %[[A2]], %[[B2]], %[[C2]] : vector<2x1xf32>, vector<1x24xf32> into vector<2x24xf32>
// CHECK: %[[OUT:.*]] = vector.shape_cast %[[R]] : vector<2x24xf32> to vector<1x2x24xf32>
// CHECK: return %[[OUT]]
func.func @two_unit_reductions(%a: vector<1x2x1x1xf32>, %b: vector<1x1x24xf32>, %c: vector<1x2x24xf32>) -> vector<1x2x24xf32> {
  %r = vector.contract {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>,
                                         affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>,
                                         affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>],
                        iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"],
                        kind = #vector.kind<add>} %a, %b, %c : vector<1x2x1x1xf32>, vector<1x1x24xf32> into vector<1x2x24xf32>
  return %r : vector<1x2x24xf32>
}

// -----

// One reduction dim (the default matmul tile) or a reduction of extent 2: unchanged.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: vector.shape_cast
// CHECK: vector.contract {{.*}} : vector<8x1xf32>, vector<1x1x32xf32> into vector<8x1x32xf32>
// CHECK: vector.contract {{.*}} : vector<2x2x1xf32>, vector<2x1x8xf32> into vector<2x8xf32>
func.func @left_alone(%a: vector<8x1xf32>, %b: vector<1x1x32xf32>, %c: vector<8x1x32xf32>,
                      %d: vector<2x2x1xf32>, %e: vector<2x1x8xf32>, %f: vector<2x8xf32>) -> (vector<8x1x32xf32>, vector<2x8xf32>) {
  %r = vector.contract {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3)>,
                                         affine_map<(d0, d1, d2, d3) -> (d3, d1, d2)>,
                                         affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                        iterator_types = ["parallel", "parallel", "parallel", "reduction"],
                        kind = #vector.kind<add>} %a, %b, %c : vector<8x1xf32>, vector<1x1x32xf32> into vector<8x1x32xf32>
  %s = vector.contract {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>,
                                         affine_map<(d0, d1, d2, d3) -> (d2, d3, d1)>,
                                         affine_map<(d0, d1, d2, d3) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel", "reduction", "reduction"],
                        kind = #vector.kind<add>} %d, %e, %f : vector<2x2x1xf32>, vector<2x1x8xf32> into vector<2x8xf32>
  return %r, %s : vector<8x1x32xf32>, vector<2x8xf32>
}
