// tilecraft-int8-epilogues: the elementwise generic that consumes an int8 kernel's i32 result
// (here through the expand_shape back to the model's shape) moves into a variant of the kernel,
// which applies it to its accumulators and writes its 8-bit result: a per-column operand is
// read per column tile, a same-shape operand (a residual) at each accumulator's place, a
// scalar constant becomes a splat. A division by a constant scale that only feeds a rounding
// (QuantizeLinear's) becomes a multiplication by the scale's reciprocal (requantize_by_reciprocals).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-int8-matmul="vnni=1" --tilecraft-int8-epilogues | FileCheck %s

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>

// CHECK-LABEL: func.func @requantized
// CHECK-NOT: linalg.generic
// CHECK: %[[R:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1], [2]] : tensor<1x6x70xi8> into tensor<6x70xi8>
// CHECK: %[[Y:.*]] = call @tilecraft_int8_matmul_6x70x8_u8_t1_epilogue0(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[R]]) : (tensor<6x8xi8>, tensor<2x2x256xi8>, tensor<128xi32>, tensor<70xf32>, tensor<6x70xi8>) -> tensor<6x70xi8>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [1, 6, 70]
// CHECK: return %[[E]]
// CHECK-NOT: func.func private @tilecraft_int8_matmul_6x70x8_u8_t1(
// CHECK-LABEL: func.func private @tilecraft_int8_matmul_6x70x8_u8_t1_epilogue0
// CHECK-SAME: (%arg0: tensor<6x8xi8>, %arg1: tensor<2x2x256xi8>, %arg2: tensor<128xi32>, %arg3: tensor<70xf32>, %arg4: tensor<6x70xi8>) -> tensor<6x70xi8>
// CHECK: %[[TWO:.*]] = arith.constant dense<2.000000e+00> : vector<16xf32>
// CHECK: scf.forall
// CHECK: vector.contract
// CHECK: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: arith.mulf
// CHECK-NOT: arith.divf
// CHECK: arith.mulf %{{.*}}, %[[TWO]] : vector<16xf32>
// CHECK-NOT: arith.divf
// CHECK: math.roundeven
// CHECK: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
// CHECK: vector.transfer_write %{{.*}} : vector<16xi8>, tensor<{{.*}}xi8>
// CHECK-NOT: func.call
// CHECK: tensor.parallel_insert_slice
func.func @requantized(%x: tensor<6x8xi8>, %residual: tensor<1x6x70xi8>) -> tensor<1x6x70xi8> {
  %zero = arith.constant 0 : i32
  %scale = arith.constant 0.5 : f32
  %w = arith.constant dense<3> : tensor<8x70xi8>
  %column_scale = arith.constant dense<0.25> : tensor<70xf32>
  %e = tensor.empty() : tensor<6x70xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<6x70xi32>) -> tensor<6x70xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<6x8xi8>, tensor<8x70xi8>) outs(%f : tensor<6x70xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x70xi32>
  %y3 = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 6, 70] : tensor<6x70xi32> into tensor<1x6x70xi32>
  %o = tensor.empty() : tensor<1x6x70xi8>
  %q = linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y3, %column_scale, %residual : tensor<1x6x70xi32>, tensor<70xf32>, tensor<1x6x70xi8>) outs(%o : tensor<1x6x70xi8>) {
  ^bb0(%acc: i32, %cs: f32, %r: i8, %out: i8):
    %a = arith.sitofp %acc : i32 to f32
    %b = arith.mulf %a, %cs : f32
    %rf = arith.sitofp %r : i8 to f32
    %c = arith.addf %b, %rf : f32
    %d = arith.divf %c, %scale : f32
    %n = math.roundeven %d : f32
    %i = arith.fptosi %n : f32 to i32
    %t = arith.trunci %i : i32 to i8
    linalg.yield %t : i8
  } -> tensor<1x6x70xi8>
  return %q : tensor<1x6x70xi8>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// An integer division could trap on the padding lanes of a column tile, and a result used
// twice is not the epilogue's alone: both stay after the plain kernel.
// CHECK-LABEL: func.func @kept
// CHECK: call @tilecraft_int8_matmul_4x3x4_u8_t1(
// CHECK: linalg.generic
// CHECK: arith.divsi
// CHECK: call @tilecraft_int8_matmul_4x3x4_u8_t1(
// CHECK: return
func.func @kept(%x: tensor<4x4xi8>) -> (tensor<4x3xi32>, tensor<4x3xi32>, tensor<4x3xi32>) {
  %zero = arith.constant 0 : i32
  %seven = arith.constant 7 : i32
  %w = arith.constant dense<1> : tensor<4x3xi8>
  %e = tensor.empty() : tensor<4x3xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<4x3xi32>) -> tensor<4x3xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x4xi8>, tensor<4x3xi8>) outs(%f : tensor<4x3xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x3xi32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x3xi32>) outs(%e : tensor<4x3xi32>) {
  ^bb0(%v: i32, %out: i32):
    %r = arith.divsi %v, %seven : i32
    linalg.yield %r : i32
  } -> tensor<4x3xi32>
  %y2 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x4xi8>, tensor<4x3xi8>) outs(%f : tensor<4x3xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x3xi32>
  %twice = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y2 : tensor<4x3xi32>) outs(%e : tensor<4x3xi32>) {
  ^bb0(%v: i32, %out: i32):
    %r = arith.addi %v, %v : i32
    linalg.yield %r : i32
  } -> tensor<4x3xi32>
  return %d, %twice, %y2 : tensor<4x3xi32>, tensor<4x3xi32>, tensor<4x3xi32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#heads = affine_map<(d0, d1, d2) -> (d1, d2)>

