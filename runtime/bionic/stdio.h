/* bionic's <stdio.h>, the part tilecraft's runtime uses (stderr is exported from API 23). */
#ifndef TILECRAFT_BIONIC_STDIO_H
#define TILECRAFT_BIONIC_STDIO_H
#include "bionic.h"

typedef struct __sFILE FILE;
extern FILE *stderr;
int fprintf(FILE *stream, const char *format, ...) __attribute__((format(printf, 2, 3)));
int printf(const char *format, ...) __attribute__((format(printf, 1, 2)));
#endif
