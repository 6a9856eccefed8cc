/* Test driver: run a package on inputs read from raw files, write its outputs as raw files.
 *
 *   runner [-r ROOM] PACKAGE OUTDIR INPUT...      INPUT: FILE:D0,D1,... (dtype: the declared one)
 *
 * Each output buffer starts with ROOM bytes (default 16); when an output does not fit, the
 * call returns TILECRAFT_ERROR_BUFFER_TOO_SMALL with the output's shape set, and the
 * driver grows the buffer to that shape and runs again, as docs/deploy.md tells callers to.
 * Prints "retries N", then "output I SHAPE..." per output (written to OUTDIR/outputI.bin),
 * or "status CODE NAME: MESSAGE" for a failure. Exits 0 whenever the runtime returned. */
#define _POSIX_C_SOURCE 200809L /* getopt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilecraft_runtime.h"

static int report(const tilecraft_error *error) {
  printf("status %d %s: %s\n", (int)error->status, tilecraft_status_name(error->status), error->message);
  return 0;
}

int main(int argc, char **argv) {
  size_t room = 16;
  int option;
  while ((option = getopt(argc, argv, "r:")) != -1) {
    if (option != 'r')
      return 2;
    room = (size_t)atoll(optarg);
  }
  if (argc - optind < 2)
    return 2;
  const char *package = argv[optind], *directory = argv[optind + 1];
  tilecraft_model *model;
  tilecraft_error error;
  if (tilecraft_model_open(package, NULL, &model, &error) != TILECRAFT_OK)
    return report(&error);
  size_t num_inputs = (size_t)(argc - optind - 2), num_outputs = tilecraft_model_num_outputs(model);
  tilecraft_tensor *inputs = calloc(num_inputs + 1, sizeof *inputs);
  tilecraft_tensor *outputs = calloc(num_outputs + 1, sizeof *outputs);
  for (size_t i = 0; i < num_inputs; ++i) {
    char *spec = argv[optind + 2 + (int)i], *colon = strrchr(spec, ':');
    if (!colon)
      return 2;
    *colon = '\0';
    tilecraft_tensor_info info;
    inputs[i].dtype = tilecraft_model_input(model, i, &info) == TILECRAFT_OK ? info.dtype : TILECRAFT_FLOAT32;
    for (char *text = colon + 1; *text; ++inputs[i].rank) {
      inputs[i].shape[inputs[i].rank] = strtoll(text, &text, 10);
      if (*text == ',')
        ++text;
    }
    FILE *stream = fopen(spec, "rb");
    if (!stream)
      return 2;
    fseek(stream, 0, SEEK_END);
    inputs[i].size_bytes = (size_t)ftell(stream);
    fseek(stream, 0, SEEK_SET);
    inputs[i].data = malloc(inputs[i].size_bytes + 8);
    if (fread(inputs[i].data, 1, inputs[i].size_bytes, stream) != inputs[i].size_bytes)
      return 2;
    fclose(stream);
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    tilecraft_tensor_info info;
    tilecraft_model_output(model, i, &info);
    outputs[i].dtype = info.dtype;
    outputs[i].size_bytes = room;
    outputs[i].data = malloc(room + 8);
  }
  int retries = 0;
  tilecraft_status status;
  while ((status = tilecraft_model_run(model, inputs, num_inputs, outputs, num_outputs, &error)) ==
             TILECRAFT_ERROR_BUFFER_TOO_SMALL && retries < 8) {
    ++retries;
    for (size_t i = 0; i < num_outputs; ++i) {
      size_t needed = tilecraft_dtype_size(outputs[i].dtype);
      for (int32_t d = 0; d < outputs[i].rank; ++d)
        needed *= (size_t)outputs[i].shape[d];
      if (needed > outputs[i].size_bytes) {
        free(outputs[i].data);
        outputs[i].size_bytes = needed;
        outputs[i].data = malloc(needed + 8);
      }
    }
  }
  printf("retries %d\n", retries);
  if (status != TILECRAFT_OK)
    report(&error);
  for (size_t i = 0; i < num_outputs && status == TILECRAFT_OK; ++i) {
    size_t bytes = tilecraft_dtype_size(outputs[i].dtype);
    printf("output %zu", i);
    for (int32_t d = 0; d < outputs[i].rank; ++d) {
      printf(" %lld", (long long)outputs[i].shape[d]);
      bytes *= (size_t)outputs[i].shape[d];
    }
    printf("\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/output%zu.bin", directory, i);
    FILE *out = fopen(path, "wb");
    if (!out || fwrite(outputs[i].data, 1, bytes, out) != bytes)
      return 2;
    fclose(out);
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
