"""The CUDA architectures the ``cuda`` target accepts, and the PTX ISA version of each."""

from __future__ import annotations

from ...errors import TargetError
from ...pipelines.target import Target

# CUDA architectures (LLVM NVPTX chip names) -> the PTX ISA version emitted for them: the
# lowest version that architecture exists in (LLVM rejects older ones; ptxas accepts newer).
CUDA_ARCHS: dict[str, str] = {
    "sm_70": "ptx60", "sm_72": "ptx61", "sm_75": "ptx63", "sm_80": "ptx70", "sm_86": "ptx71",
    "sm_87": "ptx74", "sm_89": "ptx78", "sm_90": "ptx78", "sm_90a": "ptx80",
    "sm_100": "ptx86", "sm_100a": "ptx86", "sm_103": "ptx88", "sm_110": "ptx90",
    "sm_120": "ptx87", "sm_120a": "ptx87", "sm_121": "ptx88",
}
DEFAULT_CUDA_ARCH = "sm_80"


def ptx_version(target: Target) -> str:
    """LLVM NVPTX feature naming the PTX ISA version (``"ptx70"``) of a CUDA target."""
    if target.arch not in CUDA_ARCHS:
        raise TargetError(f"{target} is not a CUDA target")
    return CUDA_ARCHS[target.arch]
