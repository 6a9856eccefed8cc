"""The CUDA backend: GPU schedules as transform scripts, NVVM lowering to PTX and cubin.

See docs/cuda.md. ``tilecraft.compile(src, target="cuda -arch=sm_80")`` uses
:func:`cuda_pipeline`; compiling needs no GPU, running needs an NVIDIA driver.
The GPU schedule (``tilecraft-gpu-schedule``) is ``tilecraft.schedule.cuda``.
"""

from .lowering import assemble_ptx, cuda_pipeline, find_ptxas

__all__ = ["assemble_ptx", "cuda_pipeline", "find_ptxas"]
