/* The tilecraft C runtime: open, check and run a package without Python.
 *
 * This file mirrors runtime/package.py (the loader) and runtime/package_signing.py (the
 * signature check) step for step, so that a package the Python side refuses is refused
 * here too, with the same reason; runtime/memref.py is the calling convention: every
 * tensor crosses `_mlir_ciface_<entry>` as a memref descriptor {allocated, aligned,
 * offset, sizes[rank], strides[rank]} (the index fields 8-byte words), the results first,
 * through one pointer. On a 32-bit machine (armv7) the two pointers share the first 8-byte
 * word, as the C struct the compiled code expects lays them out (DESCRIPTOR_HEADER_WORDS). The parts that need no package (JSON, SHA-256) live in json.c and sha256.c. */
#define _GNU_SOURCE /* mkdtemp, realpath, strdup on glibc */
#include "tilecraft_runtime.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"

#define RUNTIME_VERSION "0.1.0"
#define FORMAT_NAME "tilecraft-package"
#define MANIFEST "manifest.json"
#define LIBRARY "model.so"
#define PROFILE_LIBRARY "profile.so"
/* 8-byte words of a descriptor's {allocated, aligned} pointers: 2 on 64-bit machines, 1 on
 * 32-bit ones; the offset, sizes and strides follow as int64_t. */
#define DESCRIPTOR_HEADER_WORDS ((2 * sizeof(void *) + sizeof(int64_t) - 1) / sizeof(int64_t))

static void *descriptor_pointer(const int64_t *descriptor, size_t which) {
  void *pointer;
  memcpy(&pointer, (const char *)descriptor + which * sizeof(void *), sizeof pointer);
  return pointer;
}

static void set_descriptor_pointers(int64_t *descriptor, void *data) {
  void *pointers[2] = {data, data};
  memcpy(descriptor, pointers, sizeof pointers);
}
#define SIGNATURE "signature.json"
#define SIGNATURE_FORMAT "tilecraft-package-signature"
#define SIGNATURE_ALGORITHM "hmac-sha256"
#define CONTRACT_SYMBOL "tilecraft_contract"
#define MANIFEST_SYMBOL "tilecraft_manifest"
#define TAKE_SYMBOL "tilecraft_take_check_failure"
/* A CUDA package's runtime (runtime/cuda_runtime.c): its pending error, its weights' release. */
#define TAKE_DEVICE_ERROR_SYMBOL "tilecraft_cuda_take_error"
#define RELEASE_DEVICE_SYMBOL "tilecraft_cuda_release"
#define MAX_MEMBER_BYTES ((uint64_t)16 << 30)
#define MIN_KEY_BYTES 16
/* The longest argument list the entry can be called with (results pointer included). */
#define MAX_CALL_ARGUMENTS 32

/* "device" is compared where present (a CUDA package: how its entry is called; runtime/package.py
 * OPTIONAL_CONTRACT_KEYS); absent on both sides it compares equal, as CPU packages have it. */
static const char *const CONTRACT_KEYS[] = {"entry", "symbol", "inputs", "outputs", "equal_dims", "runtime_checks",
                                            "device"};

/* ---- errors ---------------------------------------------------------------------- */

static tilecraft_status fail(tilecraft_error *error, tilecraft_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static tilecraft_status fail(tilecraft_error *error, tilecraft_status status, const char *format, ...) {
  if (error) {
    va_list args;
    va_start(args, format);
    error->status = status;
    vsnprintf(error->message, sizeof error->message, format, args);
    va_end(args);
  }
  return status;
}

static tilecraft_status succeed(tilecraft_error *error) {
  if (error) {
    error->status = TILECRAFT_OK;
    error->message[0] = '\0';
  }
  return TILECRAFT_OK;
}

/* ---- dtypes ---------------------------------------------------------------------- */

static const struct {
  const char *name;
  tilecraft_dtype dtype;
  size_t size;
} DTYPES[] = {
    {"float32", TILECRAFT_FLOAT32, 4},   {"float64", TILECRAFT_FLOAT64, 8},
    {"float16", TILECRAFT_FLOAT16, 2},   {"bfloat16", TILECRAFT_BFLOAT16, 2},
    {"int8", TILECRAFT_INT8, 1},         {"int16", TILECRAFT_INT16, 2},
    {"int32", TILECRAFT_INT32, 4},       {"int64", TILECRAFT_INT64, 8},
    {"uint8", TILECRAFT_UINT8, 1},       {"uint16", TILECRAFT_UINT16, 2},
    {"uint32", TILECRAFT_UINT32, 4},     {"uint64", TILECRAFT_UINT64, 8},
    {"bool", TILECRAFT_BOOL, 1},         {"float8_e4m3fn", TILECRAFT_FLOAT8_E4M3FN, 1},
    {"float8_e4m3fnuz", TILECRAFT_FLOAT8_E4M3FNUZ, 1}, {"float8_e5m2", TILECRAFT_FLOAT8_E5M2, 1},
    {"float8_e5m2fnuz", TILECRAFT_FLOAT8_E5M2FNUZ, 1}, {"float8_e8m0fnu", TILECRAFT_FLOAT8_E8M0FNU, 1},
    {"int4", TILECRAFT_INT4, 1},         {"uint4", TILECRAFT_UINT4, 1},
    {"int2", TILECRAFT_INT2, 1},         {"uint2", TILECRAFT_UINT2, 1},
    {"float4_e2m1fn", TILECRAFT_FLOAT4_E2M1FN, 1},
};
#define DTYPE_COUNT (sizeof DTYPES / sizeof DTYPES[0])

const char *tilecraft_dtype_name(tilecraft_dtype dtype) {
  for (size_t i = 0; i < DTYPE_COUNT; ++i)
    if (DTYPES[i].dtype == dtype)
      return DTYPES[i].name;
  return "unknown";
}

size_t tilecraft_dtype_size(tilecraft_dtype dtype) {
  for (size_t i = 0; i < DTYPE_COUNT; ++i)
    if (DTYPES[i].dtype == dtype)
      return DTYPES[i].size;
  return 0;
}

static tilecraft_dtype dtype_named(const char *name) {
  for (size_t i = 0; i < DTYPE_COUNT; ++i)
    if (strcmp(DTYPES[i].name, name) == 0)
      return DTYPES[i].dtype;
  return TILECRAFT_DTYPE_UNKNOWN;
}

const char *tilecraft_status_name(tilecraft_status status) {
  switch (status) {
  case TILECRAFT_OK: return "ok";
  case TILECRAFT_ERROR_INVALID_ARGUMENT: return "invalid argument";
  case TILECRAFT_ERROR_IO: return "input/output";
  case TILECRAFT_ERROR_PACKAGE: return "package";
  case TILECRAFT_ERROR_TARGET: return "target";
  case TILECRAFT_ERROR_SIGNATURE: return "signature";
  case TILECRAFT_ERROR_UNSUPPORTED: return "unsupported";
  case TILECRAFT_ERROR_ARGUMENT_TYPE: return "argument type";
  case TILECRAFT_ERROR_ARGUMENT_VALUE: return "argument value";
  case TILECRAFT_ERROR_BUFFER_TOO_SMALL: return "buffer too small";
  case TILECRAFT_ERROR_RUNTIME_CHECK: return "run-time check";
  case TILECRAFT_ERROR_OUT_OF_MEMORY: return "out of memory";
  case TILECRAFT_ERROR_DEVICE: return "device";
  }
  return "unknown status";
}

const char *tilecraft_runtime_version(void) { return RUNTIME_VERSION; }

/* ---- the model ------------------------------------------------------------------- */

typedef struct {
  char *name;
  tilecraft_dtype dtype;
  int32_t rank;
  int64_t shape[TILECRAFT_MAX_RANK]; /* -1: dynamic */
} spec;

typedef struct {
  size_t count;
  int64_t (*members)[2]; /* (input index, axis) */
  int64_t size;          /* -1: fixed by the first member at each call */
} dim_group;

typedef struct {
  char *kind;
  char *message;
} check_entry;

struct tilecraft_model {
  char *path;
  char *manifest_text;
  tc_json *manifest;
  spec *inputs, *outputs;
  size_t num_inputs, num_outputs;
  dim_group *groups;
  size_t num_groups;
  check_entry *checks;
  size_t num_checks;
  void *library;
  void **dependencies;
  size_t num_dependencies;
  void *entry;
  int (*take_failure)(int64_t *);
  int (*take_device_error)(char *, int64_t); /* CUDA packages only */
  uint64_t (*release_device)(void);
  /* The call frame's layout in 8-byte words (as runtime/memref.py CallFrame). */
  size_t frame_words;
  size_t *result_offsets, *argument_offsets;
  /* A CUDA package's entry takes each output's destination after its inputs
   * (targets/cuda/memory.py OUTPUT_ARGUMENTS): the caller's buffers, host or device memory. */
  int output_arguments;
  size_t *destination_offsets;
};

/* The libraries are opened with RTLD_NODELETE: dlclose only drops the reference. Why: the
 * parallel loops' worker threads (runtime/async_runtime.c) live in model.so and never
 * exit; unmapping their code would crash them. */
static void free_model(tilecraft_model *model) {
  if (!model)
    return;
  if (model->release_device) /* the device-resident weights */
    model->release_device();
  if (model->library)
    dlclose(model->library);
  for (size_t i = model->num_dependencies; i-- > 0;)
    dlclose(model->dependencies[i]);
  free(model->dependencies);
  for (size_t i = 0; i < model->num_inputs; ++i)
    free(model->inputs[i].name);
  for (size_t i = 0; i < model->num_outputs; ++i)
    free(model->outputs[i].name);
  free(model->inputs);
  free(model->outputs);
  for (size_t i = 0; i < model->num_groups; ++i)
    free(model->groups[i].members);
  free(model->groups);
  for (size_t i = 0; i < model->num_checks; ++i) {
    free(model->checks[i].kind);
    free(model->checks[i].message);
  }
  free(model->checks);
  free(model->result_offsets);
  free(model->argument_offsets);
  free(model->destination_offsets);
  tc_json_free(model->manifest);
  free(model->manifest_text);
  free(model->path);
  free(model);
}

/* ---- files ----------------------------------------------------------------------- */

static tilecraft_status read_file(const char *path, const char *where, size_t limit, char **data, size_t *size,
                                  tilecraft_error *error) {
  FILE *stream = fopen(path, "rb");
  if (!stream)
    return fail(error, TILECRAFT_ERROR_IO, "%s: cannot open %s (%s)", where, path, strerror(errno));
  size_t capacity = 1 << 16, used = 0;
  char *buffer = malloc(capacity + 1);
  while (buffer) {
    if (used == capacity) {
      if (capacity >= limit) {
        free(buffer);
        fclose(stream);
        return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s is larger than %zu bytes", where, path, limit);
      }
      capacity *= 2;
      char *grown = realloc(buffer, capacity + 1);
      if (!grown) {
        free(buffer);
        buffer = NULL;
        break;
      }
      buffer = grown;
    }
    size_t got = fread(buffer + used, 1, capacity - used, stream);
    used += got;
    if (got == 0)
      break;
  }
  int failed = ferror(stream);
  fclose(stream);
  if (!buffer)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %s", where, path);
  if (failed) {
    free(buffer);
    return fail(error, TILECRAFT_ERROR_IO, "%s: cannot read %s", where, path);
  }
  buffer[used] = '\0';
  *data = buffer;
  *size = used;
  return TILECRAFT_OK;
}

/* SHA-256 of a file as hex; 0 if it cannot be read. */
static int sha256_file(const char *path, char hex[65]) {
  FILE *stream = fopen(path, "rb");
  if (!stream)
    return 0;
  tc_sha256 context;
  unsigned char block[1 << 16], digest[32];
  tc_sha256_init(&context);
  size_t got;
  while ((got = fread(block, 1, sizeof block, stream)) > 0)
    tc_sha256_update(&context, block, got);
  int failed = ferror(stream);
  fclose(stream);
  if (failed)
    return 0;
  tc_sha256_final(&context, digest);
  tc_hex(digest, 32, hex);
  return 1;
}

static int is_file(const char *path) {
  struct stat status;
  return stat(path, &status) == 0 && S_ISREG(status.st_mode);
}

static char *join(const char *directory, const char *name) {
  size_t size = strlen(directory) + strlen(name) + 2;
  char *path = malloc(size);
  if (path)
    snprintf(path, size, "%s/%s", directory, name);
  return path;
}

/* lib<name>.so[.N...]: a bundled extern library (runtime/package.py BUNDLED_LIBRARY). */
static int is_bundled_library_name(const char *name) {
  size_t length = strlen(name);
  if (length < 7 || strncmp(name, "lib", 3) != 0)
    return 0;
  const char *end = strstr(name + 3, ".so");
  while (end) { /* the last ".so" followed by nothing or .digits groups */
    const char *rest = end + 3;
    int ok = 1;
    while (*rest) {
      if (*rest != '.' || !(rest[1] >= '0' && rest[1] <= '9')) {
        ok = 0;
        break;
      }
      ++rest;
      while (*rest >= '0' && *rest <= '9')
        ++rest;
    }
    if (ok && end > name + 3) {
      for (const char *c = name + 3; c < end; ++c)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '.' || *c == '+' || *c == '-'))
          return 0;
      return 1;
    }
    end = strstr(end + 1, ".so");
  }
  return 0;
}

