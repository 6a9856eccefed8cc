/* A small strict JSON reader (RFC 8259) for package manifests and contracts.
 *
 * Why strict and bounded: a manifest comes from a file anyone may have edited; every
 * malformed input is an error message, never a crash (nesting is limited to 64 levels so
 * a file of brackets cannot exhaust the stack). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_DEPTH 64

typedef struct {
  const char *text;
  size_t length, at;
  char *error;
  size_t error_size;
  int failed;
} parser;

static int fail(parser *p, const char *format, ...) {
  if (!p->failed) {
    va_list args;
    va_start(args, format);
    int used = snprintf(p->error, p->error_size, "at byte %zu: ", p->at);
    if (used >= 0 && (size_t)used < p->error_size)
      vsnprintf(p->error + used, p->error_size - (size_t)used, format, args);
    va_end(args);
    p->failed = 1;
  }
  return 0;
}

static void skip_space(parser *p) {
  while (p->at < p->length &&
         (p->text[p->at] == ' ' || p->text[p->at] == '\t' || p->text[p->at] == '\n' || p->text[p->at] == '\r'))
    ++p->at;
}

static void release(tc_json *value) {
  if (value->kind == TC_JSON_STRING)
    free(value->string);
  if (value->kind == TC_JSON_ARRAY || value->kind == TC_JSON_OBJECT) {
    for (size_t i = 0; i < value->count; ++i) {
      release(&value->items[i]);
      if (value->keys)
        free(value->keys[i]);
    }
    free(value->items);
    free(value->keys);
  }
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_hex4(parser *p, unsigned *out) {
  if (p->length - p->at < 4)
    return fail(p, "truncated \\u escape");
  unsigned value = 0;
  for (int i = 0; i < 4; ++i) {
    int digit = hex_digit(p->text[p->at + i]);
    if (digit < 0)
      return fail(p, "bad \\u escape");
    value = value * 16 + (unsigned)digit;
  }
  p->at += 4;
  *out = value;
  return 1;
}

/* A string starting at the opening quote; the UTF-8 bytes in a fresh buffer. */
static int parse_string(parser *p, char **out, size_t *out_length) {
  ++p->at; /* the quote */
  size_t capacity = 16, used = 0;
  char *buffer = malloc(capacity);
  if (!buffer)
    return fail(p, "out of memory");
  for (;;) {
    if (p->at >= p->length) {
      free(buffer);
      return fail(p, "unterminated string");
    }
    unsigned char c = (unsigned char)p->text[p->at++];
    unsigned code = c;
    char bytes[4];
    size_t count = 1;
    if (c == '"')
      break;
    if (c < 0x20) {
      free(buffer);
      return fail(p, "control character in a string");
    }
    if (c == '\\') {
      if (p->at >= p->length) {
        free(buffer);
        return fail(p, "unterminated escape");
      }
      char e = p->text[p->at++];
      switch (e) {
      case '"': code = '"'; break;
      case '\\': code = '\\'; break;
      case '/': code = '/'; break;
      case 'b': code = '\b'; break;
      case 'f': code = '\f'; break;
      case 'n': code = '\n'; break;
      case 'r': code = '\r'; break;
      case 't': code = '\t'; break;
      case 'u': {
        if (!read_hex4(p, &code)) {
          free(buffer);
          return 0;
        }
        if (code >= 0xD800 && code < 0xDC00 && p->length - p->at >= 6 && p->text[p->at] == '\\' &&
            p->text[p->at + 1] == 'u') {
          size_t mark = p->at;
          unsigned low;
          p->at += 2;
          if (!read_hex4(p, &low)) {
            free(buffer);
            return 0;
          }
          if (low >= 0xDC00 && low < 0xE000)
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          else
            p->at = mark; /* a lone surrogate, kept as Python keeps it */
        }
        break;
      }
      default:
        free(buffer);
        return fail(p, "bad escape \\%c", e);
      }
      if (code < 0x80) {
        bytes[0] = (char)code;
      } else if (code < 0x800) {
        bytes[0] = (char)(0xC0 | code >> 6);
        bytes[1] = (char)(0x80 | (code & 0x3F));
        count = 2;
      } else if (code < 0x10000) {
        bytes[0] = (char)(0xE0 | code >> 12);
        bytes[1] = (char)(0x80 | (code >> 6 & 0x3F));
        bytes[2] = (char)(0x80 | (code & 0x3F));
        count = 3;
      } else {
        bytes[0] = (char)(0xF0 | code >> 18);
        bytes[1] = (char)(0x80 | (code >> 12 & 0x3F));
        bytes[2] = (char)(0x80 | (code >> 6 & 0x3F));
        bytes[3] = (char)(0x80 | (code & 0x3F));
        count = 4;
      }
    } else {
      bytes[0] = (char)c;
    }
    if (used + count + 1 > capacity) {
      capacity *= 2;
      char *grown = realloc(buffer, capacity);
      if (!grown) {
        free(buffer);
        return fail(p, "out of memory");
      }
      buffer = grown;
    }
    memcpy(buffer + used, bytes, count);
    used += count;
  }
  buffer[used] = '\0';
  *out = buffer;
  *out_length = used;
  return 1;
}

