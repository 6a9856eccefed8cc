/* tilecraft_runtime.h: run a compiled tilecraft package from C, without Python.
 *
 * A package is what `tilecraft compile -o model.tar` (or `tilecraft.compile(...,
 * package_path=...)`) and `CompiledModule.export_library("model.so")` write for an LLVM
 * (CPU) target: the compiled model as a shared library, with a manifest describing its
 * inputs and outputs. This library opens one, checks it as the Python loader does
 * (tilecraft.runtime.load), and runs it on buffers the caller owns. See docs/deploy.md.
 *
 *   tilecraft_model *model;
 *   tilecraft_error error;
 *   if (tilecraft_model_open("digits.tar", NULL, &model, &error) != TILECRAFT_OK) {
 *     fprintf(stderr, "%s\n", error.message);
 *     return 1;
 *   }
 *   tilecraft_tensor input = {images, sizeof images, TILECRAFT_FLOAT32, 4, {n, 1, 16, 16}};
 *   tilecraft_tensor output = {logits, sizeof logits, TILECRAFT_FLOAT32, 2, {0}};
 *   tilecraft_model_run(model, &input, 1, &output, 1, &error);
 *   tilecraft_model_close(model);
 *
 * What opening checks (each failure is a status code and a message, never an abort):
 *   - a `.tar` package: only the known members (manifest.json, model.so, profile.so,
 *     signature.json, lib*.so extern libraries), regular files, each below 16 GiB;
 *     with a trusted key, the signature (HMAC-SHA256 over every member and every archive
 *     byte before signature.json) before anything is parsed or loaded;
 *   - the manifest: format name and version, its required fields, this machine's
 *     architecture and the CPU features the code needs (/proc/cpuinfo on Linux);
 *   - the SHA-256 of model.so and of every other library in the package;
 *   - the call contract compiled into model.so (entry, inputs, outputs, dimension
 *     relations, run-time check messages) equal to the manifest's.
 * Packages written as one `.so` carry their manifest inside and no hashes or signature (a
 * file cannot hold its own hash); loading one runs its initializers before any check, as
 * any dlopen does. The extracted folder of a `.tar` (manifest.json beside model.so) is
 * checked like the archive, except for the signature.
 *
 * Threads: a loaded model is read-only; any number of threads may call
 * tilecraft_model_run on it at once (each call has its own argument frame, and run-time
 * check failures are kept per thread). tilecraft_model_close must not race with runs.
 *
 * Memory: the model's outputs are allocated by its code for each call; run copies them
 * into the caller's output buffers and frees them before it returns. Nothing the library
 * allocates outlives tilecraft_model_close. A CUDA package instead copies each output from
 * the device straight into the caller's buffer, and its input and output buffers may be
 * device memory (cuMemAlloc'd in device 0's primary context): then nothing crosses to the
 * host (docs/cuda.md).
 *
 * Link: -ltilecraft_runtime -ldl -lpthread (static) or the shared library alone.
 */
#ifndef TILECRAFT_RUNTIME_H
#define TILECRAFT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TILECRAFT_API __attribute__((visibility("default")))
#else
#define TILECRAFT_API
#endif

/* The package format this runtime reads (runtime/package.py FORMAT_VERSION). */
#define TILECRAFT_PACKAGE_FORMAT_VERSION 1
/* Tensors of higher rank are refused when the package is opened. */
#define TILECRAFT_MAX_RANK 16
/* Room for an error message, NUL included (longer messages are cut). */
#define TILECRAFT_MESSAGE_SIZE 1024

/* What went wrong; 0 is success. Stable numbers: they may be stored or compared. */
typedef enum tilecraft_status {
  TILECRAFT_OK = 0,
  TILECRAFT_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, an index out of range, a bad tensor struct */
  TILECRAFT_ERROR_IO = 2,               /* a file that cannot be read or written */
  TILECRAFT_ERROR_PACKAGE = 3,          /* not a package, truncated, corrupted, tampered, malformed */
  TILECRAFT_ERROR_TARGET = 4,           /* built for another architecture or for CPU features this one lacks */
  TILECRAFT_ERROR_SIGNATURE = 5,        /* unsigned, signed with another key, or changed after signing */
  TILECRAFT_ERROR_UNSUPPORTED = 6,      /* a package feature this C runtime cannot run (see the message) */
  TILECRAFT_ERROR_ARGUMENT_TYPE = 7,    /* a tensor of the wrong dtype */
  TILECRAFT_ERROR_ARGUMENT_VALUE = 8,   /* a wrong count of tensors, rank or shape; an unaligned buffer */
  TILECRAFT_ERROR_BUFFER_TOO_SMALL = 9, /* an input or output buffer smaller than its tensor */
  TILECRAFT_ERROR_RUNTIME_CHECK = 10,   /* a check in the model's code failed (index, shape, allocation) */
  TILECRAFT_ERROR_OUT_OF_MEMORY = 11,
  TILECRAFT_ERROR_DEVICE = 12           /* a CUDA package where no driver or GPU is, or a failed driver call */
} tilecraft_status;

