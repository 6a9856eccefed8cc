"""A compiled PyTorch program called like the module: tensors in, tensors out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from ..errors import ArgumentTypeError, ArgumentValueError
from ..frontend.torch.export import import_exported
from ..frontend.torch.importer import from_numpy, mutations, state_inputs, tensor_view
from ..pipelines.jit.compiled_module import CompiledModule
from ..pipelines.target_registry import target_plugin
from ..runtime.device_array import KDL_CUDA, DeviceArray, from_dlpack
from ..runtime.timing import Timing, time_evaluator
from .compile import compile as compile_mlir
from .options import CompileOptions


class CompiledTorchModule:
    """A compiled ``nn.Module``: call it with tensors like the module, get tensors back.

    Inputs are handed to the native code as numpy views of the tensors' memory (a copy is
    made only for non-contiguous tensors); results are numpy arrays owned by the compiled
    code, wrapped by ``torch.from_numpy`` without copying (bfloat16 through int16: numpy
    has no bfloat16 that torch reads).

    For a CUDA target, CUDA tensors (or other DLPack producers of CUDA memory: CuPy arrays,
    tilecraft's ``DeviceArray``) go in without a copy through the host and the outputs stay on
    the device (the module's ``device_call``): torch CUDA tensors over them (DLPack), or,
    where this PyTorch has no CUDA, the ``DeviceArray`` results themselves (DLPack producers
    too). Inputs on different devices (a CPU tensor beside a CUDA one) are refused, naming
    both.

    A program that writes its inputs or buffers (``x.add_(1)``, ``batch_norm(training=True)``
    updating running statistics, a KV cache's ``index_copy_``) is compiled functionally: the
    compiled code returns the new values after the results, and the call copies them into
    the caller's tensors and the module's buffers, as eager leaves them. A returned tensor
    never aliases an input (eager's ``return x.add_(1)`` returns ``x`` itself; here a tensor
    equal to it).
    """

    def __init__(self, compiled: CompiledModule, program: ExportedProgram) -> None:
        self.compiled = compiled
        self.program = program
        self._in_spec = program.call_spec.in_spec
        self._out_spec = program.call_spec.out_spec
        # How many positional tensors a call flattens to itself: a call of that many plain
        # tensors, no keywords, skips pytree's flattening (most of a small call's cost), as
        # it would produce these leaves and the example's structure (-1: never).
        leaves = self._in_spec.num_leaves if self._in_spec is not None else -1
        self._positional = leaves if leaves >= 0 and (
            self._in_spec == pytree.tree_flatten((tuple(range(leaves)), {}))[1]) else -1
        outputs = self._out_spec.num_leaves if self._out_spec is not None else 0
        self._outputs_flat = self._out_spec is not None and (self._out_spec.is_leaf() or (
            self._out_spec == pytree.tree_flatten(tuple(range(outputs)))[1]))
        # the module's buffers the program writes: arguments after the user inputs
        self._state = [_buffer(program, spec.target) for spec in state_inputs(program)]
        # where each written value goes: a user input's position, or a buffer tensor
        positions = {spec.arg.name: position for position, spec in enumerate(
            s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT)}
        self._names = [spec.name for spec in self.compiled.signature.arguments]
        self._writes: list[int | torch.Tensor] = [
            positions[spec.target] if spec.kind == OutputKind.USER_INPUT_MUTATION else _buffer(program, spec.target)
            for spec in mutations(program)]

    @property
    def signature(self):  # noqa: ANN201 - the runtime's EntrySignature
        return self.compiled.signature

    @property
    def accuracy(self):  # noqa: ANN201 - compiler/precision.py's AccuracyReport
        """The accuracy report of a ``precision="bf16"`` compile (docs/precision.md); ``None``
        for an f32 one."""
        return getattr(self.compiled, "accuracy", None)

    def ir(self, stage: str = "llvm") -> str:
        """The IR after pipeline stage ``stage`` (``"source"``: the imported linalg)."""
        return self.compiled.ir(stage)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == self._positional and all(type(value) is torch.Tensor for value in args):
            flat: Sequence[Any] = args  # plain tensors in the example's order: their own flattening
        else:
            flat, spec = pytree.tree_flatten((args, kwargs))
            if self._in_spec is not None and spec != self._in_spec:
                raise ArgumentValueError(
                    f"the call's arguments are structured as {spec}, the example inputs as {self._in_spec}")
        on_device = target_plugin(self.compiled.target.kind).tensor_device == "cuda"
        if on_device and _on_cuda(self._names, flat):  # CUDA in, CUDA out: nothing through the host
            arrays = [_array_view(position, value, on_device) for position, value in enumerate(flat)]
            arrays += [tensor_view(buffer.detach()) for buffer in self._state]
            results = self.compiled.device_call(*arrays)
            results = results if isinstance(results, tuple) else (results,)
            tensors = [torch.from_dlpack(r) for r in results] if torch.cuda.is_available() else list(results)
            if self._writes and not torch.cuda.is_available():
                raise ArgumentTypeError("this program writes its inputs or buffers: its CUDA results must become "
                                        "torch CUDA tensors, and this PyTorch has no CUDA")
        else:
            arrays = [_array_view(position, value, on_device) for position, value in enumerate(flat)]
            arrays += [tensor_view(buffer.detach()) for buffer in self._state]
            results = self.compiled(*arrays)
            results = results if isinstance(results, tuple) else (results,)
            tensors = [from_numpy(r) for r in results]
        if self._writes:
            tensors, written = tensors[:len(tensors) - len(self._writes)], tensors[len(tensors) - len(self._writes):]
            with torch.no_grad():  # eager's in-place update, outside autograd as the compiled code is
                for destination, value in zip(self._writes, written):
                    target = flat[destination] if isinstance(destination, int) else destination
                    if target.shape != value.shape:  # resize_: eager reshapes the caller's tensor
                        target.resize_(value.shape)
                    target.copy_(value)
        if self._out_spec is None:
            return tensors
        if self._outputs_flat:  # a tensor, or a tuple of tensors: no pytree walk
            return tensors[0] if self._out_spec.is_leaf() else tuple(tensors)
        return pytree.tree_unflatten(tensors, self._out_spec)

    def export_library(self, path: "str | os.PathLike[str]") -> Path:
        """Write the compiled program as a package (``CompiledModule.export_library``); the
        loaded package takes and returns numpy arrays, the program's inputs flattened."""
        return self.compiled.export_library(path)

    def time_evaluator(self, name: str | None = None, *, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0.0) -> Callable[..., Timing]:
        """As ``CompiledModule.time_evaluator``, timing calls with tensors, as the module is called."""
        self.compiled.time_evaluator(name)  # the entry name check
        return time_evaluator(self, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def __repr__(self) -> str:
        return f"<CompiledTorchModule {self.compiled.signature}>"


def _array_view(position: int, value: Any, on_device: bool = False) -> Any:
    """A numpy view of argument ``value`` (its memory, read only by the compiled code);
    :class:`ArgumentTypeError` for anything but a CPU tensor, or, for a CUDA module
    (``on_device``), a CUDA tensor, passed as a device array over its memory (DLPack, no copy;
    runtime/device_array.py). Detached and with a pending conjugate or negation resolved only
    when it has one (each of those calls costs as much as the view itself)."""
    if on_device and not isinstance(value, torch.Tensor) and _dlpack_device(value) == KDL_CUDA:
        return value if isinstance(value, DeviceArray) else from_dlpack(value)  # CuPy and the like
    if not isinstance(value, torch.Tensor):
        raise ArgumentTypeError(f"argument {position} is a {type(value).__name__}, not a torch.Tensor")
    if on_device and value.device.type == "cuda":
        value = value.detach().resolve_conj().resolve_neg().contiguous()
        # The module's copies run on its own non-blocking stream: the tensor's producer
        # (torch's current stream) must be done first.
        torch.cuda.current_stream(value.device).synchronize()
        return from_dlpack(value)
    if not value.is_cpu:
        raise ArgumentTypeError(f"argument {position} is on {value.device}; compiled code runs on the CPU")
    if value.requires_grad:
        value = value.detach()
    if value.is_conj():
        value = value.resolve_conj()
    if value.is_neg():
        value = value.resolve_neg()
    return tensor_view(value)


def _dlpack_device(value: Any) -> int | None:
    """The DLPack device type of a non-tensor ``value`` that speaks DLPack (None: it does not)."""
    if not hasattr(value, "__dlpack_device__") or not hasattr(value, "__dlpack__"):
        return None
    return int(value.__dlpack_device__()[0])


def _device_name(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.device)
    return "cuda" if _dlpack_device(value) == KDL_CUDA else "cpu"


def _on_cuda(names: Sequence[str], arguments: Sequence[Any]) -> bool:
    """Whether the call's inputs are on the GPU: all of them (True) or none (False).
    :class:`ArgumentValueError` naming two inputs on different devices otherwise: the compiled
    code would copy the CPU one to the GPU behind the caller's back, and the outputs' device
    would be a guess."""
    devices = [_device_name(value) for value in arguments]
    cuda = [position for position, device in enumerate(devices) if device.startswith("cuda")]
    if not cuda or len(cuda) == len(devices):
        return bool(cuda)
    host = next(position for position, device in enumerate(devices) if not device.startswith("cuda"))

    def name(position: int) -> str:
        return f"argument {position} ({names[position]!r})" if position < len(names) else f"argument {position}"

    raise ArgumentValueError(f"{name(cuda[0])} is on {devices[cuda[0]]} but {name(host)} is on {devices[host]}: "
                             "pass every input on the same device")


def _buffer(program: ExportedProgram, name: str) -> torch.Tensor:
    """The module's buffer ``name`` (``program.state_dict`` holds the module's own tensors, so a
    copy into it updates the module)."""
    tensor = program.state_dict.get(name)
    return program.constants[name] if tensor is None else tensor


def compile_exported(program: ExportedProgram, options: CompileOptions | None = None,
                     **overrides: Any) -> CompiledTorchModule:
    """Compile an exported, decomposed program (see :func:`compile` for the arguments)."""
    return CompiledTorchModule(compile_mlir(import_exported(program), options, **overrides), program)
