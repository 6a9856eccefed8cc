"""The flat parallel-for (issue #43): pipelines/buffer/parallel_for.py outlines each parallel
loop and calls ``tilecraftParallelFor`` (runtime/async_runtime.c) once per loop; the entry
marks each call's begin and end for the workers' spinning. IR facts (no async dispatch where
the new path applies, the fallback where it does not), the runtime's counts, the runtime
driven directly (every iteration once, nested loops, several calling threads, fork), and
numerics against numpy and onnxruntime. Runtime probes run in fresh processes: the pool
starts once per process, sized by TILECRAFT_NUM_THREADS."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import mlir_text as mt
import tilecraft
from tilecraft.pipelines.buffer.parallel_for import BODY_PREFIX, CALL_BEGIN, CALL_END, RUNTIME_FUNCTION
from tilecraft.pipelines.pipeline import run_pass_elements

TWO = tilecraft.Target(num_threads=2)


def _add(shape) -> str:
    return mt.elementwise(shape, 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"])


def _run(script: str, *args: str, threads: int = 2, timeout: int = 300) -> dict:
    env = {**os.environ, "TILECRAFT_NUM_THREADS": str(threads)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---- IR facts ------------------------------------------------------------------------------


def test_parallel_loops_are_runtime_calls_not_async_tasks():
    module = tilecraft.compile(mt.matmul(96, 80, 128), target=TWO, keep_ir=True, cache=False)
    loops = module.ir("loops")
    assert "async." not in loops and "scf.parallel" not in loops
    assert f"call @{RUNTIME_FUNCTION}(" in loops
    assert f"func.func private @{BODY_PREFIX}_0(%arg0: !llvm.ptr, %arg1: index, %arg2: index)" in loops
    lowered = module.ir("llvm")
    assert "llvm.call @mlirAsyncRuntime" not in lowered and "llvm.intr.coro" not in lowered
    # One begin at the entry's start, one end before its return.
    assert lowered.count(f"llvm.call @{CALL_BEGIN}()") == 1
    assert lowered.count(f"llvm.call @{CALL_END}()") == 1


def test_every_return_of_the_entry_ends_the_call():
    """The run-time checks of dynamic shapes return early when they fail: each return ends
    the call, or the workers would spin on for a call that is over."""
    module = tilecraft.compile(_add((None, 4096)), target=TWO, keep_ir=True, cache=False)
    lowered = module.ir("llvm")
    entry = lowered[lowered.index("llvm.func @main("):lowered.index("llvm.func @_mlir_ciface_main(")]
    assert entry.count("llvm.return") >= 2
    assert entry.count(f"llvm.call @{CALL_END}()") == entry.count("llvm.return")
    assert entry.count(f"llvm.call @{CALL_BEGIN}()") == 1


def test_one_thread_keeps_its_loops_serial():
    lowered = tilecraft.compile(mt.matmul(96, 80, 128), target=tilecraft.Target(num_threads=1),
                                keep_ir=True, cache=False).ir("llvm")
    assert RUNTIME_FUNCTION not in lowered and CALL_BEGIN not in lowered


_LOOPS = """
func.func @f(%a: memref<64xf32>, %b: memref<64xf32>, %n: index, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %s : f32
    scf.parallel (%j) = (%c0) to (%c64) step (%c1) {
      memref.store %y, %b[%j] : memref<64xf32>
      scf.reduce
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    memref.store %s, %b[%j] : memref<64xf32>
    scf.reduce
  }
  %sum = scf.parallel (%i) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<64xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %t = arith.addf %l, %r : f32
      scf.reduce.return %t : f32
    }
  }
  return %sum : f32
}
"""


def test_the_pass_outlines_nested_loops_and_leaves_the_rest():
    """A nested loop is outlined from its parent's outlined function (its context struct is
    that function's, one per block). A two-dimensional loop of dynamic bounds (which
    tilecraft-collapse-parallel-loops cannot collapse) is left to async-parallel-for, which
    the pipeline runs after (pipelines/stages.py); a loop with a reduction is left too, and
    async-parallel-for leaves it to convert-scf-to-cf (serial, as before)."""
    with ir.Context():
        module = ir.Module.parse(_LOOPS)
        run_pass_elements(module, ["tilecraft-parallel-for"])
        text = str(module)
        assert text.count(f"call @{RUNTIME_FUNCTION}(") == 2
        assert f"func.func private @{BODY_PREFIX}_0" in text and f"func.func private @{BODY_PREFIX}_1" in text
        outer = text[text.index(f"@{BODY_PREFIX}_0("):text.index(f"@{BODY_PREFIX}_1(")]
        assert "llvm.alloca" in outer and f"call @{RUNTIME_FUNCTION}(" in outer  # the nested one
        assert text.count("scf.parallel") == 2 and "scf.reduce(" in text
        # What the pass made, and the fallback, lower to LLVM.
        run_pass_elements(module, ["async-parallel-for{num-workers=2 min-task-size=1}", "async-to-async-runtime",
                                   "async-runtime-ref-counting", "async-runtime-ref-counting-opt",
                                   "convert-async-to-llvm", "convert-scf-to-cf", "convert-to-llvm",
                                   "reconcile-unrealized-casts"])
        lowered = str(module)
        assert "unrealized_conversion_cast" not in lowered
        assert "llvm.call @mlirAsyncRuntimeExecute" in lowered


# ---- the runtime, driven directly ------------------------------------------------------------

DRIVER = Path(__file__).parent / "robustness" / "parallel_for_driver.c"
RUNTIME = Path(tilecraft.__file__).parent / "runtime" / "async_runtime.c"


@pytest.mark.parametrize("callers", [1, 3])
def test_every_iteration_runs_once_with_nested_loops_and_several_callers(tmp_path, callers):
    """parallel_for_driver.c: loops of 1-100 iterations, a nested loop in some blocks, from
    several threads at once, inside call begin/end marks; and a fork()ed child's loops."""
    binary = tmp_path / "driver"
    subprocess.run(["cc", "-O1", "-pthread", str(DRIVER), str(RUNTIME), "-o", str(binary)], check=True)
    for threads in ("2", "3"):
        result = subprocess.run([str(binary), str(callers), "fork"], env={**os.environ, "TILECRAFT_NUM_THREADS": threads},
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"ok: {callers} callers" in result.stdout
        assert "child ok" in result.stdout


# ---- the runtime under compiled models -------------------------------------------------------

COUNTS = """
    import json, sys, numpy as np, tilecraft
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    import mlir_text as mt
    from thread_balance import forall_tasks
    from tilecraft.runtime import parallel_runtime
    text = mt.elementwise((37, 4096), 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"])
    m = tilecraft.compile(text, target=tilecraft.Target(num_threads=2), cache=False, keep_ir=True)
    tasks = forall_tasks(m.ir("bufferize"))
    rng = np.random.default_rng(0)
    a, b = rng.random((37, 4096), dtype=np.float32), rng.random((37, 4096), dtype=np.float32)
    m(a, b)
    before, queued = parallel_runtime.loop_counts(), parallel_runtime.task_counts()
    calls = 20
    ok = all(np.array_equal(m(a, b), a + b) for _ in range(calls))
    counts, queued = parallel_runtime.loop_counts() - before, parallel_runtime.task_counts() - queued
    print(json.dumps({"ok": ok, "calls": calls, "tasks": tasks, "published": counts.published, "serial": counts.serial,
                      "blocks": counts.by_callers + counts.by_workers, "in_progress": counts.calls_in_progress,
                      "async_tasks": queued.queued}))
"""


def test_runtime_counts_one_job_per_loop_and_each_block_once():
    """37 rows: the schedule's tasks (the scf.forall's iterations) are the blocks of one loop,
    published once per call, each block run once; no async task; no call left open."""
    probe = _run(COUNTS, str(Path(__file__).parent), str(Path(__file__).parents[1] / "benchmarks"))
    assert probe["ok"]
    assert len(probe["tasks"]) == 1
    # At most 16 blocks per thread (async_runtime.c, BLOCKS_PER_THREAD): 37 tasks are 19 blocks.
    tasks = probe["tasks"][0]
    grain = 1 if tasks <= 32 else -(-tasks // 32)
    assert probe["published"] + probe["serial"] == probe["calls"]
    assert probe["blocks"] == probe["published"] * -(-tasks // grain)
    assert probe["async_tasks"] == 0
    assert probe["in_progress"] == 0


FORK = """
    import json, os, sys, numpy as np, tilecraft
    sys.path.insert(0, sys.argv[1])
    import mlir_text as mt
    m = tilecraft.compile(mt.matmul(96, 80, 128), target=tilecraft.Target(num_threads=2), cache=False)
    rng = np.random.default_rng(0)
    a, b = rng.random((96, 128), dtype=np.float32), rng.random((128, 80), dtype=np.float32)
    assert np.allclose(m(a, b), a @ b, rtol=1e-4, atol=1e-4)
    pid = os.fork()
    if pid == 0:
        ok = all(np.allclose(m(a, b), a @ b, rtol=1e-4, atol=1e-4) for _ in range(20))
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    parent_ok = all(np.allclose(m(a, b), a @ b, rtol=1e-4, atol=1e-4) for _ in range(20))
    print(json.dumps({"child": os.waitstatus_to_exitcode(status), "parent": parent_ok}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_runs_parallel_loops():
    probe = _run(FORK, str(Path(__file__).parent), timeout=120)
    assert probe == {"child": 0, "parent": True}


THREADS = """
    import json, sys, threading, numpy as np, tilecraft
    sys.path.insert(0, sys.argv[1])
    import mlir_text as mt
    from tilecraft.runtime import parallel_runtime
    target = tilecraft.Target(num_threads=2)
    models = [tilecraft.compile(mt.matmul(96, 80, 128), target=target, cache=False),
              tilecraft.compile(mt.elementwise((37, 4096), 2, ["%s = arith.addf %in0, %in1 : f32",
                                                               "linalg.yield %s : f32"]), target=target, cache=False)]
    rng = np.random.default_rng(0)
    inputs = [(rng.random((96, 128), dtype=np.float32), rng.random((128, 80), dtype=np.float32)),
              (rng.random((37, 4096), dtype=np.float32), rng.random((37, 4096), dtype=np.float32))]
    expected = [inputs[0][0] @ inputs[0][1], inputs[1][0] + inputs[1][1]]
    failures = []

    def call(k):
        for _ in range(50):
            if not np.allclose(models[k % 2](*inputs[k % 2]), expected[k % 2], rtol=1e-4, atol=1e-4):
                failures.append(k)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps({"failures": len(failures), "in_progress": parallel_runtime.loop_counts().calls_in_progress}))
"""


def test_several_threads_call_several_models():
    """Four Python threads call two models at once: a loop that finds another's job
    published runs on its own thread; every result right, no call left open."""
    assert _run(THREADS, str(Path(__file__).parent)) == {"failures": 0, "in_progress": 0}


# ---- numerics ----------------------------------------------------------------------------------


def test_a_parallel_model_matches_onnxruntime(rand):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    w1, w2 = rand((16, 8, 3, 3)) - 0.5, rand((16, 16, 1, 1)) - 0.5
    m = rand((16 * 14 * 14, 10)) - 0.5
    nodes = [helper.make_node("Conv", ["x", "w1"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["z"]),
             helper.make_node("Flatten", ["z"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["out"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 28, 28])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(v, n) for v, n in ((w1, "w1"), (w2, "w2"), (m, "m"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    compiled = tilecraft.compile(model, target=TWO, keep_ir=True, cache=False)
    assert f"llvm.call @{RUNTIME_FUNCTION}(" in compiled.ir("llvm")
    x = rand((1, 8, 28, 28))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    for _ in range(3):
        np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
