/* tilecraft's CUDA runtime: the mgpu* entry points that MLIR's gpu-to-llvm lowering calls,
 * implemented over the CUDA *driver* API, which is loaded with dlopen at first use.
 *
 * Why our own and not MLIR's libmlir_cuda_runtime.so: that library links against libLLVM.so
 * (hundreds of MB) and libcuda.so.1 at load time, so a package linked against it neither
 * deploys nor loads on a machine without a driver. This file is compiled into a CUDA
 * package's model.so (compiler/package.py) and, as a shared library, into the JIT of
 * in-process CUDA modules (runtime/libraries.py); model.so then needs no CUDA library to
 * link or load (readelf -d shows none), and finds the driver when the code first runs.
 *
 * Errors never abort. The first failure is recorded with a message; later launches and
 * copies are skipped until the caller takes it (tilecraft_cuda_take_error): the package
 * loader raises DeviceUnavailableError (no driver, no GPU: kind 2, which stays) or
 * CudaError (a driver call failed: kind 1, cleared when taken). Frees still run, so a failed
 * call leaks nothing.
 *
 * Weights live on the device for the library's life: tilecraft_cuda_resident (called by the
 * host code where tilecraft-gpu-resident-weights replaced a per-call upload,
 * targets/cuda/resident.py) uploads a weight once into a slot of the module. A function's
 * intermediates live in one device arena (targets/cuda/arena.py), allocated by its first
 * call and reused by the next (tilecraft_cuda_arena_acquire / _release). tilecraft_cuda_release
 * frees them all (Package.close, tilecraft_model_close), tilecraft_cuda_release_slot one
 * module's (a JIT module's close). Not at unload: libraries are unloaded at process exit,
 * when the driver may be gone already.
 *
 * TILECRAFT_CUDA_DRIVER=path loads another library in place of libcuda.so.1: for tests
 * only (tests/cuda/recording_driver.c records the calls on a machine without a GPU).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

enum { CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DISABLE_TIMING = 2, CU_MEM_ATTACH_GLOBAL = 1 };
enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6, CU_JIT_OPTIMIZATION_LEVEL = 7 };
enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };
enum { STATIC_SHARED_LIMIT = 48 * 1024 };
/* The kinds tilecraft_cuda_take_error returns. */
enum { NO_ERROR = 0, CALL_FAILED = 1, NO_DEVICE = 2 };

/* The driver entry points this runtime calls, by their exported (versioned) names. */
#define CUDA_DRIVER_FUNCTIONS(X)                                                                  \
  X(cuInit, "cuInit", (unsigned int))                                                             \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                                \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                                \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))                \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext))                                         \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *))                                         \
  X(cuGetErrorName, "cuGetErrorName", (CUresult, const char **))                                  \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                             \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", (CUmodule *, const void *, unsigned, int *, void **)) \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                 \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))           \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))                             \
  X(cuLaunchKernel, "cuLaunchKernel",                                                             \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,  \
     void **, void **))                                                                           \
  X(cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                     \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                       \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream, CUevent, unsigned))                        \
  X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                        \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                                               \
  X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                          \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                          \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                         \
  X(cuMemAllocManaged, "cuMemAllocManaged", (CUdeviceptr *, size_t, unsigned))                    \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                     \
  X(cuMemcpyAsync, "cuMemcpyAsync", (CUdeviceptr, CUdeviceptr, size_t, CUstream))                 \
  X(cuMemsetD32Async, "cuMemsetD32Async", (CUdeviceptr, unsigned, size_t, CUstream))              \
  X(cuMemsetD16Async, "cuMemsetD16Async", (CUdeviceptr, unsigned short, size_t, CUstream))

#define DECLARE(field, symbol, params) CUresult(*field) params;
static struct {
  CUDA_DRIVER_FUNCTIONS(DECLARE)
} cu;
#undef DECLARE

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int driver_ready;      /* driver loaded, cuInit done, primary context retained */
static int error_kind;        /* NO_ERROR, CALL_FAILED, NO_DEVICE (under lock) */
static char error_message[1024];
static int default_device;
static CUcontext context;

