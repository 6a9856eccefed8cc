/* The MLIR async runtime ABI (mlirAsyncRuntime*) in plain C with pthreads.
 *
 * Why this file exists: code lowered with async-parallel-for / convert-async-to-llvm calls
 * these functions for its parallel loops. The JIT takes them from MLIR's
 * libmlir_async_runtime.so, but that library needs libLLVM.so (130 MB), so a deployed
 * package cannot carry it. This implementation is compiled into each package's shared
 * library instead: tokens, values and groups with reference counts, awaiters run when they
 * become ready, and a fixed pool of worker threads (TILECRAFT_NUM_THREADS or the number of
 * online CPUs) that runs resumed coroutines. Semantics follow MLIR's reference runtime
 * (mlir/lib/ExecutionEngine/AsyncRuntime.cpp): tokens and values start with two
 * references (the caller's and the producing task's, dropped when emplaced), a group
 * completes when `size` added tokens are ready.
 *
 * The JIT uses this file too (built as a shared library, runtime/parallel_runtime.py), in
 * place of MLIR's libmlir_async_runtime.so, for how it schedules on few cores:
 * - The thread that waits for a parallel loop works while it waits. async-parallel-for
 *   makes the calling thread run the loop's first block and then block in
 *   mlirAsyncRuntimeAwaitAllInGroup; MLIR's runtime adds a pool of one worker per core
 *   beside it, so N + 1 threads computed on N cores (on 2 cores, 4 equal blocks took 2.5
 *   block-times instead of 2: three blocks shared two cores, then one ran alone). Here the
 *   pool has N - 1 workers and a waiting thread runs queued tasks until its group is done.
 * - Idle threads spin a short while (TILECRAFT_SPIN_US, default 100 microseconds) before
 *   sleeping: a model's parallel loops follow one another microseconds apart, and a worker
 *   woken from a condition variable for each of them lost tens of microseconds per loop.
 * - Each thread queues onto a deque of its own and runs its newest task first; an idle
 *   thread steals another's oldest (the pool section says why: locality and fewer cache
 *   lines moved per task).
 */

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Hidden: the model.o linked beside this file calls these; nothing outside the package
 * library may bind to them (nor may the library bind to MLIR's own runtime that a JIT in
 * the same process loaded globally). */
#ifdef TILECRAFT_RUNTIME_EXPORT /* the JIT's build: the engines resolve these from the process */
#define RUNTIME_API __attribute__((visibility("default")))
#else
#define RUNTIME_API __attribute__((visibility("hidden")))
#endif

typedef void (*CoroResume)(void *);

enum { UNAVAILABLE = 0, AVAILABLE = 1, ERROR = 2 };
enum { KIND_TOKEN, KIND_VALUE, KIND_GROUP };

/* A callback run once when an object becomes ready: resume a coroutine, or count a token
 * into a group (then `arg2` is the token). */
typedef struct Awaiter {
  void (*fn)(void *, void *);
  void *arg1;
  void *arg2;
  struct Awaiter *next;
} Awaiter;

typedef struct Object {
  int kind;
  int64_t refs; /* atomic */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  Awaiter *awaiters;
  /* The first awaiter's storage: nearly every token has exactly one (the group its loop
   * counts it into), which then costs no malloc and no free on another thread. */
  Awaiter first_awaiter;
  bool first_awaiter_used;
  /* tokens and values */
  int state;
  void *storage;
  /* groups */
  int64_t pending;
  int64_t errors;
  int64_t rank;
} Object;

static void die(const char *what) {
  fprintf(stderr, "tilecraft async runtime: %s\n", what);
  abort();
}

static Object *new_object(int kind, int64_t refs) {
  Object *object = calloc(1, sizeof(Object));
  if (!object) die("out of memory");
  object->kind = kind;
  object->refs = refs;
  pthread_mutex_init(&object->mu, NULL);
  pthread_cond_init(&object->cv, NULL);
  return object;
}

static void destroy(Object *object) {
  pthread_mutex_destroy(&object->mu);
  pthread_cond_destroy(&object->cv);
  free(object->storage);
  free(object);
}

RUNTIME_API void mlirAsyncRuntimeAddRef(void *ptr, int64_t count) {
  __atomic_fetch_add(&((Object *)ptr)->refs, count, __ATOMIC_RELAXED);
}

RUNTIME_API void mlirAsyncRuntimeDropRef(void *ptr, int64_t count) {
  Object *object = ptr;
  int64_t previous = __atomic_fetch_sub(&object->refs, count, __ATOMIC_ACQ_REL);
  if (previous < count) die("reference count below zero");
  if (previous == count) destroy(object);
}

/* ---- the worker pool ---------------------------------------------------------------- */

