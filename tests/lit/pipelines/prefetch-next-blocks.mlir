// tilecraft-prefetch-next-blocks: a vector read of a block-major constant (W[block, ...,
// whole row]) whose block stays fixed in its reduction loops also prefetches the same lines
// of the next block (clamped to the last). When loops between the read and the block loop
// reread the block (pixel rows), the reduction nest is versioned: the copy with prefetches
// runs on their first iteration only, the nest as it was on the others. Blocks read once
// get the prefetches unguarded. Blocks cycled through by an outer loop (pixel tiles of a
// convolution, row tiles of a matmul) are versioned one level up: the first pass over all
// of them prefetches.
// RUN: tilecraft-opt %s --tilecraft-prefetch-next-blocks | FileCheck %s

memref.global "private" constant @filter : memref<4x3x64x32xf32> = dense<1.0>

// CHECK-LABEL: func.func @reread_rows
// CHECK: scf.for %[[BLOCK:.*]] = %c0 to %c4 step %c1
// CHECK: scf.for %[[ROW:.*]] = %c0 to %c7 step %c1
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[ROW]], %c0
// CHECK: scf.if %[[FIRST]] -> (vector<7x32xf32>)
// CHECK: scf.for %[[TAP:.*]] = %c0 to %c3
// CHECK: scf.for %[[IC:.*]] = %c0 to %c64 step %c4
// CHECK: %[[AHEAD:.*]] = arith.addi %[[BLOCK]], %{{.*}} : index
// CHECK: %[[NEXT:.*]] = arith.minui %[[AHEAD]], %{{.*}} : index
// CHECK: memref.prefetch %{{.*}}[%[[NEXT]], %[[TAP]], %[[IC]], %c0], read, locality<2>, data
// CHECK: memref.prefetch %{{.*}}[%[[NEXT]], %[[TAP]], %[[IC]], %{{.*}}], read, locality<2>, data
// CHECK-COUNT-6: memref.prefetch
// CHECK: vector.transfer_read
// CHECK: } else {
// CHECK-NOT: memref.prefetch
// CHECK: vector.transfer_read
// CHECK: return
func.func @reread_rows(%out: memref<4x7x7x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<7x32xf32>
  %w = memref.get_global @filter : memref<4x3x64x32xf32>
  scf.for %b = %c0 to %c4 step %c1 {
    scf.for %row = %c0 to %c7 step %c1 {
      %acc = scf.for %t = %c0 to %c3 step %c1 iter_args(%a0 = %zero) -> (vector<7x32xf32>) {
        %a1 = scf.for %ic = %c0 to %c64 step %c4 iter_args(%a = %a0) -> (vector<7x32xf32>) {
          %f = vector.transfer_read %w[%b, %t, %ic, %c0], %pad {in_bounds = [true, true]} : memref<4x3x64x32xf32>, vector<4x32xf32>
          %row0 = vector.extract %f[0] : vector<32xf32> from vector<4x32xf32>
          %s = vector.broadcast %row0 : vector<32xf32> to vector<7x32xf32>
          %n = arith.addf %a, %s : vector<7x32xf32>
          scf.yield %n : vector<7x32xf32>
        }
        scf.yield %a1 : vector<7x32xf32>
      }
      vector.transfer_write %acc, %out[%b, %row, %c0, %c0] {in_bounds = [true, true]} : vector<7x32xf32>, memref<4x7x7x32xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @read_once
// CHECK-NOT: scf.if
// CHECK: arith.minui
// CHECK-COUNT-8: memref.prefetch
// CHECK: vector.transfer_read
func.func @read_once(%out: memref<4x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %w = memref.get_global @filter : memref<4x3x64x32xf32>
  scf.for %b = %c0 to %c4 step %c1 {
    %acc = scf.for %ic = %c0 to %c64 step %c4 iter_args(%a = %zero) -> (vector<32xf32>) {
      %f = vector.transfer_read %w[%b, %c0, %ic, %c0], %pad {in_bounds = [true, true]} : memref<4x3x64x32xf32>, vector<4x32xf32>
      %row0 = vector.extract %f[0] : vector<32xf32> from vector<4x32xf32>
      %n = arith.addf %a, %row0 : vector<32xf32>
      scf.yield %n : vector<32xf32>
    }
    vector.transfer_write %acc, %out[%b, %c0] {in_bounds = [true]} : vector<32xf32>, memref<4x32xf32>
  }
  return
}

// The blocks are cycled through once per pixel tile: the block loop is versioned on the
// first pixel tile.
// CHECK-LABEL: func.func @cycled_per_pixel
// CHECK: scf.for %[[PX:.*]] = %c0 to %c7 step %c1
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[PX]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: scf.for %[[BLOCK:.*]] = %c0 to %c4 step %c1
// CHECK: %[[AHEAD:.*]] = arith.addi %[[BLOCK]], %{{.*}} : index
// CHECK: arith.minui %[[AHEAD]], %{{.*}} : index
// CHECK-COUNT-8: memref.prefetch
// CHECK: vector.transfer_read
// CHECK: } else {
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @cycled_per_pixel(%out: memref<7x4x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %w = memref.get_global @filter : memref<4x3x64x32xf32>
  scf.for %px = %c0 to %c7 step %c1 {
    scf.for %b = %c0 to %c4 step %c1 {
      %acc = scf.for %ic = %c0 to %c64 step %c4 iter_args(%a = %zero) -> (vector<32xf32>) {
        %f = vector.transfer_read %w[%b, %c0, %ic, %c0], %pad {in_bounds = [true, true]} : memref<4x3x64x32xf32>, vector<4x32xf32>
        %row0 = vector.extract %f[0] : vector<32xf32> from vector<4x32xf32>
        %n = arith.addf %a, %row0 : vector<32xf32>
        scf.yield %n : vector<32xf32>
      }
      vector.transfer_write %acc, %out[%px, %b, %c0] {in_bounds = [true]} : vector<32xf32>, memref<7x4x32xf32>
    }
  }
  return
}

// A matmul's weight panels W[panel, k, column] read one k row at a time, as a vector that
// spans the panel dim too (vector<1x1x32>); each row tile cycles through the task's
// panels. The first row tile prefetches the next panel's row: two lines of 64 bytes.
memref.global "private" constant @panels : memref<4x64x32xf32> = dense<1.0>

// CHECK-LABEL: func.func @matmul_panels
// CHECK: scf.for %[[ROWS:.*]] = %c0 to %c16 step %c8
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[ROWS]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: scf.for %[[PANEL:.*]] = %c0 to %c4 step %c1
// CHECK: scf.for %[[K:.*]] = %c0 to %c64 step %c1
// CHECK: %[[AHEAD:.*]] = arith.addi %[[PANEL]], %{{.*}} : index
// CHECK: %[[NEXT:.*]] = arith.minui %[[AHEAD]], %{{.*}} : index
// CHECK: memref.prefetch %{{.*}}[%[[NEXT]], %[[K]], %c0], read, locality<2>, data
// CHECK: memref.prefetch %{{.*}}[%[[NEXT]], %[[K]], %{{.*}}], read, locality<2>, data
// CHECK-NOT: memref.prefetch
// CHECK: vector.transfer_read
// CHECK: } else {
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @matmul_panels(%a: memref<16x64xf32>, %out: memref<16x4x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<8x1x32xf32>
  %w = memref.get_global @panels : memref<4x64x32xf32>
  scf.for %r = %c0 to %c16 step %c8 {
    scf.for %p = %c0 to %c4 step %c1 {
      %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc0 = %zero) -> (vector<8x1x32xf32>) {
        %b = vector.transfer_read %w[%p, %k, %c0], %pad {in_bounds = [true, true, true]} : memref<4x64x32xf32>, vector<1x1x32xf32>
        %s = vector.broadcast %b : vector<1x1x32xf32> to vector<8x1x32xf32>
        %n = arith.addf %acc0, %s : vector<8x1x32xf32>
        scf.yield %n : vector<8x1x32xf32>
      }
      vector.transfer_write %acc, %out[%r, %p, %c0] {in_bounds = [true, true, true]} : vector<8x1x32xf32>, memref<16x4x32xf32>
    }
  }
  return
}

// A register tile over three 16-column panels reads the same k row of each (vector<3x1x16>,
// the panel loop stepping by 3): the first row tile prefetches that row of the next three
// panels, one line each, each clamped to the last panel.
memref.global "private" constant @panels16 : memref<6x64x16xf32> = dense<1.0>

// CHECK-LABEL: func.func @matmul_three_panels
// CHECK: scf.if
// CHECK: scf.for %[[PANEL:.*]] = %c0 to %c6 step %c3
// CHECK: scf.for %[[K:.*]] = %c0 to %c64 step %c1
// CHECK: %[[A0:.*]] = arith.addi %[[PANEL]], %c3{{.*}} : index
// CHECK: %[[N0:.*]] = arith.minui %[[A0]], %[[LAST:.*]] : index
// CHECK: %[[A1:.*]] = arith.addi %[[PANEL]], %c4{{.*}} : index
// CHECK: %[[N1:.*]] = arith.minui %[[A1]], %[[LAST]] : index
// CHECK: %[[A2:.*]] = arith.addi %[[PANEL]], %c5{{.*}} : index
// CHECK: %[[N2:.*]] = arith.minui %[[A2]], %[[LAST]] : index
// CHECK: memref.prefetch %{{.*}}[%[[N0]], %[[K]], %c0], read, locality<2>, data
// CHECK: memref.prefetch %{{.*}}[%[[N1]], %[[K]], %c0], read, locality<2>, data
// CHECK: memref.prefetch %{{.*}}[%[[N2]], %[[K]], %c0], read, locality<2>, data
// CHECK-NOT: memref.prefetch
// CHECK: vector.transfer_read
// CHECK: } else {
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @matmul_three_panels(%a: memref<16x64xf32>, %out: memref<16x6x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<8x3x16xf32>
  %w = memref.get_global @panels16 : memref<6x64x16xf32>
  scf.for %r = %c0 to %c16 step %c8 {
    scf.for %p = %c0 to %c6 step %c3 {
      %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc0 = %zero) -> (vector<8x3x16xf32>) {
        %b = vector.transfer_read %w[%p, %k, %c0], %pad {in_bounds = [true, true, true]} : memref<6x64x16xf32>, vector<3x1x16xf32>
        %s = vector.shape_cast %b : vector<3x1x16xf32> to vector<3x16xf32>
        %t = vector.broadcast %s : vector<3x16xf32> to vector<8x3x16xf32>
        %n = arith.addf %acc0, %t : vector<8x3x16xf32>
        scf.yield %n : vector<8x3x16xf32>
      }
      vector.transfer_write %acc, %out[%r, %p, %c0] {in_bounds = [true, true, true]} : vector<8x3x16xf32>, memref<16x6x16xf32>
    }
  }
  return
}
