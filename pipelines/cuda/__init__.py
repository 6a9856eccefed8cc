"""The CUDA backend: GPU schedules as transform scripts, NVVM lowering to PTX and cubin.

See docs/cuda.md. ``tilecraft.compile(src, target="cuda -arch=sm_80")`` uses
:func:`cuda_pipeline`; compiling needs no GPU, running needs an NVIDIA driver.
"""

from .lowering import assemble_ptx, cuda_pipeline, find_ptxas
from .schedule import GpuConfig, GpuOpSchedule, plan_gpu_op, render_gpu_script

__all__ = ["GpuConfig", "GpuOpSchedule", "assemble_ptx", "cuda_pipeline", "find_ptxas",
           "plan_gpu_op", "render_gpu_script"]
