"""Model importers (ONNX, PyTorch) into linalg/tensor/arith/math.

Empty until the frontend issues land: today ``tilecraft.compile`` takes MLIR text or an
``mlir.ir.Module`` in linalg-on-tensors form.
"""
