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

PROBE = textwrap.dedent("""
    import json, os, numpy as np, tilecraft
    from tilecraft.runtime import parallel_runtime
    text = '''
    func.func @mm(%a: tensor<96x128xf32>, %b: tensor<128x80xf32>) -> tensor<96x80xf32> {
      %zero = arith.constant 0.0 : f32
      %init = tensor.empty() : tensor<96x80xf32>
      %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<96x80xf32>) -> tensor<96x80xf32>
      %c = linalg.matmul ins(%a, %b : tensor<96x128xf32>, tensor<128x80xf32>) outs(%filled : tensor<96x80xf32>) -> tensor<96x80xf32>
      return %c : tensor<96x80xf32>
    }
    '''
    threads = int(os.environ["TILECRAFT_NUM_THREADS"])
    m = tilecraft.compile(text, target=tilecraft.Target(num_threads=threads))
    rng = np.random.default_rng(0)
    a = rng.random((96, 128), dtype=np.float32); b = rng.random((128, 80), dtype=np.float32)
    before = len(os.listdir("/proc/self/task"))
    ok = all(np.allclose(m(a, b), a @ b, rtol=1e-4, atol=1e-4) for _ in range(200))
    after = len(os.listdir("/proc/self/task"))
    library = parallel_runtime.load()._name
    print(json.dumps({"ok": ok, "new_threads": after - before, "library": library}))
""")


def _probe(threads: int, spin_us: str | None = None) -> dict:
    env = {**os.environ, "TILECRAFT_NUM_THREADS": str(threads)}
    if spin_us is not None:
        env["TILECRAFT_SPIN_US"] = spin_us
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threads", [2, 3])
def test_a_loop_on_n_threads_starts_n_minus_one_workers(threads):
    """The awaiting thread is the N-th: MLIR's runtime started N workers beside it."""
    probe = _probe(threads)
    assert probe["ok"]
    assert probe["new_threads"] == threads - 1
    assert "libtilecraft_async_runtime" in probe["library"]


@pytest.mark.parametrize("spin_us", ["0", "5000"])
def test_results_do_not_depend_on_spinning(spin_us):
    probe = _probe(2, spin_us)
    assert probe["ok"]
