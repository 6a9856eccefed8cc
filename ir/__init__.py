"""Framework-neutral emitters of linalg/tensor/arith/math IR, shared by every frontend.

Each emitter builds at the current insertion point and location and works on tensor
``ir.Value`` s, static or dynamic. The ONNX and PyTorch importers translate their operators'
semantics into calls to these functions, so the project has one matmul, one convolution and
one pooling lowering, not one per frontend.
"""
