// tilecraft-elementwise-by-rows: a run of elementwise ops on an n-D vector (a register
// tile's epilogue) is emitted one 1-D row at a time: row 0's whole chain, then row 1's, so
// LLVM keeps one row's temporaries live instead of every row's (spills otherwise).
// RUN: tilecraft-opt %s --tilecraft-elementwise-by-rows --canonicalize | FileCheck %s

// Bias (a broadcast row), exp-like chain, product; the stores take each row's result.
// CHECK-LABEL: func.func @epilogue
// CHECK-SAME: (%[[ACC:.*]]: vector<2x16xf32>, %[[BIAS:.*]]: vector<16xf32>,
// CHECK: %[[A0:.*]] = vector.extract %[[ACC]][0] : vector<16xf32> from vector<2x16xf32>
// CHECK: %[[X0:.*]] = arith.addf %[[A0]], %[[BIAS]] : vector<16xf32>
// CHECK: %[[E0:.*]] = math.exp %[[X0]] : vector<16xf32>
// CHECK: %[[Y0:.*]] = arith.mulf %[[X0]], %[[E0]] : vector<16xf32>
// CHECK: %[[A1:.*]] = vector.extract %[[ACC]][1] : vector<16xf32> from vector<2x16xf32>
// CHECK: %[[X1:.*]] = arith.addf %[[A1]], %[[BIAS]] : vector<16xf32>
// CHECK: %[[E1:.*]] = math.exp %[[X1]] : vector<16xf32>
// CHECK: %[[Y1:.*]] = arith.mulf %[[X1]], %[[E1]] : vector<16xf32>
// CHECK-NOT: vector<2x16xf32>
// CHECK: vector.transfer_write %[[Y0]]
// CHECK: vector.transfer_write %[[Y1]]
func.func @epilogue(%acc: vector<2x16xf32>, %bias: vector<16xf32>, %out: memref<2x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = vector.broadcast %bias : vector<16xf32> to vector<2x16xf32>
  %x = arith.addf %acc, %b : vector<2x16xf32>
  %e = math.exp %x : vector<2x16xf32>
  %y = arith.mulf %x, %e : vector<2x16xf32>
  %y0 = vector.extract %y[0] : vector<16xf32> from vector<2x16xf32>
  vector.transfer_write %y0, %out[%c0, %c0] {in_bounds = [true]} : vector<16xf32>, memref<2x16xf32>
  %y1 = vector.extract %y[1] : vector<16xf32> from vector<2x16xf32>
  vector.transfer_write %y1, %out[%c1, %c0] {in_bounds = [true]} : vector<16xf32>, memref<2x16xf32>
  return
}

// Splat constants, compares and selects (i1 rows) take part; a value of the run used after it
// (here returned whole) is put back together from its rows.
// CHECK-LABEL: func.func @whole_result_used
// CHECK: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.select %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: arith.cmpf olt, %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.select %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK: vector.from_elements
// CHECK: return
func.func @whole_result_used(%x: vector<2x4xf32>) -> vector<2x4xf32> {
  %zero = arith.constant dense<0.0> : vector<2x4xf32>
  %neg = arith.cmpf olt, %x, %zero : vector<2x4xf32>
  %y = arith.select %neg, %zero, %x : vector<2x4xi1>, vector<2x4xf32>
  %z = arith.mulf %y, %x : vector<2x4xf32>
  return %z : vector<2x4xf32>
}

// A single op is no run (nothing to reorder); 1-D vectors are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK: arith.addf %{{.*}} : vector<2x4xf32>
// CHECK: arith.addf %{{.*}} : vector<4xf32>
// CHECK: arith.mulf %{{.*}} : vector<4xf32>
func.func @left_alone(%x: vector<2x4xf32>, %v: vector<4xf32>) -> (vector<2x4xf32>, vector<4xf32>) {
  %y = arith.addf %x, %x : vector<2x4xf32>
  %a = arith.addf %v, %v : vector<4xf32>
  %b = arith.mulf %a, %v : vector<4xf32>
  return %y, %b : vector<2x4xf32>, vector<4xf32>
}
