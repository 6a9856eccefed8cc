/* The blas backend's shim: MLIR memref descriptors in, cblas_sgemm out.
 *
 * The compiled module calls these through MLIR's C interface (a pointer to a memref
 * descriptor per memref; pipelines/tensor/extern.py), so one function serves every shape and
 * layout: each operand's strides decide whether it is handed to BLAS as stored (row-major),
 * as its transpose (column-major storage), or packed first (neither dimension contiguous).
 * SGEMM and SET_THREADS are the BLAS library's symbols (scipy-openblas prefixes them),
 * given with -D when the shim is built (backends/blas.py).
 *
 * Threads: a call with threads > 1 splits its work itself (a matmul's columns, a batch
 * matmul's batches) over a small pool of its own, and each part calls BLAS on one thread.
 * OpenBLAS's own threads hand work over by spinning several times per call, which on a
 * loaded 2-core machine made a BERT layer 3-20x slower than on one thread; this pool's
 * workers block on a condition variable, so one call costs one wake-up and idle workers
 * take no CPU from the compiled kernels between calls.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

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

typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } Memref1;
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

/* ---- the pool: run(part, parts) for part 0..parts-1, part 0 on the caller's thread ---- */

enum { MAX_PARTS = 64 };
typedef void (*PartFn)(void *arg, int part, int parts);
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;  /* one parallel call at a time */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_start = PTHREAD_COND_INITIALIZER, pool_done = PTHREAD_COND_INITIALIZER;
static PartFn pool_fn;
static void *pool_arg;
static int pool_parts, pool_pending, pool_workers;
static long pool_generation;
/* The generation each worker has seen, set before it starts: a new worker must not take
 * the last (finished) job for a fresh one. */
static long pool_started_at[MAX_PARTS];

static void *pool_worker(void *index_ptr) {
  int part = (int)(intptr_t)index_ptr;
  long seen = pool_started_at[part];
  for (;;) {
    pthread_mutex_lock(&pool_mu);
    while (pool_generation == seen) pthread_cond_wait(&pool_start, &pool_mu);
    seen = pool_generation;
    PartFn fn = pool_fn;
    void *arg = pool_arg;
    int parts = pool_parts;
    pthread_mutex_unlock(&pool_mu);
    if (part >= parts) continue;
    fn(arg, part, parts);
    pthread_mutex_lock(&pool_mu);
    if (--pool_pending == 0) pthread_cond_signal(&pool_done);
    pthread_mutex_unlock(&pool_mu);
  }
  return NULL;
}

/* The threads this process runs with, as the compiled code's runtime counts them
 * (runtime/async_runtime.c): TILECRAFT_NUM_THREADS, else the online cores (read once). A
 * call's `threads` is the compiling target's count, so a package built on a larger machine
 * is capped here instead of oversubscribing the one it runs on. */
static int process_threads(void) {
  static int cores = 0;
  const char *env = getenv("TILECRAFT_NUM_THREADS");
  long count = env ? atol(env) : 0;
  if (count <= 0) {
    if (__atomic_load_n(&cores, __ATOMIC_RELAXED) == 0) {
      long online = sysconf(_SC_NPROCESSORS_ONLN);
      __atomic_store_n(&cores, online < 1 ? 1 : (int)(online > MAX_PARTS ? MAX_PARTS : online), __ATOMIC_RELAXED);
    }
    count = __atomic_load_n(&cores, __ATOMIC_RELAXED);
  }
  return count > MAX_PARTS ? MAX_PARTS : (int)count;
}

/* Run fn over `parts` parts (at most the process's threads); serially when parts <= 1, when
 * another call holds the pool (a second Python thread calling the same model), or when a
 * worker cannot be started. */
static void run_parts(PartFn fn, void *arg, int parts) {
  int threads = process_threads();
  if (parts > threads) parts = threads;
  if (parts <= 1 || pthread_mutex_trylock(&pool_lock) != 0) {
    for (int part = 0; part < parts || part == 0; ++part) fn(arg, part, parts > 1 ? parts : 1);
    return;
  }
  while (pool_workers < parts - 1) {
    pthread_t thread;
    pool_started_at[pool_workers + 1] = pool_generation;
    if (pthread_create(&thread, NULL, pool_worker, (void *)(intptr_t)(pool_workers + 1)) != 0) break;
    pthread_detach(thread);
    ++pool_workers;
  }
  if (pool_workers < parts - 1) parts = pool_workers + 1;
  pthread_mutex_lock(&pool_mu);
  pool_fn = fn;
  pool_arg = arg;
  pool_parts = parts;
  pool_pending = parts - 1;
  ++pool_generation;
  pthread_cond_broadcast(&pool_start);
  pthread_mutex_unlock(&pool_mu);
  fn(arg, 0, parts);
  pthread_mutex_lock(&pool_mu);
  while (pool_pending > 0) pthread_cond_wait(&pool_done, &pool_mu);
  pthread_mutex_unlock(&pool_mu);
  pthread_mutex_unlock(&pool_lock);
}

