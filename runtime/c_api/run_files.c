/* The emulated device's runner (runtime/emulated.py): one run of a package on inputs read
 * from raw files, outputs written as raw files, per-call seconds printed.
 *
 *   run_files PACKAGE OUTDIR REPEAT NUMBER MIN_REPEAT_MS INPUT...   INPUT: FILE:D0,D1,...
 *
 * Why a program of its own: `tilecraft serve --emulate ARCH` runs packages built for another
 * architecture under qemu-user, where no Python of that architecture exists; this file,
 * cross-compiled with the C runtime (tilecraft_runtime.c), is all that runs under the
 * emulator. Input files hold the C-contiguous elements of each input in its declared dtype.
 *
 * Output buffers start at the size of the outputs' static shapes (16 bytes per dynamic
 * one) and grow on TILECRAFT_ERROR_BUFFER_TOO_SMALL, as docs/deploy.md tells callers to.
 * With REPEAT > 0 the model is called once untimed, then REPEAT times NUMBER calls, NUMBER
 * doubling until a measurement lasts MIN_REPEAT_MS, as runtime/timing.py's measure does.
 *
 * Prints, one line each: "output I DTYPE D0 D1 ..." (written to OUTDIR/outputI.bin), then
 * "per_call SECONDS" per measurement; or "status CODE NAME: MESSAGE" for a failure of the
 * runtime, exit status 3. Exit status 2: bad arguments or an unreadable/unwritable file. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tilecraft_runtime.h"

#define INITIAL_ROOM 16

static int fail(const tilecraft_error *error) {
  printf("status %d %s: %s\n", (int)error->status, tilecraft_status_name(error->status), error->message);
  return 3;
}

static int usage(const char *why) {
  fprintf(stderr, "run_files: %s\n", why);
  return 2;
}

static double now(void) {
  struct timespec moment;
  clock_gettime(CLOCK_MONOTONIC, &moment);
  return (double)moment.tv_sec + 1e-9 * (double)moment.tv_nsec;
}

static int read_input(char *spec, tilecraft_model *model, size_t index, tilecraft_tensor *tensor) {
  char *colon = strrchr(spec, ':');
  if (!colon)
    return usage("an input is not FILE:D0,D1,...");
  *colon = '\0';
  tilecraft_tensor_info info;
  tensor->dtype = tilecraft_model_input(model, index, &info) == TILECRAFT_OK ? info.dtype : TILECRAFT_FLOAT32;
  for (char *text = colon + 1; *text && tensor->rank < TILECRAFT_MAX_RANK; ++tensor->rank) {
    tensor->shape[tensor->rank] = strtoll(text, &text, 10);
    if (*text == ',')
      ++text;
  }
  FILE *stream = fopen(spec, "rb");
  if (!stream)
    return usage("cannot open an input file");
  fseek(stream, 0, SEEK_END);
  tensor->size_bytes = (size_t)ftell(stream);
  fseek(stream, 0, SEEK_SET);
  tensor->data = malloc(tensor->size_bytes + 64);
  size_t got = tensor->data ? fread(tensor->data, 1, tensor->size_bytes, stream) : 0;
  fclose(stream);
  return got == tensor->size_bytes ? 0 : usage("cannot read an input file");
}

static size_t output_bytes(const tilecraft_tensor *tensor) {
  size_t bytes = tilecraft_dtype_size(tensor->dtype);
  for (int32_t d = 0; d < tensor->rank; ++d)
    bytes *= (size_t)tensor->shape[d];
  return bytes;
}

int main(int argc, char **argv) {
  if (argc < 6)
    return usage("usage: run_files PACKAGE OUTDIR REPEAT NUMBER MIN_REPEAT_MS INPUT...");
  const char *package = argv[1], *directory = argv[2];
  long repeat = atol(argv[3]), number = atol(argv[4]);
  double min_repeat_s = atof(argv[5]) / 1e3;
  if (repeat < 0 || number < 1)
    return usage("REPEAT must be >= 0 and NUMBER >= 1");
  tilecraft_model *model;
  tilecraft_error error;
  if (tilecraft_model_open(package, NULL, &model, &error) != TILECRAFT_OK)
    return fail(&error);
  size_t num_inputs = (size_t)(argc - 6), num_outputs = tilecraft_model_num_outputs(model);
  tilecraft_tensor *inputs = calloc(num_inputs + 1, sizeof *inputs);
  tilecraft_tensor *outputs = calloc(num_outputs + 1, sizeof *outputs);
  for (size_t i = 0; i < num_inputs; ++i)
    if (read_input(argv[6 + i], model, i, &inputs[i]) != 0)
      return 2;
  for (size_t i = 0; i < num_outputs; ++i) {
    tilecraft_tensor_info info;
    tilecraft_model_output(model, i, &info);
    size_t room = tilecraft_dtype_size(info.dtype);
    for (int32_t d = 0; d < info.rank; ++d)
      room *= info.shape[d] < 0 ? INITIAL_ROOM : (size_t)info.shape[d];
    outputs[i].dtype = info.dtype;
    outputs[i].size_bytes = room ? room : INITIAL_ROOM;
    outputs[i].data = malloc(outputs[i].size_bytes + 64);
  }
  tilecraft_status status;
  for (int retries = 0;; ++retries) {
    status = tilecraft_model_run(model, inputs, num_inputs, outputs, num_outputs, &error);
    if (status != TILECRAFT_ERROR_BUFFER_TOO_SMALL || retries == 8)
      break;
    for (size_t i = 0; i < num_outputs; ++i) {
      size_t needed = output_bytes(&outputs[i]);
      if (needed > outputs[i].size_bytes) {
        free(outputs[i].data);
        outputs[i].size_bytes = needed;
        outputs[i].data = malloc(needed + 64);
      }
    }
  }
  if (status != TILECRAFT_OK)
    return fail(&error);
  for (size_t i = 0; i < num_outputs; ++i) {
    size_t bytes = output_bytes(&outputs[i]);
    printf("output %zu %s", i, tilecraft_dtype_name(outputs[i].dtype));
    for (int32_t d = 0; d < outputs[i].rank; ++d)
      printf(" %lld", (long long)outputs[i].shape[d]);
    printf("\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/output%zu.bin", directory, i);
    FILE *out = fopen(path, "wb");
    if (!out)
      return usage("cannot write an output file");
    size_t written = fwrite(outputs[i].data, 1, bytes, out);
    if (fclose(out) != 0 || written != bytes)
      return usage("cannot write an output file");
  }
  for (long r = 0; r < repeat; ++r) {
    double elapsed;
    for (;;) {
      double start = now();
      for (long n = 0; n < number && status == TILECRAFT_OK; ++n)
        status = tilecraft_model_run(model, inputs, num_inputs, outputs, num_outputs, &error);
      elapsed = now() - start;
      if (status != TILECRAFT_OK)
        return fail(&error);
      if (elapsed >= min_repeat_s || number >= (1L << 20))
        break;
      number *= 2;
    }
    printf("per_call %.9e\n", elapsed / (double)number);
  }
  for (size_t i = 0; i < num_outputs; ++i)
    free(outputs[i].data);
  for (size_t i = 0; i < num_inputs; ++i)
    free(inputs[i].data);
  free(inputs);
  free(outputs);
  tilecraft_model_close(model);
  return 0;
}