static void record(int kind, const char *format, ...) {
  pthread_mutex_lock(&lock);
  if (error_kind == NO_ERROR) { /* the first failure is the cause; later ones follow from it */
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error_message, sizeof error_message, format, arguments);
    va_end(arguments);
    error_kind = kind;
  }
  pthread_mutex_unlock(&lock);
}

static const char *error_name(CUresult status) {
  const char *name = NULL;
  if (cu.cuGetErrorName == NULL || cu.cuGetErrorName(status, &name) != 0 || name == NULL)
    return "unknown CUresult";
  return name;
}

/* Whether a driver call succeeded; records the failure (naming the mgpu* function) if not. */
static int check(CUresult status, const char *where, const char *call) {
  if (status == 0)
    return 1;
  record(CALL_FAILED, "%s: %s failed with CUresult %d (%s)", where, call, status, error_name(status));
  return 0;
}

static void load_driver(void) {
  const char *path = getenv("TILECRAFT_CUDA_DRIVER");
  const char *name = path && *path ? path : "libcuda.so.1";
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    record(NO_DEVICE, "no CUDA driver: %s cannot be loaded (%s)", name, dlerror());
    return;
  }
#define RESOLVE(field, symbol, params)                                                            \
  *(void **)&cu.field = dlsym(handle, symbol);                                                    \
  if (cu.field == NULL) {                                                                         \
    record(NO_DEVICE, "no usable CUDA driver: %s lacks %s (driver too old?)", name, symbol);      \
    return;                                                                                       \
  }
  CUDA_DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
  CUresult status = cu.cuInit(0);
  if (status != 0) {
    record(NO_DEVICE, "the CUDA driver is installed but cuInit failed (CUresult %d, %s)", status,
           error_name(status));
    return;
  }
  int count = 0;
  if (cu.cuDeviceGetCount(&count) != 0 || count <= default_device) {
    record(NO_DEVICE, "the CUDA driver found no GPU (device %d of %d)", default_device, count);
    return;
  }
  CUdevice device;
  status = cu.cuDeviceGet(&device, default_device);
  if (status == 0)
    status = cu.cuDevicePrimaryCtxRetain(&context, device);
  if (status != 0) {
    record(NO_DEVICE, "CUDA device %d cannot be used (CUresult %d, %s)", default_device, status,
           error_name(status));
    return;
  }
  driver_ready = 1;
}

/* Make the primary context current for one runtime call. `work`: launches and copies are
 * skipped once an error is pending (their results would be wrong anyway); frees are not. */
static int enter(int work) {
  pthread_once(&init_once, load_driver);
  if (!driver_ready)
    return 0;
  if (work) {
    pthread_mutex_lock(&lock);
    int pending = error_kind != NO_ERROR;
    pthread_mutex_unlock(&lock);
    if (pending)
      return 0;
  }
  return check(cu.cuCtxPushCurrent(context), "tilecraft CUDA runtime", "cuCtxPushCurrent");
}

static void leave(void) {
  CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
}

/* ---- modules and kernels -------------------------------------------------------------- */

CUmodule mgpuModuleLoad(void *data, size_t size) {
  (void)size;
  CUmodule module = NULL;
  if (!enter(1))
    return NULL;
  check(cu.cuModuleLoadData(&module, data), "mgpuModuleLoad", "cuModuleLoadData");
  leave();
  return module;
}

/* PTX (a module the driver compiles): what the package holds when ptxas was not found. */
CUmodule mgpuModuleLoadJIT(void *data, int opt_level) {
  CUmodule module = NULL;
  char log[4096] = {0};
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, (void *)(uintptr_t)sizeof log, (void *)(uintptr_t)opt_level};
  if (!enter(1))
    return NULL;
  CUresult status = cu.cuModuleLoadDataEx(&module, data, 3, options, values);
  if (status != 0)
    record(CALL_FAILED, "mgpuModuleLoadJIT: the driver could not compile the PTX (CUresult %d, %s): %s",
           status, error_name(status), log);
  leave();
  return module;
}

