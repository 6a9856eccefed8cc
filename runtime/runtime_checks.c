/* Run-time checks of a tilecraft package (runtime/checks.py, docs/robustness.md).
 *
 * Generated code calls tilecraft_check_failed(id, value, bound) when a check fails; the
 * first failure of a call is kept per thread, so concurrent calls of one package do not see
 * each other's failures, and the Python runtime takes it after the entry returns with
 * tilecraft_take_check_failure (exported; files are compiled with -fvisibility=hidden).
 * Never called on the success path. */
#include <stdint.h>

static _Thread_local int64_t pending[3];
static _Thread_local int has_pending;

/* Hidden: only the model code linked beside it calls it (and must not bind to another
 * library's copy). */
__attribute__((visibility("hidden"))) void tilecraft_check_failed(int64_t id, int64_t value, int64_t bound) {
  if (has_pending)
    return;
  pending[0] = id;
  pending[1] = value;
  pending[2] = bound;
  has_pending = 1;
}

__attribute__((visibility("default"))) int tilecraft_take_check_failure(int64_t *out) {
  if (!has_pending)
    return 0;
  out[0] = pending[0];
  out[1] = pending[1];
  out[2] = pending[2];
  has_pending = 0;
  return 1;
}
