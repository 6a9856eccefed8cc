# tensorize: the script annotates the tile op; tilecraft-tensorize, after bufferization,
# replaces it by a call of the intrinsic's extern on the operands' subviews.
# RUN: %PYTHON %s %t.mlir | FileCheck %s
# RUN: tilecraft-opt %t.mlir --one-shot-bufferize="bufferize-function-boundaries" --tilecraft-tensorize | FileCheck %s --check-prefix=CALL

import sys
from pathlib import Path

import tilecraft.scheduling as tc

SOURCE = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
void gemv16(M2 *a, M2 *b, M2 *c) {
  for (int64_t j = 0; j < 16; ++j)
    for (int64_t k = 0; k < 32; ++k)
      c->aligned[c->offset + j * c->strides[1]] += a->aligned[a->offset + k * a->strides[1]] *
          b->aligned[b->offset + k * b->strides[0] + j * b->strides[1]];
}
"""
a, b = tc.placeholder((1, 32), name="a"), tc.placeholder((32, 16), name="b")
r = tc.reduce_axis(32, "k")
tc.register_intrinsic("gemv16", tc.compute((1, 16), lambda i, j: tc.sum(a[i, r] * b[r, j], axis=r)),
                      tc.compile_c(SOURCE, name="gemv16"))

A, B = tc.placeholder((8, 32), name="A"), tc.placeholder((32, 32), name="B")
k = tc.reduce_axis(32, "k")
sch = tc.Schedule(tc.compute((8, 32), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C"))
C = sch.get_block("C")
i, j, k = sch.get_loops(C)
jo, ji = sch.split(j, factor=16)
sch.tensorize(ji, "gemv16")
# CHECK: // sch.tensorize(l5, "gemv16")
# CHECK: %[[T:.+]], %{{.+}}, %{{.+}} = transform.structured.tile_using_for %{{.+}} tile_sizes [1, 16, 0]
# CHECK: %[[N:.+]] = transform.param.constant "gemv16"
# CHECK: transform.annotate %[[T]] "tilecraft.tensorize" = %[[N]]
sch.trace()
Path(sys.argv[1]).write_text(sch.module_text())

# CALL: module attributes {tilecraft.externs = ["gemv16"]}
# CALL: func.func private @gemv16(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
# CALL-LABEL: func.func @main
# CALL-NOT: linalg.generic
# CALL-DAG: memref.subview %arg0[%{{.+}}, 0] [1, 32] [1, 1]
# CALL-DAG: memref.subview %arg1[0, %{{.+}}] [32, 16] [1, 1]
# CALL: func.call @gemv16(%{{.+}}, %{{.+}}, %{{.+}})
# CALL-NOT: linalg.generic
# CALL: return