void mgpuModuleUnload(CUmodule module) {
  if (module == NULL || !enter(0))
    return;
  check(cu.cuModuleUnload(module), "mgpuModuleUnload", "cuModuleUnload");
  leave();
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  CUfunction function = NULL;
  if (module == NULL || !enter(1))
    return NULL;
  if (!check(cu.cuModuleGetFunction(&function, module, name), "mgpuModuleGetFunction", "cuModuleGetFunction"))
    function = NULL;
  leave();
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z, intptr_t block_x,
                      intptr_t block_y, intptr_t block_z, int32_t shared_bytes, CUstream stream, void **params,
                      void **extra, size_t param_count) {
  (void)param_count;
  if (function == NULL || !enter(1))
    return;
  /* Dynamic shared memory above 48 KiB must be opted into per kernel. */
  if (shared_bytes > STATIC_SHARED_LIMIT &&
      !check(cu.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
             "mgpuLaunchKernel", "cuFuncSetAttribute")) {
    leave();
    return;
  }
  check(cu.cuLaunchKernel(function, (unsigned)grid_x, (unsigned)grid_y, (unsigned)grid_z, (unsigned)block_x,
                          (unsigned)block_y, (unsigned)block_z, (unsigned)shared_bytes, stream, params, extra),
        "mgpuLaunchKernel", "cuLaunchKernel");
  leave();
}

/* ---- streams and events --------------------------------------------------------------- */

CUstream mgpuStreamCreate(void) {
  CUstream stream = NULL;
  if (!enter(0))
    return NULL;
  check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "mgpuStreamCreate", "cuStreamCreate");
  leave();
  return stream;
}

void mgpuStreamDestroy(CUstream stream) {
  if (stream == NULL || !enter(0))
    return;
  check(cu.cuStreamDestroy(stream), "mgpuStreamDestroy", "cuStreamDestroy");
  leave();
}

void mgpuStreamSynchronize(CUstream stream) {
  if (stream == NULL || !enter(0))
    return;
  /* Not skipped on a pending error: the host must not go on while the stream still runs. */
  check(cu.cuStreamSynchronize(stream), "mgpuStreamSynchronize", "cuStreamSynchronize");
  leave();
}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  if (stream == NULL || event == NULL || !enter(1))
    return;
  check(cu.cuStreamWaitEvent(stream, event, 0), "mgpuStreamWaitEvent", "cuStreamWaitEvent");
  leave();
}

CUevent mgpuEventCreate(void) {
  CUevent event = NULL;
  if (!enter(0))
    return NULL;
  check(cu.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "mgpuEventCreate", "cuEventCreate");
  leave();
  return event;
}

void mgpuEventDestroy(CUevent event) {
  if (event == NULL || !enter(0))
    return;
  check(cu.cuEventDestroy(event), "mgpuEventDestroy", "cuEventDestroy");
  leave();
}

void mgpuEventSynchronize(CUevent event) {
  if (event == NULL || !enter(0))
    return;
  check(cu.cuEventSynchronize(event), "mgpuEventSynchronize", "cuEventSynchronize");
  leave();
}

void mgpuEventRecord(CUevent event, CUstream stream) {
  if (event == NULL || !enter(1))
    return;
  check(cu.cuEventRecord(event, stream), "mgpuEventRecord", "cuEventRecord");
  leave();
}

void mgpuSetDefaultDevice(int32_t device) { default_device = device; }

/* ---- memory ------------------------------------------------------------------------- */

void *mgpuMemAlloc(uint64_t bytes, CUstream stream, _Bool host_shared) {
  (void)stream;
  CUdeviceptr pointer = 0;
  if (bytes == 0 || !enter(1))
    return NULL;
  if (host_shared)
    check(cu.cuMemAllocManaged(&pointer, bytes, CU_MEM_ATTACH_GLOBAL), "mgpuMemAlloc", "cuMemAllocManaged");
  else
    check(cu.cuMemAlloc(&pointer, bytes), "mgpuMemAlloc", "cuMemAlloc");
  leave();
  return (void *)(uintptr_t)pointer;
}