/* [begin, end) of `part` when `total` units split into `parts`, in multiples of `step`. */
static void part_range(int64_t total, int64_t step, int part, int parts, int64_t *begin, int64_t *end) {
  int64_t units = (total + step - 1) / step;
  *begin = units * part / parts * step;
  *end = units * (part + 1) / parts * step;
  if (*begin > total) *begin = total;
  if (*end > total) *end = total;
}

/* What a GEMM's parts do to their block of C after it: c = clamp(c + bias[j], low, high). */
typedef struct {
  const float *bias; /* NULL: no add */
  int64_t bias_stride;
  float low, high;   /* infinite: no clamp on that side */
} Epilogue;

static const Epilogue NO_EPILOGUE = {NULL, 0, -__builtin_inff(), __builtin_inff()};

static int has_epilogue(const Epilogue *e) {
  return e->bias || e->low > -__builtin_inff() || e->high < __builtin_inff();
}

/* c[m, n] = op(a) @ op(b) for one matrix, then the epilogue; c is row-major with row stride ldc. */
typedef struct {
  Operand a, b;
  float *c;
  int64_t m, n, k, ldc;
  Epilogue epilogue;
} Gemm;

/* The epilogue on columns [begin, end) of c, row by row, in one pass. The comparisons are
 * written so that a NaN stays NaN, as arith.maximumf / minimumf keep it. Built once per
 * instruction set (target_clones, picked at load time by the CPU), since the library is
 * compiled without -march: vectorized at 16 bytes only, the epilogue took longer than the
 * compiled kernel it replaces (ResNet-50 with --offload blas: 99 ms against 90 ms). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PER_ISA __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PER_ISA
#endif
PER_ISA
static void apply_epilogue(const Epilogue *e, float *c, int64_t m, int64_t ldc, int64_t begin, int64_t end) {
  const float low = e->low, high = e->high;
  for (int64_t i = 0; i < m; ++i) {
    float *restrict row = c + i * ldc;
    if (e->bias && e->bias_stride == 1) {
      const float *restrict bias = e->bias;
      for (int64_t j = begin; j < end; ++j) {
        float v = row[j] + bias[j];
        v = v < low ? low : v;
        row[j] = v > high ? high : v;
      }
    } else {
      for (int64_t j = begin; j < end; ++j) {
        float v = row[j] + (e->bias ? e->bias[j * e->bias_stride] : 0.0f);
        v = v < low ? low : v;
        row[j] = v > high ? high : v;
      }
    }
  }
}

/* One part of a GEMM: a block of C's columns (each part reads its share of B, the larger
 * operand of a layer's projections, and all of A). */
static void gemm_part(void *arg, int part, int parts) {
  Gemm *g = (Gemm *)arg;
  int64_t begin, end;
  part_range(g->n, 16, part, parts, &begin, &end);
  if (end <= begin) return;
  const float *b = g->b.trans ? g->b.data + begin * g->b.ld : g->b.data + begin;
  SGEMM(ROW_MAJOR, g->a.trans ? TRANS : NO_TRANS, g->b.trans ? TRANS : NO_TRANS, (int)g->m,
        (int)(end - begin), (int)g->k, 1.0f, g->a.data, g->a.ld, b, g->b.ld, 0.0f, g->c + begin,
        (int)g->ldc);
  if (has_epilogue(&g->epilogue)) apply_epilogue(&g->epilogue, g->c, g->m, g->ldc, begin, end);
}

/* Below this many multiply-adds a GEMM runs on one thread: the wake-up costs more. */
enum { MIN_PARALLEL_MACS = 1 << 18 };

