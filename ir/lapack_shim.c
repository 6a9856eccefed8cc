/* The linear-algebra externs' shim: MLIR memref descriptors in, LAPACK out.
 *
 * The compiled module calls these through MLIR's C interface (a pointer to a memref
 * descriptor per memref, scalars by value; pipelines/extern.py). Every matrix operand is a
 * batch of matrices, memref<?x?x?xT> (the importer collapses the leading dims into one),
 * read through its strides: each matrix is copied into a column-major scratch buffer, which
 * is what LAPACK works on, and the results are copied back into the caller's row-major
 * buffers. So one function serves every shape and layout, and LAPACK never sees the
 * caller's memory (it overwrites its inputs).
 *
 * Each routine is generated twice by the ROUTINES macro: `s` (float) and `d` (double).
 * LAPACK(x) is the library's symbol of routine x (scipy-openblas prefixes them, given with
 * -DLAPACK_PREFIX when the shim is built: ir/lapack.py). Character arguments are
 * followed by their hidden Fortran lengths (size_t 1), which the C ABI lets a C-translated
 * LAPACK ignore.
 *
 * `info` outputs are LAPACK's, per matrix: 0 success, > 0 the numerical failure (a zero
 * pivot, a leading minor that is not positive definite, no convergence); the importer turns
 * them into torch's semantics (a run-time check, or the *_ex variants' info result).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef LAPACK_PREFIX
#define LAPACK_PREFIX
#endif
#define CAT_(a, b, c) a##b##c
#define CAT(a, b, c) CAT_(a, b, c)
#define LAPACK(x) CAT(LAPACK_PREFIX, x, _)
/* The shim's own symbols: tilecraft_lapack_sgetrf...; a shim built against another LAPACK
 * gets another prefix, so that two shims loaded in one process never interpose. */
#ifndef ENTRY_PREFIX
#define ENTRY_PREFIX tilecraft_lapack_
#endif
#define ENTRY(p, x) CAT(ENTRY_PREFIX, p, x)

typedef struct { int32_t *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } MemrefI1;
typedef struct { int32_t *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } MemrefI2;

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