static int is_known_member(const char *name) {
  return strcmp(name, MANIFEST) == 0 || strcmp(name, LIBRARY) == 0 || strcmp(name, PROFILE_LIBRARY) == 0 ||
         strcmp(name, SIGNATURE) == 0 || is_bundled_library_name(name);
}

static void remove_directory(const char *directory) {
  DIR *listing = opendir(directory);
  if (listing) {
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
        continue;
      char *path = join(directory, entry->d_name);
      if (path)
        unlink(path);
      free(path);
    }
    closedir(listing);
  }
  rmdir(directory);
}

/* ---- tar archives ------------------------------------------------------------------ */

typedef struct {
  char name[272];
  uint64_t header_offset; /* where its first header starts (a pax header's, if any) */
  uint64_t data_offset;
  uint64_t size;
} tar_member;

typedef struct {
  tar_member *members;
  size_t count;
} tar_listing;

/* An octal (or GNU base-256) numeric field; 0 on a malformed one. */
static int tar_number(const unsigned char *field, size_t size, uint64_t *out) {
  uint64_t value = 0;
  if (field[0] & 0x80) {
    for (size_t i = 1; i < size; ++i) {
      if (value >> 56)
        return 0;
      value = value << 8 | field[i];
    }
    *out = value;
    return 1;
  }
  size_t i = 0;
  while (i < size && field[i] == ' ')
    ++i;
  int digits = 0;
  for (; i < size && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
    if (value >> 60)
      return 0;
    value = value * 8 + (uint64_t)(field[i] - '0');
  }
  for (; i < size; ++i)
    if (field[i] != ' ' && field[i] != '\0')
      return 0;
  *out = value;
  return digits > 0 || size == 0;
}

static int tar_checksum_ok(const unsigned char *header) {
  uint64_t stored;
  if (!tar_number(header + 148, 8, &stored))
    return 0;
  uint64_t sum = 0;
  for (int i = 0; i < 512; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : header[i];
  return sum == stored;
}

/* The path and size records of a pax extended header. */
static int pax_records(const char *data, size_t size, char *path, size_t path_size, uint64_t *record_size,
                       int *has_size) {
  size_t at = 0;
  while (at < size) {
    size_t length = 0, start = at;
    while (at < size && data[at] >= '0' && data[at] <= '9')
      length = length * 10 + (size_t)(data[at++] - '0');
    if (at >= size || data[at] != ' ' || length == 0 || start + length > size || data[start + length - 1] != '\n')
      return 0;
    const char *record = data + at + 1;
    size_t record_length = start + length - 1 - (at + 1);
    const char *equals = memchr(record, '=', record_length);
    if (!equals)
      return 0;
    size_t key_length = (size_t)(equals - record), value_length = record_length - key_length - 1;
    if (key_length == 4 && memcmp(record, "path", 4) == 0) {
      if (value_length >= path_size)
        return 0;
      memcpy(path, equals + 1, value_length);
      path[value_length] = '\0';
    } else if (key_length == 4 && memcmp(record, "size", 4) == 0) {
      uint64_t value = 0;
      for (size_t i = 0; i < value_length; ++i) {
        char c = equals[1 + i];
        if (c < '0' || c > '9' || value > (UINT64_MAX - 9) / 10)
          return 0;
        value = value * 10 + (uint64_t)(c - '0');
      }
      *record_size = value;
      *has_size = 1;
    }
    at = start + length;
  }
  return 1;
}

/* Unpack the package archive `path` into `directory`: only the known member names, as
 * regular files (runtime/package.py _extract). Lists the members for the signature check. */
static tilecraft_status extract(const char *path, const char *directory, tar_listing *listing,
                                tilecraft_error *error) {
  FILE *stream = fopen(path, "rb");
  if (!stream)
    return fail(error, TILECRAFT_ERROR_IO, "%s: no such package file (%s)", path, strerror(errno));
  tilecraft_status status = TILECRAFT_OK;
  unsigned char header[512];
  uint64_t offset = 0, pending_start = 0;
  char pax_path[256] = "";
  uint64_t pax_size = 0;
  int has_pax = 0, has_pax_size = 0, ended = 0;
  size_t capacity = 0;
  char *copy = malloc(1 << 16);
  if (!copy) {
    fclose(stream);
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  for (;;) {
    size_t got = fread(header, 1, 512, stream);
    if (got == 0 && listing->count > 0 && !has_pax) {
      ended = 1; /* no end-of-archive blocks: tarfile accepts this too */
      break;
    }
    if (got != 512) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package, or truncated (a tar header "
                    "ends early at byte %llu)", path, (unsigned long long)offset);
      break;
    }
    int zero = 1;
    for (int i = 0; i < 512 && zero; ++i)
      zero = header[i] == 0;
    if (zero) {
      ended = 1;
      break;
    }
    if (!tar_checksum_ok(header)) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package, or truncated (bad tar header "
                    "checksum at byte %llu)", path, (unsigned long long)offset);
      break;
    }
    uint64_t size;
    if (!tar_number(header + 124, 12, &size)) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: bad tar size field at byte %llu", path,
                    (unsigned long long)offset);
      break;
    }
    char type = (char)header[156];
    uint64_t header_offset = offset;
    offset += 512;
    uint64_t padded = (size + 511) / 512 * 512;
    if (type == 'x' || type == 'g') { /* pax extended headers: read the records */
      if (size > (1 << 20)) {
        status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: a pax header of %llu bytes", path,
                      (unsigned long long)size);
        break;
      }
      char *records = malloc(padded ? padded : 1);
      if (!records || fread(records, 1, padded, stream) != padded) {
        free(records);
        status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package, or truncated (in a pax "
                      "header)", path);
        break;
      }
      offset += padded;
      if (type == 'x') {
        if (!has_pax)
          pending_start = header_offset;
        has_pax = 1;
        if (!pax_records(records, size, pax_path, sizeof pax_path, &pax_size, &has_pax_size)) {
          free(records);
          status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed pax header at byte %llu", path,
                        (unsigned long long)header_offset);
          break;
        }
      }
      free(records);
      continue;
    }
    char name[272]; /* a ustar prefix, '/', a name */
    if (pax_path[0]) {
      snprintf(name, sizeof name, "%s", pax_path);
    } else {
      char prefix[156] = "", base[101];
      memcpy(base, header, 100);
      base[100] = '\0';
      if (memcmp(header + 257, "ustar", 5) == 0) {
        memcpy(prefix, header + 345, 155);
        prefix[155] = '\0';
      }
      snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "/" : "", base);
    }
    if (has_pax_size)
      size = pax_size, padded = (size + 511) / 512 * 512;
    if (!is_known_member(name) || (type != '0' && type != '\0')) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: unexpected archive member '%s'", path, name);
      break;
    }
    if (size > MAX_MEMBER_BYTES) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: archive member '%s' is %llu bytes, above the limit of %llu",
                    path, name, (unsigned long long)size, (unsigned long long)MAX_MEMBER_BYTES);
      break;
    }
    for (size_t i = 0; i < listing->count; ++i)
      if (strcmp(listing->members[i].name, name) == 0) {
        status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: archive member '%s' appears twice", path, name);
        break;
      }
    if (status != TILECRAFT_OK)
      break;
    if (listing->count == capacity) {
      capacity = capacity ? capacity * 2 : 8;
      tar_member *grown = realloc(listing->members, capacity * sizeof *grown);
      if (!grown) {
        status = fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      listing->members = grown;
    }
    tar_member *member = &listing->members[listing->count++];
    snprintf(member->name, sizeof member->name, "%s", name);
    member->header_offset = has_pax ? pending_start : header_offset;
    member->data_offset = offset;
    member->size = size;
    has_pax = has_pax_size = 0;
    pax_path[0] = '\0';
    char *target = join(directory, name);
    FILE *out = target ? fopen(target, "wb") : NULL;
    free(target);
    if (!out) {
      status = fail(error, TILECRAFT_ERROR_IO, "%s: cannot write '%s' to %s", path, name, directory);
      break;
    }
    uint64_t left = size;
    while (left > 0) {
      size_t chunk = left < (1 << 16) ? (size_t)left : (1 << 16);
      size_t read = fread(copy, 1, chunk, stream);
      if (read != chunk || fwrite(copy, 1, chunk, out) != chunk) {
        status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package, or truncated (member '%s' "
                      "ends early)", path, name);
        break;
      }
      left -= chunk;
    }
    if (fclose(out) != 0 && status == TILECRAFT_OK)
      status = fail(error, TILECRAFT_ERROR_IO, "%s: cannot write '%s' to %s", path, name, directory);
    if (status != TILECRAFT_OK)
      break;
    offset += size;
    if (padded > size && fseeko(stream, (off_t)(padded - size), SEEK_CUR) != 0) {
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: truncated after member '%s'", path, name);
      break;
    }
    offset = member->data_offset + padded;
  }
  free(copy);
  fclose(stream);
  if (status == TILECRAFT_OK && !ended)
    status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package, or truncated", path);
  if (status == TILECRAFT_OK) {
    int has_manifest = 0;
    for (size_t i = 0; i < listing->count; ++i)
      has_manifest |= strcmp(listing->members[i].name, MANIFEST) == 0;
    if (!has_manifest)
      status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package (no %s in the archive)", path,
                    MANIFEST);
  }
  return status;
}

