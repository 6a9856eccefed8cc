// Fusion groups as one loop nest (tilecraft-schedule fuse-groups=1, what opt_level 3 runs):
// the group's last op is tiled with scf.forall and its producers are fused into that loop.
// The schedule reads the partition tilecraft-mark-groups tags (the end of opt_level 3's simplify stage).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s --check-prefix=GROUP
// Untagged IR has no groups: one loop nest per op, as with fuse-groups=0.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s --check-prefix=PEROP
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=0" | FileCheck %s --check-prefix=PEROP
// RUN: not tilecraft-opt %s --split-input-file --tilecraft-schedule="fuse-groups=maybe" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: option fuse-groups must be 0 or 1

// A matmul with its bias + ReLU epilogue: one parallel loop computes a 64x256 tile of the
// product (in registers, 8x32 at a time) and applies the epilogue to it while it is hot.
// GROUP-LABEL: func.func @matmul_bias_relu
// GROUP: {{scf.forall \(}}
// GROUP: vector.contract
// GROUP-NOT: scf.forall
// GROUP: arith.maximumf {{.*}} : vector<
// GROUP: scf.forall.in_parallel
// GROUP-NOT: scf.forall
// GROUP: return
// One loop nest per op: the product is written whole, then read again by the epilogue.
// PEROP-LABEL: func.func @matmul_bias_relu
// PEROP: {{scf.forall \(}}
// PEROP: vector.contract
// PEROP: scf.forall.in_parallel
// PEROP: {{scf.forall \(}}
// PEROP: arith.maximumf {{.*}} : vector<
func.func @matmul_bias_relu(%a: tensor<256x128xf32>, %b: tensor<128x256xf32>, %bias: tensor<256xf32>) -> tensor<256x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x256xf32>) -> tensor<256x256xf32>
  %c = linalg.matmul ins(%a, %b : tensor<256x128xf32>, tensor<128x256xf32>) outs(%init : tensor<256x256xf32>) -> tensor<256x256xf32>
  %out = tensor.empty() : tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : tensor<256x256xf32>, tensor<256xf32>) outs(%out : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

// Negative: the product is also a result of the function, so fusing it into the epilogue's
// loop would compute it twice; each op keeps its own loop nest.
// GROUP-LABEL: func.func @product_used_twice
// GROUP: {{scf.forall \(}}
// GROUP: vector.contract
// GROUP: scf.forall.in_parallel
// GROUP: {{scf.forall \(}}
// GROUP: arith.maximumf
func.func @product_used_twice(%a: tensor<256x128xf32>, %b: tensor<128x256xf32>) -> (tensor<256x256xf32>, tensor<256x256xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x256xf32>) -> tensor<256x256xf32>
  %c = linalg.matmul ins(%a, %b : tensor<256x128xf32>, tensor<128x256xf32>) outs(%init : tensor<256x256xf32>) -> tensor<256x256xf32>
  %out = tensor.empty() : tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<256x256xf32>) outs(%out : tensor<256x256xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %zero : f32
    linalg.yield %m : f32
  } -> tensor<256x256xf32>
  return %c, %r : tensor<256x256xf32>, tensor<256x256xf32>
}

// -----

// Softmax over rows, as the ONNX frontend imports it (keepdims: the row max is 512x1 over
// the input reshaped to 512x1x256, the row sum 512 reshaped to 512x1): max, sum of
// exponentials and the normalization share one loop over row blocks; the slices are moved
// above the reshapes so that the reductions fuse too, each computing only its rows, once
// (the max feeds two ops: fused twice, the copies are merged by CSE).
// GROUP-LABEL: func.func @softmax
// GROUP: {{scf.forall \(}}
// GROUP-NOT: scf.forall
// GROUP: vector.multi_reduction <maximumf>
// GROUP-NOT: {{scf.forall|multi_reduction <maximumf>}}
// GROUP: vector.multi_reduction <add>
// GROUP-NOT: scf.forall
// GROUP: arith.divf {{.*}} : vector<
// GROUP: scf.forall.in_parallel
// GROUP-NOT: scf.forall
// GROUP: return
// PEROP-LABEL: func.func @softmax
// PEROP-COUNT-3: {{scf.forall \(}}
func.func @softmax(%x: tensor<512x256xf32>) -> tensor<512x256xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %x3 = tensor.expand_shape %x [[0, 1], [2]] output_shape [512, 1, 256] : tensor<512x256xf32> into tensor<512x1x256xf32>
  %e1 = tensor.empty() : tensor<512x1xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<512x1xf32>) -> tensor<512x1xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(i, u, j) -> (i, u, j)>, affine_map<(i, u, j) -> (i, u)>],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x3 : tensor<512x1x256xf32>) outs(%f1 : tensor<512x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %v, %acc : f32
    linalg.yield %m : f32
  } -> tensor<512x1xf32>
  %e2 = tensor.empty() : tensor<512xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<512xf32>) -> tensor<512xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : tensor<512x256xf32>, tensor<512x1xf32>) outs(%f2 : tensor<512xf32>) {
  ^bb0(%v: f32, %m: f32, %acc: f32):
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %s = arith.addf %e, %acc : f32
    linalg.yield %s : f32
  } -> tensor<512xf32>
  %sum2 = tensor.expand_shape %sum [[0, 1]] output_shape [512, 1] : tensor<512xf32> into tensor<512x1xf32>
  %e3 = tensor.empty() : tensor<512x256xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %max, %sum2 : tensor<512x256xf32>, tensor<512x1xf32>, tensor<512x1xf32>) outs(%e3 : tensor<512x256xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %q = arith.divf %e, %s : f32
    linalg.yield %q : f32
  } -> tensor<512x256xf32>
  return %y : tensor<512x256xf32>
}

