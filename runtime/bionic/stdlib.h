/* bionic's <stdlib.h>, the part tilecraft's runtime uses. */
#ifndef TILECRAFT_BIONIC_STDLIB_H
#define TILECRAFT_BIONIC_STDLIB_H
#include "bionic.h"

void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void *realloc(void *pointer, size_t size);
void free(void *pointer);
void abort(void) __attribute__((noreturn));
char *getenv(const char *name);
long atol(const char *text);
#endif
