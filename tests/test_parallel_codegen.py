"""Parallel code generation (pipelines/jit/parallel_codegen.py): the kernels compiled in
worker processes give bit-identical outputs to the serial JIT, the result goes through the
compile cache, and a worker that dies or a bad setting raises a typed error, never hangs."""

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.errors import CompileError, OptionError
from tilecraft.pipelines.jit import parallel_codegen
from tilecraft.runtime.libraries import llvm_tool


def _conv_mlp(rng) -> onnx.ModelProto:
    """Conv + ReLU + Conv + pooling + MatMul + Add: several outlined parallel kernels."""
    w = (rng.random((16, 8, 3, 3)) - 0.5).astype(np.float32)
    b = (rng.random(16) - 0.5).astype(np.float32)
    w2 = (rng.random((16, 16, 3, 3)) - 0.5).astype(np.float32)
    m = (rng.random((16, 10)) - 0.5).astype(np.float32)
    c = (rng.random(10) - 0.5).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["r0"]),
        # A second convolution: two parallel kernels, one per codegen worker.
        helper.make_node("Conv", ["r0", "w2"], ["r"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "m"], ["g"]),
        helper.make_node("Add", ["g", "c"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "conv_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 12, 12])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 10])],
        [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (w2, "w2"), (m, "m"), (c, "c"))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def parallel(monkeypatch):
    """Two codegen workers, whatever the module's size, on a two-thread target."""
    monkeypatch.setattr(parallel_codegen, "MIN_PARALLEL_OPS", 0)
    monkeypatch.setenv(parallel_codegen.WORKERS_ENV, "2")
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")


def _compile(model, workers: str, monkeypatch, **options):
    monkeypatch.setenv(parallel_codegen.WORKERS_ENV, workers)
    return tilecraft.compile(model, keep_ir=False, cache=False, **options)


def test_parallel_and_serial_codegen_give_bit_identical_outputs(parallel, monkeypatch, tmp_path):
    rng = np.random.default_rng(3)
    model = _conv_mlp(rng)
    x = (rng.random((2, 8, 12, 12)) * 2 - 1).astype(np.float32)
    serial = _compile(model, "0", monkeypatch)
    split = _compile(model, "2", monkeypatch)
    assert serial._function.codegen_parts is None
    parts = split._function.codegen_parts
    assert parts is not None and len(parts.parts) == 2, parts
    expected, got = serial(x), split(x)
    assert expected.tobytes() == got.tobytes()
    # The object of code made in parts is one relocatable object defining every kernel.
    split.dump_object_file(str(tmp_path / "model.o"))
    symbols = subprocess.run([llvm_tool("llvm-nm"), str(tmp_path / "model.o")], check=True, capture_output=True,
                             text=True).stdout
    defined = {line.split()[-1] for line in symbols.splitlines() if line.split()[-2] in ("T", "t")}
    assert {name for names in parts.parts for name in names} <= defined


def test_parallel_codegen_goes_through_the_compile_cache(parallel, monkeypatch):
    rng = np.random.default_rng(4)
    model = _conv_mlp(rng)
    x = (rng.random((2, 8, 12, 12)) * 2 - 1).astype(np.float32)
    first = tilecraft.compile(model, keep_ir=False, cache=True)
    assert first._function.codegen_parts is not None
    expected = first(x)
    tilecraft.compiler.cache.wait_for_stores()
    again = tilecraft.compile(model, keep_ir=False, cache=True)
    assert again.cache_status == "hit", first.cache_status
    assert again(x).tobytes() == expected.tobytes()


def test_a_killed_worker_raises_a_compile_error(parallel, monkeypatch):
    monkeypatch.setattr(parallel_codegen, "worker_command", lambda: [
        sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    with pytest.raises(CompileError, match="killed by signal 9"):
        _compile(_conv_mlp(np.random.default_rng(5)), "2", monkeypatch)


@pytest.mark.timeout(300)  # the worker sleeps 600 s: waiting for it fails the test
def test_a_hung_worker_is_stopped_at_the_deadline(parallel, monkeypatch):
    monkeypatch.setattr(parallel_codegen, "WORKER_TIMEOUT_S", 2.0)
    monkeypatch.setattr(parallel_codegen, "worker_command", lambda: [
        sys.executable, "-c", "import time; time.sleep(600)"])
    with pytest.raises(CompileError, match="did not finish in 2 s; stopped"):
        _compile(_conv_mlp(np.random.default_rng(5)), "2", monkeypatch)


def test_a_failing_worker_names_its_error(parallel, monkeypatch):
    monkeypatch.setattr(parallel_codegen, "worker_command", lambda: [
        sys.executable, "-c", "import sys; sys.exit('no LLVM today')"])
    with pytest.raises(CompileError, match="exited with status 1: no LLVM today"):
        _compile(_conv_mlp(np.random.default_rng(5)), "2", monkeypatch)


@pytest.mark.parametrize("value", ["two", "-1"])
def test_a_bad_worker_count_is_an_option_error(monkeypatch, value):
    monkeypatch.setenv(parallel_codegen.WORKERS_ENV, value)
    with pytest.raises(OptionError, match=parallel_codegen.WORKERS_ENV):
        parallel_codegen.worker_count()


def test_small_modules_and_zero_workers_compile_serially(monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = _conv_mlp(np.random.default_rng(6))
    assert _compile(model, "2", monkeypatch)._function.codegen_parts is None  # below MIN_PARALLEL_OPS
    monkeypatch.setattr(parallel_codegen, "MIN_PARALLEL_OPS", 0)
    assert _compile(model, "0", monkeypatch)._function.codegen_parts is None


_SPLIT_MODULE = """
module {
  llvm.mlir.global internal constant @msg("hi\\00") {addr_space = 0 : i32}
  llvm.func @malloc(i64) -> !llvm.ptr
  llvm.func @tilecraft_check_failed(i64)
  llvm.func internal @leaf(%a: i64) -> i64 { llvm.return %a : i64 }
  llvm.func internal @calls_leaf(%a: i64) -> !llvm.ptr {
    %0 = llvm.call @leaf(%a) : (i64) -> i64
    %1 = llvm.call @malloc(%0) : (i64) -> !llvm.ptr
    llvm.return %1 : !llvm.ptr
  }
  llvm.func internal @names_global() -> !llvm.ptr {
    %0 = llvm.mlir.addressof @msg : !llvm.ptr
    llvm.return %0 : !llvm.ptr
  }
  llvm.func internal @calls_global_user() -> !llvm.ptr {
    %0 = llvm.call @names_global() : () -> !llvm.ptr
    llvm.return %0 : !llvm.ptr
  }
  llvm.func internal @reports(%a: i64) {
    llvm.call @tilecraft_check_failed(%a) : (i64) -> ()
    llvm.return
  }
  llvm.func internal @to_bf16(%a: vector<8xf32>) -> vector<8xbf16> {
    %0 = llvm.fptrunc %a : vector<8xf32> to vector<8xbf16>
    llvm.return %0 : vector<8xbf16>
  }
  llvm.func @main(%a: i64) -> !llvm.ptr {
    %0 = llvm.call @calls_leaf(%a) : (i64) -> !llvm.ptr
    %1 = llvm.call @calls_global_user() : () -> !llvm.ptr
    llvm.call @reports(%a) : (i64) -> ()
    llvm.return %0 : !llvm.ptr
  }
}
"""


def test_only_local_functions_that_name_no_global_and_no_jit_bound_symbol_move():
    """A function naming a global (directly or through a callee), a symbol the JIT binds by
    address (the check reporter) or a half-precision conversion (a compiler-rt call on AVX2:
    ``__truncsfbf2``, which a worker process does not resolve) stays with the JIT; the entry
    always does."""
    from mlir import ir

    from tilecraft.pipelines.jit.function_split import declare_functions, keep_part, movable_functions

    context = ir.Context()
    module = ir.Module.parse(_SPLIT_MODULE, context)
    moved = movable_functions(module, lambda symbol: parallel_codegen._resolvable(symbol, ()))
    assert set(moved) == {"leaf", "calls_leaf"}
    part = ir.Module.parse(_SPLIT_MODULE, context)
    keep_part(part, ["calls_leaf"])
    kept = {op.operation.attributes["sym_name"].value: len(op.operation.regions[0].blocks)
            for op in part.body.operations}
    assert kept == {"malloc": 0, "leaf": 0, "calls_leaf": 1}  # the callee declared, the rest gone
    declare_functions(module, moved)
    assert "llvm.func @leaf(i64) -> i64" in str(module) and "llvm.func internal @names_global" in str(module)
    module.operation.verify()
