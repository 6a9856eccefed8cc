/* A CUDA package run through the C API (runtime/c_api/tilecraft_runtime.h) on the recording
 * stand-in for the driver (recording_driver.c), as a C user would run it: host buffers in and
 * out, then device buffers in and out (cuMemAlloc'd by the caller). Test-only: built and run by
 * tests/cuda/test_c_api_device.py.
 *
 * The package is the reshapes model (cuda_testing.reshapes_model): x (2x3x4) -> y (4x6), w
 * (5x2x3) -> z (5x6), no kernel, so the recording driver (whose device memory is host memory)
 * computes it whole and the values are checked here. A CUDA package's entry copies each result
 * straight into the caller's buffer (its output arguments): host buffers get one copy from the
 * device each, device buffers one device-to-device copy and none to the host.
 *
 * Usage: c_api_device PACKAGE RECORDING_DRIVER (TILECRAFT_CUDA_DRIVER set to the same path).
 * Prints one line per check; exits 0 when all pass. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tilecraft_runtime.h"

static int64_t (*counter)(const char *);
static void (*reset)(void);
static void (*fail_next)(const char *);
static int (*device_alloc)(unsigned long long *, size_t);
static int failures;

static void expect(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok" : "FAILED", what);
  failures += !ok;
}

static void counts(const char *what, int64_t h2d, int64_t d2h, int64_t d2d, int64_t alloc) {
  char line[256];
  snprintf(line, sizeof line, "%s: h2d %lld (want %lld), d2h %lld (want %lld), d2d %lld (want %lld), alloc %lld "
           "(want %lld)", what, (long long)counter("h2d"), (long long)h2d, (long long)counter("d2h"), (long long)d2h,
           (long long)counter("d2d"), (long long)d2d, (long long)counter("alloc"), (long long)alloc);
  expect(counter("h2d") == h2d && counter("d2h") == d2h && counter("d2d") == d2d && counter("alloc") == alloc, line);
}

static tilecraft_tensor tensor(void *data, int32_t rank, const int64_t *shape) {
  tilecraft_tensor t = {data, 0, TILECRAFT_FLOAT32, rank, {0}};
  size_t elements = 1;
  for (int32_t d = 0; d < rank; ++d) {
    t.shape[d] = shape[d];
    elements *= (size_t)shape[d];
  }
  t.size_bytes = elements * sizeof(float);
  return t;
}

static int same(const float *a, const float *b, size_t count) { return memcmp(a, b, count * sizeof(float)) == 0; }

static void *device_buffer(size_t bytes) {
  unsigned long long pointer = 0;
  return device_alloc(&pointer, bytes) == 0 ? (void *)(uintptr_t)pointer : NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PACKAGE RECORDING_DRIVER\n", argv[0]);
    return 2;
  }
  void *driver = dlopen(argv[2], RTLD_NOW); /* the library the runtime loads: one copy of its state */
  if (!driver) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  *(void **)&counter = dlsym(driver, "recording_counter");
  *(void **)&reset = dlsym(driver, "recording_reset");
  *(void **)&device_alloc = dlsym(driver, "cuMemAlloc_v2");
  *(void **)&fail_next = dlsym(driver, "recording_fail");
  if (!counter || !reset || !device_alloc || !fail_next) {
    fprintf(stderr, "%s is not the recording driver\n", argv[2]);
    return 2;
  }
  tilecraft_model *model;
  tilecraft_error error;
  if (tilecraft_model_open(argv[1], NULL, &model, &error) != TILECRAFT_OK) {
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  static const int64_t x_shape[] = {2, 3, 4}, w_shape[] = {5, 2, 3}, y_shape[] = {4, 6}, z_shape[] = {5, 6};
  float x[24], w[30], y[24], z[30];
  for (int i = 0; i < 24; ++i)
    x[i] = (float)i + 0.5f;
  for (int i = 0; i < 30; ++i)
    w[i] = 2.0f * (float)i - 7.0f;

  /* Host buffers: the C API passes them as the results' destinations. */
  tilecraft_tensor inputs[2] = {tensor(x, 3, x_shape), tensor(w, 3, w_shape)};
  tilecraft_tensor outputs[2] = {tensor(y, 2, y_shape), tensor(z, 2, z_shape)};
  expect(tilecraft_model_run(model, inputs, 2, outputs, 2, &error) == TILECRAFT_OK, "first run (host buffers)");
  reset();
  memset(y, 0, sizeof y);
  memset(z, 0, sizeof z);
  tilecraft_status status = tilecraft_model_run(model, inputs, 2, outputs, 2, &error);
  expect(status == TILECRAFT_OK, status == TILECRAFT_OK ? "second run (host buffers)" : error.message);
  expect(same(y, x, 24) && same(z, w, 30), "host outputs equal the inputs reshaped");
  expect(outputs[0].rank == 2 && outputs[0].shape[0] == 4 && outputs[0].shape[1] == 6, "output shape set");
  int64_t inside = counter("d2d"); /* the model's own copies (a reshape's result buffer) */
  counts("host buffers", 2, 2, inside, 0);

  /* Device buffers in and out: nothing crosses to the host. */
  float *dx = device_buffer(sizeof x), *dw = device_buffer(sizeof w), *dy = device_buffer(sizeof y),
        *dz = device_buffer(sizeof z);
  expect(dx && dw && dy && dz, "device buffers allocated");
  memcpy(dx, x, sizeof x); /* the recording driver's device memory is host memory */
  memcpy(dw, w, sizeof w);
  reset();
  tilecraft_tensor device_inputs[2] = {tensor(dx, 3, x_shape), tensor(dw, 3, w_shape)};
  tilecraft_tensor device_outputs[2] = {tensor(dy, 2, y_shape), tensor(dz, 2, z_shape)};
  status = tilecraft_model_run(model, device_inputs, 2, device_outputs, 2, &error);
  expect(status == TILECRAFT_OK, status == TILECRAFT_OK ? "run (device buffers)" : error.message);
  counts("device buffers", 0, 0, inside + 4, 0);
  expect(same(dy, x, 24) && same(dz, w, 30), "device outputs equal the inputs reshaped");

  /* A failed driver call is still TILECRAFT_ERROR_DEVICE with device outputs. */
  fail_next("cuMemcpyAsync");
  status = tilecraft_model_run(model, device_inputs, 2, device_outputs, 2, &error);
  expect(status == TILECRAFT_ERROR_DEVICE && strstr(error.message, "cuMemcpyAsync") != NULL,
         "a failed copy is TILECRAFT_ERROR_DEVICE");
  tilecraft_model_close(model);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
