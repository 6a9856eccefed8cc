/* A RECORDING STAND-IN FOR THE CUDA DRIVER, FOR TESTS ONLY: it runs no kernel and computes
 * nothing. It exports the cu* functions tilecraft's CUDA runtime (runtime/cuda_runtime.c)
 * resolves, with "device memory" from malloc and copies done by memcpy, and counts the calls,
 * so a test on a machine without a GPU can check the host code's call sequence: weights
 * uploaded once (not per call), one copy per input and output per call, every allocation
 * freed by the end of a call or by close. The runtime loads it in place of libcuda.so.1 when
 * TILECRAFT_CUDA_DRIVER names it (tests/cuda/test_cuda_package.py).
 *
 * recording_counter(name) reads a counter ("alloc", "free", "live", "h2d", "h2d_bytes",
 * "d2h", "launch", "module_load", "module_unload", "stream_create", "stream_destroy");
 * recording_reset() zeroes them (live allocations stay); recording_fail(name) makes the
 * next call of the cu* function `name` (cuLaunchKernel, cuMemAlloc, cuMemcpyAsync) fail with
 * CUDA_ERROR_OUT_OF_MEMORY (2).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define EXPORT __attribute__((visibility("default")))
#define MAX_ALLOCATIONS 4096

static struct {
  int64_t alloc, free, h2d, h2d_bytes, d2h, d2d, launch, module_load, module_unload, stream_create,
      stream_destroy;
} counts;
static struct {
  void *pointer;
  size_t bytes;
} allocations[MAX_ALLOCATIONS];
static int live;
static char failing[64];
static int dummy_context, dummy_module, dummy_function, dummy_stream, dummy_event;

static int fails(const char *name) {
  if (strcmp(failing, name) != 0)
    return 0;
  failing[0] = 0;
  return 1;
}

static int is_device(const void *pointer) {
  for (int i = 0; i < live; ++i)
    if ((const char *)pointer >= (const char *)allocations[i].pointer &&
        (const char *)pointer < (const char *)allocations[i].pointer + allocations[i].bytes)
      return 1;
  return 0;
}

EXPORT int64_t recording_counter(const char *name) {
  static const struct {
    const char *name;
    int64_t *value;
  } table[] = {{"alloc", &counts.alloc}, {"free", &counts.free}, {"h2d", &counts.h2d},
               {"h2d_bytes", &counts.h2d_bytes}, {"d2h", &counts.d2h}, {"d2d", &counts.d2d},
               {"launch", &counts.launch}, {"module_load", &counts.module_load},
               {"module_unload", &counts.module_unload}, {"stream_create", &counts.stream_create},
               {"stream_destroy", &counts.stream_destroy}};
  if (strcmp(name, "live") == 0)
    return live;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    if (strcmp(name, table[i].name) == 0)
      return *table[i].value;
  return -1;
}

EXPORT void recording_reset(void) { memset(&counts, 0, sizeof counts); }

EXPORT void recording_fail(const char *name) {
  strncpy(failing, name, sizeof failing - 1);
  failing[sizeof failing - 1] = 0;
}

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return 0; }
EXPORT CUresult cuDeviceGetCount(int *count) { *count = 1; return 0; }
EXPORT CUresult cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
  (void)device;
  *context = &dummy_context;
  return 0;
}
EXPORT CUresult cuCtxPushCurrent_v2(void *context) { (void)context; return 0; }
EXPORT CUresult cuCtxPopCurrent_v2(void **context) { *context = &dummy_context; return 0; }
EXPORT CUresult cuGetErrorName(CUresult status, const char **name) {
  *name = status == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_RECORDED";
  return 0;
}
EXPORT CUresult cuModuleLoadData(void **module, const void *image) {
  (void)image;
  counts.module_load++;
  *module = &dummy_module;
  return 0;
}
EXPORT CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
  (void)n, (void)options, (void)values;
  return cuModuleLoadData(module, image);
}
EXPORT CUresult cuModuleUnload(void *module) { (void)module; counts.module_unload++; return 0; }
EXPORT CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  (void)module, (void)name;
  *function = &dummy_function;
  return 0;
}
EXPORT CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return 0;
}
EXPORT CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
  (void)function, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream;
  (void)params, (void)extra;
  if (fails("cuLaunchKernel"))
    return 2;
  counts.launch++;
  return 0;
}
EXPORT CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  counts.stream_create++;
  *stream = &dummy_stream;
  return 0;
}
EXPORT CUresult cuStreamDestroy_v2(void *stream) { (void)stream; counts.stream_destroy++; return 0; }
EXPORT CUresult cuStreamSynchronize(void *stream) { (void)stream; return 0; }
EXPORT CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  return 0;
}
EXPORT CUresult cuEventCreate(void **event, unsigned flags) { (void)flags; *event = &dummy_event; return 0; }
EXPORT CUresult cuEventDestroy_v2(void *event) { (void)event; return 0; }
EXPORT CUresult cuEventRecord(void *event, void *stream) { (void)event, (void)stream; return 0; }
EXPORT CUresult cuEventSynchronize(void *event) { (void)event; return 0; }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  if (fails("cuMemAlloc") || live == MAX_ALLOCATIONS)
    return 2;
  void *memory = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (memory == NULL)
    return 2;
  allocations[live].pointer = memory;
  allocations[live++].bytes = bytes;
  counts.alloc++;
  *pointer = (CUdeviceptr)(uintptr_t)memory;
  return 0;
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *pointer, size_t bytes, unsigned flags) {
  (void)flags;
  return cuMemAlloc_v2(pointer, bytes);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  for (int i = 0; i < live; ++i)
    if (allocations[i].pointer == (void *)(uintptr_t)pointer) {
      free(allocations[i].pointer);
      allocations[i] = allocations[--live];
      counts.free++;
      return 0;
    }
  return 1; /* CUDA_ERROR_INVALID_VALUE: not an allocation of ours */
}
EXPORT CUresult cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, void *stream) {
  (void)stream;
  if (fails("cuMemcpyAsync"))
    return 2;
  void *to = (void *)(uintptr_t)destination, *from = (void *)(uintptr_t)source;
  int to_device = is_device(to), from_device = is_device(from);
  if (to_device && !from_device) {
    counts.h2d++;
    counts.h2d_bytes += (int64_t)bytes;
  } else if (!to_device && from_device) {
    counts.d2h++;
  } else if (to_device && from_device) {
    counts.d2d++;
  }
  memmove(to, from, bytes);
  return 0;
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned value, size_t count, void *stream) {
  (void)stream;
  for (size_t i = 0; i < count; ++i)
    ((unsigned *)(uintptr_t)destination)[i] = value;
  return 0;
}
EXPORT CUresult cuMemsetD16Async(CUdeviceptr destination, unsigned short value, size_t count, void *stream) {
  (void)stream;
  for (size_t i = 0; i < count; ++i)
    ((unsigned short *)(uintptr_t)destination)[i] = value;
  return 0;
}
