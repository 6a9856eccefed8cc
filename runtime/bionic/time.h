/* bionic's <time.h>, the part tilecraft's runtime uses (clock ids are the kernel's). */
#ifndef TILECRAFT_BIONIC_TIME_H
#define TILECRAFT_BIONIC_TIME_H
#include "bionic.h"

struct timespec {
  time_t tv_sec;
  long tv_nsec;
};
#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1
int clock_gettime(clockid_t clock, struct timespec *time);
int nanosleep(const struct timespec *request, struct timespec *remaining);
#endif
