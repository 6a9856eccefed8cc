/* A loop of blocks on runtime/async_runtime.c, called the way code lowered by MLIR's
 * async-parallel-for calls it, for C programs that drive the runtime without MLIR:
 * benchmarks/parallel_overhead.c (what a loop costs) and tests/robustness/async_runtime_driver.c
 * (the runtime under ThreadSanitizer). One copy, so both exercise the same call sequence.
 *
 * A loop of N blocks makes a group of N - 1 tokens; the caller queues [N/2, N) as a task
 * (which splits its range the same way), then [N/4, N/2), ..., runs block 0 itself and
 * awaits the group. Link with runtime/async_runtime.c. Header-only (static functions): each
 * program includes it once. */
#ifndef TILECRAFT_ASYNC_LOOP_H
#define TILECRAFT_ASYNC_LOOP_H

#include <stdbool.h>
#include <stdint.h>
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

/* The body of one block: its index and the loop's context. */
typedef void (*async_loop_block)(int64_t block, void *context);

typedef struct {
  void *group, *token;
  int64_t start, end;
  async_loop_block block;
  void *context;
} AsyncLoopTask;

static void async_loop_dispatch(void *group, int64_t start, int64_t end, async_loop_block block, void *context);

static void async_loop_resume(void *handle) {
  AsyncLoopTask *task = handle;
  async_loop_dispatch(task->group, task->start, task->end, task->block, task->context);
  void *token = task->token;
  free(task);
  mlirAsyncRuntimeEmplaceToken(token);
}

/* Blocks [start, end): the far halves queued as tasks, block `start` run here. */
static void async_loop_dispatch(void *group, int64_t start, int64_t end, async_loop_block block, void *context) {
  while (end - start > 1) {
    int64_t mid = start + (end - start) / 2;
    AsyncLoopTask *task = malloc(sizeof(AsyncLoopTask));
    if (!task) abort();
    *task = (AsyncLoopTask){group, mlirAsyncRuntimeCreateToken(), mid, end, block, context};
    void *token = task->token;
    mlirAsyncRuntimeExecute(task, async_loop_resume);
    mlirAsyncRuntimeAddTokenToGroup(token, group);
    mlirAsyncRuntimeDropRef(token, 1);
    end = mid;
  }
  block(start, context);
}

/* Runs blocks [0, blocks) and returns when all have; true when the group reports an error. */
static bool async_loop_run(int64_t blocks, async_loop_block block, void *context) {
  if (blocks == 1) {
    block(0, context);
    return false;
  }
  void *group = mlirAsyncRuntimeCreateGroup(blocks - 1);
  async_loop_dispatch(group, 0, blocks, block, context);
  mlirAsyncRuntimeAwaitAllInGroup(group);
  bool failed = mlirAsyncRuntimeIsGroupError(group);
  mlirAsyncRuntimeDropRef(group, 1);
  return failed;
}

#endif
