/* A stress driver of runtime/async_runtime.c without MLIR (tests/robustness/test_sanitizers.py
 * builds it with the runtime under ThreadSanitizer). It calls the runtime as code lowered by
 * async-parallel-for does (runtime/async_loop.h: a loop of N blocks makes a group of N - 1
 * tokens, the caller queues [N/2, N), [N/4, N/2), ... (each task splits its range the same
 * way), computes block 0 and awaits the group). Loops of 1-16 blocks, every fifth block runs
 * a nested loop of 7, from argv[1] caller threads at once; every block must run exactly once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../runtime/async_loop.h"
#include "each_once.h"

typedef struct { int *done; int depth; } Loop;
static void loop(int n, int *done, int depth);
static void block(int64_t i, void *context) {
  Loop *at = context;
  __atomic_fetch_add(&at->done[i], 1, __ATOMIC_RELAXED);
  if (at->depth == 0 && i % 5 == 0) {
    int inner[7] = {0};
    loop(7, inner, 1);
    expect_each_once(inner, 7, "nested block");
  }
}
static void loop(int n, int *done, int depth) {
  Loop at = {done, depth};
  if (async_loop_run(n, block, &at)) abort();
}
static void *caller(void *arg) {
  intptr_t id = (intptr_t)arg;
  for (int it = 0; it < 3000; ++it) {
    int n = 1 + (int)((it * 7 + id) % 16);
    int done[16] = {0};
    loop(n, done, 0);
    expect_each_once(done, n, "block");
  }
  return NULL;
}
int main(int argc, char **argv) {
  int callers = argc > 1 ? atoi(argv[1]) : 1;
  pthread_t t[8];
  for (intptr_t i = 0; i < callers; ++i) pthread_create(&t[i], NULL, caller, (void *)i);
  for (int i = 0; i < callers; ++i) pthread_join(t[i], NULL);
  printf("ok: %d callers\n", callers);
  return 0;
}