/* ---- signatures (runtime/package_signing.py) ---------------------------------------- */

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A key file: hex (whitespace allowed between byte pairs), else its raw bytes. */
static tilecraft_status read_key(const char *key_path, unsigned char **key, size_t *key_size,
                                 tilecraft_error *error) {
  char *text;
  size_t size;
  tilecraft_error io;
  if (read_file(key_path, key_path, 1 << 20, &text, &size, &io) != TILECRAFT_OK)
    return fail(error, TILECRAFT_ERROR_SIGNATURE, "cannot read the key file %s", key_path);
  unsigned char *bytes = malloc(size + 1);
  if (!bytes) {
    free(text);
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  size_t start = 0, end = size, count = 0;
  while (start < end && (text[start] == ' ' || text[start] == '\n' || text[start] == '\t' || text[start] == '\r'))
    ++start;
  while (end > start && (text[end - 1] == ' ' || text[end - 1] == '\n' || text[end - 1] == '\t' ||
                         text[end - 1] == '\r'))
    --end;
  int is_hex = 1;
  for (size_t i = start; i < end && is_hex;) {
    if (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r') {
      ++i;
      continue;
    }
    if (i + 1 >= end || hex_value(text[i]) < 0 || hex_value(text[i + 1]) < 0) {
      is_hex = 0;
      break;
    }
    bytes[count++] = (unsigned char)(hex_value(text[i]) * 16 + hex_value(text[i + 1]));
    i += 2;
  }
  if (!is_hex) {
    memcpy(bytes, text, size);
    count = size;
  }
  free(text);
  if (count < MIN_KEY_BYTES) {
    free(bytes);
    return fail(error, TILECRAFT_ERROR_SIGNATURE, "the package key %s has %zu bytes; a key needs at least %d "
                "(`tilecraft keygen KEYFILE` writes one)", key_path, count, MIN_KEY_BYTES);
  }
  *key = bytes;
  *key_size = count;
  return TILECRAFT_OK;
}

static void key_id(const unsigned char *key, size_t key_size, char out[17]) {
  static const char label[] = "tilecraft package key id\n";
  tc_sha256 context;
  unsigned char digest[32];
  char hex[65];
  tc_sha256_init(&context);
  tc_sha256_update(&context, label, sizeof label - 1);
  tc_sha256_update(&context, key, key_size);
  tc_sha256_final(&context, digest);
  tc_hex(digest, 32, hex);
  memcpy(out, hex, 16);
  out[16] = '\0';
}

/* A growing string buffer (for the canonical JSON the signature is rebuilt as). */
typedef struct {
  char *data;
  size_t size, capacity;
  int failed;
} text_buffer;

static void append_text(text_buffer *buffer, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void append_text(text_buffer *buffer, const char *format, ...) {
  if (buffer->failed)
    return;
  for (;;) {
    va_list args;
    va_start(args, format);
    int needed = vsnprintf(buffer->data + buffer->size, buffer->capacity - buffer->size, format, args);
    va_end(args);
    if (needed < 0) {
      buffer->failed = 1;
      return;
    }
    if (buffer->size + (size_t)needed < buffer->capacity) {
      buffer->size += (size_t)needed;
      return;
    }
    size_t capacity = (buffer->capacity + (size_t)needed + 1) * 2;
    char *grown = realloc(buffer->data, capacity);
    if (!grown) {
      buffer->failed = 1;
      return;
    }
    buffer->data = grown;
    buffer->capacity = capacity;
  }
}

/* Names and hashes Python's json.dumps writes as they are (no escapes). */
static int plain_json_string(const char *text) {
  for (const unsigned char *c = (const unsigned char *)text; *c; ++c)
    if (*c < 0x20 || *c >= 0x7f || *c == '"' || *c == '\\')
      return 0;
  return 1;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int constant_time_equal(const void *a, const void *b, size_t size) {
  const unsigned char *x = a, *y = b;
  unsigned char difference = 0;
  for (size_t i = 0; i < size; ++i)
    difference |= x[i] ^ y[i];
  return difference == 0;
}

/* The canonical tar header of signature.json (package_signing.py _signature_header). */
static void signature_header(uint64_t size, unsigned char header[512]) {
  memset(header, 0, 512);
  memcpy(header, SIGNATURE, sizeof SIGNATURE - 1);
  memcpy(header + 100, "0000644", 8);
  memcpy(header + 108, "0000000", 8);
  memcpy(header + 116, "0000000", 8);
  snprintf((char *)header + 124, 12, "%011llo", (unsigned long long)size);
  memcpy(header + 136, "00000000000", 12);
  header[156] = '0';
  memcpy(header + 257, "ustar", 6);
  memcpy(header + 263, "00", 2);
  memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i)
    sum += header[i];
  snprintf((char *)header + 148, 8, "%06o", sum);
  header[155] = ' ';
}

/* Refuse the unpacked archive unless its last member signature.json is, byte for byte,
 * the signature under `key` of exactly these members and of every archive byte before it,
 * and only zero bytes follow it (package_signing.py check_signature). */
static tilecraft_status check_signature(const char *path, const unsigned char *key, size_t key_size,
                                        const char *directory, const tar_listing *listing, tilecraft_error *error) {
  const tar_member *last = listing->count ? &listing->members[listing->count - 1] : NULL;
  int signed_package = 0;
  for (size_t i = 0; i < listing->count; ++i)
    signed_package |= strcmp(listing->members[i].name, SIGNATURE) == 0;
  if (!signed_package)
    return fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: the package is not signed, and a trusted key was given: "
                "refusing it (sign it with `tilecraft compile --sign KEYFILE` or `tilecraft sign`)", path);
  char *raw = NULL, *signature_path = join(directory, SIGNATURE);
  size_t raw_size = 0;
  tilecraft_status status = signature_path ? read_file(signature_path, path, 1 << 20, &raw, &raw_size, error)
                                           : fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  free(signature_path);
  if (status != TILECRAFT_OK)
    return status;
  char message[256];
  tc_json *signature = tc_json_parse(raw, raw_size, message, sizeof message);
  const tc_json *members = tc_json_get(signature, "members"), *given_id = tc_json_get(signature, "key_id");
  const tc_json *format = tc_json_get(signature, "format"), *algorithm = tc_json_get(signature, "algorithm");
  int well_formed = signature && members && members->kind == TC_JSON_OBJECT && given_id &&
                    given_id->kind == TC_JSON_STRING && format && format->kind == TC_JSON_STRING &&
                    strcmp(format->string, SIGNATURE_FORMAT) == 0;
  for (size_t i = 0; well_formed && i < members->count; ++i)
    well_formed = members->items[i].kind == TC_JSON_STRING && plain_json_string(members->keys[i]) &&
                  plain_json_string(members->items[i].string);
  text_buffer payload = {0}, expected = {0};
  char **names = NULL;
  if (!well_formed) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: %s is malformed (%s): refusing the package", path, SIGNATURE,
                  signature ? "not a tilecraft package signature" : message);
    goto done;
  }
  if (!algorithm || algorithm->kind != TC_JSON_STRING || strcmp(algorithm->string, SIGNATURE_ALGORITHM) != 0) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: signed with %.40s; this runtime checks %s", path,
                  algorithm && algorithm->kind == TC_JSON_STRING ? algorithm->string : "another algorithm",
                  SIGNATURE_ALGORITHM);
    goto done;
  }
  char trusted_id[17];
  key_id(key, key_size, trusted_id);
  if (strlen(given_id->string) != 16 || !constant_time_equal(given_id->string, trusted_id, 16)) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: signed with another key (key id %.16s, the trusted key is "
                  "%s): refusing the package", path, given_id->string, trusted_id);
    goto done;
  }
  if (strcmp(last->name, SIGNATURE) != 0) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: %s is not the archive's last member (members were added "
                  "after signing): refusing the package", path, SIGNATURE);
    goto done;
  }
  /* The archive's bytes: its prefix's hash, the signature's header, what follows it. */
  FILE *stream = fopen(path, "rb");
  if (!stream) {
    status = fail(error, TILECRAFT_ERROR_IO, "%s: cannot reopen the package", path);
    goto done;
  }
  tc_sha256 context;
  unsigned char block[1 << 16], digest[32], header[512], canonical[512];
  char prefix[65];
  tc_sha256_init(&context);
  for (uint64_t left = last->header_offset; left > 0;) {
    size_t chunk = left < sizeof block ? (size_t)left : sizeof block;
    if (fread(block, 1, chunk, stream) != chunk)
      break;
    tc_sha256_update(&context, block, chunk);
    left -= chunk;
  }
  tc_sha256_final(&context, digest);
  tc_hex(digest, 32, prefix);
  signature_header(last->size, canonical);
  int header_ok = last->data_offset - last->header_offset == 512 && fread(header, 1, 512, stream) == 512 &&
                  memcmp(header, canonical, 512) == 0;
  int tail_ok = fseeko(stream, (off_t)(last->data_offset + last->size), SEEK_SET) == 0;
  size_t got;
  while (tail_ok && (got = fread(block, 1, sizeof block, stream)) > 0)
    for (size_t i = 0; i < got; ++i)
      tail_ok &= block[i] == 0;
  fclose(stream);
  if (!header_ok) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: the tar header of %s was changed after signing: refusing "
                  "the package", path, SIGNATURE);
    goto done;
  }
  if (!tail_ok) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: bytes after %s are not the archive's end (added after "
                  "signing): refusing the package", path, SIGNATURE);
    goto done;
  }
  /* Rebuild signature.json as Python writes it and compare every byte. */
  names = malloc((members->count + 1) * sizeof *names);
  if (!names) {
    status = fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < members->count; ++i)
    names[i] = members->keys[i];
  qsort(names, members->count, sizeof *names, compare_keys);
  for (size_t i = 1; i < members->count; ++i)
    if (strcmp(names[i - 1], names[i]) == 0) {
      status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: %s names a member twice: refusing the package", path,
                    SIGNATURE);
      goto done;
    }
  append_text(&payload, "{\"algorithm\": \"%s\", \"archive_sha256\": \"%s\", \"key_id\": \"%s\", \"members\": {",
              SIGNATURE_ALGORITHM, prefix, trusted_id);
  for (size_t i = 0; i < members->count; ++i)
    append_text(&payload, "%s\"%s\": \"%s\"", i ? ", " : "", names[i], tc_json_get(members, names[i])->string);
  append_text(&payload, "}}");
  unsigned char mac[32];
  char mac_hex[65];
  if (payload.failed) {
    status = fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  tc_hmac_sha256(key, key_size, payload.data, payload.size, mac);
  tc_hex(mac, 32, mac_hex);
  append_text(&expected, "{\n  \"format\": \"%s\",\n  \"algorithm\": \"%s\",\n  \"key_id\": \"%s\",\n"
              "  \"archive_sha256\": \"%s\",\n  \"members\": {", SIGNATURE_FORMAT, SIGNATURE_ALGORITHM, trusted_id,
              prefix);
  for (size_t i = 0; i < members->count; ++i)
    append_text(&expected, "%s\n    \"%s\": \"%s\"", i ? "," : "", names[i], tc_json_get(members, names[i])->string);
  append_text(&expected, "%s},\n  \"mac\": \"%s\"\n}\n", members->count ? "\n  " : "", mac_hex);
  if (expected.failed || expected.size != raw_size || !constant_time_equal(expected.data, raw, raw_size)) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: the signature does not cover this archive (its headers, "
                  "padding or %s changed after signing): refusing the package", path, SIGNATURE);
    goto done;
  }
  /* Exactly the signed members, each with its signed content. */
  for (size_t i = 0; i < listing->count; ++i) {
    const char *name = listing->members[i].name;
    if (strcmp(name, SIGNATURE) == 0)
      continue;
    const tc_json *hash = tc_json_get(members, name);
    if (!hash) {
      status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: the archive's members differ from the signed ones (added: "
                    "%s): refusing the package", path, name);
      goto done;
    }
  }
  if (members->count != listing->count - 1) {
    status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: the archive's members differ from the signed ones (members "
                  "removed): refusing the package", path);
    goto done;
  }
  for (size_t i = 0; i < listing->count; ++i) {
    const char *name = listing->members[i].name;
    if (strcmp(name, SIGNATURE) == 0)
      continue;
    char *member_path = join(directory, name), hex[65];
    int ok = member_path && sha256_file(member_path, hex);
    free(member_path);
    const tc_json *hash = tc_json_get(members, name);
    if (!ok || strlen(hash->string) != 64 || !constant_time_equal(hex, hash->string, 64)) {
      status = fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: %s is not the signed one (changed after signing): "
                    "refusing the package", path, name);
      goto done;
    }
  }
