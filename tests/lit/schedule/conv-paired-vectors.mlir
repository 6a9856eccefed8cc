// A convolution whose filters make an odd number of vectors, 3 or more (208 = 13 x 16 on
// AVX-512), takes two-vector register tiles with the last channel tile, one vector, peeled
// (schedule/conv_plan.py ``paired_vector_tile``): 7 pixels x 32 channels over the first 192
// filters and 7 x 16 over the last 16, each with its bias and ReLU on its accumulators,
// not 7 x 16 tiles throughout. AVX2 (208 = 26 x 8: two-vector tiles divide it) keeps
// dividing tiles and peels nothing.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=AVX512
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=AVX2

// AVX512-LABEL: func.func @conv_208_filters_14_columns
// AVX512: scf.for %{{.*}} = %c0 to %c192 step %c32
// AVX512: vector.contract {{.*}} : vector<7x4xf32>, vector<4x32xf32> into vector<7x32xf32>
// AVX512: arith.maximumf {{.*}} : vector<7x32xf32>
// AVX512: vector.transfer_write {{.*}} : vector<7x32xf32>, tensor<1x1x7x32xf32>
// AVX512: vector.contract {{.*}} : vector<7x4xf32>, vector<4x16xf32> into vector<7x16xf32>
// AVX512: arith.maximumf {{.*}} : vector<7x16xf32>
// AVX512: vector.transfer_write {{.*}} : vector<7x16xf32>, tensor<1x1x7x16xf32>
// AVX512-NOT: linalg.conv_2d
// AVX512-NOT: linalg.generic
// AVX2-LABEL: func.func @conv_208_filters_14_columns
// AVX2: scf.for %{{.*}} = %c0 to %c208 step %c16
// AVX2-NOT: vector<{{[0-9]+}}x8xf32>, tensor<1x1x{{[0-9]+}}x8xf32>
// AVX2-NOT: linalg.conv_2d
func.func @conv_208_filters_14_columns(%x: tensor<1x3x16x96xf32>, %w: tensor<3x3x96x208xf32>, %b: tensor<208xf32>) -> tensor<1x1x14x208xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x1x14x208xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x1x14x208xf32>) -> tensor<1x1x14x208xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x3x16x96xf32>, tensor<3x3x96x208xf32>) outs(%init : tensor<1x1x14x208xf32>) -> tensor<1x1x14x208xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b : tensor<1x1x14x208xf32>, tensor<208xf32>) outs(%empty : tensor<1x1x14x208xf32>) {
    ^bb0(%a: f32, %bb: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %m = arith.maximumf %t, %zero : f32
      linalg.yield %m : f32
  } -> tensor<1x1x14x208xf32>
  return %o : tensor<1x1x14x208xf32>
}
