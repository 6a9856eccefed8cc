/* The blas backend's shim: MLIR memref descriptors in, cblas_sgemm out.
 *
 * The compiled module calls these through MLIR's C interface (a pointer to a memref
 * descriptor per memref; pipelines/extern.py), so one function serves every shape and
 * layout: each operand's strides decide whether it is handed to BLAS as stored (row-major),
 * as its transpose (column-major storage), or packed first (neither dimension contiguous).
 * SGEMM and SET_THREADS are the BLAS library's symbols (scipy-openblas prefixes them),
 * given with -D when the shim is built (backends/blas.py).
 */
#include <stdint.h>
#include <stdlib.h>

#ifndef SGEMM
#define SGEMM cblas_sgemm
#endif
#ifndef SET_THREADS
#define SET_THREADS openblas_set_num_threads
#endif

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
extern void SGEMM(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
extern void SET_THREADS(int threads);

typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } Memref2;
typedef struct { float *allocated, *aligned; int64_t offset, sizes[3], strides[3]; } Memref3;

typedef struct { const float *data; int trans; int ld; float *packed; } Operand;

/* A stored rows x cols matrix (row stride rs, column stride cs) that the op reads
 * transposed when `trans`, as a BLAS operand. */
static Operand operand(const float *data, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int trans) {
  Operand o = {data, trans, 1, NULL};
  if (cs == 1 || cols == 1) {
    int64_t ld = rows == 1 ? cols : rs;
    o.ld = (int)(ld > cols ? ld : (cols > 0 ? cols : 1));
    if (rows == 1 || rs >= cols) return o;
  } else if (rs == 1 || rows == 1) { /* column-major storage: BLAS sees the transpose */
    o.trans = !trans;
    int64_t ld = cols == 1 ? rows : cs;
    o.ld = (int)(ld > rows ? ld : (rows > 0 ? rows : 1));
    if (cols == 1 || cs >= rows) return o;
  }
  /* Neither dimension contiguous (or overlapping): pack row-major. */
  o.packed = malloc(sizeof(float) * (size_t)(rows * cols > 0 ? rows * cols : 1));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) o.packed[i * cols + j] = data[i * rs + j * cs];
  o.data = o.packed;
  o.trans = trans;
  o.ld = (int)(cols > 0 ? cols : 1);
  return o;
}

static void set_threads(int32_t threads) {
  static int32_t current = 0;
  if (threads > 0 && threads != current) {
    SET_THREADS(threads);
    current = threads;
  }
}

/* c[m, n] = op(a) @ op(b) for one matrix; c is row-major with row stride ldc. */
static void gemm(const float *a, int64_t ar, int64_t ac, int64_t ars, int64_t acs, int32_t ta,
                 const float *b, int64_t br, int64_t bc, int64_t brs, int64_t bcs, int32_t tb,
                 float *c, int64_t m, int64_t n, int64_t ldc) {
  int64_t k = ta ? ar : ac;
  Operand oa = operand(a, ar, ac, ars, acs, ta);
  Operand ob = operand(b, br, bc, brs, bcs, tb);
  SGEMM(ROW_MAJOR, oa.trans ? TRANS : NO_TRANS, ob.trans ? TRANS : NO_TRANS, (int)m, (int)n, (int)k,
        1.0f, oa.data, oa.ld, ob.data, ob.ld, 0.0f, c, (int)(ldc > n ? ldc : (n > 0 ? n : 1)));
  free(oa.packed);
  free(ob.packed);
}

void tilecraft_blas_matmul(Memref2 *a, Memref2 *b, int32_t trans_a, int32_t trans_b, int32_t threads,
                           Memref2 *c) {
  set_threads(threads);
  int64_t m = c->sizes[0], n = c->sizes[1];
  if (m == 0 || n == 0) return;
  gemm(a->aligned + a->offset, a->sizes[0], a->sizes[1], a->strides[0], a->strides[1], trans_a,
       b->aligned + b->offset, b->sizes[0], b->sizes[1], b->strides[0], b->strides[1], trans_b,
       c->aligned + c->offset, m, n, m == 1 ? n : c->strides[0]);
}

void tilecraft_blas_batch_matmul(Memref3 *a, Memref3 *b, int32_t trans_a, int32_t trans_b,
                                 int32_t threads, Memref3 *c) {
  set_threads(threads);
  int64_t m = c->sizes[1], n = c->sizes[2];
  if (m == 0 || n == 0) return;
  for (int64_t i = 0; i < c->sizes[0]; ++i)
    gemm(a->aligned + a->offset + i * a->strides[0], a->sizes[1], a->sizes[2], a->strides[1], a->strides[2],
         trans_a, b->aligned + b->offset + i * b->strides[0], b->sizes[1], b->sizes[2], b->strides[1],
         b->strides[2], trans_b, c->aligned + c->offset + i * c->strides[0], m, n,
         m == 1 ? n : c->strides[1]);
}
