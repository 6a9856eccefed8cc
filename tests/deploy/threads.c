/* Test driver: one loaded model run from several threads at once, every result compared
 * with the same input's result computed alone first.
 *
 *   threads PACKAGE IMAGES THREADS ROUNDS
 *
 * Thread t runs batches of 1 + (round * THREADS + t) % 32 images starting at a different
 * offset each round (the batch dimension is dynamic, so the calls differ in shape too).
 * Prints "mismatches N calls M" and exits 1 when N > 0 or a call failed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilecraft_runtime.h"

#define PIXELS 256
#define CLASSES 10

static const tilecraft_model *model;
static const float *images;
static float *reference; /* per (round, thread): the logits of its call, computed alone */
static size_t count;
static int threads, rounds;

typedef struct {
  int index;
  long mismatches, calls, failures;
} work;

static int run(size_t start, int64_t batch, float *logits, tilecraft_error *error) {
  tilecraft_tensor x = {(void *)(images + start * PIXELS), (size_t)batch * PIXELS * sizeof(float), TILECRAFT_FLOAT32,
                        4, {batch, 1, 16, 16}};
  tilecraft_tensor y = {logits, (size_t)batch * CLASSES * sizeof(float), TILECRAFT_FLOAT32, 0, {0}};
  return tilecraft_model_run(model, &x, 1, &y, 1, error) == TILECRAFT_OK;
}

/* The call thread `index` makes in `round`: its first image and batch size. */
static void call_of(int round, int index, size_t *start, int64_t *batch) {
  *batch = 1 + (round * threads + index) % 32;
  *start = ((size_t)round * 37 + (size_t)index * 101) % (count - (size_t)*batch);
}

static float *expected(int round, int index) {
  return reference + ((size_t)round * (size_t)threads + (size_t)index) * 32 * CLASSES;
}

static void *worker(void *argument) {
  work *job = argument;
  float logits[32 * CLASSES];
  tilecraft_error error;
  for (int round = 0; round < rounds; ++round) {
    int64_t batch;
    size_t start;
    call_of(round, job->index, &start, &batch);
    ++job->calls;
    if (!run(start, batch, logits, &error)) {
      fprintf(stderr, "thread %d: %s\n", job->index, error.message);
      ++job->failures;
      continue;
    }
    if (memcmp(logits, expected(round, job->index), (size_t)batch * CLASSES * sizeof(float)) != 0)
      ++job->mismatches;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5)
    return 2;
  threads = atoi(argv[3]);
  rounds = atoi(argv[4]);
  FILE *stream = fopen(argv[2], "rb");
  if (!stream)
    return 2;
  fseek(stream, 0, SEEK_END);
  count = (size_t)ftell(stream) / (PIXELS * sizeof(float));
  fseek(stream, 0, SEEK_SET);
  float *data = malloc(count * PIXELS * sizeof(float));
  if (!data || fread(data, sizeof(float), count * PIXELS, stream) != count * PIXELS)
    return 2;
  fclose(stream);
  images = data;
  tilecraft_model *opened;
  tilecraft_error error;
  if (tilecraft_model_open(argv[1], NULL, &opened, &error) != TILECRAFT_OK) {
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  model = opened;
  if (threads < 1 || threads > 64 || rounds < 1 || count < 33)
    return 2;
  /* The reference: every call the threads will make, made first from this thread alone. */
  reference = malloc((size_t)rounds * (size_t)threads * 32 * CLASSES * sizeof(float));
  if (!reference)
    return 2;
  for (int round = 0; round < rounds; ++round)
    for (int t = 0; t < threads; ++t) {
      int64_t batch;
      size_t start;
      call_of(round, t, &start, &batch);
      if (!run(start, batch, expected(round, t), &error)) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
      }
    }
  pthread_t ids[64];
  work jobs[64] = {{0}};
  for (int t = 0; t < threads; ++t) {
    jobs[t].index = t;
    pthread_create(&ids[t], NULL, worker, &jobs[t]);
  }
  long mismatches = 0, calls = 0, failures = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    mismatches += jobs[t].mismatches;
    calls += jobs[t].calls;
    failures += jobs[t].failures;
  }
  printf("mismatches %ld calls %ld failures %ld\n", mismatches, calls, failures);
  tilecraft_model_close(opened);
  free(reference);
  free(data);
  return mismatches || failures ? 1 : 0;
}