done:
  free(names);
  free(payload.data);
  free(expected.data);
  tc_json_free(signature);
  free(raw);
  return status;
}

/* ---- the manifest (runtime/package.py check_manifest) ------------------------------ */

static const char *normalized_machine(const char *name, char *out, size_t size) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; ++i)
    out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
  out[i] = '\0';
  if (strcmp(out, "arm64") == 0)
    snprintf(out, size, "aarch64");
  else if (strcmp(out, "amd64") == 0)
    snprintf(out, size, "x86_64");
  return out;
}

/* This CPU's feature flags from /proc/cpuinfo ("flags" or "Features"), space-separated
 * with a space at each end; NULL where the file is not there (then nothing is checked,
 * as in Python). */
static char *host_cpu_flags(void) {
  FILE *stream = fopen("/proc/cpuinfo", "r");
  if (!stream)
    return NULL;
  char *line = NULL, *flags = NULL;
  size_t capacity = 0;
  while (getline(&line, &capacity, stream) > 0) {
    if (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0) {
      char *colon = strchr(line, ':');
      if (!colon)
        continue;
      size_t size = strlen(colon) + 2;
      flags = malloc(size);
      if (flags) {
        snprintf(flags, size, " %s", colon + 1);
        for (char *c = flags; *c; ++c)
          if (*c == '\n' || *c == '\t')
            *c = ' ';
        size_t length = strlen(flags);
        if (length && flags[length - 1] != ' ') {
          flags[length] = ' ';
          flags[length + 1] = '\0';
        }
      }
      break;
    }
  }
  free(line);
  fclose(stream);
  return flags;
}

static tilecraft_status check_manifest(const tc_json *manifest, const char *where, tilecraft_error *error) {
  const tc_json *version = tc_json_get(manifest, "format_version");
  if (!version || version->kind != TC_JSON_NUMBER || !version->is_integer ||
      version->integer != TILECRAFT_PACKAGE_FORMAT_VERSION) {
    const tc_json *writer = tc_json_get(manifest, "tilecraft_version");
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: package format %lld (written by tilecraft %s); this runtime "
                "reads format %d: recompile the model with this version", where,
                version && version->is_integer ? (long long)version->integer : -1LL,
                writer && writer->kind == TC_JSON_STRING ? writer->string : "?", TILECRAFT_PACKAGE_FORMAT_VERSION);
  }
  static const char *const required[] = {"entry", "symbol", "inputs", "outputs", "equal_dims", "machine", "target",
                                         "sha256"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; ++i)
    if (!tc_json_get(manifest, required[i]))
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s lacks '%s'", where, MANIFEST, required[i]);
  static const struct {
    const char *key;
    tc_json_kind kind;
    const char *kind_name;
  } kinds[] = {{"symbol", TC_JSON_STRING, "str"}, {"inputs", TC_JSON_ARRAY, "list"},
               {"outputs", TC_JSON_ARRAY, "list"}, {"sha256", TC_JSON_OBJECT, "dict"},
               {"machine", TC_JSON_STRING, "str"}, {"target", TC_JSON_STRING, "str"},
               {"entry", TC_JSON_STRING, "str"},   {"equal_dims", TC_JSON_ARRAY, "list"}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
    if (tc_json_get(manifest, kinds[i].key)->kind != kinds[i].kind)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s field '%s' must be a %s", where, MANIFEST, kinds[i].key,
                  kinds[i].kind_name);
  struct utsname host;
  char machine[64], built[64];
  if (uname(&host) == 0) {
    normalized_machine(host.machine, machine, sizeof machine);
    normalized_machine(tc_json_get(manifest, "machine")->string, built, sizeof built);
    if (strcmp(machine, built) != 0)
      return fail(error, TILECRAFT_ERROR_TARGET, "%s: built for target '%s' (%s); this machine is %s", where,
                  tc_json_get(manifest, "target")->string, tc_json_get(manifest, "machine")->string, machine);
  }
  const tc_json *needed = tc_json_get(manifest, "required_cpu_flags");
  char *flags = needed && needed->kind == TC_JSON_ARRAY && needed->count ? host_cpu_flags() : NULL;
  if (flags) {
    char missing[512] = "";
    for (size_t i = 0; i < needed->count; ++i) {
      const tc_json *flag = &needed->items[i];
      if (flag->kind != TC_JSON_STRING)
        continue;
      char token[128];
      snprintf(token, sizeof token, " %s ", flag->string);
      if (!strstr(flags, token)) {
        size_t used = strlen(missing);
        snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "", flag->string);
      }
    }
    free(flags);
    if (missing[0])
      return fail(error, TILECRAFT_ERROR_TARGET, "%s: built for target '%s' on a CPU with %s, which this CPU lacks: "
                  "recompile it here", where, tc_json_get(manifest, "target")->string, missing);
  }
  return TILECRAFT_OK;
}

