// tilecraft-fold-integer-round-trips: a clamped integral float converted to a narrow integer
// and back is the float itself (QuantizeLinear + DequantizeLinear in one body); nothing else.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fold-integer-round-trips --canonicalize | FileCheck %s

// QuantizeLinear to u8 (zero point 128) then DequantizeLinear: the dequantization reads the
// clamped value; the u8 the function also returns keeps its conversions.
// CHECK-LABEL: func.func @fake_quant_u8
// CHECK: %[[R:.*]] = math.roundeven
// CHECK: %[[A:.*]] = arith.addf %[[R]]
// CHECK: %[[LO:.*]] = arith.maximumf %[[A]]
// CHECK: %[[Y:.*]] = arith.minimumf %[[LO]]
// CHECK: %[[I:.*]] = arith.fptosi %[[Y]]
// CHECK: %[[Q:.*]] = arith.trunci %[[I]]
// CHECK-NOT: arith.uitofp
// CHECK: arith.subf %[[Y]]
// CHECK: return {{.*}}, %[[Q]]
func.func @fake_quant_u8(%x: vector<16xf32>) -> (vector<16xf32>, vector<16xi8>) {
  %zp = arith.constant dense<128.0> : vector<16xf32>
  %lo = arith.constant dense<0.0> : vector<16xf32>
  %hi = arith.constant dense<255.0> : vector<16xf32>
  %s = arith.constant dense<0.25> : vector<16xf32>
  %r = math.roundeven %x : vector<16xf32>
  %a = arith.addf %r, %zp : vector<16xf32>
  %m = arith.maximumf %a, %lo : vector<16xf32>
  %y = arith.minimumf %m, %hi : vector<16xf32>
  %i = arith.fptosi %y : vector<16xf32> to vector<16xi32>
  %q = arith.trunci %i : vector<16xi32> to vector<16xi8>
  %f = arith.uitofp %q : vector<16xi8> to vector<16xf32>
  %d = arith.subf %f, %zp : vector<16xf32>
  %z = arith.mulf %d, %s : vector<16xf32>
  return %z, %q : vector<16xf32>, vector<16xi8>
}

// -----

// Signed int8, clamp in the other order: folded.
// CHECK-LABEL: func.func @fake_quant_s8
// CHECK-NOT: arith.sitofp
// CHECK-NOT: arith.fptosi
// CHECK: return
func.func @fake_quant_s8(%x: f32) -> f32 {
  %lo = arith.constant -128.0 : f32
  %hi = arith.constant 127.0 : f32
  %r = math.roundeven %x : f32
  %m = arith.minimumf %r, %hi : f32
  %y = arith.maximumf %m, %lo : f32
  %i = arith.fptosi %y : f32 to i32
  %q = arith.trunci %i : i32 to i8
  %f = arith.sitofp %q : i8 to f32
  return %f : f32
}

// -----

// Not folded: bounds outside u8 (256 wraps), a value not rounded (3.5 truncates), a signed
// clamp read as unsigned (-1 becomes 255).
// CHECK-LABEL: func.func @not_round_trips
// CHECK-COUNT-3: arith.uitofp
func.func @not_round_trips(%x: f32) -> (f32, f32, f32) {
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 256.0 : f32
  %u8 = arith.constant 255.0 : f32
  %neg = arith.constant -128.0 : f32
  %s8 = arith.constant 127.0 : f32
  %r = math.roundeven %x : f32
  %m1 = arith.maximumf %r, %lo : f32
  %y1 = arith.minimumf %m1, %hi : f32
  %q1 = arith.fptosi %y1 : f32 to i8
  %f1 = arith.uitofp %q1 : i8 to f32
  %m2 = arith.maximumf %x, %lo : f32
  %y2 = arith.minimumf %m2, %u8 : f32
  %q2 = arith.fptosi %y2 : f32 to i8
  %f2 = arith.uitofp %q2 : i8 to f32
  %m3 = arith.maximumf %r, %neg : f32
  %y3 = arith.minimumf %m3, %s8 : f32
  %q3 = arith.fptosi %y3 : f32 to i8
  %f3 = arith.uitofp %q3 : i8 to f32
  return %f1, %f2, %f3 : f32, f32, f32
}