static int parse_number(parser *p, tc_json *value) {
  size_t start = p->at;
  int integral = 1;
  if (p->at < p->length && p->text[p->at] == '-')
    ++p->at;
  if (p->at >= p->length || p->text[p->at] < '0' || p->text[p->at] > '9')
    return fail(p, "bad number");
  if (p->text[p->at] == '0')
    ++p->at;
  else
    while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9')
      ++p->at;
  if (p->at < p->length && p->text[p->at] == '.') {
    integral = 0;
    ++p->at;
    if (p->at >= p->length || p->text[p->at] < '0' || p->text[p->at] > '9')
      return fail(p, "bad number");
    while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9')
      ++p->at;
  }
  if (p->at < p->length && (p->text[p->at] == 'e' || p->text[p->at] == 'E')) {
    integral = 0;
    ++p->at;
    if (p->at < p->length && (p->text[p->at] == '+' || p->text[p->at] == '-'))
      ++p->at;
    if (p->at >= p->length || p->text[p->at] < '0' || p->text[p->at] > '9')
      return fail(p, "bad number");
    while (p->at < p->length && p->text[p->at] >= '0' && p->text[p->at] <= '9')
      ++p->at;
  }
  char digits[64];
  size_t size = p->at - start;
  if (size >= sizeof digits)
    return fail(p, "number too long");
  memcpy(digits, p->text + start, size);
  digits[size] = '\0';
  value->kind = TC_JSON_NUMBER;
  value->number = strtod(digits, NULL);
  if (integral) {
    errno = 0;
    long long parsed = strtoll(digits, NULL, 10);
    if (errno == 0) {
      value->is_integer = 1;
      value->integer = parsed;
    }
  }
  return 1;
}

static int match_word(parser *p, const char *word) {
  size_t size = strlen(word);
  if (p->length - p->at < size || memcmp(p->text + p->at, word, size) != 0)
    return fail(p, "unexpected character");
  p->at += size;
  return 1;
}

static int parse_value(parser *p, tc_json *value, int depth);

static int append(parser *p, tc_json *container, size_t *capacity) {
  if (container->count < *capacity)
    return 1;
  size_t grown = *capacity ? *capacity * 2 : 4;
  tc_json *items = realloc(container->items, grown * sizeof *items);
  if (!items)
    return fail(p, "out of memory");
  container->items = items;
  if (container->kind == TC_JSON_OBJECT) {
    char **keys = realloc(container->keys, grown * sizeof *keys);
    if (!keys)
      return fail(p, "out of memory");
    container->keys = keys;
  }
  *capacity = grown;
  return 1;
}

