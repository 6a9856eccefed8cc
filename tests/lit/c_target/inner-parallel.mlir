// tilecraft-c-inner-parallel: the loop over the output's last (contiguous) dimension moves
// innermost, past the reductions, so the C compiler vectorizes a multiply-add over rows;
// generics that read linalg.index, or whose innermost loop already is that one, are kept.
// RUN: tilecraft-opt %s --split-input-file --linalg-generalize-named-ops --tilecraft-c-inner-parallel --convert-linalg-to-loops | FileCheck %s

// CHECK-LABEL: func.func @matmul
// CHECK: scf.for %[[I:.*]] = %c0 to %c4
// CHECK:   scf.for %[[K:.*]] = %c0 to %c3
// CHECK:     scf.for %[[J:.*]] = %c0 to %c5
// CHECK:       memref.load %arg0[%[[I]], %[[K]]]
// CHECK:       memref.load %arg1[%[[K]], %[[J]]]
// CHECK:       memref.load %arg2[%[[I]], %[[J]]]
// CHECK:       memref.store {{.*}}, %arg2[%[[I]], %[[J]]]
func.func @matmul(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  linalg.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @row_sum
// CHECK: scf.for %[[I:.*]] = %c0 to %c4
// CHECK:   scf.for %[[K:.*]] = %c0 to %c6
// CHECK:     memref.load %arg0[%[[I]], %[[K]]]
func.func @row_sum(%x: memref<4x6xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x6xf32>) outs(%y : memref<4xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %s = arith.addf %v, %acc : f32
      linalg.yield %s : f32
  }
  return
}

// -----

// CHECK-LABEL: func.func @uses_index
// CHECK: scf.for %[[I:.*]] = %c0 to %c2
// CHECK:   scf.for %[[J:.*]] = %c0 to %c3
// CHECK:     scf.for %[[K:.*]] = %c0 to %c4
func.func @uses_index(%x: memref<2x4xf32>, %y: memref<2x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x4xf32>) outs(%y : memref<2x3xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %k = linalg.index 2 : index
      %kf = arith.index_cast %k : index to i32
      %f = arith.sitofp %kf : i32 to f32
      %m = arith.mulf %v, %f : f32
      %s = arith.addf %m, %acc : f32
      linalg.yield %s : f32
  }
  return
}

// -----

// An NCHW convolution runs n, f, oh, c, kh, kw, ow: the output row innermost.
// CHECK-LABEL: func.func @conv
// CHECK: scf.for %[[N:.*]] = %c0 to %c1
// CHECK:   scf.for %[[F:.*]] = %c0 to %c4
// CHECK:     scf.for %[[OH:.*]] = %c0 to %c6
// CHECK:       scf.for %[[C:.*]] = %c0 to %c3
// CHECK:         scf.for %[[KH:.*]] = %c0 to %c3
// CHECK:           scf.for %[[KW:.*]] = %c0 to %c3
// CHECK:             scf.for %[[OW:.*]] = %c0 to %c6
// CHECK:               memref.store {{.*}}, %arg2[%[[N]], %[[F]], %[[OH]], %[[OW]]]
func.func @conv(%x: memref<1x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  linalg.conv_2d_nchw_fchw ins(%x, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x6x6xf32>)
  return
}
