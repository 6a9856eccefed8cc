/* Test driver: open a package with the C runtime and, when asked, run it once on zeros.
 *
 *   probe PATH [-k KEYFILE] [-t DTYPE] [-s D0,D1,...] [-f FILL] [-i INPUT_BYTES] [-o OUTPUT_BYTES]
 *
 * The first input gets shape -s, dtype -t (default: the declared one) and every element
 * FILL (int64 and float32 inputs; 0 otherwise).
 *
 * Prints "status <code> <name>: <message>" for the first failure, or "status 0 ok" plus
 * the model's inputs, outputs and (after a run) the output shape; exits 0 whenever the C
 * runtime returned (a crash or abort is what the tests look for). */
#define _POSIX_C_SOURCE 200809L /* getopt */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilecraft_runtime.h"

static tilecraft_dtype dtype_named(const char *name) {
  for (int d = TILECRAFT_FLOAT32; d <= TILECRAFT_FLOAT4_E2M1FN; ++d)
    if (strcmp(tilecraft_dtype_name((tilecraft_dtype)d), name) == 0)
      return (tilecraft_dtype)d;
  return TILECRAFT_DTYPE_UNKNOWN;
}

static int report(const tilecraft_error *error) {
  printf("status %d %s: %s\n", (int)error->status, tilecraft_status_name(error->status), error->message);
  return 0;
}

int main(int argc, char **argv) {
  const char *key = NULL, *dtype = NULL, *shape = NULL;
  long long input_bytes = -1, output_bytes = -1, fill = 0;
  int option;
  while ((option = getopt(argc, argv, "k:t:s:f:i:o:")) != -1) {
    switch (option) {
    case 'k': key = optarg; break;
    case 't': dtype = optarg; break;
    case 's': shape = optarg; break;
    case 'f': fill = atoll(optarg); break;
    case 'i': input_bytes = atoll(optarg); break;
    case 'o': output_bytes = atoll(optarg); break;
    default: return 2;
    }
  }
  if (optind >= argc)
    return 2;
  tilecraft_model *model;
  tilecraft_error error;
  if (tilecraft_model_open(argv[optind], key, &model, &error) != TILECRAFT_OK)
    return report(&error);
  printf("status 0 ok\n");
  for (size_t i = 0; i < tilecraft_model_num_inputs(model); ++i) {
    tilecraft_tensor_info info;
    tilecraft_model_input(model, i, &info);
    printf("input %s %s", info.name, tilecraft_dtype_name(info.dtype));
    for (int32_t d = 0; d < info.rank; ++d)
      printf(" %lld", (long long)info.shape[d]);
    printf("\n");
  }
  for (size_t i = 0; i < tilecraft_model_num_outputs(model); ++i) {
    tilecraft_tensor_info info;
    tilecraft_model_output(model, i, &info);
    printf("output %s %s", info.name, tilecraft_dtype_name(info.dtype));
    for (int32_t d = 0; d < info.rank; ++d)
      printf(" %lld", (long long)info.shape[d]);
    printf("\n");
  }
  if (shape) {
    tilecraft_tensor input = {0}, output = {0};
    tilecraft_tensor_info info;
    tilecraft_model_input(model, 0, &info);
    input.dtype = dtype ? dtype_named(dtype) : info.dtype;
    size_t elements = 1;
    for (char *text = (char *)shape; *text; ++input.rank) {
      input.shape[input.rank] = strtoll(text, &text, 10);
      elements *= (size_t)(input.shape[input.rank] > 0 ? input.shape[input.rank] : 0);
      if (*text == ',')
        ++text;
    }
    size_t item = tilecraft_dtype_size(input.dtype) ? tilecraft_dtype_size(input.dtype) : 1;
    input.size_bytes = input_bytes >= 0 ? (size_t)input_bytes : elements * item;
    input.data = calloc(1, input.size_bytes + 64);
    for (size_t e = 0; input.data && e < elements && e * item < input.size_bytes; ++e) {
      if (input.dtype == TILECRAFT_INT64)
        ((int64_t *)input.data)[e] = fill;
      else if (input.dtype == TILECRAFT_FLOAT32)
        ((float *)input.data)[e] = (float)fill;
    }
    tilecraft_model_output(model, 0, &info);
    output.dtype = info.dtype;
    output.size_bytes = output_bytes >= 0 ? (size_t)output_bytes : (size_t)1 << 20;
    output.data = calloc(1, output.size_bytes + 64);
    tilecraft_status status = tilecraft_model_run(model, &input, 1, &output, 1, &error);
    if (status != TILECRAFT_OK) {
      report(&error);
    } else {
      printf("ran: output shape");
      for (int32_t d = 0; d < output.rank; ++d)
        printf(" %lld", (long long)output.shape[d]);
      printf("\n");
    }
    free(input.data);
    free(output.data);
  }
  tilecraft_model_close(model);
  return 0;
}
