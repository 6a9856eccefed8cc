"""The CUDA pipeline: linalg on tensors -> GPU schedule -> gpu.launch -> NVVM -> PTX / cubin.

Stages, as data like the CPU pipeline (``pipelines/cpu.py``):

  input      tilecraft-prepare-entry (C interface, read-only arguments)
  simplify   fold constants, fuse elementwise producers
  schedule   tilecraft-gpu-schedule: blocks, threads, shared memory, vectors (on tensors)
  bufferize  one-shot-bufferize, ownership-based deallocation
  map        tilecraft-gpu-map (scf.forall -> gpu.launch, thread ids, barriers),
             tilecraft-gpu-host-memory (device buffers, host<->device copies, shared memory),
             tilecraft-gpu-hoist-accumulators (a thread's C tile in registers across K),
             tilecraft-gpu-plan-arena (device buffers at planned offsets of one arena, arena.py)
  loops      vector multi-reductions and transfers to 1-D, remaining linalg to loops
  outline    kernel outlining into gpu.module, NVVM target attached (chip, PTX version)
  kernel     inside gpu.module: vector/memref/scf/arith to LLVM + NVVM intrinsics
  host       async GPU ops on a stream, gpu-to-llvm (mgpu* runtime calls, runtime/cuda_runtime.c),
             LLVM; weights uploaded once (tilecraft-gpu-resident-weights, resident.py)
  binary     gpu-module-to-binary{format=isa}: PTX from LLVM's NVPTX backend
  assemble   tilecraft-ptxas: ptxas turns the PTX into a cubin (kept as PTX without ptxas)

Why ``format=isa`` then ptxas, not ``format=bin``: the PTX stays inspectable
(``CompiledModule.ptx()``) and ptxas's own diagnostics reach the user as a
:class:`~tilecraft.errors.ToolchainError`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Mapping

from mlir import ir

from ...errors import GpuScheduleError, TargetError, ToolchainError
from ...ir.lapack import refuse_calls
from ...pipelines.tensor.extern import refuse_python_calls
from ...pipelines.tensor.fusion_barrier import DROP_BARRIERS, INSERT_BARRIERS
from ...pipelines.buffer.bool_memory import WIDEN_BOOL_MEMORY
from ...pipelines.passes import register_pass, register_pipeline
from ...pipelines.pipeline import Pipeline, Stage
from ...pipelines.tensor.int8_matmul import INT8_MATMUL_PASS
from ...pipelines.tensor.runtime_checks import INSERT_CHECKS
from ...pipelines.target import Target
from .archs import ptx_version
from .serial_foralls import SERIAL_FORALLS
from .shared_alignment import ALIGN_SHARED
from . import memory, vectors  # noqa: F401  (register tilecraft-gpu-* passes)
from .arena import PLAN_ARENA
from .resident import RESIDENT_WEIGHTS

PTX_ATTRIBUTE = "tilecraft.ptx"


def find_ptxas() -> str | None:
    """``ptxas`` from ``TILECRAFT_PTXAS``, the PATH, ``$CUDA_HOME/bin`` or /usr/local/cuda."""
    explicit = os.environ.get("TILECRAFT_PTXAS")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return str(Path(root) / "bin" / "ptxas")
    return None


@cache
def ptxas_architectures(ptxas: str) -> frozenset[str]:
    """The ``sm_XX`` names ``ptxas`` can target (from its ``--help``; CUDA 13 dropped sm_7x < 75)."""
    result = subprocess.run([ptxas, "--help"], capture_output=True, text=True)
    allowed = result.stdout.split("Allowed values for this option:", 1)
    if len(allowed) < 2:
        return frozenset()
    names = allowed[1].split("Default value", 1)[0]
    return frozenset(re.findall(r"'(sm_[0-9a-z]+)'", names))


def assemble_ptx(ptx: str, arch: str, ptxas: str | None = None) -> bytes:
    """PTX text -> cubin bytes with ``ptxas -arch=<arch>``; raises :class:`ToolchainError`."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise ToolchainError("ptxas not found (PATH, CUDA_HOME, TILECRAFT_PTXAS)")
    with tempfile.TemporaryDirectory(prefix="tilecraft-ptx-") as scratch:
        source, cubin = Path(scratch) / "kernels.ptx", Path(scratch) / "kernels.cubin"
        source.write_text(ptx)
        result = subprocess.run([ptxas, f"-arch={arch}", "-O3", str(source), "-o", str(cubin)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise ToolchainError(f"ptxas -arch={arch} failed:\n{result.stderr or result.stdout}")
        return cubin.read_bytes()


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel: registers per thread (occupancy falls as they
    rise; 255 is the hardware's limit), local-memory spill bytes (each a round trip to
    device memory in the kernel's loop), stack frame and static shared memory bytes."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def kernel_resources(ptx: str, arch: str, ptxas: str | None = None) -> dict[str, KernelResources]:
    """Kernel name -> its :class:`KernelResources`, from ``ptxas -v -arch=<arch>`` on ``ptx``.

    Why: a PTX module that assembles can still be slow: a register-heavy tile spills to local
    memory or caps occupancy. Without a GPU this is the check that can run (issue #47's
    register/spill count per kernel). Raises :class:`ToolchainError` without ptxas or when
    it rejects the module."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise ToolchainError("ptxas not found (PATH, CUDA_HOME, TILECRAFT_PTXAS)")
    with tempfile.TemporaryDirectory(prefix="tilecraft-ptx-") as scratch:
        source = Path(scratch) / "kernels.ptx"
        source.write_text(ptx)
        result = subprocess.run([ptxas, f"-arch={arch}", "-O3", "-v", str(source), "-o",
                                 str(Path(scratch) / "kernels.cubin")], capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolchainError(f"ptxas -arch={arch} failed:\n{result.stderr or result.stdout}")
    found: dict[str, KernelResources] = {}
    name, frame = None, (0, 0, 0)
    for line in (result.stderr + result.stdout).splitlines():
        if entry := _ENTRY.search(line):
            name, frame = entry.group(1), (0, 0, 0)
        elif name and (sizes := _FRAME.search(line)):
            frame = tuple(int(group) for group in sizes.groups())
        elif name and (used := _USED.search(line)):
            stack, stores, loads = frame
            found[name] = KernelResources(int(used.group(1)), stores, loads, stack, int(used.group(2) or 0))
            name = None
    return found


def gpu_binaries(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "gpu.binary"]


def binary_ptx(binary: ir.Operation) -> str:
    """The PTX of a ``gpu.binary``: its assembly object, or the copy kept beside a cubin."""
    if PTX_ATTRIBUTE in binary.attributes:
        return ir.StringAttr(binary.attributes[PTX_ATTRIBUTE]).value
    from mlir.dialects import gpu

    obj = gpu.ObjectAttr(ir.ArrayAttr(binary.attributes["objects"])[0])
    return bytes(obj.object).decode()


@register_pass(
    "tilecraft-ptxas",
    "Assemble each gpu.binary's PTX into a cubin with ptxas (PTX kept as tilecraft.ptx)",
    options={"arch": "sm_XX passed to ptxas (default: the target's chip)",
             "required": "1: fail without ptxas; 0 (default): keep PTX for the driver's JIT"},
)
def ptxas_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a cubin: loading PTX makes the driver JIT-compile it at every process start; the
    cubin is what ``nvcc`` would ship. Without ptxas the PTX stays (the driver accepts it)."""
    from mlir.dialects import gpu

    ptxas = find_ptxas()
    if ptxas is None:
        if options.get("required") == "1":
            raise ToolchainError("ptxas not found (PATH, CUDA_HOME, TILECRAFT_PTXAS)")
        return
    for binary in gpu_binaries(module):
        objects = ir.ArrayAttr(binary.attributes["objects"])
        obj = gpu.ObjectAttr(objects[0])
        if obj.format != int(gpu.CompilationTarget.Assembly):
            continue
        ptx = bytes(obj.object).decode()
        arch = options.get("arch") or re.search(r'chip = "([^"]+)"', str(obj.target)).group(1)
        supported = ptxas_architectures(ptxas)
        if supported and arch not in supported:
            if options.get("required") == "1":
                raise ToolchainError(f"{ptxas} cannot target {arch}")
            warnings.warn(f"tilecraft-ptxas: {ptxas} cannot target {arch}; the kernels stay "
                          "PTX, which the CUDA driver compiles when it loads them",
                          RuntimeWarning, stacklevel=2)
            return
        cubin = assemble_ptx(ptx, arch, ptxas)
        binary.attributes[PTX_ATTRIBUTE] = ir.StringAttr.get(ptx)
        binary.attributes["objects"] = ir.ArrayAttr.get([gpu.ObjectAttr.get(
            obj.target, int(gpu.CompilationTarget.Binary), cubin, obj.properties, obj.kernels)])


REFUSE_LAPACK = "tilecraft-gpu-refuse-lapack"


@register_pass(REFUSE_LAPACK, "Refuse LAPACK calls (the linear-algebra ops), which have no device code")
def refuse_lapack_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a pass at the start: without it the call reaches the GPU mapping, which fails on
    host memory with a message that does not name the op."""
    refuse_calls(module, "the CUDA target", GpuScheduleError)
    refuse_python_calls(module, "the CUDA target", GpuScheduleError)


def cuda_pipeline(target: "Target | str" = "cuda", *, schedule_options: str = "") -> Pipeline:
    """The CUDA pipeline for ``target`` (``"cuda -arch=sm_80"``) as an editable :class:`Pipeline`.

    ``schedule_options``: ``tilecraft-gpu-schedule`` knobs such as ``"shared=0 k-step=32"``.
    """
    target = Target.parse(target)
    if target.kind != "cuda":
        raise TargetError(f"cuda_pipeline needs a cuda target, got {target}")
    # The schedule knows the arch (its tensor-core option refuses one without mma.sync) and
    # the target's -tensor-cores= (schedule_options may override it).
    tensor_cores = f" tensor-cores={target.tensor_cores}" if target.tensor_cores else ""
    gpu_schedule = (f"tilecraft-gpu-schedule{{arch={target.arch}{tensor_cores} "
                    f"{schedule_options}}}").replace(" }", "}")
    return Pipeline(
        (
            # The run-time checks the emitters added are removed: the device code has no
            # status to report them through yet (docs/robustness.md).
            Stage("input", ("tilecraft-prepare-entry", REFUSE_LAPACK, f"{INSERT_CHECKS}{{enabled=0}}"),
                  "C interface on public functions; arguments read-only; no run-time checks"),
            # The fusion barriers as on the CPU (pipelines/tensor/fusion_barrier.py): without
            # them a GELU moved into the next matmul's body (recomputed per column, and the
            # op no longer planned as a contraction: BERT-base's FFN ran 2 ms a layer), and a
            # reshape folded into a projection gave it an untiled heads dim (2 blocks).
            Stage("simplify", ("canonicalize", "cse", INT8_MATMUL_PASS, INSERT_BARRIERS,
                               "func.func(linalg-fuse-elementwise-ops)", DROP_BARRIERS, "canonicalize"),
                  "fold constants; 8-bit matmuls as i32 matmuls; fuse elementwise producers "
                  "into consumers where that duplicates no work"),
            # No CSE here: two pads of one shape have identical zero-filled destinations, and
            # merged into one, one-shot bufferization must copy a strided interior out of
            # place, on the host (a ResNet basic block's two padded convolutions). The map
            # stage's CSE runs after bufferization.
            Stage("schedule", (gpu_schedule, "canonicalize"),
                  "GPU schedule: block/thread tiles, shared-memory staging, vectors"),
            Stage("bufferize",
                  ("one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
                   "function-boundary-type-conversion=identity-layout-map}",
                   "canonicalize", "buffer-deallocation-pipeline", "convert-bufferization-to-memref",
                   "canonicalize", SERIAL_FORALLS),
                  "tensors to buffers; results returned as fresh allocations; unmapped foralls (a "
                  "frontend's parallel bands) as host loops"),
            Stage("map", ("tilecraft-gpu-map", "tilecraft-gpu-host-memory",
                          "loop-invariant-code-motion", "tilecraft-gpu-hoist-accumulators",
                          "func.func(gpu-eliminate-barriers)", "canonicalize", "cse", PLAN_ARENA),
                  "block loops to gpu.launch, thread loops to thread ids (+ barriers); device "
                  "buffers and host<->device copies; shared memory as workgroup attributions; "
                  "accumulator tiles in registers across the staged K loop; device buffers "
                  "planned into one arena per function"),
            Stage("loops",
                  ("func.func(lower-vector-multi-reduction{lowering-strategy=inner-reduction})",
                   # No canonicalize after tilecraft-gpu-lower-vectors: it folds insert
                   # chains back into n-D vector.broadcast, which NVVM cannot translate.
                   "convert-linalg-to-loops", "convert-vector-to-scf{full-unroll=true}",
                   "fold-memref-alias-ops", "canonicalize", "tilecraft-gpu-lower-vectors",
                   "tilecraft-gpu-vector-alignment",
                   # i1 buffers (attention masks) as bytes: MLIR's store lowering asserts
                   # on sub-byte element types (an abort, not an error).
                   WIDEN_BOOL_MEMORY),
                  "leftover linalg to loops; vectors to loads, stores and FMAs; 128-bit "
                  "accesses marked aligned where provable; i1 buffers as bytes"),
            Stage("outline",
                  ("gpu-launch-sink-index-computations", "gpu-kernel-outlining", ALIGN_SHARED,
                   f"nvvm-attach-target{{chip={target.arch} features=+{ptx_version(target)} O=3}}"),
                  "kernels into a gpu.module with the NVVM target; shared buffers 16-byte aligned"),
            Stage("kernel",
                  ("gpu.module(expand-strided-metadata, lower-affine, convert-scf-to-cf, "
                   "convert-nvgpu-to-nvvm, convert-gpu-to-nvvm, canonicalize, cse, "
                   "reconcile-unrealized-casts)",),
                  "kernels to LLVM + NVVM intrinsics (thread ids, barriers, shared memory, "
                  "tensor-core ldmatrix/mma.sync)"),
            Stage("host",
                  ("func.func(gpu-async-region)", "expand-strided-metadata", "lower-affine",
                   "convert-scf-to-cf", "gpu-to-llvm", "convert-to-llvm",
                   "reconcile-unrealized-casts", "canonicalize", RESIDENT_WEIGHTS),
                  "host code to LLVM: async copies and launches on a stream (mgpu* calls); "
                  "weights uploaded once into device buffers kept by the runtime"),
            Stage("binary", ("gpu-module-to-binary{format=isa}",),
                  "PTX from LLVM's NVPTX backend"),
            Stage("assemble", (f"tilecraft-ptxas{{arch={target.arch}}}",),
                  "ptxas: PTX to cubin (PTX kept when ptxas is not installed)"),
        )
    )


@register_pipeline(
    "tilecraft-lower-cuda",
    "The whole CUDA pipeline (cuda_pipeline) from linalg on tensors to LLVM + gpu.binary",
    options={"arch": "sm_XX (default sm_80)"},
)
def lower_cuda_pipeline(options: Mapping[str, str]) -> list[str]:
    spec = "cuda" + (f" -arch={options['arch']}" if options.get("arch") else "")
    return cuda_pipeline(spec).pass_elements()
