// Ops the default schedule must leave alone or treat specially, because MLIR 22 would
// abort the process on them (regressions: each of these once killed the compiler).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=2" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-lower-cpu="num-threads=1" -o /dev/null

// A flipped window (`2 - d1`): tiling asserts on negative coefficients; left untiled.
// CHECK-LABEL: func.func @flip
// CHECK-NOT: scf.for
// CHECK: linalg.generic
func.func @flip(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 2 - d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// A three-input product reduced over two loops: tiled but not vectorized (its
// vector.contract would have two reduction dims, which the LLVM lowering cannot take).
// CHECK-LABEL: func.func @three_way
// CHECK-NOT: vector.contract
// CHECK: linalg.generic
func.func @three_way(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<4x8xf32>, %o: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i,l,j,k) -> (i,j)>, affine_map<(i,l,j,k) -> (j,k)>, affine_map<(i,l,j,k) -> (k,l)>, affine_map<(i,l,j,k) -> (i,l)>], iterator_types = ["parallel","parallel","reduction","reduction"]} ins(%a, %b, %c : tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x8xf32>) outs(%o : tensor<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %n = arith.mulf %m, %z : f32
    %s = arith.addf %acc, %n : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// A zero extent next to a dynamic one: tiling it aborts; nothing to compute anyway.
// CHECK-LABEL: func.func @empty_extent
// CHECK-NOT: scf.forall
// CHECK: linalg.generic
func.func @empty_extent(%x: tensor<?x2x0xf32>) -> tensor<?x2x0xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x2x0xf32>
  %e = tensor.empty(%d) : tensor<?x2x0xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<?x2x0xf32>) outs(%e : tensor<?x2x0xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    linalg.yield %s : f32
  } -> tensor<?x2x0xf32>
  return %r : tensor<?x2x0xf32>
}
