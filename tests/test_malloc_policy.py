"""runtime/malloc_policy.py: glibc keeps a model's freed intermediates for the next call
(no mmap/munmap and page faults per call), unless the user opted out or tuned malloc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tilecraft.runtime import malloc_policy

GLIBC = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None

_PROBE = ("import tilecraft.runtime.malloc_policy as m; a = m.keep_freed_memory(); "
          "b = m.keep_freed_memory(); print(a, b)")


def _probe(**env: str) -> str:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TILECRAFT_KEEP_FREED_MEMORY", "MALLOC_MMAP_THRESHOLD_",
                                "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", _PROBE], env=environment, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_applied_once_per_process_on_glibc():
    assert _probe() == "True True"


@pytest.mark.parametrize("env", [{"TILECRAFT_KEEP_FREED_MEMORY": "0"},
                                 {"MALLOC_MMAP_THRESHOLD_": "65536"},
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000"}])
def test_left_alone_when_the_user_opted_out_or_tuned_malloc(env):
    assert _probe(**env) == "False False"


def test_compiled_modules_apply_it():
    """Creating a compiled module applies the policy (the JIT path; packages alike)."""
    import numpy as np
    from onnx import TensorProto, helper

    import tilecraft

    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    module = tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    np.testing.assert_array_equal(module(np.ones(4, np.float32)), np.full(4, 2, np.float32))
    assert malloc_policy._applied is not None
