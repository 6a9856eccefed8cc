// The bundled demo model: one dense layer, y = relu(x @ w + b), in linalg on tensors.
// Compile and run it with `make demo` (examples/demo.py), or lower it by hand:
//   tilecraft-opt examples/matmul_bias_relu.mlir --tilecraft-lower-cpu
func.func @dense_relu(%x: tensor<512x512xf32> {tilecraft.name = "x"},
                      %w: tensor<512x512xf32> {tilecraft.name = "w"},
                      %b: tensor<512xf32> {tilecraft.name = "b"}) -> tensor<512x512xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<512x512xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<512x512xf32>) -> tensor<512x512xf32>
  %xw = linalg.matmul ins(%x, %w : tensor<512x512xf32>, tensor<512x512xf32>)
                      outs(%init : tensor<512x512xf32>) -> tensor<512x512xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%xw, %b : tensor<512x512xf32>, tensor<512xf32>) outs(%empty : tensor<512x512xf32>) {
  ^bb0(%acc: f32, %bias: f32, %out: f32):
    %sum = arith.addf %acc, %bias : f32
    %relu = arith.maximumf %sum, %zero : f32
    linalg.yield %relu : f32
  } -> tensor<512x512xf32>
  return %y : tensor<512x512xf32>
}
