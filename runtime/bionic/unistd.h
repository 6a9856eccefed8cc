/* bionic's <unistd.h>, the part tilecraft's runtime uses (sysconf names from <bits/sysconf.h>). */
#ifndef TILECRAFT_BIONIC_UNISTD_H
#define TILECRAFT_BIONIC_UNISTD_H
#include "bionic.h"

#define _SC_NPROCESSORS_CONF 0x0060
#define _SC_NPROCESSORS_ONLN 0x0061
long sysconf(int name);
pid_t getpid(void);
pid_t fork(void);
#endif
