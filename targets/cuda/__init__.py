"""The CUDA target (``target="cuda -arch=sm_80"``): NVVM lowering to PTX and cubin, a module
that calls tilecraft's CUDA runtime (module.py, runtime/cuda_runtime.c), weights kept on the
device (resident.py), its plugin (plugin.py: packages too). See docs/cuda.md;
compiling needs no GPU, running needs an NVIDIA driver. The GPU schedule
(``tilecraft-gpu-schedule``) is ``tilecraft.targets.cuda.schedule``: the tuning space beside it uses it.
"""

from ...pipelines.target_registry import register_target
from .lowering import assemble_ptx, cuda_pipeline, find_ptxas
from .plugin import CudaTarget

register_target(CudaTarget())

__all__ = ["assemble_ptx", "cuda_pipeline", "find_ptxas"]
