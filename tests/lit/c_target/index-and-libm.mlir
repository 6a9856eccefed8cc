// tilecraft-c-signed-index: index division/remainder go through i64 (EmitC prints index as
// size_t, where a signed % or / would be unsigned; the unsigned ones have no EmitC pattern); tilecraft-c-math-to-libm: math ops as
// libm calls, rsqrt as 1 / sqrtf, f64 ops call the double functions.
// RUN: tilecraft-opt %s --tilecraft-c-signed-index --tilecraft-c-math-to-libm | FileCheck %s

// CHECK-LABEL: func.func @signed
// CHECK: %[[A:.*]] = arith.index_cast %arg0 : index to i64
// CHECK: %[[B:.*]] = arith.index_cast %arg1 : index to i64
// CHECK: %[[R:.*]] = arith.remsi %[[A]], %[[B]] : i64
// CHECK: %[[RI:.*]] = arith.index_cast %[[R]] : i64 to index
// CHECK: arith.divsi %{{.*}}, %{{.*}} : i64
// CHECK: %[[UA:.*]] = arith.index_castui %arg0 : index to i64
// CHECK: arith.remui %[[UA]], %{{.*}} : i64
// CHECK: arith.index_castui %{{.*}} : i64 to index
// CHECK: arith.addi %arg0, %arg1 : index
func.func @signed(%a: index, %b: index) -> (index, index, index, index) {
  %r = arith.remsi %a, %b : index
  %d = arith.divsi %a, %b : index
  %u = arith.remui %a, %b : index
  %s = arith.addi %a, %b : index
  return %r, %d, %u, %s : index, index, index, index
}

// CHECK-LABEL: func.func @libm
// CHECK: emitc.call_opaque "tanhf"(%arg0) : (f32) -> f32
// CHECK: %[[S:.*]] = emitc.call_opaque "sqrtf"(%arg0) : (f32) -> f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: arith.divf %[[ONE]], %[[S]] : f32
// CHECK: emitc.call_opaque "exp"(%arg1) : (f64) -> f64
// CHECK: emitc.call_opaque "powf"(%arg0, %arg0) : (f32, f32) -> f32
// CHECK-NOT: math.
func.func @libm(%x: f32, %y: f64) -> (f32, f32, f64, f32) {
  %t = math.tanh %x : f32
  %r = math.rsqrt %x : f32
  %e = math.exp %y : f64
  %p = math.powf %x, %x : f32
  return %t, %r, %e, %p : f32, f32, f64, f32
}
