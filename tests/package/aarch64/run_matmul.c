/* Runs a package's model.so built for AArch64 under qemu-user (tests/package/test_cross.py).
 *
 * There is no AArch64 Python here, so this harness plays the loader's part for one known
 * model, `@mm(a: tensor<MxKxf32>, b: tensor<KxNxf32>) -> tensor<MxNxf32>` (a matmul): it
 * dlopens the library, calls `_mlir_ciface_mm` with memref descriptors exactly as
 * runtime/package.py does (result pointer first), and compares with a plain C matmul.
 * Prints "OK <max abs error>" and exits 0 when they agree.
 */

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define M 96
#define K 128
#define N 80

typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Memref2D;

static Memref2D describe(float *data, int64_t rows, int64_t cols) {
  Memref2D d = {data, data, 0, {rows, cols}, {cols, 1}};
  return d;
}

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s model.so\n", argv[0]), 2;
  void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) return fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
  void (*entry)(Memref2D *, Memref2D *, Memref2D *) = (void (*)(Memref2D *, Memref2D *, Memref2D *))dlsym(library, "_mlir_ciface_mm");
  if (!entry) return fprintf(stderr, "dlsym: %s\n", dlerror()), 1;
  static float a[M * K], b[K * N], expected[M * N];
  uint32_t state = 12345;
  for (int i = 0; i < M * K; ++i) a[i] = (float)((state = state * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
  for (int i = 0; i < K * N; ++i) b[i] = (float)((state = state * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += a[i * K + k] * b[k * N + j];
      expected[i * N + j] = sum;
    }
  float max_error = 0.0f;
  for (int call = 0; call < 20; ++call) {  /* repeated: the async runtime's tasks and refs */
    Memref2D result, da = describe(a, M, K), db = describe(b, K, N);
    entry(&result, &da, &db);
    if (result.sizes[0] != M || result.sizes[1] != N) return fprintf(stderr, "bad result shape\n"), 1;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float got = result.aligned[result.offset + i * result.strides[0] + j * result.strides[1]];
        float error = fabsf(got - expected[i * N + j]);
        if (error > max_error) max_error = error;
      }
    free(result.allocated);
  }
  printf("OK %g\n", max_error);
  return max_error < 1e-3f ? 0 : 1;
}
