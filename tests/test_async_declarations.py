"""A module declares only the async runtime functions it calls (pipelines/stages.py runs
symbol-dce after convert-async-to-llvm, which declares the whole API): a model whose parallel
loops are all flat parallel-for calls needs no async symbol, and one that keeps an async
loop needs exactly those it calls. Read off the LLVM dialect and the object's undefined
symbols (llvm-nm -u), no timing."""

from __future__ import annotations

import re
import subprocess

import numpy as np
from mlir import ir

import mlir_text as mt
import tilecraft
from tilecraft.pipelines.pipeline import run_pass_elements
from tilecraft.pipelines.stages import lowering_stages
from tilecraft.runtime.libraries import llvm_tool
from test_parallel_for import _LOOPS

_DECLARED = re.compile(r"llvm\.func @(mlirAsync\w+)\(")
_CALLED = re.compile(r"llvm\.call @(mlirAsync\w+)\(")


def _undefined(path) -> set[str]:
    listing = subprocess.run([llvm_tool("llvm-nm"), "-u", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in listing.stdout.splitlines() if line.strip()}


def test_a_model_of_parallel_for_calls_needs_no_async_symbol(tmp_path):
    compiled = tilecraft.compile(mt.matmul(96, 80, 128), target=tilecraft.Target(num_threads=2),
                                 keep_ir=True, cache=False)
    lowered = compiled.ir("llvm")
    assert "tilecraftParallelFor" in lowered  # it is a parallel module
    assert _DECLARED.findall(lowered) == []
    compiled.dump_object_file(str(tmp_path / "model.o"))
    undefined = _undefined(tmp_path / "model.o")
    assert "tilecraftParallelFor" in undefined
    assert not [name for name in undefined if name.startswith("mlirAsync")]
    rng = np.random.default_rng(0)
    a, b = rng.random((96, 128), dtype=np.float32), rng.random((128, 80), dtype=np.float32)
    np.testing.assert_allclose(compiled(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_a_module_with_an_async_loop_declares_what_it_calls():
    loops = next(stage for stage in lowering_stages(tilecraft.Target(num_threads=2)) if stage.name == "loops")
    tail = list(loops.passes)
    tail = tail[tail.index(next(p for p in tail if p.startswith("tilecraft-parallel-for"))):]
    with ir.Context():
        module = ir.Module.parse(_LOOPS)
        run_pass_elements(module, [*tail, "convert-scf-to-cf", "convert-to-llvm", "reconcile-unrealized-casts"])
        lowered = str(module)
    called = set(_CALLED.findall(lowered))
    assert "mlirAsyncRuntimeExecute" in called  # the two-dimensional dynamic loop's tasks
    assert set(_DECLARED.findall(lowered)) == called