static int parse_container(parser *p, tc_json *value, int depth) {
  int object = p->text[p->at] == '{';
  char close = object ? '}' : ']';
  size_t capacity = 0;
  value->kind = object ? TC_JSON_OBJECT : TC_JSON_ARRAY;
  ++p->at;
  skip_space(p);
  if (p->at < p->length && p->text[p->at] == close) {
    ++p->at;
    return 1;
  }
  for (;;) {
    if (!append(p, value, &capacity))
      return 0;
    tc_json *item = &value->items[value->count];
    memset(item, 0, sizeof *item);
    skip_space(p);
    if (object) {
      size_t key_length;
      if (p->at >= p->length || p->text[p->at] != '"')
        return fail(p, "expected a string key");
      if (!parse_string(p, &value->keys[value->count], &key_length))
        return 0;
      skip_space(p);
      if (p->at >= p->length || p->text[p->at] != ':') {
        free(value->keys[value->count]);
        return fail(p, "expected ':'");
      }
      ++p->at;
    }
    if (!parse_value(p, item, depth + 1)) {
      release(item);
      if (object)
        free(value->keys[value->count]);
      return 0;
    }
    ++value->count;
    skip_space(p);
    if (p->at < p->length && p->text[p->at] == ',') {
      ++p->at;
      continue;
    }
    if (p->at < p->length && p->text[p->at] == close) {
      ++p->at;
      return 1;
    }
    return fail(p, "expected ',' or '%c'", close);
  }
}

static int parse_value(parser *p, tc_json *value, int depth) {
  if (depth > MAX_DEPTH)
    return fail(p, "nested deeper than %d levels", MAX_DEPTH);
  skip_space(p);
  if (p->at >= p->length)
    return fail(p, "unexpected end of text");
  char c = p->text[p->at];
  switch (c) {
  case '{':
  case '[':
    return parse_container(p, value, depth);
  case '"':
    value->kind = TC_JSON_STRING;
    return parse_string(p, &value->string, &value->length);
  case 't':
    value->kind = TC_JSON_BOOL;
    value->boolean = 1;
    return match_word(p, "true");
  case 'f':
    value->kind = TC_JSON_BOOL;
    return match_word(p, "false");
  case 'n':
    value->kind = TC_JSON_NULL;
    return match_word(p, "null");
  default:
    return parse_number(p, value);
  }
}

tc_json *tc_json_parse(const char *text, size_t length, char *error, size_t error_size) {
  parser p = {text, length, 0, error, error_size, 0};
  tc_json *value = calloc(1, sizeof *value);
  if (!value) {
    snprintf(error, error_size, "out of memory");
    return NULL;
  }
  if (parse_value(&p, value, 0)) {
    skip_space(&p);
    if (p.at == p.length)
      return value;
    fail(&p, "text after the JSON value");
  }
  release(value);
  free(value);
  return NULL;
}

void tc_json_free(tc_json *value) {
  if (value) {
    release(value);
    free(value);
  }
}

const tc_json *tc_json_get(const tc_json *object, const char *key) {
  if (!object || object->kind != TC_JSON_OBJECT)
    return NULL;
  for (size_t i = object->count; i-- > 0;)
    if (strcmp(object->keys[i], key) == 0)
      return &object->items[i];
  return NULL;
}

int tc_json_equal(const tc_json *a, const tc_json *b) {
  if (!a || !b)
    return a == b;
  if (a->kind != b->kind)
    return 0;
  switch (a->kind) {
  case TC_JSON_NULL:
    return 1;
  case TC_JSON_BOOL:
    return a->boolean == b->boolean;
  case TC_JSON_NUMBER:
    if (a->is_integer != b->is_integer)
      return 0;
    return a->is_integer ? a->integer == b->integer : a->number == b->number;
  case TC_JSON_STRING:
    return a->length == b->length && memcmp(a->string, b->string, a->length) == 0;
  case TC_JSON_ARRAY:
    if (a->count != b->count)
      return 0;
    for (size_t i = 0; i < a->count; ++i)
      if (!tc_json_equal(&a->items[i], &b->items[i]))
        return 0;
    return 1;
  case TC_JSON_OBJECT:
    if (a->count != b->count)
      return 0;
    for (size_t i = 0; i < a->count; ++i)
      if (!tc_json_equal(&a->items[i], tc_json_get(b, a->keys[i])))
        return 0;
    return 1;
  }
  return 0;
}
