/* Timers for the profiling variant of a package (profile.so, `tilecraft run --profile`).
 *
 * The profiling pass (pipelines/profiling.py) brackets each top-level kernel of the entry
 * function with tilecraft_profile_begin(id) / tilecraft_profile_end(id); the loader reads
 * the accumulated seconds and call counts back with tilecraft_profile_read. Kernels are
 * entered from the calling thread only (their parallel loops run inside them), so plain
 * arrays suffice.
 *
 * The clock is wall time (CLOCK_MONOTONIC) unless tilecraft_profile_use_thread_clock(1)
 * chose the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the tuner's one-thread
 * measurements use it, because on a shared machine the wall time of a kernel also counts
 * the time its thread waited for a core (runtime/timing.py says when each clock fits).
 */

#include <stdint.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_KERNELS 65536

static double started[MAX_KERNELS];
static double total[MAX_KERNELS];
static int64_t calls[MAX_KERNELS];
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

EXPORT void tilecraft_profile_begin(int64_t id) {
  if (id >= 0 && id < MAX_KERNELS) started[id] = now();
}

EXPORT void tilecraft_profile_end(int64_t id) {
  if (id < 0 || id >= MAX_KERNELS) return;
  total[id] += now() - started[id];
  calls[id] += 1;
}

EXPORT void tilecraft_profile_use_thread_clock(int64_t thread_cpu) {
  clock_id = thread_cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

EXPORT void tilecraft_profile_reset(void) {
  for (int64_t i = 0; i < MAX_KERNELS; ++i) total[i] = 0.0, calls[i] = 0;
}

EXPORT void tilecraft_profile_read(int64_t id, double *seconds, int64_t *count) {
  *seconds = (id >= 0 && id < MAX_KERNELS) ? total[id] : 0.0;
  *count = (id >= 0 && id < MAX_KERNELS) ? calls[id] : 0;
}
