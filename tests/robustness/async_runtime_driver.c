/* A stress driver of runtime/async_runtime.c without MLIR (tests/robustness/test_sanitizers.py
 * builds it with the runtime under ThreadSanitizer). It calls the runtime as code lowered by
 * async-parallel-for does: a loop of N blocks makes a group of N - 1 tokens, the caller queues
 * [N/2, N), [N/4, N/2), ... (each task splits its range the same way), computes block 0 and
 * awaits the group. Loops of 1-16 blocks, every fifth block runs a nested loop of 7, from
 * argv[1] caller threads at once; every block must run exactly once. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
void mlirAsyncRuntimeAddRef(void *, int64_t);
void mlirAsyncRuntimeDropRef(void *, int64_t);
void *mlirAsyncRuntimeCreateToken(void);
void *mlirAsyncRuntimeCreateGroup(int64_t);
void mlirAsyncRuntimeEmplaceToken(void *);
int64_t mlirAsyncRuntimeAddTokenToGroup(void *, void *);
void mlirAsyncRuntimeAwaitAllInGroup(void *);
bool mlirAsyncRuntimeIsGroupError(void *);
void mlirAsyncRuntimeExecute(void *, void (*)(void *));
typedef struct { void *group, *token; int start, end; int *done; int depth; } Job;
static void loop(int n, int *done, int depth);
static void block(int i, int *done, int depth) {
  __atomic_fetch_add(&done[i], 1, __ATOMIC_RELAXED);
  if (depth == 0 && i % 5 == 0) { int inner[7] = {0}; loop(7, inner, 1); for (int k = 0; k < 7; ++k) if (inner[k] != 1) { fprintf(stderr, "nested block %d ran %d times\n", k, inner[k]); abort(); } }
}
static void dispatch(void *group, int start, int end, int *done, int depth);
static void resume(void *h) { Job *j = h; dispatch(j->group, j->start, j->end, j->done, j->depth); void *t = j->token; free(j); mlirAsyncRuntimeEmplaceToken(t); }
static void dispatch(void *group, int start, int end, int *done, int depth) {
  while (end - start > 1) {
    int mid = start + (end - start) / 2;
    Job *j = malloc(sizeof(Job));
    *j = (Job){group, mlirAsyncRuntimeCreateToken(), mid, end, done, depth};
    void *token = j->token;
    mlirAsyncRuntimeExecute(j, resume);
    mlirAsyncRuntimeAddTokenToGroup(token, group);
    mlirAsyncRuntimeDropRef(token, 1);
    end = mid;
  }
  block(start, done, depth);
}
static void loop(int n, int *done, int depth) {
  if (n == 1) { block(0, done, depth); return; }
  void *group = mlirAsyncRuntimeCreateGroup(n - 1);
  dispatch(group, 0, n, done, depth);
  mlirAsyncRuntimeAwaitAllInGroup(group);
  if (mlirAsyncRuntimeIsGroupError(group)) abort();
  mlirAsyncRuntimeDropRef(group, 1);
}
static void *caller(void *arg) {
  intptr_t id = (intptr_t)arg;
  for (int it = 0; it < 3000; ++it) {
    int n = 1 + (int)((it * 7 + id) % 16);
    int done[16] = {0};
    loop(n, done, 0);
    for (int i = 0; i < n; ++i) if (done[i] != 1) { fprintf(stderr, "block %d of %d ran %d times\n", i, n, done[i]); abort(); }
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
