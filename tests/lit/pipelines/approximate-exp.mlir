// tilecraft-approximate-exp: a vector f32 math.exp becomes Cephes' polynomial in arith ops
// (LLVM scalarizes vector exp into expf calls); scalar and f64 exp are left to libm.
// RUN: tilecraft-opt %s --tilecraft-approximate-exp | FileCheck %s

// CHECK-LABEL: func.func @vector_exp
// CHECK-NOT: math.exp
// CHECK: math.roundeven %{{.*}} : vector<4x16xf32>
// CHECK-COUNT-7: math.fma
// CHECK: arith.fptosi %{{.*}} : vector<4x16xf32> to vector<4x16xi32>
// CHECK: arith.shli
// CHECK: arith.addi
// CHECK: arith.bitcast %{{.*}} : vector<4x16xi32> to vector<4x16xf32>
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf uno
// CHECK: %[[R:.*]] = arith.select
// CHECK: return %[[R]] : vector<4x16xf32>
func.func @vector_exp(%x: vector<4x16xf32>) -> vector<4x16xf32> {
  %y = math.exp %x : vector<4x16xf32>
  return %y : vector<4x16xf32>
}

// tanh: a polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, both from arith ops.
// CHECK-LABEL: func.func @vector_tanh
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: math.absf
// CHECK: math.roundeven
// CHECK: math.copysign
// CHECK: arith.cmpf oge
// CHECK: %[[R:.*]] = arith.select
// CHECK: return %[[R]] : vector<16xf32>
func.func @vector_tanh(%x: vector<16xf32>) -> vector<16xf32> {
  %y = math.tanh %x : vector<16xf32>
  return %y : vector<16xf32>
}

// CHECK-LABEL: func.func @left_to_libm
// CHECK: math.exp %{{.*}} : f32
// CHECK: math.exp %{{.*}} : vector<8xf64>
func.func @left_to_libm(%x: f32, %v: vector<8xf64>) -> (f32, vector<8xf64>) {
  %y = math.exp %x : f32
  %w = math.exp %v : vector<8xf64>
  return %y, %w : f32, vector<8xf64>
}