/* Tasks live in per-thread deques, work-stealing style: a thread pushes the tasks it queues
 * onto its own deque and takes its own newest first; a thread whose deque is empty steals
 * the oldest task of another. Why, and not one shared FIFO queue: async-parallel-for queues
 * a loop recursively (the caller queues blocks [N/2, N), then [N/4, N/2), ... and computes
 * block 0), so the oldest task is the far half of the loop and the newest the blocks next to
 * the one just computed. With one FIFO the caller, after its first block, popped the far
 * half itself whenever the worker had not yet pulled the queue's lines across (about 0.5 us
 * a line between this VM's cores), and which thread ran which rows changed from loop to
 * loop. With deques the worker steals the far half and splits it on its own deque while the
 * caller walks up from block 0: each thread keeps about the same half of every loop (the
 * rows its previous loop wrote, where the layers split alike), and a push or pop touches
 * only the pushing thread's lines unless a thread steals (docs/performance.md, "The second
 * core": mobilenet_v2's fastest two-thread calls 0.8x round 21's, measured under load). */

typedef struct Task {
  CoroResume resume;
  void *handle;
  struct Task *older, *newer;
} Task;

/* Each shared variable that one thread writes while another reads or writes it has a cache
 * line of its own: they sat on two lines, and the worker's count of its tasks, the caller's
 * count of its own, the queue and the started flag every task reads made each task move the
 * same lines between the cores several times. */
#define OWN_LINE __attribute__((aligned(64)))

typedef struct Deque {
  pthread_mutex_t mu;
  Task *oldest, *newest; /* written under mu; `oldest` is read without it by spinning threads */
} OWN_LINE Deque;

/* Deque 0 belongs to the threads outside the pool (the callers of the model; several may
 * share it), deque i to worker i; past MAX_DEQUES - 1 workers, they share deques in turn. */
enum { MAX_DEQUES = 64 };
static Deque deques[MAX_DEQUES];
static __thread int own_deque; /* 0 outside the pool */

static pthread_mutex_t pool_mu OWN_LINE = PTHREAD_MUTEX_INITIALIZER; /* starting, sleeping */
static pthread_cond_t pool_cv OWN_LINE = PTHREAD_COND_INITIALIZER;
static int64_t sleeping_workers OWN_LINE; /* workers waiting on pool_cv (changed under pool_mu) */
/* Read by every task, written once per process. */
static bool pool_started OWN_LINE; /* this process's workers exist (cleared in a fork()ed child) */
static int64_t pool_threads;        /* threads computing parallel loops: the workers and a waiter */
static int deque_count = 1;         /* deques in use: 1 + workers (at most MAX_DEQUES) */
static int64_t spin_ns = 100 * 1000;

/* Counts for benchmarks/thread_balance.py and the tests (relaxed atomics, a few cycles per
 * task): tasks queued by async.execute (a parallel loop of B blocks queues B - 1: its
 * caller computes the first block itself), tasks run by a pool worker or by a thread that
 * awaits, times a worker found no task within its spin and slept (each costs a wake-up when
 * the next task is queued), and tasks taken from another thread's deque. Why: how evenly
 * the threads share a loop's blocks is read from these, not guessed from the IR. */
static int64_t tasks_queued OWN_LINE;
static int64_t tasks_run_by_workers OWN_LINE;
static int64_t tasks_run_by_waiters OWN_LINE;
static int64_t worker_sleeps OWN_LINE;
static int64_t tasks_stolen OWN_LINE;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spin until `ready(arg)` holds or `spin_ns` pass; whether it held. */
static bool spin_until(bool (*ready)(void *), void *arg) {
  if (ready(arg)) return true;
  if (spin_ns <= 0) return false;
  int64_t deadline = now_ns() + spin_ns;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      cpu_relax();
      if (ready(arg)) return true;
    }
    if (now_ns() >= deadline) return false;
  }
}

static bool queue_nonempty(void *unused) {
  (void)unused;
  int count = __atomic_load_n(&deque_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < count; ++i)
    if (__atomic_load_n(&deques[i].oldest, __ATOMIC_ACQUIRE)) return true;
  return false;
}

static void push_newest(Deque *deque, Task *task) {
  pthread_mutex_lock(&deque->mu);
  task->newer = NULL;
  task->older = deque->newest;
  if (deque->newest) deque->newest->newer = task;
  else __atomic_store_n(&deque->oldest, task, __ATOMIC_RELEASE);
  deque->newest = task;
  pthread_mutex_unlock(&deque->mu);
}

/* Take the newest (own deque) or the oldest (stealing) task of `deque`, or NULL. */
static Task *take(Deque *deque, bool newest) {
  if (!__atomic_load_n(&deque->oldest, __ATOMIC_ACQUIRE)) return NULL;
  pthread_mutex_lock(&deque->mu);
  Task *task = newest ? deque->newest : deque->oldest;
  if (task) {
    Task *older = task->older, *newer = task->newer;
    if (older) older->newer = newer;
    else __atomic_store_n(&deque->oldest, newer, __ATOMIC_RELEASE);
    if (newer) newer->older = older;
    else deque->newest = older;
  }
  pthread_mutex_unlock(&deque->mu);
  return task;
}

