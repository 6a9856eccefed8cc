"""A toy accelerator for tilecraft, written against its UMA-style backend API.

The accelerator ("toy") has a kernel library of its own, ``libtoy_kernels.so``, compiled
from ``kernels.c`` when this package is installed (see setup.py). It takes two kinds of
regions from a model and leaves the rest to tilecraft:

- **convolutions** (``linalg.conv_2d_nchw_fchw`` and ``_nhwc_hwcf``, f32, static shapes):
  replaced by a call of its library's kernel, with the strides and dilations passed as
  scalars (the "MLIR for the region" answer of ``Backend.lower``: the backend emits the
  constants and the call itself);
- **matmuls** whose M and N are multiples of its 8x32 tile: kept in the compiler but
  scheduled with the accelerator's own transform script (the ``TransformSchedule`` answer).

Installed, the package declares the backend under the ``tilecraft.backends`` entry point,
so ``tilecraft compile model.onnx --offload toy`` and ``tilecraft.compile(model,
offload=["toy"])`` find it without an import.
"""

from __future__ import annotations

from pathlib import Path

from mlir import ir
from mlir.dialects import arith

import tilecraft
from tilecraft.errors import BackendError
from tilecraft.pipelines.tensor.extern import emit_call

LIBRARY = Path(__file__).with_name("libtoy_kernels.so")

# linalg op -> the library's kernel for it.
CONV_KERNELS = {
    "linalg.conv_2d_nchw_fchw": "toy_conv2d_nchw_fchw",
    "linalg.conv_2d_nhwc_hwcf": "toy_conv2d_nhwc_hwcf",
}
_TENSOR4 = "memref<?x?x?x?xf32>"

MATMUL_SCHEDULE = tilecraft.TransformSchedule("""
transform.named_sequence @schedule(%op: !transform.any_op {transform.consumed}) {
  %tile, %loops:2 = transform.structured.tile_using_for %op tile_sizes [8, 32, 0]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  transform.structured.vectorize %tile : !transform.any_op
  transform.yield
}
""")


class ToyAccelerator(tilecraft.Backend):
    """Convolutions to the toy kernel library, matmuls with the toy's own schedule."""

    name = "toy"
    patterns = (*CONV_KERNELS, "linalg.matmul")

    def prepare(self) -> None:
        if not LIBRARY.is_file():
            raise BackendError(f"the toy accelerator's kernel library is missing ({LIBRARY}); "
                               "reinstall tilecraft-toy-accelerator to build it")
        # inputs: activations, filters, accumulator, stride h/w, dilation h/w; output: result
        self.kernels = {
            op_name: tilecraft.extern.register_c(
                symbol, LIBRARY, inputs=[_TENSOR4] * 3 + ["i64"] * 4, outputs=[_TENSOR4])
            for op_name, symbol in CONV_KERNELS.items()}

    def lower(self, op: ir.Operation, module: ir.Operation, num_threads: int):
        f32 = ir.F32Type.get()
        shapes = [ir.RankedTensorType(value.type) for value in op.operands]
        if not all(t.has_static_shape and t.element_type == f32 for t in shapes):
            return None  # the accelerator takes static f32 tensors only
        if op.name == "linalg.matmul":
            rows, columns = shapes[2].shape
            return MATMUL_SCHEDULE if rows % 8 == 0 and columns % 32 == 0 else None
        i64 = ir.IntegerType.get_signless(64)
        strides = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"])]
        dilations = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["dilations"])]
        scalars = [arith.constant(i64, v) for v in (*strides, *dilations)]
        inputs, filters, init = op.operands
        return emit_call(module, self.kernels[op.name], [inputs, filters, init, *scalars],
                         [op.results[0].type])
