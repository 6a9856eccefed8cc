/* Types shared by tilecraft's bionic headers (runtime/bionic/__init__.py says why they exist).
 * Android aarch64 only (LP64): the sizes below are bionic's for __LP64__. */
#ifndef TILECRAFT_BIONIC_H
#define TILECRAFT_BIONIC_H
#if !defined(__aarch64__) || !defined(__LP64__)
#error "tilecraft's bionic declarations describe Android aarch64 (LP64) only"
#endif
#include <stddef.h>
#include <stdint.h>

typedef int pid_t;
typedef long time_t;
typedef int clockid_t;
typedef long ssize_t;
#endif