/* The calling thread's next task: its own newest, else another deque's oldest; or NULL. */
static Task *try_pop(void) {
  int own = own_deque;
  Task *task = take(&deques[own], true);
  if (task) return task;
  int count = __atomic_load_n(&deque_count, __ATOMIC_ACQUIRE);
  for (int step = 1; step < count; ++step) {
    task = take(&deques[(own + step) % count], false);
    if (task) {
      __atomic_fetch_add(&tasks_stolen, 1, __ATOMIC_RELAXED);
      return task;
    }
  }
  return NULL;
}

static void run_task(Task *task) {
  CoroResume resume = task->resume;
  void *handle = task->handle;
  free(task);
  resume(handle);
}

/* ---- the flat parallel-for ------------------------------------------------------------
 *
 * Code lowered by tilecraft-parallel-for (pipelines/buffer/parallel_for.py) runs a parallel
 * loop as ONE call, tilecraftParallelFor(fn, ctx, iterations): fn(ctx, begin, end) computes
 * iterations [begin, end) of the loop's outlined body. Why, and not async-parallel-for's
 * coroutines: those cost a coroutine frame, a token, a group entry and a malloc per block,
 * queued and awaited one by one, for each of the ~30 loops of a 1-5 ms model call (issue #43).
 *
 * The caller publishes one Job in `current_job` (a stack object: nothing is allocated), the
 * pool's workers join it, and every thread takes blocks from counters until none is left:
 * the blocks are split into one contiguous part per thread, each part's counter on a line
 * of its own, and a thread takes from its own part first (the caller the first, worker w
 * part w), then from the others'. Why parts and not one counter: the threads keep about the
 * same rows of every loop (the rows their previous loop wrote, where the layers split alike,
 * what the per-thread deques of the async path were for), and a thread's counter line moves
 * to the other core only when it steals. The caller then withdraws the job and waits (spins
 * up to TILECRAFT_SPIN_US, then sleeps until woken) until no worker still holds it (each
 * worker announces the job it joins in a hazard slot of its own and checks the job is still
 * published after that, so a worker never touches a job whose caller has returned).
 *
 * One job at a time: a loop that finds another job published (a nested loop inside a block,
 * or another thread calling a model at the same time) runs all its blocks on its own thread.
 * That thread's core is busy either way, and it needs no lock.
 *
 * Between the loops of a model call the workers spin: the generated entry calls
 * tilecraftParallelCallBegin / tilecraftParallelCallEnd (tilecraft-mark-parallel-calls), and
 * a worker with no job spins TILECRAFT_SPIN_US, then, while a call is in progress, on with
 * sched_yield between checks (at most TILECRAFT_CALL_SPIN_US since its last job, default
 * 1000, so a long serial stretch or a call that never ends does not hold a core), then sleeps. A call's begin wakes sleeping
 * workers, so their wake-up overlaps the call's first serial work instead of its first loop. */

typedef void (*BlockFn)(void *, int64_t, int64_t);

/* A contiguous range of blocks and the counter threads take them from. */
typedef struct Part {
  int64_t next; /* atomic: the next block to take (may run past `end`) */
  int64_t end;
} OWN_LINE Part;

enum { MAX_PARTS = 16, MAX_WORKERS = 255 };

typedef struct Job {
  BlockFn fn;
  void *ctx;
  int64_t iterations, grain; /* block b: iterations [b * grain, min((b + 1) * grain, iterations)) */
  int parts;
  Part part[MAX_PARTS];
} Job;

/* Blocks per thread when a loop has more iterations than that: the planner makes a few tasks
 * per thread (schedule/op_schedule.py), which run one block each; a larger loop (one the
 * schedule did not split) is grouped into this many blocks per thread, enough to balance. */
enum { BLOCKS_PER_THREAD = 16 };

static Job *current_job OWN_LINE;          /* the published job, or NULL */
typedef struct Hazard { Job *job; } OWN_LINE Hazard;
static Hazard hazards[MAX_WORKERS + 1];     /* the job worker w (1-based) holds, or NULL */
static __thread int worker_index;          /* 0 outside the pool */
static int64_t calls_in_progress OWN_LINE; /* model calls between their begin and end */
static int64_t calls_begun;                /* model calls begun (wakes sleeping workers) */
/* A caller whose workers still hold its job past spin_ns sleeps on join_cv. */
static pthread_mutex_t join_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t join_cv = PTHREAD_COND_INITIALIZER;
static int64_t join_waiters OWN_LINE;
static int64_t call_spin_ns = 1000 * 1000;

