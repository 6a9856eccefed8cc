/* The part of MLIR's libmlir_c_runner_utils that compiled models call, in plain C.
 *
 * Why: `memref.copy` between buffers with non-identity layouts lowers to a call of
 * `memrefCopy`, which the JIT takes from libmlir_c_runner_utils.so; that library needs
 * libMLIR.so and libLLVM.so, far too much to ship in a package, so this file is linked
 * into every package's shared library instead. Same ABI as upstream (CRunnerUtils.cpp):
 * element size in bytes, then two unranked memrefs {rank, descriptor*}, where a descriptor
 * is {allocated, aligned, offset, sizes[rank], strides[rank]} (strides in elements).
 */

#include <stdint.h>
#include <string.h>

/* Hidden: the model.o linked beside this file calls these; nothing outside the package
 * library may bind to them (nor may the library bind to MLIR's own runtime that a JIT in
 * the same process loaded globally). */
#define RUNTIME_API __attribute__((visibility("hidden")))

typedef struct {
  int64_t rank;
  void *descriptor;
} UnrankedMemRef;

typedef struct {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizes_and_strides[];
} Descriptor;

static void copy_dims(int64_t element_size, int64_t rank, int64_t dim, const int64_t *sizes,
                      const int64_t *src_strides, const int64_t *dst_strides, const char *src,
                      char *dst) {
  if (dim == rank) {
    memcpy(dst, src, (size_t)element_size);
    return;
  }
  /* The innermost dimension contiguous on both sides: one memcpy for the whole row. */
  if (dim == rank - 1 && src_strides[dim] == 1 && dst_strides[dim] == 1) {
    memcpy(dst, src, (size_t)(element_size * sizes[dim]));
    return;
  }
  for (int64_t i = 0; i < sizes[dim]; ++i)
    copy_dims(element_size, rank, dim + 1, sizes, src_strides, dst_strides,
              src + i * src_strides[dim] * element_size, dst + i * dst_strides[dim] * element_size);
}

RUNTIME_API void memrefCopy(int64_t element_size, UnrankedMemRef *src_arg, UnrankedMemRef *dst_arg) {
  int64_t rank = src_arg->rank;
  Descriptor *src = src_arg->descriptor, *dst = dst_arg->descriptor;
  const int64_t *sizes = src->sizes_and_strides;
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] == 0) return;
  copy_dims(element_size, rank, 0, sizes, src->sizes_and_strides + rank,
            dst->sizes_and_strides + rank, src->aligned + src->offset * element_size,
            dst->aligned + dst->offset * element_size);
}