// The columns split into heads (6 x 64 -> 6 x 2 x 32), with a per-column operand over both
// head dims: it is read as one column vector of 64.
// CHECK-LABEL: func.func @heads
// CHECK-NOT: linalg.generic
// CHECK: %[[B:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<2x32xf32> into tensor<64xf32>
// CHECK: %[[Y:.*]] = call @tilecraft_int8_matmul_6x64x8_u8_t1_epilogue0(%arg0, %{{.*}}, %{{.*}}, %[[B]]) : {{.*}} -> tensor<6x64xf32>
// CHECK: tensor.expand_shape %[[Y]] {{\[}}[0], [1, 2]] output_shape [6, 2, 32]
func.func @heads(%x: tensor<6x8xi8>) -> tensor<6x2x32xf32> {
  %zero = arith.constant 0 : i32
  %w = arith.constant dense<2> : tensor<8x64xi8>
  %bias = arith.constant dense<0.5> : tensor<2x32xf32>
  %e = tensor.empty() : tensor<6x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<6x64xi32>) -> tensor<6x64xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<6x8xi8>, tensor<8x64xi8>) outs(%f : tensor<6x64xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x64xi32>
  %split = tensor.expand_shape %y [[0], [1, 2]] output_shape [6, 2, 32] : tensor<6x64xi32> into tensor<6x2x32xi32>
  %o = tensor.empty() : tensor<6x2x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #heads, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%split, %bias : tensor<6x2x32xi32>, tensor<2x32xf32>) outs(%o : tensor<6x2x32xf32>) {
  ^bb0(%acc: i32, %b: f32, %out: f32):
    %v = arith.sitofp %acc : i32 to f32
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x2x32xf32>
  return %r : tensor<6x2x32xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// Two products added, each quantized to 8 bits first (a projection shortcut's Add in QDQ
// form): the second is quantized by a generic of its own, which becomes its kernel's
// epilogue (an 8-bit result, no i32 stored); the first kernel's epilogue reads those bytes,
// and no longer the second's column scale. A third product read as i32 (no 8-bit value in
// between) stays an i32 operand.
// CHECK-LABEL: func.func @shortcut
// CHECK-NOT: linalg.generic
// CHECK: %[[SIDE:.*]] = call @tilecraft_int8_matmul_6x64x8_u8_t1_epilogue{{.}}(%arg1, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<6x8xi8>, tensor<1x2x256xi8>, tensor<64xi32>, tensor<64xf32>) -> tensor<6x64xi8>
// CHECK: call @tilecraft_int8_matmul_6x64x8_u8_t1_epilogue{{.}}(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[SIDE]]) : (tensor<6x8xi8>, tensor<1x2x256xi8>, tensor<64xi32>, tensor<64xf32>, tensor<6x64xi8>) -> tensor<6x64xi8>
// CHECK-LABEL: func.func @unquantized
// CHECK: %[[P:.*]] = call @tilecraft_int8_matmul_6x64x8_u8_t1({{.*}}) {{.*}} -> tensor<6x64xi32>
// CHECK: call @tilecraft_int8_matmul_6x64x8_u8_t1_epilogue{{.}}(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %[[P]]) : {{.*}}tensor<6x64xi32>) -> tensor<6x64xi8>
func.func @shortcut(%x: tensor<6x8xi8>, %side: tensor<6x8xi8>) -> tensor<6x64xi8> {
  %zero = arith.constant 0 : i32
  %half = arith.constant 0.5 : f32
  %low = arith.constant 0.0 : f32
  %high = arith.constant 255.0 : f32
  %w = arith.constant dense<3> : tensor<8x64xi8>
  %v = arith.constant dense<-2> : tensor<8x64xi8>
  %scale = arith.constant dense<0.25> : tensor<64xf32>
  %side_scale = arith.constant dense<0.125> : tensor<64xf32>
  %e = tensor.empty() : tensor<6x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<6x64xi32>) -> tensor<6x64xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<6x8xi8>, tensor<8x64xi8>) outs(%f : tensor<6x64xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x64xi32>
  %z = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%side, %v : tensor<6x8xi8>, tensor<8x64xi8>) outs(%f : tensor<6x64xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x64xi32>
  %o = tensor.empty() : tensor<6x64xi8>
  %sum = linalg.generic {indexing_maps = [#id, #col, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %scale, %z, %side_scale : tensor<6x64xi32>, tensor<64xf32>, tensor<6x64xi32>, tensor<64xf32>)
      outs(%o : tensor<6x64xi8>) {
  ^bb0(%acc: i32, %cs: f32, %other: i32, %ss: f32, %out: i8):
    %a = arith.sitofp %acc : i32 to f32
    %b = arith.mulf %a, %cs : f32
    %sa = arith.sitofp %other : i32 to f32
    %sb = arith.mulf %sa, %ss : f32
    %sr = math.roundeven %sb : f32
    %sc = arith.maximumf %sr, %low : f32
    %sd = arith.minimumf %sc, %high : f32
    %si = arith.fptosi %sd : f32 to i32
    %st = arith.trunci %si : i32 to i8
    %sf = arith.uitofp %st : i8 to f32
    %c = arith.addf %b, %sf : f32
    %d = arith.divf %c, %half : f32
    %n = math.roundeven %d : f32
    %i = arith.fptosi %n : f32 to i32
    %t = arith.trunci %i : i32 to i8
    linalg.yield %t : i8
  } -> tensor<6x64xi8>
  return %sum : tensor<6x64xi8>
}

func.func @unquantized(%x: tensor<6x8xi8>, %side: tensor<6x8xi8>) -> tensor<6x64xi8> {
  %zero = arith.constant 0 : i32
  %half = arith.constant 0.5 : f32
  %w = arith.constant dense<3> : tensor<8x64xi8>
  %v = arith.constant dense<-2> : tensor<8x64xi8>
  %scale = arith.constant dense<0.25> : tensor<64xf32>
  %e = tensor.empty() : tensor<6x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<6x64xi32>) -> tensor<6x64xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<6x8xi8>, tensor<8x64xi8>) outs(%f : tensor<6x64xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x64xi32>
  %z = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%side, %v : tensor<6x8xi8>, tensor<8x64xi8>) outs(%f : tensor<6x64xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<6x64xi32>
  %o = tensor.empty() : tensor<6x64xi8>
  %sum = linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %scale, %z : tensor<6x64xi32>, tensor<64xf32>, tensor<6x64xi32>) outs(%o : tensor<6x64xi8>) {
  ^bb0(%acc: i32, %cs: f32, %other: i32, %out: i8):
    %a = arith.sitofp %acc : i32 to f32
    %b = arith.mulf %a, %cs : f32
    %sa = arith.sitofp %other : i32 to f32
    %c = arith.addf %b, %sa : f32
    %d = arith.divf %c, %half : f32
    %n = math.roundeven %d : f32
    %i = arith.fptosi %n : f32 to i32
    %t = arith.trunci %i : i32 to i8
    linalg.yield %t : i8
  } -> tensor<6x64xi8>
  return %sum : tensor<6x64xi8>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// A division by a constant whose quotient is not only rounded (here: returned as f32) stays a
// division: replacing it by a reciprocal would change the value, not only a rare rounding tie.
// Rounded, a division by 3 becomes a multiplication by its f32 reciprocal.
// CHECK-LABEL: func.func private @tilecraft_int8_matmul_4x16x4_u8_t1_epilogue0
// CHECK: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-LABEL: func.func private @tilecraft_int8_matmul_4x16x4_u8_t1_epilogue1
// CHECK-NOT: arith.divf
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT: math.roundeven
func.func @unrounded_division_kept(%x: tensor<4x4xi8>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0 : i32
  %three = arith.constant 3.0 : f32
  %w = arith.constant dense<1> : tensor<4x16xi8>
  %e = tensor.empty() : tensor<4x16xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<4x16xi32>) -> tensor<4x16xi32>
  %o = tensor.empty() : tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x4xi8>, tensor<4x16xi8>) outs(%f : tensor<4x16xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x16xi32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x16xi32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%v: i32, %out: f32):
    %vf = arith.sitofp %v : i32 to f32
    %r = arith.divf %vf, %three : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %y2 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x4xi8>, tensor<4x16xi8>) outs(%f : tensor<4x16xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x16xi32>
  %rounded = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y2 : tensor<4x16xi32>) outs(%o : tensor<4x16xf32>) {
  ^bb0(%v: i32, %out: f32):
    %vf = arith.sitofp %v : i32 to f32
    %r = arith.divf %vf, %three : f32
    %n = math.roundeven %r : f32
    linalg.yield %n : f32
  } -> tensor<4x16xf32>
  return %d, %rounded : tensor<4x16xf32>, tensor<4x16xf32>
}
