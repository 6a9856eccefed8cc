/* malloc and aligned_alloc taking 64-bit sizes, for packages whose C size_t is 32 bits.
 *
 * Why: MLIR lowers memref.alloc and the frames of parallel loops' coroutines to calls of
 * `malloc(i64)` and `aligned_alloc(i64, i64)`, whatever the target (index is 64-bit, as the
 * package's memref descriptors are). On 32-bit ARM an i64 argument takes a register pair,
 * so the C library read aligned_alloc's size from the high word of the alignment (0) and
 * the frame overran its block. compiler/cross_toolchain.py points the calls of 32-bit
 * packages at these functions instead.
 */

#include <stdint.h>
#include <stdlib.h>

__attribute__((visibility("hidden"))) void *tilecraft_malloc_i64(uint64_t size) {
  return size > SIZE_MAX ? NULL : malloc((size_t)size);
}

__attribute__((visibility("hidden"))) void *tilecraft_aligned_alloc_i64(uint64_t alignment, uint64_t size) {
  return size > SIZE_MAX || alignment > SIZE_MAX ? NULL : aligned_alloc((size_t)alignment, (size_t)size);
}
