/* A stress driver of runtime/async_runtime.c's flat parallel-for without MLIR
 * (tests/test_parallel_for.py builds it plainly, tests/robustness/test_sanitizers.py under
 * ThreadSanitizer). It calls the runtime as code lowered by tilecraft-parallel-for does:
 * tilecraftParallelFor(fn, ctx, iterations) with the context on the caller's stack, inside
 * tilecraftParallelCallBegin / End. Loops of 1-100 iterations, every seventh iteration runs
 * a nested loop of 9, from argv[1] caller threads at once; every iteration must run exactly
 * once. With argv[2] = "fork", a fork()ed child then runs loops too (its pool starts afresh;
 * ThreadSanitizer does not support fork() in a process with threads). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "each_once.h"
#include <unistd.h>
void tilecraftParallelFor(void (*)(void *, int64_t, int64_t), void *, int64_t);
void tilecraftParallelCallBegin(void);
void tilecraftParallelCallEnd(void);
typedef struct { int *done; int depth; } Context;
static void loop(int n, int *done, int depth);
static void body(void *ctx, int64_t begin, int64_t end) {
  Context *c = ctx;
  for (int64_t i = begin; i < end; ++i) {
    __atomic_fetch_add(&c->done[i], 1, __ATOMIC_RELAXED);
    if (c->depth == 0 && i % 7 == 0) {
      int inner[9] = {0};
      loop(9, inner, 1);
      expect_each_once(inner, 9, "nested iteration");
    }
  }
}
static void loop(int n, int *done, int depth) {
  Context c = {done, depth};
  tilecraftParallelFor(body, &c, n);
}
static void run(intptr_t id, int rounds) {
  for (int it = 0; it < rounds; ++it) {
    int n = 1 + (int)((it * 13 + id) % 100);
    int done[100] = {0};
    if (it % 3 == 0) tilecraftParallelCallBegin();
    loop(n, done, 0);
    if (it % 3 == 0) tilecraftParallelCallEnd();
    expect_each_once(done, n, "iteration");
  }
}
static void *caller(void *arg) {
  run((intptr_t)arg, 2000);
  return NULL;
}
int main(int argc, char **argv) {
  int callers = argc > 1 ? atoi(argv[1]) : 1;
  if (callers < 1 || callers > 8) callers = 1;
  pthread_t t[8];
  for (intptr_t i = 0; i < callers; ++i) pthread_create(&t[i], NULL, caller, (void *)i);
  for (int i = 0; i < callers; ++i) pthread_join(t[i], NULL);
  printf("ok: %d callers\n", callers);
  fflush(stdout);
  if (argc < 3 || strcmp(argv[2], "fork") != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    run(0, 200);
    printf("child ok\n");
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