/* The host code frees a buffer once its last kernel is *issued* on `stream` (gpu-to-llvm
 * puts the frees before the stream's final synchronize). cuMemFree is not documented to
 * wait for that stream, so the stream is synchronized first: at the end of a call it is
 * idle after the first free, so the cost is one wait that the final synchronize would do. */
void mgpuMemFree(void *pointer, CUstream stream) {
  if (pointer == NULL || !enter(0))
    return;
  if (stream != NULL)
    check(cu.cuStreamSynchronize(stream), "mgpuMemFree", "cuStreamSynchronize");
  check(cu.cuMemFree((CUdeviceptr)(uintptr_t)pointer), "mgpuMemFree", "cuMemFree");
  leave();
}

void mgpuMemcpy(void *destination, void *source, size_t bytes, CUstream stream) {
  if (bytes == 0 || destination == NULL || source == NULL || !enter(1))
    return;
  check(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source, bytes, stream),
        "mgpuMemcpy", "cuMemcpyAsync");
  leave();
}

void mgpuMemset32(void *destination, unsigned int value, size_t count, CUstream stream) {
  if (count == 0 || destination == NULL || !enter(1))
    return;
  check(cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)destination, value, count, stream), "mgpuMemset32",
        "cuMemsetD32Async");
  leave();
}

void mgpuMemset16(void *destination, unsigned short value, size_t count, CUstream stream) {
  if (count == 0 || destination == NULL || !enter(1))
    return;
  check(cu.cuMemsetD16Async((CUdeviceptr)(uintptr_t)destination, value, count, stream), "mgpuMemset16",
        "cuMemsetD16Async");
  leave();
}

/* ---- device-resident weights and activation arenas ------------------------------------ */

/* What the runtime holds on the device between calls: a weight (its slot is the module's i64
 * global holding the device copy) or an activation arena (its slot is the module's pair of
 * i64: the arena's device address and whether a call is using it; targets/cuda/arena.py). */
enum { WEIGHT = 0, ARENA = 1 };
typedef struct {
  uint64_t *slot; /* slot[0]: the device address (0 until allocated) */
  CUdeviceptr device;
  uint64_t bytes;
  int kind;
} held_buffer;

static held_buffer *residents;
static size_t resident_count, resident_capacity;
static uint64_t resident_bytes, arena_bytes;

/* Room for one more held buffer (under lock); 0 when out of host memory. */
static int reserve_held(void) {
  if (resident_count < resident_capacity)
    return 1;
  size_t capacity = resident_capacity ? 2 * resident_capacity : 64;
  held_buffer *grown = realloc(residents, capacity * sizeof *grown);
  if (grown == NULL)
    return 0;
  residents = grown;
  resident_capacity = capacity;
  return 1;
}

static void hold(uint64_t *slot, CUdeviceptr device, uint64_t bytes, int kind) {
  residents[resident_count++] = (held_buffer){slot, device, bytes, kind};
  if (kind == WEIGHT)
    resident_bytes += bytes;
  else
    arena_bytes += bytes;
  __atomic_store_n(slot, (uint64_t)device, __ATOMIC_RELEASE);
}

/* The device copy of the weight at `host` (`bytes` long), uploaded on the first call and
 * kept in `*slot` until tilecraft_cuda_release. The copy completes before it returns, so
 * the caller's stream may read it at once. NULL (with the error recorded) on failure. */
