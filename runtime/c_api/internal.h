/* Internal pieces of the tilecraft C runtime (not installed): a small JSON reader and
 * SHA-256 / HMAC-SHA256. Why our own: the runtime links nothing but libc, libdl and
 * libpthread, so that a device with no OpenSSL and no JSON library can run a package. */
#ifndef TILECRAFT_RUNTIME_INTERNAL_H
#define TILECRAFT_RUNTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define TC_HIDDEN __attribute__((visibility("hidden")))

/* ---- JSON ------------------------------------------------------------------------- */

typedef enum { TC_JSON_NULL, TC_JSON_BOOL, TC_JSON_NUMBER, TC_JSON_STRING, TC_JSON_ARRAY, TC_JSON_OBJECT } tc_json_kind;

typedef struct tc_json {
  tc_json_kind kind;
  int boolean;
  int is_integer;       /* a number written without fraction or exponent that fits int64 */
  int64_t integer;
  double number;
  char *string;         /* strings (UTF-8, NUL-terminated; may hold NULs: see length) */
  size_t length;
  struct tc_json *items; /* arrays and objects */
  char **keys;           /* objects: keys[i] names items[i] */
  size_t count;
} tc_json;

/* Parse `length` bytes; NULL and a message in `error` on malformed input or nesting
 * deeper than 64. */
TC_HIDDEN tc_json *tc_json_parse(const char *text, size_t length, char *error, size_t error_size);
TC_HIDDEN void tc_json_free(tc_json *value);
/* The member `key` of an object (the last one, as Python's json keeps), else NULL. */
TC_HIDDEN const tc_json *tc_json_get(const tc_json *object, const char *key);
/* Deep equality, as Python compares parsed JSON (1 and 1.0 differ, as their dumps do). */
TC_HIDDEN int tc_json_equal(const tc_json *a, const tc_json *b);

/* ---- SHA-256 ---------------------------------------------------------------------- */

typedef struct {
  uint32_t state[8];
  uint64_t bytes;
  unsigned char block[64];
  size_t used;
} tc_sha256;

TC_HIDDEN void tc_sha256_init(tc_sha256 *context);
TC_HIDDEN void tc_sha256_update(tc_sha256 *context, const void *data, size_t size);
TC_HIDDEN void tc_sha256_final(tc_sha256 *context, unsigned char digest[32]);
/* Lower-case hex of a digest (65 bytes with the NUL). */
TC_HIDDEN void tc_hex(const unsigned char *digest, size_t size, char *out);
TC_HIDDEN void tc_hmac_sha256(const unsigned char *key, size_t key_size, const void *data, size_t size,
                              unsigned char mac[32]);

#endif
