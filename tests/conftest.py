"""Shared fixtures. MLIR text builders and numpy references live in ``mlir_text.py``.

``tests/`` is deliberately not a package: the repository root is the ``tilecraft`` package
itself, so a ``tests/__init__.py`` made pytest import a second copy of tilecraft under the
checkout folder's name (``main.pipelines...``) beside the installed one.
"""

import os
import shutil
import tempfile

# MLIR's Python libraries must load before TensorFlow's (imported by the TFLite tests, and by
# keras with its default backend): loaded after them, MLIR's `_mlirRegisterEverything`
# crashes the process (a segmentation fault, at whichever test first touches MLIR).
import mlir.ir  # noqa: F401
import numpy as np
import pytest

# Read by every compile (the target's thread count, hence the default schedule's tiles and
# tuning spaces): a test that changes it must not change the tests after it in its process.
_PROCESS_SETTINGS = ("TILECRAFT_NUM_THREADS",)


# pipelines/jit/parallel_codegen.py's switch, named rather than imported: this file imports
# nothing of tilecraft (each test module imports what it tests).
WORKERS_ENV = "TILECRAFT_CODEGEN_WORKERS"

# The session's own cache folder (set by the process that made it; xdist workers inherit it).
_SESSION_CACHE = "_TILECRAFT_TEST_SESSION_CACHE"


def pytest_configure(config):
    # A schedule that fails for an op only warns and falls back to scalar loops; in the
    # tests that is a compiler bug, so it must fail the test that triggers it.
    config.addinivalue_line("filterwarnings", "error:tilecraft-schedule:RuntimeWarning")
    # The tests never read or fill a user's cache (compiler/cache.py): a folder of the
    # session's own, and the compile cache off unless a test asks for it (cache=True), so
    # that no test meets another's compiled models (tests/test_compile_cache.py turns it on).
    session = os.environ.get(_SESSION_CACHE)
    if session is None or os.environ.get("TILECRAFT_CACHE_DIR") != session:
        session = tempfile.mkdtemp(prefix="tilecraft-test-cache-")
        os.environ["TILECRAFT_CACHE_DIR"] = os.environ[_SESSION_CACHE] = session
        config._tilecraft_made_cache = session
    os.environ["TILECRAFT_COMPILE_CACHE"] = "0"
    _serial_codegen_when_cores_are_taken()


def _serial_codegen_when_cores_are_taken():
    """Compile with no codegen worker processes (pipelines/jit/parallel_codegen.py) in an
    xdist worker when the xdist workers already take every core, unless the caller set
    ``TILECRAFT_CODEGEN_WORKERS``. Why: there the workers only compete with the other xdist
    worker for the same cores, and cost CPU of their own (a start-up, the module's bytecode,
    a link): the light SqueezeNet's compile took a median 5.8 CPU s with them against 5.2
    without (docs/testing.md). tests/test_parallel_codegen.py sets the variable itself."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or WORKERS_ENV in os.environ:
        return
    if int(workers) >= len(os.sched_getaffinity(0)):
        os.environ[WORKERS_ENV] = "0"


def pytest_unconfigure(config):
    made = getattr(config, "_tilecraft_made_cache", None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(autouse=True)
def keep_process_settings():
    """Restore the settings above after each test: a module imported during a test (the
    benchmarks' model builders) once set ``TILECRAFT_NUM_THREADS=1`` for good, and the
    tests after it in that xdist worker compiled for one thread and failed."""
    saved = {name: os.environ.get(name) for name in _PROCESS_SETTINGS}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def random_array(rng, shape, dtype=np.float32):
    """Values in [-1, 1) for floats, small integers for ints, coin flips for bools."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return (rng.random(shape) * 2 - 1).astype(dtype)


@pytest.fixture
def rand(rng):
    """``rand(shape, dtype=np.float32)``: a reproducible random array."""
    return lambda shape, dtype=np.float32: random_array(rng, shape, dtype)
