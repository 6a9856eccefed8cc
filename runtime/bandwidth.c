/* The machine's data bandwidth at one working-set size: a streaming scale (b = s * a) on
 * every thread, each over its own pair of buffers.
 *
 * Why: a depthwise or small 1x1 convolution does a few FMAs per byte it moves; its bound is
 * bandwidth x arithmetic intensity, not the FMA peak (runtime/peak.py's roofline). A working
 * set that fits a thread's share of the L2 measures the L2's bandwidth, one of half the L3
 * the L3's, one four times the L3 the memory's. Bytes counted as STREAM counts them: each
 * element read once and written once (8 bytes per float), not the write-allocate reads,
 * which a kernel's stores cause alike. Each thread's rate comes from its own CPU time, as
 * the FMA probe's: other processes on the cores slow the run, not the figure (a stalled
 * thread still holds its core). The best of five runs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct job {
  long floats; /* per buffer */
  long passes;
  double seconds; /* this thread's CPU time in the passes */
  float sink;
  int failed;
};

static double thread_seconds(void) {
  struct timespec used;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &used);
  return used.tv_sec + used.tv_nsec * 1e-9;
}

static void *stream(void *argument) {
  struct job *job = argument;
  float *a = aligned_alloc(64, ((job->floats * sizeof(float) + 63) / 64) * 64);
  float *b = aligned_alloc(64, ((job->floats * sizeof(float) + 63) / 64) * 64);
  if (!a || !b) {
    job->failed = 1;
    free(a);
    free(b);
    return 0;
  }
  /* First touch on this thread: the pages are this thread's (its NUMA node), and warm. */
  for (long i = 0; i < job->floats; i++) a[i] = 1.0f + (float)(i & 7), b[i] = 0.0f;
  double start = thread_seconds();
  for (long pass = 0; pass < job->passes; pass++) {
    const float scale = (pass & 1) ? 0.5f : 2.0f; /* the values stay bounded */
    for (long i = 0; i < job->floats; i++) b[i] = scale * a[i];
    float *swap = a;
    a = b;
    b = swap;
    __asm__ volatile("" ::: "memory"); /* each pass reads what the last one wrote */
  }
  job->seconds = thread_seconds() - start;
  job->sink = a[job->floats / 2];
  free(a);
  free(b);
  return 0;
}

/* GB/s moved (read + written) by `threads` threads, each streaming `bytes_per_thread` (its
 * two buffers together) `passes` times; 0 when a thread or a buffer could not be had. */
double tilecraft_stream_gbs(int threads, long bytes_per_thread, long passes) {
  enum { MAX_THREADS = 256 };
  pthread_t handles[MAX_THREADS];
  struct job jobs[MAX_THREADS];
  long floats = bytes_per_thread / 2 / (long)sizeof(float);
  if (threads < 1 || threads > MAX_THREADS || floats < 16 || passes < 1) return 0.0;
  double best = 0.0;
  for (int run = 0; run < 5; run++) {
    int started = 0;
    for (; started < threads; started++) {
      jobs[started] = (struct job){floats, passes, 0.0, 0.0f, 0};
      if (pthread_create(&handles[started], 0, stream, &jobs[started]) != 0) break;
    }
    for (int i = 0; i < started; i++) pthread_join(handles[i], 0);
    if (started < threads) return 0.0;
    double gbs = 0.0;
    for (int i = 0; i < threads; i++) {
      if (jobs[i].failed || jobs[i].seconds <= 0.0) return 0.0;
      gbs += (double)floats * 2 * sizeof(float) * passes / jobs[i].seconds / 1e9;
    }
    if (gbs > best) best = gbs;
  }
  return best;
}