// -----

// A convolution with its zero padding and bias + ReLU epilogue (NHWC, as the layout pass
// leaves ResNet's): the pad stays before the group's loop (at bufferization it becomes the
// buffer its source is written into: pipelines/tensor/pad_destinations.py) and the tasks, split
// by output rows, read it in place; the conv accumulates in vector registers, the
// epilogue follows.
// GROUP-LABEL: func.func @conv_pad_bias_relu
// GROUP: tensor.pad
// GROUP: {{scf.forall \(}}
// GROUP-NOT: scf.forall
// GROUP-NOT: tensor.pad
// GROUP: vector.contract
// GROUP-NOT: scf.forall
// GROUP: arith.maximumf {{.*}} : vector<
// GROUP: scf.forall.in_parallel
// GROUP-NOT: scf.forall
// GROUP: return
// Per op: the pad is a copy of its own before the convolution's loop.
// PEROP-LABEL: func.func @conv_pad_bias_relu
// PEROP: tensor.pad
// PEROP: {{scf.forall \(}}
// PEROP: vector.contract
// PEROP: {{scf.forall \(}}
// PEROP: arith.maximumf
func.func @conv_pad_bias_relu(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>, %bias: tensor<64xf32>) -> tensor<1x56x56x64xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x56x56x64xf32> to tensor<1x58x58x64xf32>
  %empty = tensor.empty() : tensor<1x56x56x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %conv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%padded, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>) outs(%init : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %out = tensor.empty() : tensor<1x56x56x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%conv, %bias : tensor<1x56x56x64xf32>, tensor<64xf32>) outs(%out : tensor<1x56x56x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x56x56x64xf32>
  return %r : tensor<1x56x56x64xf32>
}

// -----

// Softmax as the frontend emits it now: exp(x - max) once, as its own op that the row sum
// and the normalization both read (the fusion barrier keeps it from being recomputed in
// each), and a multiply by 1 / sum hoisted out of the row's vector loop. One loop nest.
// GROUP-LABEL: func.func @softmax_exp_once
// GROUP: {{scf.forall \(}}
// GROUP-NOT: scf.forall
// GROUP: vector.multi_reduction <maximumf>
// GROUP: math.exp {{.*}} : vector<
// GROUP-NOT: math.exp
// GROUP: vector.multi_reduction <add>
// GROUP: arith.divf {{.*}} : vector<
// GROUP-NEXT: scf.for
// GROUP: arith.mulf {{.*}} : vector<
// GROUP: scf.forall.in_parallel
// GROUP-NOT: scf.forall
// GROUP: return
// PEROP-LABEL: func.func @softmax_exp_once
#sm_id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#sm_red4out = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#sm_id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sm_row = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
  func.func @softmax_exp_once(%arg0: tensor<12x128x128xf32>) -> tensor<12x128x128xf32> {
    %cst = arith.constant 1.000000e+00 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %cst_1 = arith.constant 0xFF800000 : f32
    %0 = tensor.empty() : tensor<12x128xf32>
    %1 = tensor.empty() : tensor<12x128xf32>
    %expanded = tensor.expand_shape %0 [[0], [1, 2]] output_shape [12, 128, 1] : tensor<12x128xf32> into tensor<12x128x1xf32>
    %2 = linalg.fill ins(%cst_1 : f32) outs(%expanded : tensor<12x128x1xf32>) -> tensor<12x128x1xf32>
    %expanded_2 = tensor.expand_shape %arg0 [[0], [1, 2], [3]] output_shape [12, 128, 1, 128] : tensor<12x128x128xf32> into tensor<12x128x1x128xf32>
    %3 = linalg.generic {indexing_maps = [#sm_id4, #sm_red4out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded_2 : tensor<12x128x1x128xf32>) outs(%2 : tensor<12x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = arith.maximumf %out, %in : f32
      linalg.yield %10 : f32
    } -> tensor<12x128x1xf32>
    %4 = tensor.empty() : tensor<12x128x128xf32>
    %5 = tensor.empty() : tensor<12x128x128xf32>
    %6 = linalg.generic {indexing_maps = [#sm_id3, #sm_row, #sm_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %3 : tensor<12x128x128xf32>, tensor<12x128x1xf32>) outs(%4 : tensor<12x128x128xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %10 = arith.subf %in, %in_5 : f32
      %11 = math.exp %10 : f32
      linalg.yield %11 : f32
    } -> tensor<12x128x128xf32>
    %expanded_3 = tensor.expand_shape %1 [[0], [1, 2]] output_shape [12, 128, 1] : tensor<12x128xf32> into tensor<12x128x1xf32>
    %7 = linalg.fill ins(%cst_0 : f32) outs(%expanded_3 : tensor<12x128x1xf32>) -> tensor<12x128x1xf32>
    %expanded_4 = tensor.expand_shape %6 [[0], [1, 2], [3]] output_shape [12, 128, 1, 128] : tensor<12x128x128xf32> into tensor<12x128x1x128xf32>
    %8 = linalg.generic {indexing_maps = [#sm_id4, #sm_red4out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded_4 : tensor<12x128x1x128xf32>) outs(%7 : tensor<12x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = arith.addf %out, %in : f32
      linalg.yield %10 : f32
    } -> tensor<12x128x1xf32>
    %9 = linalg.generic {indexing_maps = [#sm_id3, #sm_row, #sm_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %8 : tensor<12x128x128xf32>, tensor<12x128x1xf32>) outs(%5 : tensor<12x128x128xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %10 = arith.divf %cst, %in_5 : f32
      %11 = arith.mulf %in, %10 : f32
      linalg.yield %11 : f32
    } -> tensor<12x128x128xf32>
    return %9 : tensor<12x128x128xf32>
  }