/* Counts (relaxed, once per loop or per thread and loop): see tilecraftParallelForCounts. */
static int64_t loops_published OWN_LINE;
static int64_t loops_serial OWN_LINE;
static int64_t blocks_by_callers OWN_LINE;
static int64_t blocks_by_workers OWN_LINE;
static int64_t loops_joined OWN_LINE;

/* Run blocks of `job` until none is left, own part (`home`) first; how many ran. */
static int64_t run_blocks(Job *job, int home) {
  int64_t ran = 0;
  for (int k = 0; k < job->parts; ++k) {
    Part *part = &job->part[(home + k) % job->parts];
    while (__atomic_load_n(&part->next, __ATOMIC_RELAXED) < part->end) {
      int64_t block = __atomic_fetch_add(&part->next, 1, __ATOMIC_RELAXED);
      if (block >= part->end) break;
      int64_t begin = block * job->grain;
      int64_t end = begin + job->grain < job->iterations ? begin + job->grain : job->iterations;
      job->fn(job->ctx, begin, end);
      ++ran;
    }
  }
  return ran;
}

/* A worker joins the published job, if any, and runs blocks of it; whether it found one. */
static bool join_job(void) {
  Job *job = __atomic_load_n(&current_job, __ATOMIC_ACQUIRE);
  if (!job) return false;
  Hazard *hazard = &hazards[worker_index];
  __atomic_store_n(&hazard->job, job, __ATOMIC_SEQ_CST);
  /* Pairs with the caller's withdrawal: either this load sees the job withdrawn, or the
   * caller sees the hazard and waits. Only after it may the job's fields be read. */
  if (__atomic_load_n(&current_job, __ATOMIC_SEQ_CST) == job) {
    int64_t ran = run_blocks(job, worker_index % job->parts);
    if (ran) {
      __atomic_fetch_add(&blocks_by_workers, ran, __ATOMIC_RELAXED);
      __atomic_fetch_add(&loops_joined, 1, __ATOMIC_RELAXED);
    }
  }
  __atomic_store_n(&hazard->job, NULL, __ATOMIC_SEQ_CST);
  /* Pairs with wait_for_workers: either the caller sees the hazard cleared, or this thread
   * sees it waiting and wakes it (under join_mu, so not before it waits). */
  if (__atomic_load_n(&join_waiters, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock(&join_mu);
    pthread_cond_broadcast(&join_cv);
    pthread_mutex_unlock(&join_mu);
  }
  return true;
}

static bool job_published(void) { return __atomic_load_n(&current_job, __ATOMIC_RELAXED) != NULL; }

static void wake_sleepers(void) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* pairs with next_work's, see there */
  if (__atomic_load_n(&sleeping_workers, __ATOMIC_RELAXED) > 0) {
    pthread_mutex_lock(&pool_mu);
    pthread_cond_broadcast(&pool_cv);
    pthread_mutex_unlock(&pool_mu);
  }
}

/* A worker's next piece of work: a queued task (returned) or a published job (run here,
 * then NULL is returned). Spins while a model call is in progress (up to call_spin_ns) or
 * up to spin_ns, then sleeps until a task is queued, a job published or a call begins. Why
 * the spin goes on after a lost race: a worker that saw a task but lost it to another
 * thread used to go straight to sleep, and stayed asleep until the next task was queued. */
static Task *next_work(void) {
  int64_t start = now_ns();
  for (;;) {
    if (join_job()) return NULL;
    Task *task = try_pop();
    if (task) return task;
    for (int i = 0; i < 64 && !job_published() && !queue_nonempty(NULL); ++i) cpu_relax();
    int64_t waited = now_ns() - start;
    if (waited < spin_ns) continue;
    if (waited < call_spin_ns && __atomic_load_n(&calls_in_progress, __ATOMIC_RELAXED) > 0) {
      /* Past spin_ns, spin politely: on a loaded machine the caller may be waiting for
       * this very core (a worker that spun without yielding held it from the call it
       * waited for). On an idle core sched_yield returns at once. */
      sched_yield();
      continue;
    }
    break;
  }
  pthread_mutex_lock(&pool_mu);
  __atomic_fetch_add(&worker_sleeps, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&sleeping_workers, sleeping_workers + 1, __ATOMIC_SEQ_CST);
  /* The fence pairs with wake_sleepers': either this thread sees the pushed task, the
   * published job or the begun call, or the other thread sees a sleeper and broadcasts
   * (under pool_mu, so not before this thread waits). A call that begins wakes the workers
   * once: they then spin for it, and sleep again only after call_spin_ns without a job. */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  int64_t began = __atomic_load_n(&calls_begun, __ATOMIC_SEQ_CST);
  Task *task = NULL;
  while (!job_published() && !(task = try_pop()) &&
         !(__atomic_load_n(&calls_begun, __ATOMIC_SEQ_CST) != began))
    pthread_cond_wait(&pool_cv, &pool_mu);
  __atomic_store_n(&sleeping_workers, sleeping_workers - 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&pool_mu);
  return task;
}