EXPORT void *tilecraft_cuda_resident(uint64_t *slot, const void *host, uint64_t bytes, CUstream stream) {
  if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != 0)
    return (void *)(uintptr_t)*slot;
  if (bytes == 0 || !enter(1))
    return NULL;
  pthread_mutex_lock(&lock); /* two threads' first calls upload once */
  CUdeviceptr device = (CUdeviceptr)*slot;
  if (device == 0 && !reserve_held()) {
    pthread_mutex_unlock(&lock);
    record(CALL_FAILED, "tilecraft_cuda_resident: out of host memory");
    leave();
    return NULL;
  }
  if (device == 0 && cu.cuMemAlloc(&device, bytes) != 0)
    device = 0;
  if (device != 0 && *slot == 0) {
    if (cu.cuMemcpyAsync(device, (CUdeviceptr)(uintptr_t)host, bytes, stream) != 0 ||
        cu.cuStreamSynchronize(stream) != 0) {
      cu.cuMemFree(device);
      device = 0;
    } else {
      hold(slot, device, bytes, WEIGHT);
    }
  }
  pthread_mutex_unlock(&lock);
  if (device == 0)
    record(CALL_FAILED, "tilecraft_cuda_resident: uploading a weight of %llu bytes to the device failed",
           (unsigned long long)bytes);
  leave();
  return (void *)(uintptr_t)device;
}

/* The device arena of one call of a function (`bytes`: its planned size; `slot`: the
 * function's {address, in use} pair). The first call allocates it and later calls reuse it,
 * so a call allocates no device memory. A call that finds it in use (another thread's call
 * of the same function is running) gets a private arena of its own, freed by
 * tilecraft_cuda_arena_release: correct, only not allocation-free. NULL (error recorded) on
 * failure; the launches and copies of the call are then skipped. */
