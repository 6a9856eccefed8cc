"""Helpers for the CUDA tests: models, PTX inspection, and the CPU replay of a GPU schedule.

No GPU is needed except for tests marked ``gpu`` (skipped without a CUDA driver).

The CPU replay: after the ``schedule`` stage, a CUDA module is still linalg/vector on
tensors, its block and thread loops ``scf.forall`` with GPU mappings. Compiled by the CPU
pipeline (minus its own schedule, shared-memory address space dropped) it computes what the
GPU schedule computes: tiling, fusion, shared-memory staging, split reductions. What it cannot
check: thread-id arithmetic, barriers and host<->device copies (those need a GPU).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, save

from mlir import ir

import tilecraft
from tilecraft.frontend.loader import load_module
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.pipeline import Pipeline
from tilecraft.pipelines.target import Target
from tilecraft.runtime.libraries import cuda_driver_available
from tilecraft.scheduling import compute, create_func, placeholder

DEMO_CNN = Path(__file__).resolve().parents[2] / "examples" / "digits_cnn.onnx"
PTX_PATTERN = re.compile(
    r"ld\.shared[.a-z0-9]*|st\.shared[.a-z0-9]*|ld\.global[.a-z0-9]*|st\.global[.a-z0-9]*"
    r"|bar\.sync|fma\.rn\.f32|\.entry|\.shared|%ctaid\.[xyz]|%tid\.[xyz]"
)

requires_gpu = pytest.mark.skipif(not cuda_driver_available(),
                                  reason="needs a CUDA driver and GPU (libcuda.so.1)")


def ptx_counts(ptx: str) -> Counter:
    """How often each PTX instruction family of interest appears."""
    return Counter(PTX_PATTERN.findall(ptx))


def check_ptxas(module, arch: str, tmp_path: Path) -> None:
    """The cubin came from ptxas, and the PTX assembles again by hand (skip without ptxas)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return
    assert module.cubin(), "ptxas is installed but no cubin was produced"
    for name, cubin in module.cubin().items():
        assert cubin[:4] == b"\x7fELF", name
    for name, ptx in module.ptx_modules().items():
        source = tmp_path / f"{name}.ptx"
        source.write_text(ptx)
        subprocess.run([ptxas, f"-arch={arch}", str(source), "-o", str(tmp_path / f"{name}.cubin")],
                       check=True, capture_output=True)


def cpu_replay(module, source, shape_dict=None):
    """``module``'s GPU-scheduled tensor program, compiled for the CPU (see module doc).

    The stages up to ``schedule`` run again on ``source``: ``module.ir()`` elides weights.
    """
    context = ir.Context()
    payload = load_module(source, context, shape_dict=shape_dict)
    stages = module.pipeline.stage_names
    Pipeline(module.pipeline.stages[: stages.index("schedule") + 1]).run(payload)
    scheduled = str(payload).replace(", #gpu.address_space<workgroup>", "")
    pipeline = cpu_pipeline(Target(num_threads=1)).replace("schedule", ["canonicalize"])
    return tilecraft.compile(scheduled, target="llvm", pipeline=pipeline)


def onnx_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def f32(name: str, shape: list[int]):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def matmul_mlir(m: int, n: int, k: int) -> str:
    return f"""
func.func @matmul(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%c : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def softmax_model(rows: int, cols: int):
    return onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                      [f32("x", [rows, cols])], [f32("y", [rows, cols])])


def conv_model(rng):
    weight = (rng.random((16, 8, 3, 3)) - 0.5).astype(np.float32)
    bias = (rng.random(16) - 0.5).astype(np.float32)
    initializers = [helper.make_tensor("w", TensorProto.FLOAT, weight.shape, weight.ravel()),
                    helper.make_tensor("b", TensorProto.FLOAT, bias.shape, bias)]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    return onnx_model([node], [f32("x", [1, 8, 32, 32])], [f32("y", [1, 16, 32, 32])], initializers)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def vector_add(n: int) -> str:
    """TVM's vector add, defined with the TE-style API: C[i] = A[i] + B[i]."""
    A = placeholder((n,), name="A")
    B = placeholder((n,), name="B")
    C = compute((n,), lambda i: A[i] + B[i], name="C")
    return str(create_func([A, B, C], name="vector_add"))


def reshapes_model(path: Path) -> Path:
    """A model of reshapes only, saved at ``path``: ``x`` (2x3x4) -> ``y`` (4x6) and ``w``
    (5x2x3) -> ``z`` (5x6). Compiled for CUDA it launches no kernel, so the recording driver
    (recording_driver.c, whose device memory is host memory) runs it whole: its outputs are
    exact without a GPU."""
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [4, 6])
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"]), helper.make_node("Flatten", ["w"], ["z"], axis=1)]
    model = onnx_model(nodes, [f32("x", [2, 3, 4]), f32("w", [5, 2, 3])], [f32("y", [4, 6]), f32("z", [5, 6])],
                       [shape])
    save(model, path)
    return path