/* Element types, by the names numpy gives them in the manifest. */
typedef enum tilecraft_dtype {
  TILECRAFT_DTYPE_UNKNOWN = 0,
  TILECRAFT_FLOAT32, TILECRAFT_FLOAT64, TILECRAFT_FLOAT16, TILECRAFT_BFLOAT16,
  TILECRAFT_INT8, TILECRAFT_INT16, TILECRAFT_INT32, TILECRAFT_INT64,
  TILECRAFT_UINT8, TILECRAFT_UINT16, TILECRAFT_UINT32, TILECRAFT_UINT64,
  TILECRAFT_BOOL, /* one byte per element, 0 or 1 */
  TILECRAFT_FLOAT8_E4M3FN, TILECRAFT_FLOAT8_E4M3FNUZ, TILECRAFT_FLOAT8_E5M2, TILECRAFT_FLOAT8_E5M2FNUZ,
  TILECRAFT_FLOAT8_E8M0FNU,
  TILECRAFT_INT4, TILECRAFT_UINT4, TILECRAFT_INT2, TILECRAFT_UINT2, TILECRAFT_FLOAT4_E2M1FN /* one byte each */
} tilecraft_dtype;

/* A status and a message naming the problem (and the file or tensor). */
typedef struct tilecraft_error {
  tilecraft_status status;
  char message[TILECRAFT_MESSAGE_SIZE];
} tilecraft_error;

/* One input or output as the package declares it. `shape` has `rank` entries, -1 for a
 * dimension known only at run time. Valid until the model is closed. */
typedef struct tilecraft_tensor_info {
  const char *name;
  tilecraft_dtype dtype;
  int32_t rank;
  const int64_t *shape;
} tilecraft_tensor_info;

/* A caller-owned buffer: C-contiguous (row-major) elements at `data`, aligned to the
 * element size, `size_bytes` long. Inputs: `rank` and `shape` say what the buffer holds.
 * Outputs: `size_bytes` is the room; run writes the output's `rank` and `shape`. */
typedef struct tilecraft_tensor {
  void *data;
  size_t size_bytes;
  tilecraft_dtype dtype;
  int32_t rank;
  int64_t shape[TILECRAFT_MAX_RANK];
} tilecraft_tensor;

typedef struct tilecraft_model tilecraft_model;

/* Open and check the package at `path`: a `.tar` archive, a `.so` from export_library, or
 * the folder a `.tar` was extracted to. `trust_key_path` (NULL: none) names a key file
 * (`tilecraft keygen`): the package must then be a `.tar` signed with that key. On
 * success *model owns everything it loaded; on failure *model is NULL. `error` may be
 * NULL. */
TILECRAFT_API tilecraft_status tilecraft_model_open(const char *path, const char *trust_key_path,
                                                    tilecraft_model **model, tilecraft_error *error);

/* Unload the model and free all it holds. NULL is ignored. */
TILECRAFT_API void tilecraft_model_close(tilecraft_model *model);

TILECRAFT_API size_t tilecraft_model_num_inputs(const tilecraft_model *model);
TILECRAFT_API size_t tilecraft_model_num_outputs(const tilecraft_model *model);
/* Input / output `index` (0-based) in *info. */
TILECRAFT_API tilecraft_status tilecraft_model_input(const tilecraft_model *model, size_t index,
                                                     tilecraft_tensor_info *info);
TILECRAFT_API tilecraft_status tilecraft_model_output(const tilecraft_model *model, size_t index,
                                                      tilecraft_tensor_info *info);
/* The position of the input / output called `name`, or -1. */
TILECRAFT_API int64_t tilecraft_model_input_index(const tilecraft_model *model, const char *name);
TILECRAFT_API int64_t tilecraft_model_output_index(const tilecraft_model *model, const char *name);
/* The package's manifest (JSON text), e.g. for its "target" or "tilecraft_version". */
TILECRAFT_API const char *tilecraft_model_manifest(const tilecraft_model *model);

/* Run the model: `inputs` in the package's input order, `outputs` in its output order.
 * Checks every tensor against the package's contract before any of its code runs (dtype,
 * rank, static dimensions, dimensions that must agree, buffer sizes and alignment), then
 * calls the model and copies each output into its buffer, setting its rank and shape. A
 * buffer too small for an output whose shape is known only after the call gives
 * TILECRAFT_ERROR_BUFFER_TOO_SMALL with every output's rank and shape set: call again
 * with room for them. Safe to call from many threads at once on one model. */
TILECRAFT_API tilecraft_status tilecraft_model_run(const tilecraft_model *model, const tilecraft_tensor *inputs,
                                                   size_t num_inputs, tilecraft_tensor *outputs,
                                                   size_t num_outputs, tilecraft_error *error);

/* Names: "float32", "int64", ... (the manifest's); "unknown" for others. */
TILECRAFT_API const char *tilecraft_dtype_name(tilecraft_dtype dtype);
/* Bytes per element; 0 for TILECRAFT_DTYPE_UNKNOWN. */
TILECRAFT_API size_t tilecraft_dtype_size(tilecraft_dtype dtype);
/* "ok", "invalid argument", "package", ... */
TILECRAFT_API const char *tilecraft_status_name(tilecraft_status status);
/* The version of this runtime library, "0.1.0"-style. */
TILECRAFT_API const char *tilecraft_runtime_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TILECRAFT_RUNTIME_H */
