"""Shared payloads of the tuning tests: small ops, so a worker builds each in about a second."""

import pytest

MATMUL_64 = """
func.func @mm(%a: tensor<64x128xf32>, %b: tensor<128x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<64x128xf32>, tensor<128x64xf32>)
                     outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}
"""


@pytest.fixture
def matmul_64() -> str:
    return MATMUL_64
