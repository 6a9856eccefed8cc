/* The "toy accelerator"'s kernel library: what a vendor SDK would ship as a binary.
 *
 * Built when the package is installed (setup.py) into toy_accelerator/libtoy_kernels.so.
 * Every function takes MLIR's C interface: one pointer to a memref descriptor per buffer
 * ({T *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]}, strides in
 * elements), scalars by value, inputs first, then the output buffer it fills. */
#include <stdint.h>

typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[4], strides[4];
} Tensor4;

#define AT(t, a, b, c, d) \
  ((t)->aligned[(t)->offset + (a) * (t)->strides[0] + (b) * (t)->strides[1] + \
                (c) * (t)->strides[2] + (d) * (t)->strides[3]])

/* out[n, f, y, x] = init[n, f, y, x]
 *                 + sum_{c, i, j} in[n, c, y*sy + i*dy, x*sx + j*dx] * filter[f, c, i, j]
 * (NCHW activations, FCHW filters: linalg.conv_2d_nchw_fchw; padding is done before). */
void toy_conv2d_nchw_fchw(Tensor4 *in, Tensor4 *filter, Tensor4 *init, int64_t sy, int64_t sx,
                          int64_t dy, int64_t dx, Tensor4 *out) {
  const int64_t N = out->sizes[0], F = out->sizes[1], H = out->sizes[2], W = out->sizes[3];
  const int64_t C = filter->sizes[1], KH = filter->sizes[2], KW = filter->sizes[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          float acc = AT(init, n, f, y, x);
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j)
                acc += AT(in, n, c, y * sy + i * dy, x * sx + j * dx) * AT(filter, f, c, i, j);
          AT(out, n, f, y, x) = acc;
        }
}

/* The same for NHWC activations and HWCF filters (linalg.conv_2d_nhwc_hwcf). */
void toy_conv2d_nhwc_hwcf(Tensor4 *in, Tensor4 *filter, Tensor4 *init, int64_t sy, int64_t sx,
                          int64_t dy, int64_t dx, Tensor4 *out) {
  const int64_t N = out->sizes[0], H = out->sizes[1], W = out->sizes[2], F = out->sizes[3];
  const int64_t KH = filter->sizes[0], KW = filter->sizes[1], C = filter->sizes[2];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        for (int64_t f = 0; f < F; ++f) {
          float acc = AT(init, n, y, x, f);
          for (int64_t i = 0; i < KH; ++i)
            for (int64_t j = 0; j < KW; ++j)
              for (int64_t c = 0; c < C; ++c)
                acc += AT(in, n, y * sy + i * dy, x * sx + j * dx, c) * AT(filter, i, j, c, f);
          AT(out, n, y, x, f) = acc;
        }
}
