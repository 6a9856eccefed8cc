"""CUDA's callable module: host code JIT-compiled on the first call, kernels as PTX/cubin."""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Callable

import numpy as np
from mlir import ir

from ...pipelines.jit.compiled_module import CompiledModule
from ...pipelines.jit.engine import JitFunction
from ...runtime.cuda_errors import raise_pending
from ...runtime.device_array import DeviceArray, host_views, output_arrays
from ...runtime.libraries import cuda_runtime_library
from ...runtime.signature import EntrySignature
from .resident import MODULE_RELEASE_FUNCTION


class CudaCompiledModule(CompiledModule):
    """A module compiled for ``cuda -arch=...``: host code plus kernels in ``gpu.binary`` ops.

    Compiling needs no GPU: the PTX (:meth:`ptx`) and, where ``ptxas`` is installed, the
    cubin (:meth:`cubin`) are in hand right away. The JIT is created on the first call, with
    tilecraft's CUDA runtime (runtime/cuda_runtime.c), because creating it runs the kernels'
    module-load constructors: without a driver and GPU, calling raises
    :class:`DeviceUnavailableError` before any of that. The calling
    convention is the CPU one: numpy arrays in (copied to the device by the compiled host
    code), fresh numpy arrays out (copied back); the weights and the activation arena go to
    the device on the first call and stay there until :meth:`close` (or the process's end).
    :meth:`device_call` leaves the outputs on the device instead (device arrays, no copy to
    the host). A failed driver call is a
    :class:`~tilecraft.errors.CudaError` after the call.
    """

    def _jit(self, llvm_module: ir.Module, signature: EntrySignature, opt_level: int) -> JitFunction:
        """Deferred to the first call, with tilecraft's CUDA runtime (class docstring)."""
        return JitFunction(llvm_module, signature, opt_level=opt_level,
                           extra_libraries=lambda: [cuda_runtime_library()], lazy=True, output_arguments=True)

    def _runtime(self) -> ctypes.CDLL:
        """The runtime library the JIT loaded (the same handle: dlopen of the same path)."""
        runtime = getattr(self, "_runtime_library", None)
        if runtime is None:
            runtime = self._runtime_library = ctypes.CDLL(cuda_runtime_library())
        return runtime

    def _binaries(self) -> dict[str, ir.Operation]:
        from .lowering import gpu_binaries

        return {ir.StringAttr(b.attributes["sym_name"]).value: b
                for b in gpu_binaries(self._module.operation)}

    def ptx_modules(self) -> dict[str, str]:
        """Kernel module name -> its PTX (one PTX file each, as ptxas takes them)."""
        from .lowering import binary_ptx

        return {name: binary_ptx(b) for name, b in self._binaries().items()}

    def ptx(self) -> str:
        """The PTX of every kernel module, one after the other (for reading and grepping)."""
        return "\n".join(self.ptx_modules().values())

    def cubin(self) -> dict[str, bytes]:
        """Kernel module name -> cubin (ELF) from ptxas; empty when ptxas was not found."""
        from mlir.dialects import gpu

        cubins = {}
        for name, binary in self._binaries().items():
            obj = gpu.ObjectAttr(ir.ArrayAttr(binary.attributes["objects"])[0])
            if obj.format == int(gpu.CompilationTarget.Binary):
                cubins[name] = bytes(obj.object)
        return cubins

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """numpy arrays or :class:`~tilecraft.runtime.device_array.DeviceArray` (copied on the
        device) in, numpy arrays out."""
        args, kwargs = host_views(args, kwargs)
        outputs = self._invoke(tuple(args), kwargs)
        self._after_call()
        return outputs

    def device_call(self, *args: Any, out: "DeviceArray | list[DeviceArray] | None" = None,
                    **kwargs: Any) -> "DeviceArray | tuple[DeviceArray, ...]":
        """Call with the outputs left on the device: :class:`DeviceArray` results, each copied
        device to device from the call's arena, none to the host. ``out``: the arrays to
        write (one per output, of its shape and dtype, overlapping no input), else fresh
        ones are allocated. An input called ``out`` must be passed by position."""
        outputs = output_arrays(self.signature, out, [*args, *kwargs.values()], runtime=self._runtime())
        views, named = host_views(args, kwargs)
        self._function.call_into(tuple(views), named, [array.pointer for array in outputs])
        self._after_call()
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _after_call(self) -> None:
        """Register the module's release (its device memory now exists) and raise a failed
        driver call's :class:`~tilecraft.errors.CudaError`."""
        if getattr(self, "_release", None) is None:
            self._release = _module_release(self, self._function.engine)
        raise_pending(self._runtime(), "the CUDA module")

    def close(self) -> None:
        """Free this module's device memory now: its resident weights and activation arena
        (a later call uploads and allocates them again). Every JIT module of the process shares
        one CUDA runtime, so this calls the module's own release function
        (``__tilecraft_cuda_release_module``, targets/cuda/resident.py), which frees only this
        module's slots. A module collected without ``close`` frees them then."""
        release, self._release = getattr(self, "_release", None), None
        if release is not None:
            release()  # a later call registers it again

    def __enter__(self) -> "CudaCompiledModule":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _module_release(module: CudaCompiledModule, engine: Any) -> "weakref.finalize | Callable[[], None]":
    """A call of the module's release function (nothing where the module holds no device
    memory across calls), also run when ``module`` is collected; not at interpreter exit,
    when the driver may be gone. The finalizer holds the engine, whose globals are the slots."""
    address = engine.raw_lookup(MODULE_RELEASE_FUNCTION)
    if not address:
        return lambda: None
    finalizer = weakref.finalize(module, _release_slots, engine, address)
    finalizer.atexit = False
    return finalizer


def _release_slots(engine: Any, address: int) -> None:
    """Call ``__tilecraft_cuda_release_module`` at ``address`` (``engine`` keeps it alive)."""
    ctypes.CFUNCTYPE(None)(address)()
