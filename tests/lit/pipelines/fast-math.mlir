// tilecraft-fast-math: f32 tanh and erf become rational functions (x P(x^2) / Q(x^2), +-1
// beyond the clamp), exp Cephes' polynomial; scalars and vectors alike, f64 left alone.
// RUN: tilecraft-opt %s --tilecraft-fast-math | FileCheck %s

// CHECK-LABEL: func.func @scalar_tanh
// CHECK-NOT: math.tanh
// CHECK: arith.maximumf
// CHECK: arith.minimumf
// CHECK-COUNT-6: math.fma
// CHECK: arith.divf
// CHECK: arith.cmpf oge
// CHECK: math.copysign
// CHECK: arith.cmpf olt
// CHECK: %[[R:.*]] = arith.select
// CHECK: return %[[R]] : f32
func.func @scalar_tanh(%x: f32) -> f32 {
  %y = math.tanh %x : f32
  return %y : f32
}

// CHECK-LABEL: func.func @vector_erf
// CHECK-NOT: math.erf
// CHECK: arith.divf %{{.*}} : vector<16xf32>
// CHECK: return
func.func @vector_erf(%x: vector<16xf32>) -> vector<16xf32> {
  %y = math.erf %x : vector<16xf32>
  return %y : vector<16xf32>
}

// An erf the frontends expanded (tagged on its last op) gives way to the rational one;
// the expansion's exp goes with it.
// CHECK-LABEL: func.func @tagged_erf
// CHECK-NOT: math.exp
// CHECK-NOT: tilecraft.fast_math
// CHECK: arith.divf
// CHECK: return
func.func @tagged_erf(%x: f32, %slow: f32) -> f32 {
  %e = math.exp %slow : f32
  %y = math.copysign %e, %x {tilecraft.fast_math = "erf"} : f32
  return %y : f32
}

// CHECK-LABEL: func.func @scalar_exp
// CHECK-NOT: math.exp
// CHECK: math.roundeven
// CHECK: arith.bitcast %{{.*}} : i32 to f32
func.func @scalar_exp(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// CHECK-LABEL: func.func @f64_left_alone
// CHECK: math.tanh %{{.*}} : f64
func.func @f64_left_alone(%x: f64) -> f64 {
  %y = math.tanh %x : f64
  return %y : f64
}
