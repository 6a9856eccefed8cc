"""The JIT's parallel loops run on tilecraft's runtime (runtime/parallel_runtime.py,
runtime/async_runtime.c): N threads compute a loop on N cores (N - 1 workers and the thread
that awaits it), idle threads spin TILECRAFT_SPIN_US before sleeping. Each case runs in a
fresh process: the pool starts once per process, sized by TILECRAFT_NUM_THREADS."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import mlir_text as mt

PROBE = textwrap.dedent("""
    import json, os, sys, numpy as np, tilecraft
    from tilecraft.runtime import parallel_runtime
    text = open(sys.argv[1]).read()
    threads = int(os.environ["TILECRAFT_NUM_THREADS"])
    m = tilecraft.compile(text, target=tilecraft.Target(num_threads=threads))
    rng = np.random.default_rng(0)
    a = rng.random((96, 128), dtype=np.float32); b = rng.random((128, 80), dtype=np.float32)
    expected = a @ b  # before counting: numpy's BLAS may start threads of its own
    before = len(os.listdir("/proc/self/task"))
    ok = all(np.allclose(m(a, b), expected, rtol=1e-4, atol=1e-4) for _ in range(200))
    after = len(os.listdir("/proc/self/task"))
    library = parallel_runtime.load()._name
    print(json.dumps({"ok": ok, "new_threads": after - before, "library": library}))
""")


def _probe(tmp_path, threads: int, spin_us: str | None = None) -> dict:
    source = tmp_path / "mm.mlir"
    source.write_text(mt.matmul(96, 80, 128))
    env = {**os.environ, "TILECRAFT_NUM_THREADS": str(threads)}
    if spin_us is not None:
        env["TILECRAFT_SPIN_US"] = spin_us
    result = subprocess.run([sys.executable, "-c", PROBE, str(source)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threads", [2, 3])
def test_a_loop_on_n_threads_starts_n_minus_one_workers(tmp_path, threads):
    """The awaiting thread is the N-th: MLIR's runtime started N workers beside it."""
    probe = _probe(tmp_path, threads)
    assert probe["ok"]
    assert probe["new_threads"] == threads - 1
    assert "libtilecraft_async_runtime" in probe["library"]


@pytest.mark.parametrize("spin_us", ["0", "5000"])
def test_results_do_not_depend_on_spinning(tmp_path, spin_us):
    probe = _probe(tmp_path, 2, spin_us)
    assert probe["ok"]


DEQUE_PROBE = textwrap.dedent("""
    import ctypes, json, threading, time
    from tilecraft.runtime import parallel_runtime
    lib = parallel_runtime.load()
    lib.mlirAsyncRuntimeCreateToken.restype = ctypes.c_void_p
    lib.mlirAsyncRuntimeEmplaceToken.argtypes = [ctypes.c_void_p]
    lib.mlirAsyncRuntimeAwaitToken.argtypes = [ctypes.c_void_p]
    lib.mlirAsyncRuntimeDropRef.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    RESUME = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    lib.mlirAsyncRuntimeExecute.argtypes = [ctypes.c_void_p, RESUME]
    ran, started, release = [], threading.Event(), threading.Event()
    token = lib.mlirAsyncRuntimeCreateToken()

    def task(name, then=None):
        def resume(_):
            ran.append((name, threading.get_ident() == main))
            if then:
                then()
        return RESUME(resume)

    main = threading.get_ident()
    keep = [task("blocker", lambda: (started.set(), release.wait()))]
    before = parallel_runtime.task_counts()
    lib.mlirAsyncRuntimeExecute(None, keep[0])  # the one worker takes it and waits
    started.wait()
    # The worker is busy: what this thread queues now only it can run, in the order it takes.
    keep.append(task("last", lambda: (lib.mlirAsyncRuntimeEmplaceToken(token), release.set())))
    keep += [task(name) for name in ("a", "b", "c")]
    for resume in keep[1:]:
        lib.mlirAsyncRuntimeExecute(None, resume)
    lib.mlirAsyncRuntimeAwaitToken(token)  # runs this thread's queued tasks while it waits
    lib.mlirAsyncRuntimeDropRef(token, 1)
    counts = parallel_runtime.task_counts() - before
    print(json.dumps({"ran": ran, "stolen": counts.stolen, "queued": counts.queued}))
""")


def test_a_thread_runs_its_own_newest_task_first(tmp_path):
    """Per-thread deques (async_runtime.c): a waiting thread takes the task it queued last,
    the one async-parallel-for queued for the blocks next to the block it just computed; a
    thread with nothing of its own steals another's oldest (the far half of a loop). With
    one FIFO queue the waiter took the oldest first."""
    env = {**os.environ, "TILECRAFT_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-c", DEQUE_PROBE], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["ran"] == [["blocker", False], ["c", True], ["b", True], ["a", True], ["last", True]]
    assert probe["queued"] == 5
    assert probe["stolen"] == 1  # the blocker: queued by this thread, taken by the worker