#define ROUTINES(T, P)                                                                          \
  typedef struct { T *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } P##Memref1;  \
  typedef struct { T *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } P##Memref2;  \
  typedef struct { T *allocated, *aligned; int64_t offset, sizes[3], strides[3]; } P##Memref3;  \
                                                                                                \
  extern void LAPACK(P##getrf)(const int *m, const int *n, T *a, const int *lda, int *ipiv,     \
                               int *info);                                                      \
  extern void LAPACK(P##getrs)(const char *trans, const int *n, const int *nrhs, const T *a,    \
                               const int *lda, const int *ipiv, T *b, const int *ldb, int *info, \
                               size_t);                                                         \
  extern void LAPACK(P##potrf)(const char *uplo, const int *n, T *a, const int *lda, int *info, \
                               size_t);                                                         \
  extern void LAPACK(P##geqrf)(const int *m, const int *n, T *a, const int *lda, T *tau,        \
                               T *work, const int *lwork, int *info);                           \
  extern void LAPACK(P##orgqr)(const int *m, const int *n, const int *k, T *a, const int *lda,  \
                               const T *tau, T *work, const int *lwork, int *info);             \
  extern void LAPACK(P##syevd)(const char *jobz, const char *uplo, const int *n, T *a,          \
                               const int *lda, T *w, T *work, const int *lwork, int *iwork,     \
                               const int *liwork, int *info, size_t, size_t);                   \
  extern void LAPACK(P##gesdd)(const char *jobz, const int *m, const int *n, T *a,              \
                               const int *lda, T *s, T *u, const int *ldu, T *vt,               \
                               const int *ldvt, T *work, const int *lwork, int *iwork,          \
                               int *info, size_t);                                              \
  extern void LAPACK(P##ormqr)(const char *side, const char *trans, const int *m, const int *n,   \
                               const int *k, const T *a, const int *lda, const T *tau, T *c,    \
                               const int *ldc, T *work, const int *lwork, int *info, size_t,    \
                               size_t);                                                         \
  extern void LAPACK(P##sytrf)(const char *uplo, const int *n, T *a, const int *lda, int *ipiv,  \
                               T *work, const int *lwork, int *info, size_t);                   \
  extern void LAPACK(P##sytrs)(const char *uplo, const int *n, const int *nrhs, const T *a,     \
                               const int *lda, const int *ipiv, T *b, const int *ldb, int *info, \
                               size_t);                                                         \
  extern void LAPACK(P##trsm)(const char *side, const char *uplo, const char *transa,           \
                              const char *diag, const int *m, const int *n, const T *alpha,     \
                              const T *a, const int *lda, T *b, const int *ldb, size_t, size_t, \
                              size_t, size_t);                                                  \
                                                                                                \
  /* Matrix `b` of a batch, rows x cols, into column-major `out` (leading dim rows). */         \
  static void P##load(const P##Memref3 *m, int64_t b, T *out) {                                 \
    int64_t rows = m->sizes[1], cols = m->sizes[2];                                             \
    const T *base = m->aligned + m->offset + b * m->strides[0];                                 \
    for (int64_t j = 0; j < cols; ++j)                                                          \
      for (int64_t i = 0; i < rows; ++i)                                                        \
        out[i + j * rows] = base[i * m->strides[1] + j * m->strides[2]];                        \
  }                                                                                             \
  /* Column-major `in` (leading dim ld) into matrix `b` of a batch; `part` < 0: the lower    \
   * triangle only (zeros above), > 0: the upper triangle only, 0: all of it. */               \
  static void P##store(P##Memref3 *m, int64_t b, const T *in, int64_t ld, int part) {           \
    int64_t rows = m->sizes[1], cols = m->sizes[2];                                             \
    T *base = m->aligned + m->offset + b * m->strides[0];                                       \
    for (int64_t i = 0; i < rows; ++i)                                                          \
      for (int64_t j = 0; j < cols; ++j) {                                                      \
        T v = in[i + j * ld];                                                                   \
        if ((part < 0 && j > i) || (part > 0 && j < i)) v = 0;                                  \
        base[i * m->strides[1] + j * m->strides[2]] = v;                                        \
      }                                                                                         \
  }                                                                                             \
  static T *P##scratch(int64_t count) { return malloc(sizeof(T) * (size_t)(count > 0 ? count : 1)); } \
  static void P##put_info(MemrefI1 *info, int64_t b, int value) {                               \
    info->aligned[info->offset + b * info->strides[0]] = value;                                 \
  }                                                                                             \
                                                                                                \
  /* LU with partial pivoting of each m x n matrix: LU (L below the diagonal, unit diagonal     \
   * implied; U on and above), pivots (1-based, min(m, n) of them), info. */                   \
  void ENTRY(P, getrf)(P##Memref3 *a, P##Memref3 *lu, MemrefI2 *pivots, MemrefI1 *info) { \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = imin(m, n), lda = imax(m, 1);           \
    T *work = P##scratch((int64_t)m * n);                                                       \
    int *ipiv = malloc(sizeof(int) * (size_t)imax(k, 1));                                       \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      int status = 0;                                                                           \
      P##load(a, b, work);                                                                      \
      if (k > 0) LAPACK(P##getrf)(&m, &n, work, &lda, ipiv, &status);                           \
      P##store(lu, b, work, m, 0);                                                              \
      for (int i = 0; i < k; ++i)                                                               \
        pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]] = ipiv[i]; \
      P##put_info(info, b, status);                                                             \
    }                                                                                           \
    free(ipiv);                                                                                 \
    free(work);                                                                                 \
  }                                                                                             \
                                                                                                \
  /* X = A^-1 B (transpose 0) or A^-T B (transpose 1) from getrf's LU and pivots of A. */       \
  void ENTRY(P, getrs)(P##Memref3 *lu, MemrefI2 *pivots, P##Memref3 *rhs, int32_t transpose, \
                                   P##Memref3 *x) {                                             \
    int n = (int)lu->sizes[1], nrhs = (int)rhs->sizes[2], lda = imax(n, 1), status = 0;         \
    T *a = P##scratch((int64_t)n * n), *bx = P##scratch((int64_t)n * nrhs);                     \
    int *ipiv = malloc(sizeof(int) * (size_t)imax(n, 1));                                       \
    const char trans = transpose ? 'T' : 'N';                                                   \
    for (int64_t b = 0; b < lu->sizes[0]; ++b) {                                                \
      P##load(lu, b, a);                                                                        \
      P##load(rhs, b, bx);                                                                      \
      for (int i = 0; i < n; ++i)                                                               \
        ipiv[i] = pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]]; \
      if (n > 0 && nrhs > 0) LAPACK(P##getrs)(&trans, &n, &nrhs, a, &lda, ipiv, bx, &lda, &status, 1); \
      P##store(x, b, bx, n, 0);                                                                 \
    }                                                                                           \
    free(ipiv);                                                                                 \
    free(bx);                                                                                   \
    free(a);                                                                                    \
  }                                                                                             \
                                                                                                \
  /* det, sign and log|det| of each square matrix from its LU and pivots: the product of U's    \
   * diagonal, negated once per row exchange (torch's sign is 0 and log|det| -inf when det 0). */ \
  void ENTRY(P, lu_det)(P##Memref3 *lu, MemrefI2 *pivots, P##Memref1 *det, P##Memref1 *sign, \
                                    P##Memref1 *logabs) {                                       \
    int64_t n = lu->sizes[1];                                                                   \
    for (int64_t b = 0; b < lu->sizes[0]; ++b) {                                                \
      const T *base = lu->aligned + lu->offset + b * lu->strides[0];                            \
      T product = 1, s = 1, log_sum = 0;                                                        \
      for (int64_t i = 0; i < n; ++i) {                                                         \
        T u = base[i * lu->strides[1] + i * lu->strides[2]];                                    \
        int32_t p = pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]]; \
        if (p != i + 1) s = -s;                                                                 \
        if (u < 0) s = -s;                                                                      \
        product *= u;                                                                           \
        log_sum += log(fabs((double)u));                                                        \
      }                                                                                         \
      for (int64_t i = 0; i < n; ++i) /* an exact zero on U's diagonal: det 0 */                \
        if (base[i * lu->strides[1] + i * lu->strides[2]] == 0) s = 0;                          \
      int64_t flips = 0;                                                                        \
      for (int64_t i = 0; i < n; ++i)                                                           \
        flips += pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]] != i + 1; \
      det->aligned[det->offset + b * det->strides[0]] = (flips % 2 ? -product : product);       \
      sign->aligned[sign->offset + b * sign->strides[0]] = s;                                   \
      logabs->aligned[logabs->offset + b * logabs->strides[0]] = s == 0 ? -INFINITY : log_sum;  \
    }                                                                                           \
  }                                                                                             \
                                                                                                \
  /* Cholesky factor of each symmetric matrix (upper 0: A = L L^T from the lower triangle,     \
   * 1: A = U^T U from the upper one), the other triangle zero; info > 0: the leading minor of \
   * that order is not positive definite. */                                                    \
  void ENTRY(P, potrf)(P##Memref3 *a, int32_t upper, P##Memref3 *factor, MemrefI1 *info) { \
    int n = (int)a->sizes[1], lda = imax(n, 1);                                                 \
    const char uplo = upper ? 'U' : 'L';                                                        \
    T *work = P##scratch((int64_t)n * n);                                                       \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      int status = 0;                                                                           \
      P##load(a, b, work);                                                                      \
      if (n > 0) LAPACK(P##potrf)(&uplo, &n, work, &lda, &status, 1);                           \
      P##store(factor, b, work, n, upper ? 1 : -1);                                             \
      P##put_info(info, b, status);                                                             \
    }                                                                                           \
    free(work);                                                                                 \
  }                                                                                             \
                                                                                                \
  /* Householder QR of each m x n matrix: q (m x m when q has m columns: mode 'complete';       \
   * m x k otherwise; no columns: mode 'r') and r (its rows x n, upper triangular). */          \
  void ENTRY(P, qr)(P##Memref3 *a, P##Memref3 *q, P##Memref3 *r) {                  \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = imin(m, n), lda = imax(m, 1);           \
    int qcols = (int)q->sizes[2], status = 0, lwork = -1;                                       \
    int width = imax(n, qcols);                                                                 \
    T *work_a = P##scratch((int64_t)m * width), *tau = P##scratch(k), query = 0;                \
    LAPACK(P##geqrf)(&m, &n, work_a, &lda, tau, &query, &lwork, &status);                       \
    int orgqr_lwork = -1;                                                                       \
    T orgqr_query = 0;                                                                          \
    if (qcols > 0 && m > 0) LAPACK(P##orgqr)(&m, &qcols, &k, work_a, &lda, tau, &orgqr_query, &orgqr_lwork, &status); \
    lwork = imax(imax((int)query, (int)orgqr_query), imax(width, 1));                           \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      P##load(a, b, work_a);                                                                    \
      if (k > 0) LAPACK(P##geqrf)(&m, &n, work_a, &lda, tau, work, &lwork, &status);            \
      P##store(r, b, work_a, m, 1);                                                             \
      if (qcols > 0) {                                                                          \
        if (k > 0) LAPACK(P##orgqr)(&m, &qcols, &k, work_a, &lda, tau, work, &lwork, &status);  \
        else for (int64_t i = 0; i < (int64_t)m * qcols; ++i) work_a[i] = (i % (m + 1)) == 0;   \
        P##store(q, b, work_a, m, 0);                                                           \
      }                                                                                         \
    }                                                                                           \
    free(work);                                                                                 \
    free(tau);                                                                                  \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* Eigenvalues (ascending) and, with vectors, eigenvectors (columns) of each symmetric       \
   * matrix read from its lower (upper 0) or upper triangle; info > 0: no convergence. */       \
  void ENTRY(P, syevd)(P##Memref3 *a, int32_t upper, int32_t vectors, P##Memref2 *w, \
                                   P##Memref3 *v, MemrefI1 *info) {                             \
    int n = (int)a->sizes[1], lda = imax(n, 1), status = 0, lwork = -1, liwork = -1, iquery = 0; \
    const char jobz = vectors ? 'V' : 'N', uplo = upper ? 'U' : 'L';                            \
    T *work_a = P##scratch((int64_t)n * n), *values = P##scratch(n), query = 0;                 \
    if (n > 0) LAPACK(P##syevd)(&jobz, &uplo, &n, work_a, &lda, values, &query, &lwork, &iquery, &liwork, &status, 1, 1); \
    lwork = imax((int)query, 1);                                                                \
    liwork = imax(iquery, 1);                                                                   \
    T *work = P##scratch(lwork);                                                                \
    int *iwork = malloc(sizeof(int) * (size_t)liwork);                                          \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      status = 0;                                                                               \
      P##load(a, b, work_a);                                                                    \
      if (n > 0) LAPACK(P##syevd)(&jobz, &uplo, &n, work_a, &lda, values, work, &lwork, iwork, &liwork, &status, 1, 1); \
      for (int i = 0; i < n; ++i) w->aligned[w->offset + b * w->strides[0] + i * w->strides[1]] = values[i]; \
      if (vectors) P##store(v, b, work_a, n, 0);                                                \
      P##put_info(info, b, status);                                                             \
    }                                                                                           \
    free(iwork);                                                                                \
    free(work);                                                                                 \
    free(values);                                                                               \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* Singular values (descending) and, when u has columns, the singular vectors of each m x n  \
   * matrix by divide and conquer: u m x (m or k), vh (n or k) x n, as u's columns say          \
   * (full_matrices or not); info > 0: no convergence. */                                       \
  void ENTRY(P, gesdd)(P##Memref3 *a, P##Memref2 *s, P##Memref3 *u, P##Memref3 *vh, \
                                   MemrefI1 *info) {                                            \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = imin(m, n), lda = imax(m, 1);           \
    int ucols = (int)u->sizes[2], vrows = (int)vh->sizes[1], status = 0, lwork = -1;            \
    const char jobz = ucols == 0 ? 'N' : (ucols == m && vrows == n && m != n ? 'A' : (ucols == m && vrows == n ? 'A' : 'S')); \
    int ldu = imax(m, 1), ldvt = imax(jobz == 'A' ? n : k, 1);                                  \
    T *work_a = P##scratch((int64_t)m * n), *values = P##scratch(k), query = 0;                 \
    T *uu = P##scratch((int64_t)m * (jobz == 'A' ? m : k)), *vt = P##scratch((int64_t)ldvt * n); \
    int *iwork = malloc(sizeof(int) * (size_t)imax(8 * k, 1));                                  \
    if (k > 0) LAPACK(P##gesdd)(&jobz, &m, &n, work_a, &lda, values, uu, &ldu, vt, &ldvt, &query, &lwork, iwork, &status, 1); \
    lwork = imax((int)query, 1);                                                                \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      status = 0;                                                                               \
      P##load(a, b, work_a);                                                                    \
      if (k > 0) LAPACK(P##gesdd)(&jobz, &m, &n, work_a, &lda, values, uu, &ldu, vt, &ldvt, work, &lwork, iwork, &status, 1); \
      for (int i = 0; i < k; ++i) s->aligned[s->offset + b * s->strides[0] + i * s->strides[1]] = values[i]; \
      if (ucols > 0) {                                                                          \
        P##store(u, b, uu, m, 0);                                                               \
        P##store(vh, b, vt, ldvt, 0);                                                           \
      }                                                                                         \
      P##put_info(info, b, status);                                                             \
    }                                                                                           \
    free(work);                                                                                 \
    free(iwork);                                                                                \
    free(vt);                                                                                   \
    free(uu);                                                                                   \
    free(values);                                                                               \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* X with A X = B (left 1) or X A = B (left 0) for triangular A (upper or lower, unit:      \
   * its diagonal taken as ones); like torch, no check for a zero on the diagonal. */           \
  void ENTRY(P, trsm)(P##Memref3 *a, P##Memref3 *rhs, int32_t upper, int32_t left, \
                                  int32_t unit, P##Memref3 *x) {                                \
    int n = (int)a->sizes[1], m = (int)rhs->sizes[1], cols = (int)rhs->sizes[2];                \
    int lda = imax(n, 1), ldb = imax(m, 1);                                                     \
    const char side = left ? 'L' : 'R', uplo = upper ? 'U' : 'L', trans = 'N', diag = unit ? 'U' : 'N'; \
    const T one = 1;                                                                            \
    T *work_a = P##scratch((int64_t)n * n), *bx = P##scratch((int64_t)m * cols);               \
    for (int64_t b = 0; b < rhs->sizes[0]; ++b) {                                               \
      P##load(a, a->sizes[0] == 1 ? 0 : b, work_a);                                             \
      P##load(rhs, b, bx);                                                                      \
      if (m > 0 && cols > 0) LAPACK(P##trsm)(&side, &uplo, &trans, &diag, &m, &cols, &one, work_a, &lda, bx, &ldb, 1, 1, 1, 1); \
      P##store(x, b, bx, m, 0);                                                                 \
    }                                                                                           \
    free(bx);                                                                                   \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* P, L, U of each LU from getrf: P (m x m) the permutation with A = P L U, L (m x k, unit  \
   * lower), U (k x n, upper). */                                                               \
  void ENTRY(P, lu_unpack)(P##Memref3 *lu, MemrefI2 *pivots, P##Memref3 *p,         \
                                       P##Memref3 *l, P##Memref3 *u) {                          \
    int64_t m = lu->sizes[1], n = lu->sizes[2], k = m < n ? m : n;                              \
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(m > 0 ? m : 1));                          \
    for (int64_t b = 0; b < lu->sizes[0]; ++b) {                                                \
      const T *base = lu->aligned + lu->offset + b * lu->strides[0];                            \
      for (int64_t i = 0; i < m; ++i) perm[i] = i;                                              \
      for (int64_t i = 0; i < k; ++i) { /* row i was exchanged with row pivot-1, in order */    \
        int64_t j = pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]] - 1; \
        if (j >= 0 && j < m) { int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }           \
      }                                                                                         \
      if (p->sizes[1] > 0) {                                                                    \
        T *pb = p->aligned + p->offset + b * p->strides[0];                                     \
        for (int64_t i = 0; i < m; ++i)                                                         \
          for (int64_t j = 0; j < m; ++j) pb[i * p->strides[1] + j * p->strides[2]] = 0;       \
        /* P L U = A: row perm[i] of A is row i of L U, so P[perm[i], i] = 1 */                 \
        for (int64_t i = 0; i < m; ++i) pb[perm[i] * p->strides[1] + i * p->strides[2]] = 1;    \
      }                                                                                         \
      T *lb = l->aligned + l->offset + b * l->strides[0];                                       \
      for (int64_t i = 0; i < l->sizes[1]; ++i)                                                 \
        for (int64_t j = 0; j < l->sizes[2]; ++j)                                               \
          lb[i * l->strides[1] + j * l->strides[2]] =                                           \
              i == j ? 1 : (j < i ? base[i * lu->strides[1] + j * lu->strides[2]] : 0);        \
      T *ub = u->aligned + u->offset + b * u->strides[0];                                       \
      for (int64_t i = 0; i < u->sizes[1]; ++i)                                                 \
        for (int64_t j = 0; j < u->sizes[2]; ++j)                                               \
          ub[i * u->strides[1] + j * u->strides[2]] = j >= i ? base[i * lu->strides[1] + j * lu->strides[2]] : 0; \
    }                                                                                           \
    free(perm);                                                                                 \
  }                                                                                             \
                                                                                                \
  /* LAPACK's QR as it stores it: R on and above the diagonal, the Householder vectors below, \
   * and their scalar factors tau (torch.geqrf). */                                             \
  void ENTRY(P, geqrf)(P##Memref3 *a, P##Memref3 *out, P##Memref2 *taus) {          \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = imin(m, n), lda = imax(m, 1), status = 0, lwork = -1; \
    T *work_a = P##scratch((int64_t)m * n), *tau = P##scratch(k), query = 0;                   \
    if (k > 0) LAPACK(P##geqrf)(&m, &n, work_a, &lda, tau, &query, &lwork, &status);            \
    lwork = imax((int)query, imax(n, 1));                                                       \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      P##load(a, b, work_a);                                                                    \
      if (k > 0) LAPACK(P##geqrf)(&m, &n, work_a, &lda, tau, work, &lwork, &status);            \
      P##store(out, b, work_a, m, 0);                                                           \
      for (int i = 0; i < k; ++i) taus->aligned[taus->offset + b * taus->strides[0] + i * taus->strides[1]] = tau[i]; \
    }                                                                                           \
    free(work);                                                                                 \
    free(tau);                                                                                  \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* The first n columns of the product of the k Householder reflectors stored in each m x n  \
   * matrix and tau (torch.linalg.householder_product; n <= m, k <= n). */                      \
  void ENTRY(P, orgqr)(P##Memref3 *a, P##Memref2 *taus, P##Memref3 *q) {            \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = (int)taus->sizes[1], lda = imax(m, 1);  \
    int status = 0, lwork = -1;                                                                 \
    T *work_a = P##scratch((int64_t)m * n), *tau = P##scratch(k), query = 0;                    \
    if (n > 0) LAPACK(P##orgqr)(&m, &n, &k, work_a, &lda, tau, &query, &lwork, &status);        \
    lwork = imax((int)query, imax(n, 1));                                                       \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      P##load(a, b, work_a);                                                                    \
      for (int i = 0; i < k; ++i) tau[i] = taus->aligned[taus->offset + b * taus->strides[0] + i * taus->strides[1]]; \
      if (n > 0) LAPACK(P##orgqr)(&m, &n, &k, work_a, &lda, tau, work, &lwork, &status);        \
      P##store(q, b, work_a, m, 0);                                                             \
    }                                                                                           \
    free(work);                                                                                 \
    free(tau);                                                                                  \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* Q C, Q^T C (left) or C Q, C Q^T for Q the product of the reflectors in a and tau         \
   * (torch.ormqr). */                                                                          \
  void ENTRY(P, ormqr)(P##Memref3 *a, P##Memref2 *taus, P##Memref3 *c, int32_t left, \
                                   int32_t transpose, P##Memref3 *out) {                        \
    int nq = (int)a->sizes[1], acols = (int)a->sizes[2], k = (int)taus->sizes[1];               \
    int m = (int)c->sizes[1], n = (int)c->sizes[2], lda = imax(nq, 1), ldc = imax(m, 1);        \
    int status = 0, lwork = -1;                                                                 \
    const char side = left ? 'L' : 'R', trans = transpose ? 'T' : 'N';                          \
    T *work_a = P##scratch((int64_t)nq * acols), *tau = P##scratch(k), *work_c = P##scratch((int64_t)m * n), query = 0; \
    if (m > 0 && n > 0) LAPACK(P##ormqr)(&side, &trans, &m, &n, &k, work_a, &lda, tau, work_c, &ldc, &query, &lwork, &status, 1, 1); \
    lwork = imax((int)query, imax(imax(m, n), 1));                                              \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < c->sizes[0]; ++b) {                                                 \
      P##load(a, b, work_a);                                                                    \
      P##load(c, b, work_c);                                                                    \
      for (int i = 0; i < k; ++i) tau[i] = taus->aligned[taus->offset + b * taus->strides[0] + i * taus->strides[1]]; \
      if (m > 0 && n > 0) LAPACK(P##ormqr)(&side, &trans, &m, &n, &k, work_a, &lda, tau, work_c, &ldc, work, &lwork, &status, 1, 1); \
      P##store(out, b, work_c, m, 0);                                                           \
    }                                                                                           \
    free(work);                                                                                 \
    free(work_c);                                                                               \
    free(tau);                                                                                  \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* exp(A) of each square matrix, in double whatever T: scaling and squaring with a degree-18 \
   * Taylor polynomial (the scaled matrix has norm <= 1/2, so the remainder is below 2^-60). */ \
  void ENTRY(P, matrix_exp)(P##Memref3 *a, P##Memref3 *out) {                       \
    int64_t n = a->sizes[1], nn = n * n;                                                        \
    double *x = malloc(sizeof(double) * (size_t)(nn > 0 ? nn : 1) * 4);                         \
    double *term = x + nn, *sum = term + nn, *tmp = sum + nn;                                   \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      const T *base = a->aligned + a->offset + b * a->strides[0];                               \
      double norm = 0;                                                                          \
      for (int64_t i = 0; i < n; ++i) {                                                         \
        double row = 0;                                                                         \
        for (int64_t j = 0; j < n; ++j) {                                                       \
          x[i * n + j] = base[i * a->strides[1] + j * a->strides[2]];                           \
          row += fabs(x[i * n + j]);                                                            \
        }                                                                                       \
        if (row > norm) norm = row;                                                             \
      }                                                                                         \
      int squarings = 0;                                                                        \
      while (norm > 0.5 && squarings < 1000) { norm /= 2; ++squarings; }                       \
      double scale = ldexp(1.0, -squarings);                                                    \
      for (int64_t i = 0; i < nn; ++i) { x[i] *= scale; term[i] = sum[i] = (i % (n + 1)) == 0; } \
      for (int degree = 1; degree <= 18; ++degree) {                                            \
        for (int64_t i = 0; i < n; ++i)                                                         \
          for (int64_t j = 0; j < n; ++j) {                                                     \
            double acc = 0;                                                                     \
            for (int64_t l = 0; l < n; ++l) acc += term[i * n + l] * x[l * n + j];              \
            tmp[i * n + j] = acc / degree;                                                      \
          }                                                                                     \
        for (int64_t i = 0; i < nn; ++i) { term[i] = tmp[i]; sum[i] += tmp[i]; }                \
      }                                                                                         \
      for (int s = 0; s < squarings; ++s) {                                                     \
        for (int64_t i = 0; i < n; ++i)                                                         \
          for (int64_t j = 0; j < n; ++j) {                                                     \
            double acc = 0;                                                                     \
            for (int64_t l = 0; l < n; ++l) acc += sum[i * n + l] * sum[l * n + j];             \
            tmp[i * n + j] = acc;                                                               \
          }                                                                                     \
        memcpy(sum, tmp, sizeof(double) * (size_t)nn);                                          \
      }                                                                                         \
      T *ob = out->aligned + out->offset + b * out->strides[0];                                 \
      for (int64_t i = 0; i < n; ++i)                                                           \
        for (int64_t j = 0; j < n; ++j) ob[i * out->strides[1] + j * out->strides[2]] = (T)sum[i * n + j]; \
    }                                                                                           \
    free(x);                                                                                    \
  }                                                                                             \
                                                                                                \
  /* Moore-Penrose pseudo-inverse of each m x n matrix, as torch.linalg.pinv computes it: from \
   * the SVD (or, hermitian, the eigendecomposition with |eigenvalues|), keeping the values    \
   * above max(atol, rtol * the largest); rtol not given: 0 where atol > 0 is given, else      \
   * eps * max(m, n). */                                                                        \
  void ENTRY(P, pinv)(P##Memref3 *a, P##Memref1 *atols, P##Memref1 *rtols, int32_t hermitian, \
                                  int32_t atol_given, int32_t rtol_given, P##Memref3 *out) {    \
    int m = (int)a->sizes[1], n = (int)a->sizes[2], k = imin(m, n), status = 0, lwork = -1;     \
    int lda = imax(m, 1), ldvt = imax(k, 1), liwork = -1, iquery = 0;                           \
    T *work_a = P##scratch((int64_t)m * n), *values = P##scratch(k), query = 0;                 \
    T *uu = P##scratch((int64_t)m * k), *vt = P##scratch((int64_t)k * n);                        \
    int *iwork = NULL;                                                                          \
    const char jobz = 'S', vec = 'V', low = 'L';                                                \
    if (hermitian) {                                                                            \
      if (n > 0) LAPACK(P##syevd)(&vec, &low, &n, work_a, &lda, values, &query, &lwork, &iquery, &liwork, &status, 1, 1); \
      liwork = imax(iquery, 1);                                                                 \
      iwork = malloc(sizeof(int) * (size_t)liwork);                                             \
    } else {                                                                                    \
      iwork = malloc(sizeof(int) * (size_t)imax(8 * k, 1));                                     \
      if (k > 0) LAPACK(P##gesdd)(&jobz, &m, &n, work_a, &lda, values, uu, &lda, vt, &ldvt, &query, &lwork, iwork, &status, 1); \
    }                                                                                           \
    lwork = imax((int)query, 1);                                                                \
    T *work = P##scratch(lwork);                                                                \
    const T eps = sizeof(T) == 4 ? (T)1.1920928955078125e-07 : (T)2.220446049250313e-16;        \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      T atol = atol_given ? atols->aligned[atols->offset + b * atols->strides[0]] : 0;          \
      T rtol = rtol_given ? rtols->aligned[rtols->offset + b * rtols->strides[0]]               \
                          : (atol_given && atol > 0 ? 0 : eps * (T)imax(m, n));                 \
      P##load(a, b, work_a);                                                                    \
      T *ob = out->aligned + out->offset + b * out->strides[0];                                 \
      for (int64_t i = 0; i < n; ++i)                                                           \
        for (int64_t j = 0; j < m; ++j) ob[i * out->strides[1] + j * out->strides[2]] = 0;     \
      if (k == 0) continue;                                                                     \
      if (hermitian) {                                                                          \
        LAPACK(P##syevd)(&vec, &low, &n, work_a, &lda, values, work, &lwork, iwork, &liwork, &status, 1, 1); \
        T largest = 0;                                                                          \
        for (int i = 0; i < n; ++i) if (fabs((double)values[i]) > largest) largest = (T)fabs((double)values[i]); \
        T tol = atol > rtol * largest ? atol : rtol * largest;                                  \
        for (int l = 0; l < n; ++l) {                                                           \
          if (!(fabs((double)values[l]) > tol)) continue;                                       \
          T inverse = 1 / values[l];                                                            \
          for (int64_t i = 0; i < n; ++i)                                                       \
            for (int64_t j = 0; j < n; ++j)                                                     \
              ob[i * out->strides[1] + j * out->strides[2]] += work_a[i + l * n] * inverse * work_a[j + l * n]; \
        }                                                                                       \
      } else {                                                                                  \
        LAPACK(P##gesdd)(&jobz, &m, &n, work_a, &lda, values, uu, &lda, vt, &ldvt, work, &lwork, iwork, &status, 1); \
        T tol = atol > rtol * values[0] ? atol : rtol * values[0];                              \
        for (int l = 0; l < k; ++l) {  /* pinv = V diag(1/s) U^T */                             \
          if (!(values[l] > tol)) continue;                                                     \
          T inverse = 1 / values[l];                                                            \
          for (int64_t i = 0; i < n; ++i)                                                       \
            for (int64_t j = 0; j < m; ++j)                                                     \
              ob[i * out->strides[1] + j * out->strides[2]] += vt[l + i * ldvt] * inverse * uu[j + l * m]; \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    free(work);                                                                                 \
    free(iwork);                                                                                \
    free(vt);                                                                                   \
    free(uu);                                                                                   \
    free(values);                                                                               \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* Bunch-Kaufman LDL^T of each symmetric matrix from its lower triangle (torch.linalg.     \
   * ldl_factor): L and the 1x1/2x2 blocks of D in the lower triangle (zeros above), LAPACK's  \
   * pivots (negative: a 2x2 block), info > 0: D is singular (the factorization is done). */    \
  void ENTRY(P, sytrf)(P##Memref3 *a, P##Memref3 *ld, MemrefI2 *pivots, MemrefI1 *info) {       \
    int n = (int)a->sizes[1], lda = imax(n, 1), status = 0, lwork = -1;                         \
    const char uplo = 'L';                                                                      \
    T *work_a = P##scratch((int64_t)n * n), query = 0;                                          \
    int *ipiv = malloc(sizeof(int) * (size_t)imax(n, 1));                                       \
    if (n > 0) LAPACK(P##sytrf)(&uplo, &n, work_a, &lda, ipiv, &query, &lwork, &status, 1);     \
    lwork = imax((int)query, 1);                                                                \
    T *work = P##scratch(lwork);                                                                \
    for (int64_t b = 0; b < a->sizes[0]; ++b) {                                                 \
      status = 0;                                                                               \
      P##load(a, b, work_a);                                                                    \
      if (n > 0) LAPACK(P##sytrf)(&uplo, &n, work_a, &lda, ipiv, work, &lwork, &status, 1);     \
      P##store(ld, b, work_a, n, -1);                                                           \
      for (int i = 0; i < n; ++i)                                                               \
        pivots->aligned[pivots->offset + b * pivots->strides[0] + i * pivots->strides[1]] = ipiv[i]; \
      P##put_info(info, b, status);                                                             \
    }                                                                                           \
    free(work);                                                                                 \
    free(ipiv);                                                                                 \
    free(work_a);                                                                               \
  }                                                                                             \
                                                                                                \
  /* X = A^-1 B from sytrf's LD and pivots of A (torch.linalg.ldl_solve). */                   \
  void ENTRY(P, sytrs)(P##Memref3 *ld, MemrefI2 *pivots, P##Memref3 *rhs, P##Memref3 *x) {      \
    int n = (int)ld->sizes[1], nrhs = (int)rhs->sizes[2], lda = imax(n, 1), status = 0;         \
    const char uplo = 'L';                                                                      \
    T *a = P##scratch((int64_t)n * n), *bx = P##scratch((int64_t)n * nrhs);                     \
    int *ipiv = malloc(sizeof(int) * (size_t)imax(n, 1));                                       \
    for (int64_t b = 0; b < rhs->sizes[0]; ++b) {                                               \
      P##load(ld, ld->sizes[0] == 1 ? 0 : b, a);                                                \
      P##load(rhs, b, bx);                                                                      \
      int64_t pb = pivots->sizes[0] == 1 ? 0 : b;                                               \
      for (int i = 0; i < n; ++i)                                                               \
        ipiv[i] = pivots->aligned[pivots->offset + pb * pivots->strides[0] + i * pivots->strides[1]]; \
      if (n > 0 && nrhs > 0) LAPACK(P##sytrs)(&uplo, &n, &nrhs, a, &lda, ipiv, bx, &lda, &status, 1); \
      P##store(x, b, bx, n, 0);                                                                 \
    }                                                                                           \
    free(ipiv);                                                                                 \
    free(bx);                                                                                   \
    free(a);                                                                                    \
  }

ROUTINES(float, s)
ROUTINES(double, d)
