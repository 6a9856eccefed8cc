/* What the runtime's stress drivers (async_runtime_driver.c, parallel_for_driver.c) check
 * after every loop: each of its n blocks or iterations ran exactly once; else the process
 * aborts, naming the first that did not. */
#ifndef TILECRAFT_EACH_ONCE_H
#define TILECRAFT_EACH_ONCE_H

#include <stdio.h>
#include <stdlib.h>

static void expect_each_once(const int *done, int n, const char *what) {
  for (int i = 0; i < n; ++i)
    if (done[i] != 1) {
      fprintf(stderr, "%s %d of %d ran %d times\n", what, i, n, done[i]);
      abort();
    }
}

#endif