static tilecraft_status parse_manifest(tilecraft_model *model, const char *text, size_t size, const char *what,
                                       tilecraft_error *error) {
  char message[256];
  model->manifest = tc_json_parse(text, size, message, sizeof message);
  if (!model->manifest)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s is not valid JSON (%s)", model->path, what, message);
  const tc_json *format = tc_json_get(model->manifest, "format");
  if (!format || format->kind != TC_JSON_STRING || strcmp(format->string, FORMAT_NAME) != 0)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s does not describe a tilecraft package", model->path, what);
  model->manifest_text = strndup(text, size);
  if (!model->manifest_text)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  return check_manifest(model->manifest, model->path, error);
}

/* Inputs, outputs, dimension relations and run-time check messages: the call contract. */
static tilecraft_status parse_specs(const tilecraft_model *model, const tc_json *list, const char *what, spec **out,
                                    size_t *count, tilecraft_error *error) {
  *out = calloc(list->count ? list->count : 1, sizeof **out);
  if (!*out)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  *count = list->count;
  for (size_t i = 0; i < list->count; ++i) {
    const tc_json *entry = &list->items[i];
    const tc_json *name = tc_json_get(entry, "name"), *dtype = tc_json_get(entry, "dtype");
    const tc_json *shape = tc_json_get(entry, "shape");
    if (!name || name->kind != TC_JSON_STRING || !dtype || dtype->kind != TC_JSON_STRING || !shape)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed signature in its manifest (%s %zu lacks a name, "
                  "dtype or shape)", model->path, what, i);
    spec *target = &(*out)[i];
    target->name = strdup(name->string);
    if (!target->name)
      return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    target->dtype = dtype_named(dtype->string);
    if (target->dtype == TILECRAFT_DTYPE_UNKNOWN)
      return fail(error, TILECRAFT_ERROR_UNSUPPORTED, "%s: %s '%s' has dtype %s, which the C runtime does not pass "
                  "(strings and objects need the Python runtime)", model->path, what, name->string, dtype->string);
    if (shape->kind == TC_JSON_NULL)
      return fail(error, TILECRAFT_ERROR_UNSUPPORTED, "%s: %s '%s' is a scalar, which the C runtime does not pass "
                  "(pass it as a 0-d tensor: compile the model with a tensor<%s> argument)", model->path, what,
                  name->string, dtype->string);
    if (shape->kind != TC_JSON_ARRAY)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed shape of %s '%s' in its manifest", model->path, what,
                  name->string);
    if (shape->count > TILECRAFT_MAX_RANK)
      return fail(error, TILECRAFT_ERROR_UNSUPPORTED, "%s: %s '%s' has rank %zu, above TILECRAFT_MAX_RANK (%d)",
                  model->path, what, name->string, shape->count, TILECRAFT_MAX_RANK);
    target->rank = (int32_t)shape->count;
    for (size_t d = 0; d < shape->count; ++d) {
      const tc_json *dim = &shape->items[d];
      if (dim->kind == TC_JSON_NULL)
        target->shape[d] = -1;
      else if (dim->kind == TC_JSON_NUMBER && dim->is_integer && dim->integer >= 0)
        target->shape[d] = dim->integer;
      else
        return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed shape of %s '%s' in its manifest", model->path,
                    what, name->string);
    }
  }
  return TILECRAFT_OK;
}

static tilecraft_status parse_contract(tilecraft_model *model, tilecraft_error *error) {
  const tc_json *manifest = model->manifest;
  tilecraft_status status = parse_specs(model, tc_json_get(manifest, "inputs"), "input", &model->inputs,
                                        &model->num_inputs, error);
  if (status == TILECRAFT_OK)
    status = parse_specs(model, tc_json_get(manifest, "outputs"), "output", &model->outputs, &model->num_outputs,
                         error);
  if (status != TILECRAFT_OK)
    return status;
  const tc_json *groups = tc_json_get(manifest, "equal_dims");
  model->groups = calloc(groups->count ? groups->count : 1, sizeof *model->groups);
  if (!model->groups)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  model->num_groups = groups->count;
  for (size_t g = 0; g < groups->count; ++g) {
    const tc_json *members = tc_json_get(&groups->items[g], "members"), *size = tc_json_get(&groups->items[g], "size");
    dim_group *group = &model->groups[g];
    if (!members || members->kind != TC_JSON_ARRAY || !members->count || !size ||
        (size->kind != TC_JSON_NULL && !(size->kind == TC_JSON_NUMBER && size->is_integer)))
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed equal_dims in its manifest", model->path);
    group->size = size->kind == TC_JSON_NULL ? -1 : size->integer;
    group->members = calloc(members->count, sizeof *group->members);
    if (!group->members)
      return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    group->count = members->count;
    for (size_t m = 0; m < members->count; ++m) {
      const tc_json *pair = &members->items[m];
      if (pair->kind != TC_JSON_ARRAY || pair->count != 2 || !pair->items[0].is_integer || !pair->items[1].is_integer ||
          pair->items[0].integer < 0 || (size_t)pair->items[0].integer >= model->num_inputs ||
          pair->items[1].integer < 0 || pair->items[1].integer >= model->inputs[pair->items[0].integer].rank)
        return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed equal_dims in its manifest", model->path);
      group->members[m][0] = pair->items[0].integer;
      group->members[m][1] = pair->items[1].integer;
    }
  }
  const tc_json *checks = tc_json_get(manifest, "runtime_checks");
  if (checks) {
    if (checks->kind != TC_JSON_ARRAY)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: runtime_checks in %s must be a list of strings", model->path,
                  MANIFEST);
    model->checks = calloc(checks->count ? checks->count : 1, sizeof *model->checks);
    if (!model->checks)
      return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    model->num_checks = checks->count;
    for (size_t i = 0; i < checks->count; ++i) {
      if (checks->items[i].kind != TC_JSON_STRING)
        return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: runtime_checks in %s must be a list of strings",
                    model->path, MANIFEST);
      const char *entry = checks->items[i].string, *tab = strchr(entry, '\t');
      model->checks[i].kind = tab ? strndup(entry, (size_t)(tab - entry)) : strdup(entry);
      model->checks[i].message = strdup(tab ? tab + 1 : "");
      if (!model->checks[i].kind || !model->checks[i].message)
        return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
  }
  const tc_json *device = tc_json_get(manifest, "device");
  const tc_json *destinations = device && device->kind == TC_JSON_OBJECT ? tc_json_get(device, "output_arguments")
                                                                         : NULL;
  model->output_arguments = destinations && destinations->kind == TC_JSON_BOOL && destinations->boolean;
  /* The call frame: result descriptors, argument descriptors, destination descriptors
   * (runtime/memref.py). */
  size_t destination_count = model->output_arguments ? model->num_outputs : 0;
  if ((model->num_outputs ? 1 : 0) + model->num_inputs + destination_count > MAX_CALL_ARGUMENTS)
    return fail(error, TILECRAFT_ERROR_UNSUPPORTED, "%s: %zu inputs and %zu outputs; the C runtime calls entries of "
                "at most %d arguments", model->path, model->num_inputs, model->num_outputs, MAX_CALL_ARGUMENTS);
  model->result_offsets = calloc(model->num_outputs + 1, sizeof(size_t));
  model->argument_offsets = calloc(model->num_inputs + 1, sizeof(size_t));
  model->destination_offsets = calloc(model->num_outputs + 1, sizeof(size_t));
  if (!model->result_offsets || !model->argument_offsets || !model->destination_offsets)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  size_t words = 0;
  for (size_t i = 0; i < model->num_outputs; ++i) {
    model->result_offsets[i] = words;
    words += DESCRIPTOR_HEADER_WORDS + 1 + 2 * (size_t)model->outputs[i].rank;
  }
  for (size_t i = 0; i < model->num_inputs; ++i) {
    model->argument_offsets[i] = words;
    words += DESCRIPTOR_HEADER_WORDS + 1 + 2 * (size_t)model->inputs[i].rank;
  }
  for (size_t i = 0; i < destination_count; ++i) {
    model->destination_offsets[i] = words;
    words += DESCRIPTOR_HEADER_WORDS + 1 + 2 * (size_t)model->outputs[i].rank;
  }
  model->frame_words = words;
  return TILECRAFT_OK;
}

/* ---- loading the code -------------------------------------------------------------- */