EXPORT void *tilecraft_cuda_arena_acquire(uint64_t *slot, uint64_t bytes) {
  if (bytes == 0 || !enter(1))
    return NULL;
  uint64_t idle = 0;
  CUdeviceptr device = 0;
  if (__atomic_compare_exchange_n(&slot[1], &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    device = (CUdeviceptr)__atomic_load_n(&slot[0], __ATOMIC_ACQUIRE);
    /* This call owns the slot now: no other thread allocates it (record() takes the lock,
     * so the allocation and its error are outside it). */
    if (device == 0 && check(cu.cuMemAlloc(&device, bytes), "tilecraft_cuda_arena_acquire", "cuMemAlloc")) {
      pthread_mutex_lock(&lock);
      int held = reserve_held();
      if (held)
        hold(slot, device, bytes, ARENA);
      pthread_mutex_unlock(&lock);
      if (!held) {
        cu.cuMemFree(device);
        device = 0;
        record(CALL_FAILED, "tilecraft_cuda_arena_acquire: out of host memory");
      }
    }
    if (device == 0)
      __atomic_store_n(&slot[1], 0, __ATOMIC_RELEASE);
  } else if (!check(cu.cuMemAlloc(&device, bytes), "tilecraft_cuda_arena_acquire", "cuMemAlloc")) {
    device = 0;
  }
  leave();
  return (void *)(uintptr_t)device;
}

/* The end of the call that acquired `pointer` (the host code synchronized its streams
 * first: gpu-async-region waits before a host call). The function's arena becomes free for
 * the next call; a private one is freed. */
EXPORT void tilecraft_cuda_arena_release(uint64_t *slot, void *pointer) {
  if (pointer == NULL)
    return;
  if ((uint64_t)(uintptr_t)pointer == __atomic_load_n(&slot[0], __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&slot[1], 0, __ATOMIC_RELEASE);
    return;
  }
  if (!enter(0))
    return;
  check(cu.cuMemFree((CUdeviceptr)(uintptr_t)pointer), "tilecraft_cuda_arena_release", "cuMemFree");
  leave();
}

/* Free the held buffers for which `matches(slot, owner)` holds (their slots read 0 again: a
 * later call uploads or allocates anew). Returns the bytes freed. */
static uint64_t release_where(int (*matches)(const uint64_t *, const void *), const void *owner) {
  pthread_mutex_lock(&lock);
  uint64_t freed = 0;
  int entered = resident_count > 0 && driver_ready && cu.cuCtxPushCurrent(context) == 0;
  size_t kept = 0;
  for (size_t i = 0; i < resident_count; ++i) {
    held_buffer held = residents[i];
    if (!matches(held.slot, owner)) {
      residents[kept++] = held;
      continue;
    }
    __atomic_store_n(held.slot, 0, __ATOMIC_RELEASE);
    if (entered)
      cu.cuMemFree(held.device);
    freed += held.bytes;
    if (held.kind == WEIGHT)
      resident_bytes -= held.bytes;
    else
      arena_bytes -= held.bytes;
  }
  resident_count = kept;
  if (entered)
    leave();
  pthread_mutex_unlock(&lock);
  return freed;
}

static int any_slot(const uint64_t *slot, const void *owner) { (void)slot, (void)owner; return 1; }
static int same_slot(const uint64_t *slot, const void *owner) { return slot == owner; }

/* Free every device-resident weight and arena of this runtime (a package's close). */
EXPORT uint64_t tilecraft_cuda_release(void) { return release_where(any_slot, NULL); }

/* Free what one slot holds: a module's own release function (tilecraft-gpu-resident-weights
 * emits __tilecraft_cuda_release_module, calling this for each of its slots) frees that
 * module's weights and arenas only, where several modules share this runtime (the JIT). */
EXPORT uint64_t tilecraft_cuda_release_slot(uint64_t *slot) { return release_where(same_slot, slot); }

/* Bytes of activation arenas held on the device now. */
EXPORT uint64_t tilecraft_cuda_arena_bytes(void) {
  pthread_mutex_lock(&lock);
  uint64_t bytes = arena_bytes;
  pthread_mutex_unlock(&lock);
  return bytes;
}

/* Bytes of weights held on the device now. */
EXPORT uint64_t tilecraft_cuda_resident_bytes(void) {
  pthread_mutex_lock(&lock);
  uint64_t bytes = resident_bytes;
  pthread_mutex_unlock(&lock);
  return bytes;
}

/* ---- device arrays (runtime/device_array.py) ------------------------------------------ */

/* Device memory a user's DeviceArray owns (freed by tilecraft_cuda_device_free). */
EXPORT void *tilecraft_cuda_device_alloc(uint64_t bytes) {
  CUdeviceptr pointer = 0;
  if (bytes == 0 || !enter(1))
    return NULL;
  if (!check(cu.cuMemAlloc(&pointer, bytes), "tilecraft_cuda_device_alloc", "cuMemAlloc"))
    pointer = 0;
  leave();
  return (void *)(uintptr_t)pointer;
}

EXPORT void tilecraft_cuda_device_free(void *pointer) {
  if (pointer == NULL || !enter(0))
    return;
  check(cu.cuMemFree((CUdeviceptr)(uintptr_t)pointer), "tilecraft_cuda_device_free", "cuMemFree");
  leave();
}

/* A copy the user asked for (to_numpy, device_array), complete when it returns. The driver
 * infers the direction from the addresses (unified addressing). */
EXPORT void tilecraft_cuda_copy(void *destination, const void *source, uint64_t bytes) {
  if (bytes == 0 || destination == NULL || source == NULL || !enter(1))
    return;
  if (check(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source, bytes, NULL),
            "tilecraft_cuda_copy", "cuMemcpyAsync"))
    check(cu.cuStreamSynchronize(NULL), "tilecraft_cuda_copy", "cuStreamSynchronize");
  leave();
}

/* The pending error: 0 none, 1 a driver call failed (cleared by taking it), 2 no usable
 * driver or GPU (stays). The message goes to `buffer` (NUL-terminated, cut to `size`). */
EXPORT int tilecraft_cuda_take_error(char *buffer, int64_t size) {
  pthread_once(&init_once, load_driver);
  pthread_mutex_lock(&lock);
  int kind = error_kind;
  if (kind != NO_ERROR && buffer != NULL && size > 0)
    snprintf(buffer, (size_t)size, "%s", error_message);
  if (kind == CALL_FAILED)
    error_kind = NO_ERROR;
  pthread_mutex_unlock(&lock);
  return kind;
}
