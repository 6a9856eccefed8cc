/* The machine's float32 multiply-add peak: independent vector FMAs on every thread.
 *
 * Why portable C with GCC/Clang vector extensions and not intrinsics: the same source gives
 * AVX-512, AVX2, NEON or SVE code under -march=native, so the figure is the host's whatever
 * its architecture. Twelve accumulators per thread hide the FMA latency (4 cycles) on two
 * issue ports; the loop is unrolled so they stay in registers. The best of five runs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#define ACCUMULATORS 12
/* One native vector register per accumulator (12 + 2 fit every ISA's register file). */
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

struct job {
  long iterations;
  double seconds; /* this thread's CPU time */
  float sink;
};

/* GCC splits 64-byte vectors into two 256-bit halves where it prefers 256-bit code (its
 * default for several AVX-512 CPUs): 24 accumulators, which spill. Ask for whole registers. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("prefer-vector-width=512")))
#endif
static void *spin(void *argument) {
  struct job *job = argument;
  vec acc[ACCUMULATORS], b, c;
  for (int l = 0; l < LANES; l++) {
    b[l] = 1.0000001f;
    c[l] = 1e-7f;
  }
  for (int i = 0; i < ACCUMULATORS; i++)
    for (int l = 0; l < LANES; l++) acc[i][l] = (float)i;
  for (long n = 0; n < job->iterations; n++) {
#pragma GCC unroll 12
    for (int i = 0; i < ACCUMULATORS; i++) acc[i] = acc[i] * b + c;
  }
  for (int i = 0; i < ACCUMULATORS; i++) job->sink += acc[i][0];
  struct timespec used;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &used);
  job->seconds = used.tv_sec + used.tv_nsec * 1e-9;
  return 0;
}

/* GFLOPS (2 per multiply-add) of `threads` threads, each running `iterations` loop trips;
 * 0 when a thread could not be started. Each thread's rate comes from its own CPU time, so
 * other processes sharing the cores slow the measurement down but do not lower the figure:
 * the peak is what the threads retire while they hold a core, as a model's threads do. */
double tilecraft_fma_peak_gflops(int threads, long iterations) {
  enum { MAX_THREADS = 256 };
  pthread_t handles[MAX_THREADS];
  struct job jobs[MAX_THREADS];
  if (threads < 1 || threads > MAX_THREADS || iterations < 1) return 0.0;
  double best = 0.0;
  for (int run = 0; run < 5; run++) {
    int started = 0;
    for (; started < threads; started++) {
      jobs[started].iterations = iterations;
      jobs[started].sink = 0.0f;
      if (pthread_create(&handles[started], 0, spin, &jobs[started]) != 0) break;
    }
    for (int i = 0; i < started; i++) pthread_join(handles[i], 0);
    if (started < threads) return 0.0;
    double gflops = 0.0;
    for (int i = 0; i < threads; i++)
      gflops += (double)iterations * ACCUMULATORS * LANES * 2 / jobs[i].seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  return best;
}