static tilecraft_status add_dependency(tilecraft_model *model, void *handle, tilecraft_error *error) {
  void **grown = realloc(model->dependencies, (model->num_dependencies + 1) * sizeof *grown);
  if (!grown) {
    dlclose(handle);
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  model->dependencies = grown;
  model->dependencies[model->num_dependencies++] = handle;
  return TILECRAFT_OK;
}

static const char *sha256_of(const tilecraft_model *model, const char *name) {
  const tc_json *hash = tc_json_get(tc_json_get(model->manifest, "sha256"), name);
  return hash && hash->kind == TC_JSON_STRING ? hash->string : "";
}

/* The libraries the extern functions need, before model.so: the system ones the manifest
 * names (recorded path, else file name on the loader's path), then the bundled ones,
 * hash-checked (runtime/package.py _load_libraries). */
static tilecraft_status load_libraries(tilecraft_model *model, const char *directory, tilecraft_error *error) {
  const tc_json *libraries = tc_json_get(model->manifest, "libraries");
  if (!libraries || libraries->kind != TC_JSON_OBJECT)
    return TILECRAFT_OK;
  const tc_json *system = tc_json_get(libraries, "system"), *bundled = tc_json_get(libraries, "bundled");
  for (size_t i = 0; system && system->kind == TC_JSON_ARRAY && i < system->count; ++i) {
    if (system->items[i].kind != TC_JSON_STRING)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: malformed libraries in its manifest", model->path);
    const char *recorded = system->items[i].string, *slash = strrchr(recorded, '/');
    void *handle = dlopen(recorded, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (!handle && slash)
      handle = dlopen(slash + 1, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (!handle)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: needs the shared library %s, which is not there and not on "
                  "the loader's search path (install it, or set LD_LIBRARY_PATH)", model->path, recorded);
    if (add_dependency(model, handle, error) != TILECRAFT_OK)
      return TILECRAFT_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; bundled && bundled->kind == TC_JSON_ARRAY && i < bundled->count; ++i) {
    const char *name = bundled->items[i].kind == TC_JSON_STRING ? bundled->items[i].string : "";
    char *path = directory ? join(directory, name) : NULL, hex[65];
    if (!directory || !path || !is_bundled_library_name(name) || !is_file(path)) {
      free(path);
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the archive lacks the bundled library '%s'", model->path,
                  name);
    }
    if (!sha256_file(path, hex) || strcmp(hex, sha256_of(model, name)) != 0) {
      free(path);
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s is corrupted (SHA-256 mismatch)", model->path, name);
    }
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    free(path);
    if (!handle)
      return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: cannot load the bundled %s (%s)", model->path, name,
                  dlerror());
    if (add_dependency(model, handle, error) != TILECRAFT_OK)
      return TILECRAFT_ERROR_OUT_OF_MEMORY;
  }
  return TILECRAFT_OK;
}

static tilecraft_status open_library(tilecraft_model *model, const char *library, tilecraft_error *error) {
  model->library = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!model->library)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: cannot load %s (%s)", model->path, LIBRARY, dlerror());
  return TILECRAFT_OK;
}

/* Refuse a manifest whose call contract differs from the one compiled into the library:
 * the library's hash only proves the library intact; an edited manifest (other shapes,
 * dtypes or outputs) would bind arguments the code does not expect. */
static tilecraft_status check_contract(tilecraft_model *model, tilecraft_error *error) {
  const char *embedded = dlsym(model->library, CONTRACT_SYMBOL);
  if (!embedded)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the library has no symbol %s", model->path, CONTRACT_SYMBOL);
  char message[256];
  tc_json *contract = tc_json_parse(embedded, strlen(embedded), message, sizeof message);
  int same = contract != NULL;
  for (size_t i = 0; same && i < sizeof CONTRACT_KEYS / sizeof CONTRACT_KEYS[0]; ++i) {
    const tc_json *ours = tc_json_get(model->manifest, CONTRACT_KEYS[i]);
    const tc_json *theirs = tc_json_get(contract, CONTRACT_KEYS[i]);
    static const tc_json null_value = {TC_JSON_NULL, 0, 0, 0, 0.0, NULL, 0, NULL, NULL, 0};
    same = tc_json_equal(ours ? ours : &null_value, theirs ? theirs : &null_value);
  }
  tc_json_free(contract);
  if (!same)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s does not match the call contract compiled into %s (inputs, "
                "outputs, entry or run-time check messages edited): recompile the model", model->path, MANIFEST,
                LIBRARY);
  return TILECRAFT_OK;
}

/* The CUDA runtime's pending error as TILECRAFT_ERROR_DEVICE (none: OK, or not a CUDA package). */
static tilecraft_status take_device_error(const tilecraft_model *model, tilecraft_error *error) {
  char message[TILECRAFT_MESSAGE_SIZE - 128];
  if (!model->take_device_error || model->take_device_error(message, sizeof message) == 0)
    return TILECRAFT_OK;
  return fail(error, TILECRAFT_ERROR_DEVICE, "%s: cannot run CUDA code: %s", model->path, message);
}

static tilecraft_status bind_entry(tilecraft_model *model, tilecraft_error *error) {
  const char *symbol = tc_json_get(model->manifest, "symbol")->string;
  model->entry = dlsym(model->library, symbol);
  if (!model->entry)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the library has no symbol %s", model->path, symbol);
  *(void **)&model->take_failure = dlsym(model->library, TAKE_SYMBOL);
  if (!model->take_failure && model->num_checks)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the library has no symbol %s", model->path, TAKE_SYMBOL);
  /* A CUDA package: its kernels were loaded by model.so's constructors when it was opened;
   * without a driver or GPU that failed, and the package is refused here. */
  *(void **)&model->take_device_error = dlsym(model->library, TAKE_DEVICE_ERROR_SYMBOL);
  *(void **)&model->release_device = dlsym(model->library, RELEASE_DEVICE_SYMBOL);
  if (tc_json_get(model->manifest, "device") && !model->take_device_error)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the manifest names a device but %s has no device runtime",
                model->path, LIBRARY);
  return take_device_error(model, error);
}

/* A package written as one .so: its manifest is the string under tilecraft_manifest. */
static tilecraft_status open_shared_library(tilecraft_model *model, tilecraft_error *error) {
  if (!is_file(model->path))
    return fail(error, TILECRAFT_ERROR_IO, "%s: no such shared library", model->path);
  char *absolute = realpath(model->path, NULL); /* dlopen searches names without a slash */
  if (!absolute)
    return fail(error, TILECRAFT_ERROR_IO, "%s: %s", model->path, strerror(errno));
  tilecraft_status status = open_library(model, absolute, error);
  free(absolute);
  if (status != TILECRAFT_OK)
    return status;
  const char *embedded = dlsym(model->library, MANIFEST_SYMBOL);
  if (!embedded)
    return fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the library has no symbol %s (not a library tilecraft wrote)",
                model->path, MANIFEST_SYMBOL);
  status = parse_manifest(model, embedded, strlen(embedded), "its embedded manifest", error);
  if (status == TILECRAFT_OK)
    status = parse_contract(model, error);
  if (status == TILECRAFT_OK)
    status = check_contract(model, error);
  if (status == TILECRAFT_OK)
    status = bind_entry(model, error);
  return status;
}

/* An unpacked package in `directory` (extracted here, or by the user): manifest, hashes,
 * libraries, contract (runtime/package.py verify and _load_archive). */
static tilecraft_status open_directory(tilecraft_model *model, const char *directory, tilecraft_error *error) {
  char *manifest_path = join(directory, MANIFEST), *library = join(directory, LIBRARY);
  char *profile = join(directory, PROFILE_LIBRARY);
  char *text = NULL, hex[65];
  size_t size = 0;
  tilecraft_status status = TILECRAFT_OK;
  if (!manifest_path || !library || !profile) {
    status = fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  if (!is_file(manifest_path)) {
    status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: not a tilecraft package (no %s)", model->path, MANIFEST);
    goto done;
  }
  status = read_file(manifest_path, model->path, 1 << 28, &text, &size, error);
  if (status == TILECRAFT_OK)
    status = parse_manifest(model, text, size, MANIFEST, error);
  if (status != TILECRAFT_OK)
    goto done;
  if (!is_file(library)) {
    status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: the archive has no %s", model->path, LIBRARY);
    goto done;
  }
  if (!sha256_file(library, hex) || strcmp(hex, sha256_of(model, LIBRARY)) != 0) {
    status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s is corrupted (its SHA-256 does not match the manifest)",
                  model->path, LIBRARY);
    goto done;
  }
  /* Every file the manifest hashes must be there: an archive cut where one member ends and
   * the next begins reads without a tar error. */
  {
    const tc_json *hashes = tc_json_get(model->manifest, "sha256");
    for (size_t i = 0; hashes && i < hashes->count; i++) {
      char *member = join(directory, hashes->keys[i]);
      int present = member && is_file(member);
      free(member);
      if (!present) {
        status = fail(error, TILECRAFT_ERROR_PACKAGE,
                      "%s: the archive is truncated or incomplete: the manifest lists %s, which it lacks",
                      model->path, hashes->keys[i]);
        goto done;
      }
    }
  }
  if (is_file(profile) && (!sha256_file(profile, hex) || strcmp(hex, sha256_of(model, PROFILE_LIBRARY)) != 0)) {
    status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: %s is corrupted (its SHA-256 does not match the manifest)",
                  model->path, PROFILE_LIBRARY);
    goto done;
  }
  status = parse_contract(model, error);
  if (status == TILECRAFT_OK)
    status = load_libraries(model, directory, error);
  if (status == TILECRAFT_OK)
    status = open_library(model, library, error);
  if (status == TILECRAFT_OK)
    status = check_contract(model, error);
  if (status == TILECRAFT_OK)
    status = bind_entry(model, error);
done:
  free(text);
  free(manifest_path);
  free(library);
  free(profile);
  return status;
}

static tilecraft_status open_archive(tilecraft_model *model, const char *trust_key_path, tilecraft_error *error) {
  unsigned char *key = NULL;
  size_t key_size = 0;
  if (trust_key_path) { /* a bad key file: before unpacking */
    tilecraft_status status = read_key(trust_key_path, &key, &key_size, error);
    if (status != TILECRAFT_OK)
      return status;
  }
  const char *temporary = getenv("TMPDIR");
  char *directory = join(temporary && *temporary ? temporary : "/tmp", "tilecraft-package-XXXXXX");
  if (!directory || !mkdtemp(directory)) {
    free(directory);
    free(key);
    return fail(error, TILECRAFT_ERROR_IO, "%s: cannot create a folder to unpack it into (%s)", model->path,
                strerror(errno));
  }
  tar_listing listing = {NULL, 0};
  tilecraft_status status = extract(model->path, directory, &listing, error);
  if (status == TILECRAFT_OK && key)
    status = check_signature(model->path, key, key_size, directory, &listing, error);
  if (status == TILECRAFT_OK)
    status = open_directory(model, directory, error);
  /* The libraries stay mapped after their files are gone. */
  remove_directory(directory);
  free(directory);
  free(listing.members);
  if (key) {
    memset(key, 0, key_size);
    free(key);
  }
  return status;
}

