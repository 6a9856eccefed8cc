// tilecraft-divide-by-reciprocal: a float division by a constant becomes a multiplication by
// the constant's reciprocal and two FMAs (the exact remainder, the corrected quotient), which
// give divf's quotient bit for bit; a power of two, a non-constant divisor and a divisor whose
// reciprocal is not a normal number stay divisions.
// RUN: tilecraft-opt %s --tilecraft-divide-by-reciprocal | FileCheck %s

// CHECK-LABEL: func.func @splat_divisor
// CHECK-NOT: arith.divf
// CHECK-DAG: %[[R:.*]] = arith.constant dense<0.333333343> : vector<16xf32>
// CHECK-DAG: %[[D:.*]] = arith.constant dense<3.000000e+00> : vector<16xf32>
// CHECK: %[[Q:.*]] = arith.mulf %arg0, %[[R]] : vector<16xf32>
// CHECK: %[[N:.*]] = arith.negf %[[Q]]
// CHECK: %[[E:.*]] = math.fma %[[N]], %[[D]], %arg0
// CHECK: %[[C:.*]] = math.fma %[[E]], %[[R]], %[[Q]]
// CHECK: arith.cmpf one, %[[E]]
// CHECK: arith.cmpf ord, %[[C]], %[[C]]
// CHECK: %[[S:.*]] = arith.select %{{.*}}, %[[C]], %[[Q]]
// CHECK: return %[[S]]
func.func @splat_divisor(%x: vector<16xf32>) -> vector<16xf32> {
  %d = arith.constant dense<3.0> : vector<16xf32>
  %y = arith.divf %x, %d : vector<16xf32>
  return %y : vector<16xf32>
}

// CHECK-LABEL: func.func @scalar_f64
// CHECK-NOT: arith.divf
// CHECK: math.fma
func.func @scalar_f64(%x: f64) -> f64 {
  %d = arith.constant 0.1 : f64
  %y = arith.divf %x, %d : f64
  return %y : f64
}

// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: arith.divf
// CHECK-NOT: math.fma
func.func @left_alone(%x: vector<16xf32>, %v: vector<16xf32>) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
  %two = arith.constant dense<0.25> : vector<16xf32>
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %huge = arith.constant dense<3.0e38> : vector<16xf32>
  %a = arith.divf %x, %two : vector<16xf32>
  %b = arith.divf %x, %zero : vector<16xf32>
  %c = arith.divf %x, %huge : vector<16xf32>
  %d = arith.divf %x, %v : vector<16xf32>
  return %a, %b, %c, %d : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
}
