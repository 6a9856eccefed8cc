// --verify-diagnostics matches expected-error annotations against what MLIR reports.
// RUN: tilecraft-opt %s --split-input-file --verify-diagnostics

func.func @wrong_return(%x: i32) -> i32 {
  // expected-error @below {{'func.return' op has 0 operands, but enclosing function (@wrong_return) returns 1}}
  return
}

// -----

func.func @bad_matmul(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{inferred input/output operand #1 has shape's dimension #0 to be 8, but found 4}}
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
