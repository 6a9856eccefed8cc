/* Classify the held-out handwritten digits with a tilecraft package, from C alone.
 *
 *   classify_digits PACKAGE IMAGES LABELS [LOGITS]
 *
 * PACKAGE: the digits CNN compiled with its batch dimension left dynamic (prepare_digits.py
 * writes digits.tar); IMAGES: float32 images of 1x16x16, one after the other; LABELS: one
 * byte per image; LOGITS (optional): where to write the float32 logits, for comparing
 * with Python. Runs the split in batches of 64 (the last one smaller: the dynamic batch at
 * work) and prints the accuracy. Exit code 0 on success, 1 on any error. */
#include <stdio.h>
#include <stdlib.h>

#include "tilecraft_runtime.h"

#define BATCH 64
#define PIXELS (16 * 16)
#define CLASSES 10

static void *read_all(const char *path, size_t *size) {
  FILE *stream = fopen(path, "rb");
  if (!stream)
    return NULL;
  fseek(stream, 0, SEEK_END);
  long length = ftell(stream);
  fseek(stream, 0, SEEK_SET);
  void *data = length > 0 ? malloc((size_t)length) : NULL;
  if (data && fread(data, 1, (size_t)length, stream) != (size_t)length) {
    free(data);
    data = NULL;
  }
  fclose(stream);
  *size = data ? (size_t)length : 0;
  return data;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PACKAGE IMAGES LABELS [LOGITS]\n", argv[0]);
    return 1;
  }
  size_t image_bytes, label_bytes;
  float *images = read_all(argv[2], &image_bytes);
  unsigned char *labels = read_all(argv[3], &label_bytes);
  size_t count = label_bytes;
  if (!images || !labels || image_bytes != count * PIXELS * sizeof(float)) {
    fprintf(stderr, "cannot read %s and %s as %zu images and labels\n", argv[2], argv[3], count);
    return 1;
  }

  tilecraft_model *model;
  tilecraft_error error;
  if (tilecraft_model_open(argv[1], NULL, &model, &error) != TILECRAFT_OK) {
    fprintf(stderr, "error (%s): %s\n", tilecraft_status_name(error.status), error.message);
    return 1;
  }
  tilecraft_tensor_info input, output;
  tilecraft_model_input(model, 0, &input);
  tilecraft_model_output(model, 0, &output);
  printf("%s: input '%s' %s rank %d, output '%s' %s rank %d\n", argv[1], input.name, tilecraft_dtype_name(input.dtype),
         input.rank, output.name, tilecraft_dtype_name(output.dtype), output.rank);

  float *logits = malloc(count * CLASSES * sizeof(float));
  size_t correct = 0;
  for (size_t start = 0; start < count && logits; start += BATCH) {
    int64_t batch = (int64_t)(count - start < BATCH ? count - start : BATCH);
    tilecraft_tensor x = {images + start * PIXELS, (size_t)batch * PIXELS * sizeof(float), TILECRAFT_FLOAT32, 4,
                          {batch, 1, 16, 16}};
    tilecraft_tensor y = {logits + start * CLASSES, (size_t)batch * CLASSES * sizeof(float), TILECRAFT_FLOAT32, 0,
                          {0}};
    if (tilecraft_model_run(model, &x, 1, &y, 1, &error) != TILECRAFT_OK) {
      fprintf(stderr, "error (%s): %s\n", tilecraft_status_name(error.status), error.message);
      tilecraft_model_close(model);
      return 1;
    }
    for (int64_t i = 0; i < batch; ++i) {
      const float *row = logits + (start + (size_t)i) * CLASSES;
      int best = 0;
      for (int c = 1; c < CLASSES; ++c)
        if (row[c] > row[best])
          best = c;
      correct += best == labels[start + (size_t)i];
    }
  }
  tilecraft_model_close(model);
  if (!logits)
    return 1;
  printf("accuracy: %.4f (%zu of %zu held-out digits)\n", (double)correct / (double)count, correct, count);
  if (argc > 4) {
    FILE *out = fopen(argv[4], "wb");
    if (!out || fwrite(logits, sizeof(float), count * CLASSES, out) != count * CLASSES) {
      fprintf(stderr, "cannot write %s\n", argv[4]);
      return 1;
    }
    fclose(out);
  }
  free(logits);
  free(images);
  free(labels);
  return 0;
}
