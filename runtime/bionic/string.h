/* bionic's <string.h>, the part tilecraft's runtime uses. */
#ifndef TILECRAFT_BIONIC_STRING_H
#define TILECRAFT_BIONIC_STRING_H
#include "bionic.h"

void *memcpy(void *destination, const void *source, size_t size);
void *memmove(void *destination, const void *source, size_t size);
void *memset(void *destination, int value, size_t size);
size_t strlen(const char *text);
#endif
