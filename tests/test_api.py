"""The compile API: errors at compile time, entry points, kept IR per stage, generated code
(AVX-512) and thread settings."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mlir_text as mt
import tilecraft
from tilecraft.runtime.libraries import llvm_tool

ADD = mt.elementwise((4, 8), 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"])

TWO_FUNCTIONS = """
func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @second(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @helper(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
"""


# --- compile-time errors -------------------------------------------------------------------

def test_unparsable_mlir():
    with pytest.raises(tilecraft.CompileError, match="could not parse") as info:
        tilecraft.compile("func.func @main( {")
    assert info.value.stage == "input"


def test_invalid_ir_is_a_compile_error():
    text = "func.func @main(%a: tensor<4xf32>) -> tensor<8xf32> {\n  return %a : tensor<4xf32>\n}\n"
    with pytest.raises(tilecraft.CompileError):
        tilecraft.compile(text)


def test_no_public_function():
    text = "func.func private @hidden(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
    with pytest.raises(tilecraft.EntryPointError, match="no public func.func"):
        tilecraft.compile(text)


def test_several_public_functions_need_entry():
    with pytest.raises(tilecraft.EntryPointError, match=r"several public functions \['first', 'second'\].*entry="):
        tilecraft.compile(TWO_FUNCTIONS)


def test_entry_selects_a_function():
    module = tilecraft.compile(TWO_FUNCTIONS, entry="second")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(module(x), 2 * x)
    assert module.signature.name == "second"


def test_unknown_or_private_entry():
    with pytest.raises(tilecraft.EntryPointError, match=r"no public function @helper.*\['first', 'second'\]"):
        tilecraft.compile(TWO_FUNCTIONS, entry="helper")


@pytest.mark.parametrize("target", ["opencl", "cuda -arch=sm_1", "", "llvm -mcpu", "llvm -foo=bar", "llvm -mattr=avx2", 42])
def test_bad_target(target):
    with pytest.raises(tilecraft.TargetError):
        tilecraft.compile(ADD, target=target)


def test_bad_opt_level():
    with pytest.raises(ValueError, match="opt_level"):
        tilecraft.compile(ADD, opt_level=7)


def test_compile_rejects_non_text():
    with pytest.raises(TypeError, match="MLIR text"):
        tilecraft.compile(12)


def test_compile_accepts_bytes_and_modules():
    from mlir import ir

    with ir.Context():
        parsed = ir.Module.parse(ADD)
        before = str(parsed)
        for source in (ADD.encode(), parsed):
            module = tilecraft.compile(source)
            x = np.ones((4, 8), np.float32)
            np.testing.assert_array_equal(module(x, x), 2 * x)
        assert str(parsed) == before  # the caller's module is left as it was


# --- kept IR ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def matmul_256():
    # Two threads whatever the machine, so the schedule has a thread level to show.
    return tilecraft.compile(mt.matmul(256, 256, 256), target=tilecraft.Target(num_threads=2))


def test_every_stage_has_ir(matmul_256):
    assert matmul_256.stages == ["source", *matmul_256.pipeline.stage_names]
    for stage in matmul_256.stages:
        text = matmul_256.ir(stage)
        assert isinstance(text, str) and text.strip(), stage
    assert "llvm.func" in matmul_256.ir("llvm")
    assert matmul_256.ir() == matmul_256.ir("llvm")
    # "source" is the module as given; the pipeline's "input" stage already added to it.
    assert "linalg.matmul" in matmul_256.ir("source")
    assert "llvm.emit_c_interface" not in matmul_256.ir("source")
    assert "llvm.emit_c_interface" in matmul_256.ir("input")


def test_unknown_stage(matmul_256):
    with pytest.raises(KeyError, match="nope"):
        matmul_256.ir("nope")


def test_schedule_vectorizes_and_parallelizes_matmul(matmul_256):
    schedule = matmul_256.ir("schedule")
    assert "vector.contract" in schedule or "vector.fma" in schedule
    assert "scf.forall" in schedule


def test_matmul_256_result(matmul_256, rand):
    a, b = rand((256, 256)), rand((256, 256))
    np.testing.assert_allclose(matmul_256(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_keep_ir_false():
    module = tilecraft.compile(ADD, keep_ir=False)
    assert module.stages == []
    with pytest.raises(KeyError):
        module.ir("llvm")


# --- generated code --------------------------------------------------------------------------

def _has_avx512() -> bool:
    try:
        return "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not _has_avx512(), reason="the host CPU has no AVX-512")
def test_matmul_uses_zmm_registers(matmul_256, tmp_path):
    path = tmp_path / "matmul.o"
    matmul_256.dump_object_file(str(path))
    assert path.stat().st_size > 0
    disassembly = subprocess.run(
        [llvm_tool("llvm-objdump"), "-d", "--no-show-raw-insn", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout
    assert "zmm" in disassembly


# --- threads ---------------------------------------------------------------------------------

def test_single_thread_pipeline_has_no_async_passes(monkeypatch, rand):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    target = tilecraft.Target()
    assert target.num_threads == 1
    assert not any("async" in p for p in tilecraft.cpu_pipeline(target).pass_elements())
    explicit = tilecraft.cpu_pipeline(tilecraft.Target(num_threads=1))
    assert not any("async" in p for p in explicit.pass_elements())

    module = tilecraft.compile(mt.matmul(128, 96, 80))
    assert "scf.forall" not in module.ir("schedule")
    assert "async" not in module.ir("llvm")
    a, b = rand((128, 80)), rand((80, 96))
    np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-4, atol=1e-5)


def test_two_threads_pipeline_has_async_passes(monkeypatch, rand):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    assert any("async-parallel-for" in p for p in tilecraft.cpu_pipeline().pass_elements())
    module = tilecraft.compile(mt.matmul(128, 96, 80))
    a, b = rand((128, 80)), rand((80, 96))
    np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", ""])
def test_bad_thread_count(monkeypatch, value):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", value)
    with pytest.raises(tilecraft.TargetError, match="TILECRAFT_NUM_THREADS"):
        tilecraft.compile(ADD)
    with pytest.raises(tilecraft.TargetError):
        tilecraft.Target()


def _run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (two threads): a native crash fails one test only."""
    env = {**os.environ, "TILECRAFT_NUM_THREADS": "2"}
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=env, timeout=300,
        cwd=Path(__file__).parent,
    )


def test_parallel_loops_run_on_worker_threads():
    """The thread level of the schedule really dispatches tasks to the async runtime's pool
    (not everything inline on the caller's thread)."""
    done = _run_python("""
        import os
        import numpy as np, tilecraft, mlir_text as mt
        module = tilecraft.compile(mt.matmul(256, 256, 256))
        a = np.ones((256, 256), np.float32)
        before = len(os.listdir("/proc/self/task"))
        result = module(a, a)
        after = len(os.listdir("/proc/self/task"))
        assert (result == 256).all()
        print(before, after)
    """)
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    assert after > before, "no worker thread started: the parallel loop ran inline"


def test_deleting_a_module_keeps_others_parallel_calls_working():
    """Destroying one JIT engine must not tear down the async runtime other modules use
    (it did: the next parallel call segfaulted in mlirAsyncRuntimeCreateGroup)."""
    done = _run_python("""
        import gc
        import numpy as np, tilecraft, mlir_text as mt
        x = np.ones((2, 64, 32, 11), np.float32)
        text = mt.pooling_nchw("max", 2, 64, 32, 11, 3)
        first, second = tilecraft.compile(text), tilecraft.compile(text)
        first(x), second(x)
        del first
        gc.collect()
        assert (second(x) == 1).all()
        ones = np.ones((128, 128), np.float32)
        third = tilecraft.compile(mt.matmul(128, 128, 128))
        assert (third(ones, ones) == 128).all()
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_compile_seconds_name_each_step():
    """compile records where its time went: the import, every pipeline stage, the JIT
    (benchmarks/end_to_end.py and docs/performance.md read it). No timing is asserted."""
    module = tilecraft.compile(mt.matmul(8, 8, 8), keep_ir=False)
    assert list(module.compile_seconds) == ["import", *module.pipeline.stage_names, "jit"]
    assert all(seconds >= 0 for seconds in module.compile_seconds.values())


def test_every_lazy_name_of_tilecraft_runtime_resolves():
    """tilecraft.runtime names its exports lazily; each must import (CompiledModule named a
    module that had moved and raised ModuleNotFoundError)."""
    import tilecraft.runtime as runtime

    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name
    assert runtime.CompiledModule is tilecraft.CompiledModule
