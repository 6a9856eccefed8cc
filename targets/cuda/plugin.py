"""The ``cuda`` target's plugin: ``cuda [-arch=sm_XX]`` (TVM's spelling), NVVM lowering,
a module whose JIT waits for the first call, deployable packages (``-o model.tar``: host
code linked with tilecraft's CUDA runtime, the kernels inside) and the kernels (PTX, cubin)
as files (``-o directory``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mlir import ir

from ...errors import BackendError, PackageError, TargetError, TuningError
from ...pipelines.jit.compiled_module import CompiledModule
from ...compiler.options import CompileOptions
from ...pipelines.pipeline import Pipeline
from ...pipelines.target import Target
from ...pipelines.target_registry import TargetPlugin
from ...runtime.libraries import CUDA_DRIVER_LIBRARY, CUDA_RUNTIME_SOURCE, cuda_driver_available
from ...runtime.signature import EntrySignature
from .space import gpu_space_for, require_cuda_device
from ...schedule.te.builder import without_default_schedule
from ...schedule.te.errors import ScheduleError
from .archs import CUDA_ARCHS, DEFAULT_CUDA_ARCH
from .lowering import cuda_pipeline
from .schedule import tensor_core_problem
from .module import CudaCompiledModule


class CudaTarget(TargetPlugin):
    """NVIDIA GPUs (docs/cuda.md): compiles anywhere, runs where a CUDA driver is."""

    name = "cuda"
    usage = "'cuda -arch=sm_XX [-tensor-cores=f16|tf32]'"
    writes_packages = True
    tensor_device = "cuda"

    def parse(self, spec: str, options: Sequence[str]) -> Target:
        arch, tensor_cores = DEFAULT_CUDA_ARCH, None
        for option in options:
            key, sep, value = option.lstrip("-").partition("=")
            if not option.startswith("-") or key not in ("arch", "tensor-cores") or not sep:
                raise TargetError(f"bad target option {option!r} in {spec!r}; expected -arch=sm_XX "
                                  "or -tensor-cores=f16|tf32")
            if key == "tensor-cores":
                tensor_cores = value
            elif value not in CUDA_ARCHS:
                raise TargetError(
                    f"unknown CUDA architecture {value!r} in {spec!r}; supported: " + ", ".join(CUDA_ARCHS))
            else:
                arch = value
        if tensor_cores is not None and (problem := tensor_core_problem(tensor_cores, arch)):
            raise TargetError(f"{problem} (in {spec!r})")
        return Target(kind=self.name, arch=arch, tensor_cores=tensor_cores)

    def spec(self, target: Target) -> str:
        tensor_cores = f" -tensor-cores={target.tensor_cores}" if target.tensor_cores else ""
        return f"cuda -arch={target.arch}{tensor_cores}"

    def can_run_here(self, target: Target) -> bool:
        return cuda_driver_available()

    def check_options(self, options: CompileOptions) -> None:
        if options.offload:
            raise BackendError("offload backends run on CPU targets only")
        if options.package_path is not None and options.profile:
            raise PackageError("the profiling variant times host code around each kernel; CUDA "
                               "kernels run asynchronously on the device: package without profile")

    def package_runtime(self, target: Target) -> tuple[tuple[Path, ...], dict[str, Any]]:
        """The ``mgpu*`` runtime over the driver API (runtime/cuda_runtime.c), linked into
        model.so, which then loads ``libcuda.so.1`` at first use: no link-time CUDA dependency.
        ``output_arguments``: the entry takes its results' destinations after its arguments
        (targets/cuda/memory.py ``OUTPUT_ARGUMENTS``; null ones give host results)."""
        return (CUDA_RUNTIME_SOURCE,), {"device": {"kind": "cuda", "arch": target.arch,
                                                   "driver": CUDA_DRIVER_LIBRARY, "output_arguments": True}}

    def is_package_output(self, output: str) -> bool:
        """``model.tar`` / ``model.so``: a package; anything else: a directory of kernel files."""
        return output.endswith((".tar", ".so"))

    def pipeline(self, options: CompileOptions) -> Pipeline:
        return cuda_pipeline(options.target)

    def jit(self, module: ir.Module, signature: EntrySignature, pipeline: Pipeline, target: Target,
            **settings: Any) -> CompiledModule:
        return CudaCompiledModule(module, signature, target=target, pipeline=pipeline, **settings)

    def check_tunable(self, target: Target) -> None:
        """Stop before any work: CUDA candidates must be timed on a GPU, and the measurement
        workers time CPU code (timing a GPU schedule on the CPU would rank the wrong thing).
        Without a device the error says why there is none; with one, that measuring GPU
        candidates is not built yet (the space is :meth:`schedule_space`)."""
        require_cuda_device()
        raise TuningError("tuning a CUDA target is not supported yet: the measurement workers time "
                          "CPU code; the GPU schedule space (targets/cuda/space.py) has no GPU runner")

    def schedule_space(self, task: Any, target: Target) -> Any:
        """The GPU knobs of the task's op (targets/cuda/space.py: block and thread tiles,
        staging, unrolling)."""
        return gpu_space_for(task)

    def scheduled_pipeline(self, target: Target) -> Pipeline:
        """The loops ``bind`` mapped become kernels in the ``map`` stage (``tilecraft-gpu-map``),
        then PTX and, with ptxas, a cubin."""
        return without_default_schedule(cuda_pipeline(target))

    def check_schedule(self, schedule: Any) -> None:
        tensorized = schedule.tensorized_blocks()
        if tensorized:
            raise ScheduleError(f"build for cuda: blocks {[b.name for b in tensorized]} are tensorized; "
                                "intrinsics are C functions called on host memory — build with "
                                "target='llvm', or schedule without tensorize")
        schedule.check_gpu()

    def check_output(self, output: str) -> None:
        if not self.is_package_output(output) and Path(output).is_file():
            raise PackageError(f"{output} is a file: -o names a package (model.tar) or a directory "
                               "that receives the kernels' PTX and cubin files")

    def write_output(self, compiled: Any, output: str) -> str:
        """The kernels as files in the directory ``output``: ``<module>.ptx`` and, where
        ptxas ran, ``.cubin`` (a ``.tar`` output is a package instead)."""
        directory = Path(output)
        directory.mkdir(parents=True, exist_ok=True)
        cubins = compiled.cubin()
        for name, ptx in compiled.ptx_modules().items():
            (directory / f"{name}.ptx").write_text(ptx)
            if name in cubins:
                (directory / f"{name}.cubin").write_bytes(cubins[name])
        return (f"{len(compiled.ptx_modules())} kernel module(s) written to {directory}/ "
                f"({len(cubins)} assembled by ptxas)")
