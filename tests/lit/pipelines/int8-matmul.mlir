// tilecraft-int8-matmul: an 8-bit integer matmul with constant signed weights becomes a call of
// a VNNI kernel (B packed at compile time); otherwise the operands are widened to an i32
// linalg.matmul. tilecraft-vnni-dot-products then turns the kernel's dot products into vpdpbusd.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-int8-matmul="vnni=1 num-threads=2" | FileCheck %s --check-prefix=VNNI
// RUN: tilecraft-opt %s --split-input-file --tilecraft-int8-matmul="vnni=0" | FileCheck %s --check-prefix=WIDE
// RUN: tilecraft-opt %s --split-input-file --tilecraft-int8-matmul="vnni=1 num-threads=2" --tilecraft-vnni-dot-products | FileCheck %s --check-prefix=DOTS

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// A u8 activation times constant s8 weights: K = 6 is padded to 8 (two groups of four), N = 3
// to one 16-column tile.
// VNNI-LABEL: func.func @u8_by_s8
// VNNI-DAG: %[[W:.*]] = arith.constant dense{{.*}} : tensor<1x2x64xi8>
// VNNI-DAG: %[[S:.*]] = arith.constant dense<0> : tensor<16xi32>
// VNNI: %[[R:.*]] = call @tilecraft_int8_matmul_5x3x6_u8_t2(%arg0, %[[W]], %[[S]]) {{.*}}: (tensor<5x6xi8>, tensor<1x2x64xi8>, tensor<16xi32>) -> tensor<5x3xi32>
// VNNI: return %[[R]]
// VNNI-LABEL: func.func private @tilecraft_int8_matmul_5x3x6_u8_t2
// VNNI: scf.forall
// VNNI: vector.contract
// VNNI-NOT: arith.xori
// VNNI: tensor.parallel_insert_slice
// WIDE-LABEL: func.func @u8_by_s8
// WIDE: arith.extui
// WIDE: arith.extsi
// WIDE: linalg.matmul ins({{.*}} : tensor<5x6xi32>, tensor<6x3xi32>)
// DOTS-LABEL: func.func private @tilecraft_int8_matmul_5x3x6_u8_t2
// DOTS-NOT: vector.contract
// DOTS: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
func.func @u8_by_s8(%x: tensor<5x6xi8>) -> tensor<5x3xi32> {
  %zero = arith.constant 0 : i32
  %w = arith.constant dense<[[1, -2, 3], [4, 5, -6], [7, 8, 9], [-10, 11, 12], [13, -14, 15], [16, 17, -128]]> : tensor<6x3xi8>
  %e = tensor.empty() : tensor<5x3xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<5x3xi32>) -> tensor<5x3xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x6xi8>, tensor<6x3xi8>) outs(%f : tensor<5x3xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<5x3xi32>
  return %y : tensor<5x3xi32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// A signed activation: its bytes get their sign bit flipped in the kernel, and the
// accumulators start at -128 * column sums (-128 * (1 + 3) = -512, -128 * (2 - 4) = 256).
// VNNI-LABEL: func.func @s8_by_s8
// VNNI-DAG: arith.constant dense<[-512, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<16xi32>
// VNNI: call @tilecraft_int8_matmul_4x2x2_s8_t2
// VNNI-LABEL: func.func private @tilecraft_int8_matmul_4x2x2_s8_t2
// VNNI: arith.xori
func.func @s8_by_s8(%x: tensor<4x2xi8>) -> tensor<4x2xi32> {
  %zero = arith.constant 0 : i32
  %w = arith.constant dense<[[1, 2], [3, -4]]> : tensor<2x2xi8>
  %e = tensor.empty() : tensor<4x2xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<4x2xi32>) -> tensor<4x2xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x2xi8>, tensor<2x2xi8>) outs(%f : tensor<4x2xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extsi %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x2xi32>
  return %y : tensor<4x2xi32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// Weights known only at run time: no kernel, even with VNNI.
// VNNI-LABEL: func.func @runtime_weights
// VNNI-NOT: call @tilecraft_int8_matmul
// VNNI: linalg.matmul
func.func @runtime_weights(%x: tensor<4x8xi8>, %w: tensor<8x16xi8>) -> tensor<4x16xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<4x16xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<4x16xi32>) -> tensor<4x16xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xi8>, tensor<8x16xi8>) outs(%f : tensor<4x16xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<4x16xi32>
  return %y : tensor<4x16xi32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#window = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d3, d2 + d4, d5)>
#rows = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>

// A 3x3 convolution of 3 channels (RGB) as im2col + integer matmul: the kernel reads the
// windows in place of the im2col copy on a fourth channel (zero weights), added to the
// input's padding copy (same fill); K = 9 taps x 4 channels.
// VNNI-LABEL: func.func @rgb_window
// VNNI-NOT: linalg.generic
// VNNI: %[[P:.*]] = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 1]
// VNNI: tensor.yield %{{.*}} : i8
// VNNI-NOT: linalg.generic
// VNNI: call @tilecraft_int8_matmul_16x5x36_u8_t2_conv1x6x6x4_k3x3_s1x1_d1x1(%[[P]], {{.*}}) {{.*}}: (tensor<1x6x6x4xi8>, tensor<1x9x64xi8>, tensor<16xi32>) -> tensor<16x5xi32>
// VNNI-LABEL: func.func private @tilecraft_int8_matmul_16x5x36_u8_t2_conv1x6x6x4_k3x3_s1x1_d1x1
// WIDE-LABEL: func.func @rgb_window
// WIDE: linalg.matmul ins({{.*}} : tensor<16x27xi32>, tensor<27x5xi32>)
func.func @rgb_window(%x: tensor<1x4x4x3xi8>) -> tensor<16x5xi32> {
  %fill = arith.constant -128 : i8
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %fill : i8
  } : tensor<1x4x4x3xi8> to tensor<1x6x6x3xi8>
  %ce = tensor.empty() : tensor<1x4x4x3x3x3xi8>
  %copy = linalg.generic {indexing_maps = [#window, #rows], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%padded : tensor<1x6x6x3xi8>) outs(%ce : tensor<1x4x4x3x3x3xi8>) {
  ^bb0(%in: i8, %out: i8):
    linalg.yield %in : i8
  } -> tensor<1x4x4x3x3x3xi8>
  %a = tensor.collapse_shape %copy [[0, 1, 2], [3, 4, 5]] : tensor<1x4x4x3x3x3xi8> into tensor<16x27xi8>
  %zero = arith.constant 0 : i32
  %w = arith.constant dense<3> : tensor<27x5xi8>
  %e = tensor.empty() : tensor<16x5xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<16x5xi32>) -> tensor<16x5xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<16x27xi8>, tensor<27x5xi8>) outs(%f : tensor<16x5xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<16x5xi32>
  return %y : tensor<16x5xi32>
}
