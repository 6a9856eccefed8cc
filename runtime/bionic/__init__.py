"""C declarations of Android's libc (bionic) for building a package's runtime without an NDK.

Why: an ``aarch64-linux-android`` package links the runtime C files of runtime/ (worker
pool, memref helpers, run-time checks, profile timer). The cross toolchain (``zig cc``)
carries no bionic headers, and the host's glibc headers describe another ABI. The headers
in this folder declare exactly what those files use, with bionic's LP64 layouts and
constants (``pthread_mutex_t`` is 40 bytes, ``_SC_NPROCESSORS_ONLN`` is 0x61, ``stderr``
a ``FILE *`` exported since API 23). compiler/cross_toolchain.py compiles with them and
links against stub ``libc.so``/``libm.so`` made from the symbol list there, so a symbol
bionic lacks fails the link, not the device. Not a general libc: add a declaration
here when a runtime file starts using something new.
"""
