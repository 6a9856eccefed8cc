"""Memory at the call boundary (issue 48, "boundary limits"): argument copies and outputs
are checked against the memory budget (``TILECRAFT_MEMORY_BUDGET``, default the machine's
memory) before anything is allocated, in the JIT and in packages alike."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import AllocationLimitError, ResourceLimitError
from tilecraft.runtime import limits
from tilecraft.runtime.limits import memory_budget, physical_memory

import mlir_text


def zero_stride_rows(rows: int, columns: int) -> np.ndarray:
    """A view of ``rows`` identical rows that takes one row of memory (until copied)."""
    return np.lib.stride_tricks.as_strided(np.zeros(columns, np.float32), shape=(rows, columns),
                                           strides=(0, 4))


@pytest.fixture(scope="module")
def dynamic_matmul():
    return tilecraft.compile(mlir_text.dynamic_matmul())


@pytest.fixture(scope="module")
def matmul_package(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "mm.tar"
    tilecraft.compile(mlir_text.matmul(16, 24, 32), package_path=path)
    return tilecraft.runtime.load(path)


def test_the_default_budget_is_the_machine_memory(monkeypatch):
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET", raising=False)
    assert memory_budget() == physical_memory() > 0
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "3G")
    assert memory_budget() == 3 << 30
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "lots")
    with pytest.raises(ResourceLimitError, match="TILECRAFT_MEMORY_BUDGET must be a positive size"):
        memory_budget()


def test_a_zero_stride_view_of_2_31_rows_is_refused_before_the_copy(dynamic_matmul, monkeypatch):
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET", raising=False)
    huge = zero_stride_rows(1 << 31, 24)  # 192 GiB once C-contiguous; numpy raised _ArrayMemoryError
    with pytest.raises(ResourceLimitError, match=r"argument 'arg0': a C-contiguous copy of shape "
                                                 r"\(2147483648, 24\) \(float32\) needs 206158430208 bytes"):
        dynamic_matmul(huge, np.zeros((24, 8), np.float32))


def test_the_budget_is_configurable_and_small_copies_still_run(dynamic_matmul, monkeypatch, rng):
    rows = zero_stride_rows(1000, 24)  # 96,000 bytes when copied
    weights = rng.random((24, 8)).astype(np.float32)
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "64K")
    with pytest.raises(ResourceLimitError, match="argument 'arg0'.*96000 bytes.*budget of 65536"):
        dynamic_matmul(rows, weights)
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "1M")
    np.testing.assert_allclose(dynamic_matmul(rows, weights), np.zeros((1000, 8)), atol=0)


def test_outputs_of_static_shape_are_checked_in_packages_and_the_jit(matmul_package, monkeypatch, rng):
    a, b = rng.random((16, 32)).astype(np.float32), rng.random((32, 24)).astype(np.float32)
    jit = tilecraft.compile(mlir_text.matmul(16, 24, 32))
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "1K")  # the 16x24 f32 output is 1,536 bytes
    for module in (matmul_package, jit):
        with pytest.raises(ResourceLimitError, match=r"output 'result0' \(tensor<16x24xf32>\) needs 1536 bytes"):
            module(a, b)
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET")
    np.testing.assert_allclose(matmul_package(a, b), a @ b, rtol=1e-5)


def test_workspaces_of_run_time_size_are_held_to_the_budget_at_compile_time(monkeypatch, rng):
    """The generated code's dynamic allocations (outputs and workspaces whose size is known
    only at the call) check their bytes against the smaller of TILECRAFT_MAX_TENSOR and the
    memory budget the compile saw."""
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "1M")
    small_budget = tilecraft.compile(mlir_text.dynamic_matmul())
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET")
    a, b = rng.random((1000, 8)).astype(np.float32), rng.random((8, 1000)).astype(np.float32)
    with pytest.raises(AllocationLimitError, match=r"needs 4000000 bytes at this call .*; the limit \(TILECRAFT_MAX_TENSOR, "
                                                   r"TILECRAFT_MEMORY_BUDGET at compile time\) allows 1048576"):
        small_budget(a, b)
    np.testing.assert_allclose(small_budget(a[:100], b[:, :100]), a[:100] @ b[:, :100], rtol=1e-5)


@pytest.mark.parametrize("how", ["setenv", "setitem"])
def test_the_budget_follows_every_write_to_the_environment(monkeypatch, how):
    """Read from os.environ's own dict where runtime/limits.py found it: writes through
    os.environ (monkeypatch's too) and their removal are seen on the next read."""
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET", raising=False)
    assert memory_budget() == physical_memory()
    if how == "setenv":
        monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "3K")
    else:
        monkeypatch.setitem(os.environ, "TILECRAFT_MEMORY_BUDGET", "3K")
    assert memory_budget() == 3 << 10
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET")
    assert memory_budget() == physical_memory()


def test_another_interpreter_reads_the_environment_the_public_way(monkeypatch):
    monkeypatch.setattr(limits.sys, "implementation", type("Implementation", (), {"name": "pypy"})())
    assert limits._posix_environ_data() is None
    monkeypatch.setattr(limits, "_ENVIRON_DATA", None)
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "5K")
    assert memory_budget() == 5 << 10