static void gemm(const float *a, int64_t ar, int64_t ac, int64_t ars, int64_t acs, int32_t ta,
                 const float *b, int64_t br, int64_t bc, int64_t brs, int64_t bcs, int32_t tb,
                 float *c, int64_t m, int64_t n, int64_t ldc, const Epilogue *epilogue, int parts) {
  int64_t k = ta ? ar : ac;
  Gemm g = {operand(a, ar, ac, ars, acs, ta), operand(b, br, bc, brs, bcs, tb), c, m, n, k,
            ldc > n ? ldc : (n > 0 ? n : 1), *epilogue};
  if (m * n * k < MIN_PARALLEL_MACS || n < 32) parts = 1;
  run_parts(gemm_part, &g, parts);
  free(g.a.packed);
  free(g.b.packed);
}

void tilecraft_blas_matmul(Memref2 *a, Memref2 *b, int32_t trans_a, int32_t trans_b, int32_t threads,
                           Memref2 *c) {
  set_threads(1);
  int64_t m = c->sizes[0], n = c->sizes[1];
  if (m == 0 || n == 0) return;
  gemm(a->aligned + a->offset, a->sizes[0], a->sizes[1], a->strides[0], a->strides[1], trans_a,
       b->aligned + b->offset, b->sizes[0], b->sizes[1], b->strides[0], b->strides[1], trans_b,
       c->aligned + c->offset, m, n, m == 1 ? n : c->strides[0], &NO_EPILOGUE, threads);
}

/* c = clamp(op(a) @ op(b) + bias[j], low, high); an empty bias adds nothing, infinite bounds
 * clamp nothing (backends/blas.py takes a matmul's bias add and ReLU / Clip this way). */
void tilecraft_blas_matmul_epilogue(Memref2 *a, Memref2 *b, Memref1 *bias, int32_t trans_a, int32_t trans_b,
                                    int32_t threads, float low, float high, Memref2 *c) {
  set_threads(1);
  int64_t m = c->sizes[0], n = c->sizes[1];
  if (m == 0 || n == 0) return;
  Epilogue e = {bias->sizes[0] == n ? bias->aligned + bias->offset : NULL, bias->strides[0], low, high};
  gemm(a->aligned + a->offset, a->sizes[0], a->sizes[1], a->strides[0], a->strides[1], trans_a,
       b->aligned + b->offset, b->sizes[0], b->sizes[1], b->strides[0], b->strides[1], trans_b,
       c->aligned + c->offset, m, n, m == 1 ? n : c->strides[0], &e, threads);
}

typedef struct {
  Memref3 *a, *b, *c;
  int32_t trans_a, trans_b;
} Batch;

/* One part of a batch matmul: a range of its batches (attention's heads), each on one thread. */
static void batch_part(void *arg, int part, int parts) {
  Batch *t = (Batch *)arg;
  Memref3 *a = t->a, *b = t->b, *c = t->c;
  int64_t m = c->sizes[1], n = c->sizes[2], begin, end;
  part_range(c->sizes[0], 1, part, parts, &begin, &end);
  for (int64_t i = begin; i < end; ++i)
    gemm(a->aligned + a->offset + i * a->strides[0], a->sizes[1], a->sizes[2], a->strides[1], a->strides[2],
         t->trans_a, b->aligned + b->offset + i * b->strides[0], b->sizes[1], b->sizes[2], b->strides[1],
         b->strides[2], t->trans_b, c->aligned + c->offset + i * c->strides[0], m, n,
         m == 1 ? n : c->strides[1], &NO_EPILOGUE, 1);
}

void tilecraft_blas_batch_matmul(Memref3 *a, Memref3 *b, int32_t trans_a, int32_t trans_b,
                                 int32_t threads, Memref3 *c) {
  set_threads(1);
  int64_t m = c->sizes[1], n = c->sizes[2];
  if (m == 0 || n == 0) return;
  Batch t = {a, b, c, trans_a, trans_b};
  int64_t k = trans_a ? a->sizes[1] : a->sizes[2];
  int parts = c->sizes[0] * m * n * k < MIN_PARALLEL_MACS ? 1 : threads;
  if (parts > c->sizes[0]) parts = (int)c->sizes[0];
  if (c->sizes[0] == 1 && parts <= 1) {
    gemm(a->aligned + a->offset, a->sizes[1], a->sizes[2], a->strides[1], a->strides[2], trans_a,
         b->aligned + b->offset, b->sizes[1], b->sizes[2], b->strides[1], b->strides[2], trans_b,
         c->aligned + c->offset, m, n, m == 1 ? n : c->strides[1], &NO_EPILOGUE, threads);
    return;
  }
  run_parts(batch_part, &t, parts);
}
