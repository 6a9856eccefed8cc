/* What one parallel loop costs to dispatch, balance and join (issue #43), without a model:
 * microseconds per loop of `blocks` blocks whose body is empty or a tiny fixed amount of
 * work, on the runtime's flat parallel-for (tilecraftParallelFor, inside one call's
 * begin/end, as a model's loops run), on its async path driven as async-parallel-for's code
 * drives it (a group of blocks - 1 tokens, the far half queued recursively, block 0 on the
 * caller), and on OpenMP's fork-join (`#pragma omp parallel for`, libgomp) when built with
 * -fopenmp. CPU time per loop beside the wall time: spinning threads cost CPU.
 *
 *   cc -O2 -fopenmp -pthread benchmarks/parallel_overhead.c runtime/async_runtime.c -o /tmp/overhead
 *   TILECRAFT_NUM_THREADS=2 OMP_NUM_THREADS=2 /tmp/overhead 4 20000
 *
 * argv: blocks per loop (default 4), loops per measurement (default 20000). Prints, for
 * each runtime and body, the median over 7 alternating rounds of wall and CPU microseconds
 * per loop. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../runtime/async_loop.h"

void tilecraftParallelFor(void (*)(void *, int64_t, int64_t), void *, int64_t);
void tilecraftParallelCallBegin(void);
void tilecraftParallelCallEnd(void);

static int work_units; /* 0: empty body; else iterations of a dependent multiply-add chain */
static volatile double sink;

static void body(int64_t block) {
  double x = (double)block;
  for (int i = 0; i < work_units; ++i) x = x * 1.0000001 + 0.5;
  if (x == -1.0) sink = x;
}

/* ---- the flat parallel-for ---- */
static void flat_fn(void *ctx, int64_t begin, int64_t end) {
  (void)ctx;
  for (int64_t b = begin; b < end; ++b) body(b);
}
static void flat_loop(int blocks) { tilecraftParallelFor(flat_fn, NULL, blocks); }

/* ---- the async path, as async-parallel-for drives it (runtime/async_loop.h) ---- */
static void async_block(int64_t block, void *context) {
  (void)context;
  body(block);
}
static void async_loop(int blocks) { async_loop_run(blocks, async_block, NULL); }

#ifdef _OPENMP
static void omp_loop(int blocks) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int b = 0; b < blocks; ++b) body(b);
}
#endif

static double seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { ROUNDS = 7, RUNTIMES = 3 };

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 4;
  int loops = argc > 2 ? atoi(argv[2]) : 20000;
  const char *names[RUNTIMES] = {"flat parallel-for", "async path", "OpenMP (libgomp)"};
  void (*run[RUNTIMES])(int) = {flat_loop, async_loop,
#ifdef _OPENMP
                                omp_loop
#else
                                NULL
#endif
  };
  for (int units = 0; units <= 2000; units += 2000) {
    work_units = units;
    double wall[RUNTIMES][ROUNDS], cpu[RUNTIMES][ROUNDS];
    for (int round = 0; round < ROUNDS; ++round) {
      for (int r = 0; r < RUNTIMES; ++r) {
        if (!run[r]) continue;
        for (int i = 0; i < 100; ++i) run[r](blocks); /* warm: threads started and spinning */
        if (r == 0) tilecraftParallelCallBegin();
        double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < loops; ++i) run[r](blocks);
        wall[r][round] = (seconds(CLOCK_MONOTONIC) - w0) / loops * 1e6;
        cpu[r][round] = (seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) / loops * 1e6;
        if (r == 0) tilecraftParallelCallEnd();
      }
    }
    printf("%d blocks, body %s:\n", blocks, units ? "~2000 dependent FMAs per block" : "empty");
    for (int r = 0; r < RUNTIMES; ++r) {
      if (!run[r]) continue;
      qsort(wall[r], ROUNDS, sizeof(double), compare);
      qsort(cpu[r], ROUNDS, sizeof(double), compare);
      printf("  %-18s wall %7.2f us/loop (min %7.2f, max %7.2f)  CPU %7.2f us/loop\n", names[r],
             wall[r][ROUNDS / 2], wall[r][0], wall[r][ROUNDS - 1], cpu[r][ROUNDS / 2]);
    }
  }
  return 0;
}