tilecraft_status tilecraft_model_open(const char *path, const char *trust_key_path, tilecraft_model **model,
                                      tilecraft_error *error) {
  if (model)
    *model = NULL;
  if (!path || !model)
    return fail(error, TILECRAFT_ERROR_INVALID_ARGUMENT, "tilecraft_model_open: path and model must not be NULL");
  if ((2 * sizeof(void *)) % sizeof(int64_t) != 0) /* descriptors: pointer pair, then 8-byte words */
    return fail(error, TILECRAFT_ERROR_UNSUPPORTED, "%s: this runtime calls packages on machines with 4- or "
                "8-byte pointers only", path);
  tilecraft_model *opened = calloc(1, sizeof *opened);
  if (!opened || !(opened->path = strdup(path))) {
    free(opened);
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  struct stat status_of_path;
  int is_directory = stat(path, &status_of_path) == 0 && S_ISDIR(status_of_path.st_mode);
  size_t length = strlen(path);
  tilecraft_status status;
  if (length >= 3 && strcmp(path + length - 3, ".so") == 0) {
    status = trust_key_path ? fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: a shared library carries no signature, and "
                                   "loading it to look would run its code: export a .tar package and sign it "
                                   "(--sign) to open it with a trusted key", path)
                            : open_shared_library(opened, error);
  } else if (is_directory) {
    status = trust_key_path ? fail(error, TILECRAFT_ERROR_SIGNATURE, "%s: an extracted folder cannot be checked "
                                   "against a signature (it covers the archive's bytes): open the signed .tar", path)
                            : open_directory(opened, path, error);
  } else {
    status = open_archive(opened, trust_key_path, error);
  }
  if (status != TILECRAFT_OK) {
    free_model(opened);
    return status;
  }
  *model = opened;
  return succeed(error);
}

void tilecraft_model_close(tilecraft_model *model) { free_model(model); }

/* ---- describing the model ----------------------------------------------------------- */

size_t tilecraft_model_num_inputs(const tilecraft_model *model) { return model ? model->num_inputs : 0; }
size_t tilecraft_model_num_outputs(const tilecraft_model *model) { return model ? model->num_outputs : 0; }

static tilecraft_status describe(const spec *specs, size_t count, size_t index, tilecraft_tensor_info *info) {
  if (!specs || !info || index >= count)
    return TILECRAFT_ERROR_INVALID_ARGUMENT;
  info->name = specs[index].name;
  info->dtype = specs[index].dtype;
  info->rank = specs[index].rank;
  info->shape = specs[index].shape;
  return TILECRAFT_OK;
}

tilecraft_status tilecraft_model_input(const tilecraft_model *model, size_t index, tilecraft_tensor_info *info) {
  return model ? describe(model->inputs, model->num_inputs, index, info) : TILECRAFT_ERROR_INVALID_ARGUMENT;
}

tilecraft_status tilecraft_model_output(const tilecraft_model *model, size_t index, tilecraft_tensor_info *info) {
  return model ? describe(model->outputs, model->num_outputs, index, info) : TILECRAFT_ERROR_INVALID_ARGUMENT;
}

static int64_t index_of(const spec *specs, size_t count, const char *name) {
  for (size_t i = 0; name && i < count; ++i)
    if (strcmp(specs[i].name, name) == 0)
      return (int64_t)i;
  return -1;
}

int64_t tilecraft_model_input_index(const tilecraft_model *model, const char *name) {
  return model ? index_of(model->inputs, model->num_inputs, name) : -1;
}

int64_t tilecraft_model_output_index(const tilecraft_model *model, const char *name) {
  return model ? index_of(model->outputs, model->num_outputs, name) : -1;
}

const char *tilecraft_model_manifest(const tilecraft_model *model) { return model ? model->manifest_text : NULL; }

/* ---- running ------------------------------------------------------------------------ */

static void shape_text(const int64_t *shape, int32_t rank, char *out, size_t size) {
  size_t used = (size_t)snprintf(out, size, "(");
  for (int32_t d = 0; d < rank && used < size; ++d) {
    if (shape[d] < 0)
      used += (size_t)snprintf(out + used, size - used, "%s?", d ? ", " : "");
    else
      used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
  }
  if (used < size)
    snprintf(out + used, size - used, rank == 1 ? ",)" : ")");
}

/* Elements of a shape, or -1 when the count overflows. */
static int64_t element_count(const int64_t *shape, int32_t rank) {
  int64_t count = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0)
      return -1;
    if (shape[d] && count > INT64_MAX / shape[d])
      return -1;
    count *= shape[d];
  }
  return count;
}

/* One input against its spec (runtime/signature.py TensorSpec.check). */
static tilecraft_status check_input(const tilecraft_model *model, const spec *expected, const tilecraft_tensor *given,
                                    tilecraft_error *error) {
  char want[256], got[256]; /* formatted only for a message: snprintf is most of a call's cost */
  if (given->dtype != expected->dtype)
    return fail(error, TILECRAFT_ERROR_ARGUMENT_TYPE, "%s: argument '%s': expected dtype %s, got %s", model->path,
                expected->name, tilecraft_dtype_name(expected->dtype), tilecraft_dtype_name(given->dtype));
  if (given->rank != expected->rank || given->rank < 0 || given->rank > TILECRAFT_MAX_RANK) {
    shape_text(expected->shape, expected->rank, want, sizeof want);
    return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': expected rank %d (shape %s), got rank %d",
                model->path, expected->name, expected->rank, want, given->rank);
  }
  for (int32_t d = 0; d < given->rank; ++d) {
    int negative = given->shape[d] < 0;
    if (negative || (expected->shape[d] >= 0 && expected->shape[d] != given->shape[d])) {
      shape_text(given->shape, given->rank, got, sizeof got);
      shape_text(expected->shape, expected->rank, want, sizeof want);
      if (negative)
        return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': shape %s has a negative dimension",
                    model->path, expected->name, got);
      return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': expected shape %s, got %s (dimension "
                  "%d is %lld, must be %lld)", model->path, expected->name, want, got, d,
                  (long long)given->shape[d], (long long)expected->shape[d]);
    }
  }
  int64_t count = element_count(given->shape, given->rank);
  size_t item = tilecraft_dtype_size(given->dtype);
  int too_large = count < 0 || (uint64_t)count > SIZE_MAX / item;
  if (too_large || (size_t)count * item > given->size_bytes) {
    shape_text(given->shape, given->rank, got, sizeof got);
    if (too_large)
      return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': shape %s is too large", model->path,
                  expected->name, got);
    return fail(error, TILECRAFT_ERROR_BUFFER_TOO_SMALL, "%s: argument '%s': shape %s needs %zu bytes, the buffer "
                "has %zu", model->path, expected->name, got, (size_t)count * item, given->size_bytes);
  }
  if (count && !given->data)
    return fail(error, TILECRAFT_ERROR_INVALID_ARGUMENT, "%s: argument '%s': NULL data", model->path,
                expected->name);
  if ((uintptr_t)given->data % item)
    return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': data not aligned to its %zu-byte elements",
                model->path, expected->name, item);
  return TILECRAFT_OK;
}

static tilecraft_status check_equal_dims(const tilecraft_model *model, const tilecraft_tensor *inputs,
                                         tilecraft_error *error) {
  for (size_t g = 0; g < model->num_groups; ++g) {
    const dim_group *group = &model->groups[g];
    int64_t first_arg = group->members[0][0], first_axis = group->members[0][1];
    int64_t expected = group->size >= 0 ? group->size : inputs[first_arg].shape[first_axis];
    for (size_t m = 0; m < group->count; ++m) {
      int64_t arg = group->members[m][0], axis = group->members[m][1], given = inputs[arg].shape[axis];
      if (given == expected)
        continue;
      char got[256];
      shape_text(inputs[arg].shape, inputs[arg].rank, got, sizeof got);
      if (group->size >= 0)
        return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': got shape %s (dimension %lld is %lld; "
                    "the function needs %lld there)", model->path, model->inputs[arg].name, got, (long long)axis,
                    (long long)given, (long long)expected);
      return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: argument '%s': got shape %s (dimension %lld is %lld; it "
                  "must equal dimension %lld of argument '%s' (%lld))", model->path, model->inputs[arg].name, got,
                  (long long)axis, (long long)given, (long long)first_axis, model->inputs[first_arg].name,
                  (long long)expected);
    }
  }
  return TILECRAFT_OK;
}

/* The message of a failed run-time check: its template with {value}, {bound} and {id}
 * filled in (runtime/checks.py check_error). */
static tilecraft_status check_failure(const tilecraft_model *model, const int64_t failure[3], tilecraft_error *error) {
  char text[TILECRAFT_MESSAGE_SIZE];
  size_t used = 0;
  const char *template = failure[0] >= 0 && (uint64_t)failure[0] < model->num_checks
                             ? model->checks[failure[0]].message
                             : "run-time check {id} failed (value {value}, bound {bound})";
  for (const char *c = template; *c && used + 1 < sizeof text;) {
    const char *names[] = {"{value}", "{bound}", "{id}"};
    int replaced = 0;
    for (int n = 0; n < 3 && !replaced; ++n) {
      size_t size = strlen(names[n]);
      if (strncmp(c, names[n], size) == 0) {
        used += (size_t)snprintf(text + used, sizeof text - used, "%lld", (long long)failure[n == 0 ? 1 : n == 1 ? 2 : 0]);
        c += size;
        replaced = 1;
      }
    }
    if (replaced)
      continue;
    if ((c[0] == '{' && c[1] == '{') || (c[0] == '}' && c[1] == '}'))
      ++c;
    text[used++] = *c++;
  }
  text[used < sizeof text ? used : sizeof text - 1] = '\0';
  const char *kind = failure[0] >= 0 && (uint64_t)failure[0] < model->num_checks ? model->checks[failure[0]].kind : "";
  return fail(error, TILECRAFT_ERROR_RUNTIME_CHECK, "%s: %s%s%s", model->path, kind, *kind ? " check failed: " : "",
              text);
}

