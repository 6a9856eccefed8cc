/* bionic's <sched.h>, the part tilecraft's runtime uses. */
#ifndef TILECRAFT_BIONIC_SCHED_H
#define TILECRAFT_BIONIC_SCHED_H
#include "bionic.h"

int sched_yield(void);
#endif
