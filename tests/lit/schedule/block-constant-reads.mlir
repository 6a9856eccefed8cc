// tilecraft-block-constant-reads: a constant read only as vector-wide column blocks at offsets
// that are multiples of the block (loop steps, affine offsets of a forall) is stored
// block-major, [column / V][rows][V], and each read takes its block at [column / V, row, 0].
// A read that may straddle two blocks, or any other use of the constant, leaves it alone.
// RUN: tilecraft-opt %s --tilecraft-block-constant-reads | FileCheck %s

// CHECK-LABEL: func.func @aligned
// CHECK: %[[W:.*]] = arith.constant dense<{{\[\[\[}}0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00], [8.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01]], {{\[\[}}4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00], [1.200000e+01, 1.300000e+01, 1.400000e+01, 1.500000e+01]]]> : tensor<2x2x4xf32>
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: %[[BLOCK:.*]] = arith.divui %[[J]], %{{.*}} : index
// CHECK: vector.transfer_read %[[W]][%[[BLOCK]], %{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true, true]} : tensor<2x2x4xf32>, vector<2x4xf32>
// CHECK-NOT: tensor<2x8xf32>, vector

// CHECK-LABEL: func.func @forall_offsets
// CHECK: arith.constant {{.*}} : tensor<2x2x4xf32>
// CHECK: %[[J:[^ ]*]] = affine.apply
// CHECK: arith.divui %[[J]]
// CHECK: vector.transfer_read {{.*}} : tensor<2x2x4xf32>, vector<2x4xf32>

// CHECK-LABEL: func.func @straddles
// CHECK-NOT: tensor<2x2x4xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<2x8xf32>, vector<2x4xf32>

// CHECK-LABEL: func.func @other_use
// CHECK-NOT: tensor<2x2x4xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<2x8xf32>, vector<2x4xf32>
func.func @aligned(%out: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.for %j = %c0 to %c8 step %c4 iter_args(%acc = %out) -> tensor<2x8xf32> {
    %v = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x4xf32>
    %n = vector.transfer_write %v, %acc[%c0, %j] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x8xf32>
    scf.yield %n : tensor<2x8xf32>
  }
  return %r : tensor<2x8xf32>
}
func.func @forall_offsets(%out: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.forall (%i) in (2) shared_outs(%acc = %out) -> tensor<2x8xf32> {
    %j = affine.apply affine_map<(d0) -> (d0 * 4)>(%i)
    %v = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x4xf32>
    %e = tensor.empty() : tensor<2x4xf32>
    %t = vector.transfer_write %v, %e[%c0, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x4xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %acc[0, %j] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x8xf32>
    }
  }
  return %r : tensor<2x8xf32>
}
func.func @straddles(%out: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.for %j = %c0 to %c6 step %c2 iter_args(%acc = %out) -> tensor<2x8xf32> {
    %v = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x4xf32>
    %n = vector.transfer_write %v, %acc[%c0, %j] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x8xf32>
    scf.yield %n : tensor<2x8xf32>
  }
  return %r : tensor<2x8xf32>
}
func.func @other_use(%out: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %w[%c0, %c0], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x4xf32>
  %n = vector.transfer_write %v, %out[%c0, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x8xf32>
  return %n, %w : tensor<2x8xf32>, tensor<2x8xf32>
}

// Blocks need not be powers of two: columns 3k of a 9-column constant, in blocks of 3.
// CHECK-LABEL: func.func @three_wide
// CHECK: arith.constant dense<{{.*}}> : tensor<3x2x3xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<3x2x3xf32>, vector<2x3xf32>
func.func @three_wide(%out: tensor<2x9xf32>) -> tensor<2x9xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0]]> : tensor<2x9xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.forall (%i) in (3) shared_outs(%acc = %out) -> tensor<2x9xf32> {
    %j = affine.apply affine_map<(d0) -> (d0 * 3)>(%i)
    %v = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x9xf32>, vector<2x3xf32>
    %e = tensor.empty() : tensor<2x3xf32>
    %t = vector.transfer_write %v, %e[%c0, %c0] {in_bounds = [true, true]} : vector<2x3xf32>, tensor<2x3xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %acc[0, %j] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x9xf32>
    }
  }
  return %r : tensor<2x9xf32>
}

// A peeled last column tile (schedule/matmul_plan.py, plan_matrix_vector): 4-wide reads at
// 0 and a 2-wide read at the constant 4. The blocks are 4 wide, the last zero-padded, and
// the narrow read takes the first 2 columns of block 1.
// CHECK-LABEL: func.func @peeled_tail
// CHECK: %[[W:.*]] = arith.constant dense<{{\[\[\[}}0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00], [6.000000e+00, 7.000000e+00, 8.000000e+00, 9.000000e+00]], {{\[\[}}4.000000e+00, 5.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+01, 1.100000e+01, 0.000000e+00, 0.000000e+00]]]> : tensor<2x2x4xf32>
// CHECK: vector.transfer_read %[[W]]{{.*}} : tensor<2x2x4xf32>, vector<2x4xf32>
// CHECK: vector.transfer_read %[[W]]{{.*}} : tensor<2x2x4xf32>, vector<2x2xf32>
// CHECK-NOT: tensor<2x6xf32>, vector
func.func @peeled_tail(%out: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]> : tensor<2x6xf32>
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %w[%c0, %c0], %pad {in_bounds = [true, true]} : tensor<2x6xf32>, vector<2x4xf32>
  %n = vector.transfer_write %v, %out[%c0, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x6xf32>
  %t = vector.transfer_read %w[%c0, %c4], %pad {in_bounds = [true, true]} : tensor<2x6xf32>, vector<2x2xf32>
  %r = vector.transfer_write %t, %n[%c0, %c4] {in_bounds = [true, true]} : vector<2x2xf32>, tensor<2x6xf32>
  return %r : tensor<2x6xf32>
}

// A narrower read whose offset is not a constant (each task of a split peels its own tile
// at a loop-dependent place) leaves the constant alone.
// CHECK-LABEL: func.func @narrow_inside_a_loop
// CHECK-NOT: tensor<2x2x4xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<2x8xf32>, vector<2x2xf32>
func.func @narrow_inside_a_loop(%out: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]]> : tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.for %j = %c0 to %c8 step %c4 iter_args(%acc = %out) -> tensor<2x8xf32> {
    %v = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x4xf32>
    %t = vector.transfer_read %w[%c0, %j], %pad {in_bounds = [true, true]} : tensor<2x8xf32>, vector<2x2xf32>
    %s = arith.addf %v, %v : vector<2x4xf32>
    %n = vector.transfer_write %s, %acc[%c0, %j] {in_bounds = [true, true]} : vector<2x4xf32>, tensor<2x8xf32>
    %m = vector.transfer_write %t, %n[%c0, %j] {in_bounds = [true, true]} : vector<2x2xf32>, tensor<2x8xf32>
    scf.yield %m : tensor<2x8xf32>
  }
  return %r : tensor<2x8xf32>
}