static void *worker(void *arg) {
  worker_index = (int)(intptr_t)arg;
  own_deque = 1 + (worker_index - 1) % (MAX_DEQUES - 1);
  for (;;) {
    Task *task = next_work();
    if (!task) continue;
    __atomic_fetch_add(&tasks_run_by_workers, 1, __ATOMIC_RELAXED);
    run_task(task);
  }
  return NULL;
}

static void reset_deques(void) {
  for (int i = 0; i < MAX_DEQUES; ++i) {
    pthread_mutex_init(&deques[i].mu, NULL);
    deques[i].oldest = deques[i].newest = NULL;
  }
}

/* fork(): hold the pool lock across it, so the child's copy is consistent and unlocked. */
static void before_fork(void) { pthread_mutex_lock(&pool_mu); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&pool_mu); }
static void after_fork_in_child(void) {
  /* Start the locks and the condition afresh: the copy of pool_cv still counts the parent's
   * waiting workers, which do not exist here, and a signal consumed by such a phantom
   * waiter left the child's own worker asleep (its second parallel loop hung). A deque's
   * lock may have been held by one of the parent's threads at the fork. */
  pthread_mutex_unlock(&pool_mu);
  pthread_mutex_init(&pool_mu, NULL);
  pthread_cond_init(&pool_cv, NULL);
  reset_deques(); /* the parent's tasks: its workers run them */
  sleeping_workers = 0;
  deque_count = 1;
  current_job = NULL; /* a job of the parent's (only a block's fn could fork inside one) */
  memset(hazards, 0, sizeof hazards);
  pthread_mutex_init(&join_mu, NULL);
  pthread_cond_init(&join_cv, NULL);
  join_waiters = 0;
  calls_in_progress = 0; /* the parent's other threads' calls */
  worker_index = 0;
  own_deque = 0;         /* the forking thread may have been a worker */
  pool_started = false;  /* the parent's workers: none of them is here */
}
__attribute__((constructor)) static void register_fork_handlers(void) {
  reset_deques();
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* Start the workers once per process. Why per process: a fork()ed child (a tuner's or a
 * test's worker) inherits the started flag and the queue but none of the threads, and its
 * first parallel loop waited forever. The queue was the parent's; the child starts afresh
 * (after_fork_in_child clears the flag). Why a flag and not the pid it used to compare:
 * getpid() is a system call in current glibc, and this runs for every task and every wait. */
static void ensure_pool(void) {
  if (__atomic_load_n(&pool_started, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&pool_mu);
  if (pool_started) {
    pthread_mutex_unlock(&pool_mu);
    return;
  }
  long threads = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = getenv("TILECRAFT_NUM_THREADS");
  if (env && atol(env) > 0) threads = atol(env);
  if (threads < 1) threads = 1;
  pool_threads = threads;
  const char *spin = getenv("TILECRAFT_SPIN_US");
  if (spin && *spin) spin_ns = atol(spin) > 0 ? atol(spin) * 1000 : 0;
  const char *call_spin = getenv("TILECRAFT_CALL_SPIN_US");
  if (call_spin && *call_spin) call_spin_ns = atol(call_spin) > 0 ? atol(call_spin) * 1000 : 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* One thread fewer than the loop's threads: the thread that awaits the loop is the last
   * (wait_ready runs queued tasks). At least one, so that tasks whose continuation nobody
   * awaits with a blocking call still run. */
  long workers = threads > 1 ? threads - 1 : 1;
  if (workers > MAX_WORKERS) workers = MAX_WORKERS; /* each has a hazard slot */
  if (pool_threads > workers + 1) pool_threads = workers + 1;
  __atomic_store_n(&deque_count, (int)(workers + 1 < MAX_DEQUES ? workers + 1 : MAX_DEQUES),
                   __ATOMIC_RELEASE);
  for (long i = 0; i < workers; ++i) {
    pthread_t thread;
    if (pthread_create(&thread, &attr, worker, (void *)(intptr_t)(i + 1)) != 0) die("cannot start a worker thread");
  }
  pthread_attr_destroy(&attr);
  __atomic_store_n(&pool_started, true, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&pool_mu);
}

RUNTIME_API void mlirAsyncRuntimeExecute(void *handle, CoroResume resume) {
  ensure_pool();
  Task *task = malloc(sizeof(Task));
  if (!task) die("out of memory");
  task->resume = resume;
  task->handle = handle;
  __atomic_fetch_add(&tasks_queued, 1, __ATOMIC_RELAXED);
  push_newest(&deques[own_deque], task);
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* pairs with next_work's, see there */
  if (__atomic_load_n(&sleeping_workers, __ATOMIC_RELAXED) > 0) {
    pthread_mutex_lock(&pool_mu);
    pthread_cond_signal(&pool_cv);
    pthread_mutex_unlock(&pool_mu);
  }
}

static bool workers_hold(Job *job, int workers) {
  for (int w = 1; w <= workers; ++w)
    if (__atomic_load_n(&hazards[w].job, __ATOMIC_SEQ_CST) == job) return true;
  return false;
}

/* Return once no worker holds `job` (withdrawn): spin up to spin_ns, then sleep until the
 * last holder wakes this thread. Why sleep and not spin on: a worker holding a block may
 * have lost its core to another process; on a loaded machine a caller spinning (even with
 * sched_yield) kept that core from it, and the call's loops waited for whole time slices. */
static void wait_for_workers(Job *job, int workers) {
  int64_t deadline = 0;
  for (int spins = 0; workers_hold(job, workers); ++spins) {
    cpu_relax();
    if ((spins & 63) != 63) continue;
    int64_t now = now_ns();
    if (!deadline) deadline = now + spin_ns;
    if (now < deadline) continue;
    pthread_mutex_lock(&join_mu);
    __atomic_fetch_add(&join_waiters, 1, __ATOMIC_SEQ_CST);
    while (workers_hold(job, workers)) pthread_cond_wait(&join_cv, &join_mu);
    __atomic_fetch_sub(&join_waiters, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&join_mu);
    return;
  }
}

/* Run iterations [0, iterations) of a parallel loop: fn(ctx, begin, end) for blocks of them,
 * on this thread and the pool's workers (the flat parallel-for, see its section). Returns
 * when every block is done. */
RUNTIME_API void tilecraftParallelFor(BlockFn fn, void *ctx, int64_t iterations) {
  if (iterations <= 0) return;
  ensure_pool();
  int64_t threads = pool_threads;
  int64_t blocks_wanted = threads * BLOCKS_PER_THREAD;
  Job job;
  job.grain = iterations <= blocks_wanted ? 1 : (iterations + blocks_wanted - 1) / blocks_wanted;
  int64_t blocks = (iterations + job.grain - 1) / job.grain;
  if (threads < 2 || blocks < 2 || __atomic_load_n(&current_job, __ATOMIC_RELAXED) != NULL) {
    __atomic_fetch_add(&loops_serial, 1, __ATOMIC_RELAXED);
    fn(ctx, 0, iterations);
    return;
  }
  job.fn = fn;
  job.ctx = ctx;
  job.iterations = iterations;
  job.parts = (int)(threads < blocks ? threads : blocks);
  if (job.parts > MAX_PARTS) job.parts = MAX_PARTS;
  for (int p = 0; p < job.parts; ++p) {
    job.part[p].next = blocks * p / job.parts;
    job.part[p].end = blocks * (p + 1) / job.parts;
  }
  Job *expected = NULL;
  if (!__atomic_compare_exchange_n(&current_job, &expected, &job, false, __ATOMIC_RELEASE,
                                   __ATOMIC_RELAXED)) {
    __atomic_fetch_add(&loops_serial, 1, __ATOMIC_RELAXED); /* another job is published */
    fn(ctx, 0, iterations);
    return;
  }
  __atomic_fetch_add(&loops_published, 1, __ATOMIC_RELAXED);
  wake_sleepers();
  int64_t ran = run_blocks(&job, 0);
  __atomic_fetch_add(&blocks_by_callers, ran, __ATOMIC_RELAXED);
  /* Every block is taken: withdraw the job, then wait for the workers that still hold it
   * (their last blocks). Pairs with join_job's hazard store and second load. */
  __atomic_store_n(&current_job, NULL, __ATOMIC_SEQ_CST);
  wait_for_workers(&job, (int)(threads - 1));
}

/* The generated entry of a model with parallel loops calls these around its body
 * (tilecraft-mark-parallel-calls): the workers spin between the call's loops. */
RUNTIME_API void tilecraftParallelCallBegin(void) {
  ensure_pool();
  __atomic_fetch_add(&calls_in_progress, 1, __ATOMIC_SEQ_CST);
  if (pool_threads > 1) {
    __atomic_fetch_add(&calls_begun, 1, __ATOMIC_SEQ_CST);
    wake_sleepers();
  }
}

RUNTIME_API void tilecraftParallelCallEnd(void) {
  __atomic_fetch_sub(&calls_in_progress, 1, __ATOMIC_SEQ_CST);
}

/* counts[0..5] = loops published to the pool, loops run whole on their calling thread (one
 * block, one thread, or another job published: a nested loop, another calling thread),
 * blocks run by the calling threads, blocks run by workers, loops a worker ran blocks of,
 * and model calls in progress now; since the process started (a fork()ed child inherits its
 * parent's counts). */
RUNTIME_API void tilecraftParallelForCounts(int64_t counts[6]) {
  counts[0] = __atomic_load_n(&loops_published, __ATOMIC_RELAXED);
  counts[1] = __atomic_load_n(&loops_serial, __ATOMIC_RELAXED);
  counts[2] = __atomic_load_n(&blocks_by_callers, __ATOMIC_RELAXED);
  counts[3] = __atomic_load_n(&blocks_by_workers, __ATOMIC_RELAXED);
  counts[4] = __atomic_load_n(&loops_joined, __ATOMIC_RELAXED);
  counts[5] = __atomic_load_n(&calls_in_progress, __ATOMIC_RELAXED);
}

/* counts[0..4] = tasks queued, run by workers, run by awaiting threads, worker sleeps and
 * tasks stolen from another thread's deque, since the process started (a fork()ed child
 * inherits its parent's counts). */
RUNTIME_API void tilecraftAsyncRuntimeCounts(int64_t counts[5]) {
  counts[0] = __atomic_load_n(&tasks_queued, __ATOMIC_RELAXED);
  counts[1] = __atomic_load_n(&tasks_run_by_workers, __ATOMIC_RELAXED);
  counts[2] = __atomic_load_n(&tasks_run_by_waiters, __ATOMIC_RELAXED);
  counts[3] = __atomic_load_n(&worker_sleeps, __ATOMIC_RELAXED);
  counts[4] = __atomic_load_n(&tasks_stolen, __ATOMIC_RELAXED);
}

RUNTIME_API int64_t mlirAsyncRuntimGetNumWorkerThreads(void) {
  ensure_pool();
  return pool_threads;
}

/* ---- tokens, values, groups ---------------------------------------------------------- */

RUNTIME_API void *mlirAsyncRuntimeCreateToken(void) { return new_object(KIND_TOKEN, 2); }

RUNTIME_API void *mlirAsyncRuntimeCreateValue(int64_t size) {
  Object *value = new_object(KIND_VALUE, 2);
  value->storage = calloc(1, size > 0 ? (size_t)size : 1);
  if (!value->storage) die("out of memory");
  return value;
}

RUNTIME_API void *mlirAsyncRuntimeCreateGroup(int64_t size) {
  Object *group = new_object(KIND_GROUP, 1);
  group->pending = size;
  return group;
}

/* Run a list of awaiters detached from `owner` (called without any object lock held, while
 * the caller still holds a reference to `owner`) and free those that were allocated. */
static void run_awaiters(Object *owner, Awaiter *awaiter) {
  while (awaiter) {
    Awaiter *next = awaiter->next;
    awaiter->fn(awaiter->arg1, awaiter->arg2);
    if (awaiter != &owner->first_awaiter) free(awaiter);
    awaiter = next;
  }
}

/* Add an awaiter to `object`; its lock must be held. */
static void push_awaiter(Object *object, void (*fn)(void *, void *), void *arg1, void *arg2) {
  Awaiter *awaiter = &object->first_awaiter;
  if (object->first_awaiter_used) {
    awaiter = malloc(sizeof(Awaiter));
    if (!awaiter) die("out of memory");
  }
  object->first_awaiter_used = true;
  awaiter->fn = fn;
  awaiter->arg1 = arg1;
  awaiter->arg2 = arg2;
  awaiter->next = object->awaiters;
  object->awaiters = awaiter;
}

static void set_state(Object *object, int state) {
  pthread_mutex_lock(&object->mu);
  if (object->state != UNAVAILABLE) die("token or value completed twice");
  __atomic_store_n(&object->state, state, __ATOMIC_RELEASE); /* read by object_ready */
  Awaiter *awaiters = object->awaiters;
  object->awaiters = NULL;
  pthread_cond_broadcast(&object->cv);
  pthread_mutex_unlock(&object->mu);
  run_awaiters(object, awaiters);
  mlirAsyncRuntimeDropRef(object, 1); /* the producing task's reference */
}

RUNTIME_API void mlirAsyncRuntimeEmplaceToken(void *token) { set_state(token, AVAILABLE); }
RUNTIME_API void mlirAsyncRuntimeEmplaceValue(void *value) { set_state(value, AVAILABLE); }
RUNTIME_API void mlirAsyncRuntimeSetTokenError(void *token) { set_state(token, ERROR); }
RUNTIME_API void mlirAsyncRuntimeSetValueError(void *value) { set_state(value, ERROR); }

/* A token's or value's state: set once (set_state stores it with release order), so an
 * acquire load reads it without taking the object's lock, whose line another core may hold. */
static int load_state(Object *object) { return __atomic_load_n(&object->state, __ATOMIC_ACQUIRE); }

RUNTIME_API bool mlirAsyncRuntimeIsTokenError(void *token) { return load_state(token) == ERROR; }
RUNTIME_API bool mlirAsyncRuntimeIsValueError(void *value) { return load_state(value) == ERROR; }

RUNTIME_API bool mlirAsyncRuntimeIsGroupError(void *ptr) {
  Object *group = ptr;
  pthread_mutex_lock(&group->mu);
  bool error = group->errors > 0;
  pthread_mutex_unlock(&group->mu);
  return error;
}

/* A token of `group` became ready: count it; the last one wakes the group's awaiters. */
static void group_token_ready(void *group_ptr, void *token_ptr) {
  Object *group = group_ptr, *token = token_ptr;
  bool error = load_state(token) == ERROR;
  pthread_mutex_lock(&group->mu);
  if (error) group->errors += 1;
  if (group->pending <= 0) die("more tokens added to a group than its size");
  Awaiter *awaiters = NULL;
  int64_t pending = group->pending - 1;
  __atomic_store_n(&group->pending, pending, __ATOMIC_RELEASE); /* read by object_ready */
  if (pending == 0) {
    awaiters = group->awaiters;
    group->awaiters = NULL;
    pthread_cond_broadcast(&group->cv);
  }
  pthread_mutex_unlock(&group->mu);
  run_awaiters(group, awaiters);
  mlirAsyncRuntimeDropRef(token, 1);
  mlirAsyncRuntimeDropRef(group, 1);
}

RUNTIME_API int64_t mlirAsyncRuntimeAddTokenToGroup(void *token_ptr, void *group_ptr) {
  Object *token = token_ptr, *group = group_ptr;
  int64_t rank = __atomic_fetch_add(&group->rank, 1, __ATOMIC_RELAXED);
  /* Both stay alive until the token has been counted. */
  mlirAsyncRuntimeAddRef(group, 1);
  mlirAsyncRuntimeAddRef(token, 1);
  pthread_mutex_lock(&token->mu);
  if (token->state == UNAVAILABLE) {
    push_awaiter(token, group_token_ready, group, token);
    pthread_mutex_unlock(&token->mu);
  } else {
    pthread_mutex_unlock(&token->mu);
    group_token_ready(group, token);
  }
  return rank;
}

static bool object_ready(void *ptr) {
  Object *object = ptr;
  if (object->kind == KIND_GROUP) return __atomic_load_n(&object->pending, __ATOMIC_ACQUIRE) == 0;
  return __atomic_load_n(&object->state, __ATOMIC_ACQUIRE) != UNAVAILABLE;
}

static bool ready_or_work(void *ptr) { return object_ready(ptr) || queue_nonempty(NULL); }

/* Block until `object` is ready, running queued tasks meanwhile (the tasks it waits for are
 * usually among them): the waiting thread is one of the loop's threads, see the top. */
static void wait_ready(Object *object) {
  ensure_pool();
  for (;;) {
    if (object_ready(object)) break;
    Task *task = try_pop();
    if (task) {
      __atomic_fetch_add(&tasks_run_by_waiters, 1, __ATOMIC_RELAXED);
      run_task(task);
      continue;
    }
    if (spin_until(ready_or_work, object)) continue;
    pthread_mutex_lock(&object->mu);
    while (!object_ready(object)) pthread_cond_wait(&object->cv, &object->mu);
    pthread_mutex_unlock(&object->mu);
    break;
  }
}

RUNTIME_API void mlirAsyncRuntimeAwaitToken(void *token) { wait_ready(token); }
RUNTIME_API void mlirAsyncRuntimeAwaitValue(void *value) { wait_ready(value); }
RUNTIME_API void mlirAsyncRuntimeAwaitAllInGroup(void *group) { wait_ready(group); }

RUNTIME_API void *mlirAsyncRuntimeGetValueStorage(void *value) { return ((Object *)value)->storage; }

static void resume_coroutine(void *handle, void *resume) {
  ((CoroResume)resume)(handle);
}

/* Resume `handle` once `object` is ready: now, on this thread, if it already is. */
static void await_and_execute(Object *object, void *handle, CoroResume resume) {
  pthread_mutex_lock(&object->mu);
  bool ready = object->kind == KIND_GROUP ? object->pending == 0 : object->state != UNAVAILABLE;
  if (!ready) {
    push_awaiter(object, resume_coroutine, handle, (void *)resume);
    pthread_mutex_unlock(&object->mu);
    return;
  }
  pthread_mutex_unlock(&object->mu);
  resume(handle);
}

RUNTIME_API void mlirAsyncRuntimeAwaitTokenAndExecute(void *token, void *handle, CoroResume resume) {
  await_and_execute(token, handle, resume);
}

RUNTIME_API void mlirAsyncRuntimeAwaitValueAndExecute(void *value, void *handle, CoroResume resume) {
  await_and_execute(value, handle, resume);
}

RUNTIME_API void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *group, void *handle,
                                                      CoroResume resume) {
  await_and_execute(group, handle, resume);
}

RUNTIME_API void mlirAsyncRuntimePrintCurrentThreadId(void) {
  printf("Current thread id: %lu\n", (unsigned long)pthread_self());
}
