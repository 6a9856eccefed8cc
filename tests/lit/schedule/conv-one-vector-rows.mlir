// A convolution whose filters make an odd number of vectors (80 = 5 x 16 on AVX-512) has
// one-vector register tiles only, and such a tile takes up to half the register file as
// accumulators (schedule/conv_plan.py ``one_vector_row_tile``): a 25-pixel row is a 16-pixel
// tile and a peeled 9-pixel one, each with its bias and ReLU on its accumulators, not three
// 8-pixel tiles and a peeled 1-pixel one. AVX2 (80 = 10 x 8: two-vector tiles) keeps 5 x 2
// vectors, 5 whole tiles and nothing peeled.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=AVX512
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=AVX2

// AVX512-LABEL: func.func @conv_80_filters_25_columns
// AVX512: scf.for {{.*}} -> (vector<1x16x16xf32>)
// AVX512: vector.contract {{.*}} : vector<16x4xf32>, vector<4x16xf32> into vector<16x16xf32>
// AVX512: arith.maximumf {{.*}} : vector<16x16xf32>
// AVX512: vector.transfer_write {{.*}} : vector<16x16xf32>, tensor<1x1x16x16xf32>
// AVX512: scf.for {{.*}} -> (vector<1x9x16xf32>)
// AVX512: vector.contract {{.*}} : vector<9x4xf32>, vector<4x16xf32> into vector<9x16xf32>
// AVX512: arith.maximumf {{.*}} : vector<9x16xf32>
// AVX512: vector.transfer_write {{.*}}[%c0, %c0, %c16, %{{.*}}] {{.*}} : vector<9x16xf32>, tensor<1x1x25x80xf32>
// AVX512-NOT: linalg.conv_2d
// AVX512-NOT: linalg.generic
// AVX2-LABEL: func.func @conv_80_filters_25_columns
// AVX2: scf.for %{{.*}} = %c0 to %c25 step %c5
// AVX2: vector.contract {{.*}} into vector<5x16xf32>
// AVX2-NOT: vector.contract
// AVX2-NOT: linalg.conv_2d
func.func @conv_80_filters_25_columns(%x: tensor<1x3x27x8xf32>, %w: tensor<3x3x8x80xf32>, %b: tensor<80xf32>) -> tensor<1x1x25x80xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x1x25x80xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x1x25x80xf32>) -> tensor<1x1x25x80xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x3x27x8xf32>, tensor<3x3x8x80xf32>) outs(%init : tensor<1x1x25x80xf32>) -> tensor<1x1x25x80xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b : tensor<1x1x25x80xf32>, tensor<80xf32>) outs(%empty : tensor<1x1x25x80xf32>) {
    ^bb0(%a: f32, %bb: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %m = arith.maximumf %t, %zero : f32
      linalg.yield %m : f32
  } -> tensor<1x1x25x80xf32>
  return %o : tensor<1x1x25x80xf32>
}