/* Call the entry with `count` pointer arguments (the C interface takes every tensor and
 * the results struct by pointer). */
static void call_entry(void *entry, void *const *a, size_t count) {
#define P void *
  switch (count) {
  case 0: ((void (*)(void))entry)(); break;
  case 1: ((void (*)(P))entry)(a[0]); break;
  case 2: ((void (*)(P, P))entry)(a[0], a[1]); break;
  case 3: ((void (*)(P, P, P))entry)(a[0], a[1], a[2]); break;
  case 4: ((void (*)(P, P, P, P))entry)(a[0], a[1], a[2], a[3]); break;
  case 5: ((void (*)(P, P, P, P, P))entry)(a[0], a[1], a[2], a[3], a[4]); break;
  case 6: ((void (*)(P, P, P, P, P, P))entry)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
  case 7: ((void (*)(P, P, P, P, P, P, P))entry)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
  case 8: ((void (*)(P, P, P, P, P, P, P, P))entry)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
  default: {
    /* 9 to 32 arguments: the callee reads the ones it declares. Every ABI tilecraft targets
     * (x86-64 System V, AArch64, Arm and RISC-V) passes pointer arguments in order and has
     * the caller pop them, so the unused trailing ones are harmless. */
    typedef void (*wide)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P);
    void *b[MAX_CALL_ARGUMENTS] = {0};
    memcpy(b, a, count * sizeof *a);
    ((wide)entry)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15],
                  b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27], b[28], b[29],
                  b[30], b[31]);
  }
  }
#undef P
}

tilecraft_status tilecraft_model_run(const tilecraft_model *model, const tilecraft_tensor *inputs, size_t num_inputs,
                                     tilecraft_tensor *outputs, size_t num_outputs, tilecraft_error *error) {
  if (!model)
    return fail(error, TILECRAFT_ERROR_INVALID_ARGUMENT, "tilecraft_model_run: model is NULL");
  if (num_inputs != model->num_inputs || (num_inputs && !inputs))
    return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: @%s takes %zu input(s), got %zu", model->path,
                tc_json_get(model->manifest, "entry")->string, model->num_inputs, inputs ? num_inputs : 0);
  if (num_outputs != model->num_outputs || (num_outputs && !outputs))
    return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: @%s has %zu output(s), got buffers for %zu", model->path,
                tc_json_get(model->manifest, "entry")->string, model->num_outputs, outputs ? num_outputs : 0);
  for (size_t i = 0; i < num_inputs; ++i) {
    tilecraft_status status = check_input(model, &model->inputs[i], &inputs[i], error);
    if (status != TILECRAFT_OK)
      return status;
  }
  tilecraft_status status = check_equal_dims(model, inputs, error);
  if (status != TILECRAFT_OK)
    return status;
  for (size_t i = 0; i < num_outputs; ++i) {
    const spec *expected = &model->outputs[i];
    if (outputs[i].dtype != expected->dtype)
      return fail(error, TILECRAFT_ERROR_ARGUMENT_TYPE, "%s: output '%s': expected dtype %s, got a %s buffer",
                  model->path, expected->name, tilecraft_dtype_name(expected->dtype),
                  tilecraft_dtype_name(outputs[i].dtype));
    int64_t count = element_count(expected->shape, expected->rank); /* -1 when dynamic */
    size_t item = tilecraft_dtype_size(expected->dtype);
    if (count >= 0 && (uint64_t)count * item > outputs[i].size_bytes) {
      char want[256];
      shape_text(expected->shape, expected->rank, want, sizeof want);
      outputs[i].rank = expected->rank;
      memcpy(outputs[i].shape, expected->shape, (size_t)expected->rank * sizeof(int64_t));
      return fail(error, TILECRAFT_ERROR_BUFFER_TOO_SMALL, "%s: output '%s' of shape %s needs %llu bytes, the buffer "
                  "has %zu", model->path, expected->name, want, (unsigned long long)count * item,
                  outputs[i].size_bytes);
    }
    if (outputs[i].size_bytes && !outputs[i].data)
      return fail(error, TILECRAFT_ERROR_INVALID_ARGUMENT, "%s: output '%s': NULL data", model->path, expected->name);
    if ((uintptr_t)outputs[i].data % item)
      return fail(error, TILECRAFT_ERROR_ARGUMENT_VALUE, "%s: output '%s': data not aligned to its %zu-byte elements",
                  model->path, expected->name, item);
  }
  /* The frame: result descriptors (zeroed), argument descriptors, then the call. */
  int64_t stack_frame[256];
  int64_t *frame = model->frame_words <= 256 ? stack_frame : calloc(model->frame_words, sizeof(int64_t));
  if (!frame)
    return fail(error, TILECRAFT_ERROR_OUT_OF_MEMORY, "%s: out of memory for the call frame", model->path);
  memset(frame, 0, model->frame_words * sizeof(int64_t));
  void *arguments[MAX_CALL_ARGUMENTS];
  size_t count = 0;
  if (model->num_outputs)
    arguments[count++] = frame;
  for (size_t i = 0; i < num_inputs; ++i) {
    int64_t *descriptor = frame + model->argument_offsets[i];
    int64_t *sizes = descriptor + DESCRIPTOR_HEADER_WORDS + 1;
    int32_t rank = inputs[i].rank;
    int64_t elements = element_count(inputs[i].shape, rank);
    set_descriptor_pointers(descriptor, inputs[i].data);
    descriptor[DESCRIPTOR_HEADER_WORDS] = 0;
    int64_t stride = 1;
    for (int32_t d = rank; d-- > 0;) {
      sizes[d] = inputs[i].shape[d];
      sizes[rank + d] = elements ? stride : 0;
      stride *= inputs[i].shape[d] ? inputs[i].shape[d] : 1;
    }
    arguments[count++] = descriptor;
  }
  /* A CUDA package copies each result straight into the caller's buffer (device to device
   * or device to host, as its address says): no host copy of the result in between. */
  for (size_t i = 0; model->output_arguments && i < num_outputs; ++i) {
    int64_t *descriptor = frame + model->destination_offsets[i];
    int64_t *sizes = descriptor + DESCRIPTOR_HEADER_WORDS + 1;
    const spec *expected = &model->outputs[i];
    set_descriptor_pointers(descriptor, outputs[i].data);
    descriptor[DESCRIPTOR_HEADER_WORDS] = 0;
    int64_t stride = 1;
    for (int32_t d = expected->rank; d-- > 0;) {
      int64_t extent = expected->shape[d] < 0 ? 0 : expected->shape[d];
      sizes[d] = extent;
      sizes[expected->rank + d] = stride;
      stride *= extent ? extent : 1;
    }
    arguments[count++] = descriptor;
  }
  call_entry(model->entry, arguments, count);
  int64_t failure[3];
  int failed = model->take_failure && model->take_failure(failure);
  /* Copy the results out and free what the call allocated (each buffer once; never an
   * input's, which a result may alias: runtime/memref.py adopt_results). */
  status = TILECRAFT_OK;
  for (size_t i = 0; i < num_outputs; ++i) {
    const spec *expected = &model->outputs[i];
    int64_t *descriptor = frame + model->result_offsets[i];
    const int64_t *sizes = descriptor + DESCRIPTOR_HEADER_WORDS + 1, offset = descriptor[DESCRIPTOR_HEADER_WORDS];
    void *allocated = descriptor_pointer(descriptor, 0);
    const char *aligned = descriptor_pointer(descriptor, 1);
    int32_t rank = expected->rank;
    int owned = allocated != NULL && !(model->output_arguments && allocated == outputs[i].data);
    for (size_t k = 0; owned && k < num_inputs; ++k)
      owned = allocated != inputs[k].data;
    for (size_t k = 0; owned && k < i; ++k)
      owned = descriptor_pointer(frame + model->result_offsets[k], 0) != allocated;
    if (!failed) { /* every output's shape is set, even after one did not fit */
      outputs[i].rank = rank;
      memcpy(outputs[i].shape, sizes, (size_t)rank * sizeof(int64_t));
      int64_t elements = element_count(sizes, rank);
      size_t item = tilecraft_dtype_size(expected->dtype);
      int contiguous = 1;
      int64_t stride = 1;
      for (int32_t d = rank; d-- > 0 && elements > 0;) {
        contiguous &= sizes[rank + d] == stride || sizes[d] == 1;
        stride *= sizes[d];
      }
      if (elements < 0 || (uint64_t)elements * item > outputs[i].size_bytes) {
        char got[256];
        shape_text(outputs[i].shape, rank, got, sizeof got);
        if (status == TILECRAFT_OK)
          status = fail(error, TILECRAFT_ERROR_BUFFER_TOO_SMALL, "%s: output '%s' has shape %s this call: %llu bytes, "
                        "the buffer has %zu (every output's shape is set in its tensor: run again with room for "
                        "them)", model->path, expected->name, got,
                        (unsigned long long)(elements < 0 ? 0 : elements) * item, outputs[i].size_bytes);
      } else if (!contiguous) {
        if (status == TILECRAFT_OK)
          status = fail(error, TILECRAFT_ERROR_PACKAGE, "%s: output '%s': the compiled code returned a strided "
                        "buffer", model->path, expected->name);
      } else if (elements > 0 && aligned && aligned + offset * (int64_t)item != outputs[i].data) {
        memcpy(outputs[i].data, aligned + offset * (int64_t)item, (size_t)elements * item);
      }
    }
    if (owned)
      free(allocated);
  }
  if (frame != stack_frame)
    free(frame);
  if (take_device_error(model, error) != TILECRAFT_OK) /* the outputs hold nothing valid */
    return TILECRAFT_ERROR_DEVICE;
  if (failed)
    return check_failure(model, failure, error);
  return status == TILECRAFT_OK ? succeed(error) : status;
}
