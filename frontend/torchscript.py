"""TorchScript (``torch.jit.trace``/``torch.jit.script`` modules, saved ``.pt`` archives) as a
``torch.export`` program, so that the one PyTorch frontend (``frontend/torch``) imports it.

Why this route: TorchScript graphs are converted to an ``ExportedProgram`` by PyTorch's own
converter (``torch._export.converter.TS2EPConverter``), which maps ``aten::`` calls one to one
onto the ATen ops our importer already covers and unrolls loops of constant trip count; the
result is exported once more on the example inputs, so its shapes are theirs (static, as
``torch.jit.trace`` records them). The other candidate, the legacy TorchScript ONNX
exporter, is deprecated and would send PyTorch models through the ONNX frontend, a second
path with its own coverage. Before converting, the module is frozen (``torch.jit.freeze``):
attributes become constants, so ``if self.training``-style branches fold away and batch
norms fold into their convolutions.

What cannot be converted: an ``if`` or ``while`` whose condition is computed from tensor
data (the converter turns it into ``torch.cond``, which no straight-line kernel computes).
It is refused with a :class:`TorchImportError` naming the TorchScript statement and its line.
The converter is a private PyTorch API; the ``torch`` extra pins the version it was tried on.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch.export import ExportedProgram

from ..errors import TorchImportError

# Ops of a converted program that stand for control flow on tensor data.
_CONTROL_FLOW_OPS = ("cond", "while_loop")
# TorchScript ops that turn a tensor into a Python condition.
_TENSOR_TO_CONDITION = ("aten::Bool", "aten::is_nonzero", "aten::item", "aten::IntImplicit",
                        "aten::FloatImplicit", "aten::ScalarImplicit", "aten::Int", "aten::Float")


def is_script_module(source: Any) -> bool:
    """A ``torch.jit.trace``d or ``torch.jit.script``ed module (or a loaded archive)."""
    return isinstance(source, torch.jit.ScriptModule)


def read_torchscript(path: Path) -> torch.jit.ScriptModule:
    """The TorchScript module saved in ``path`` (``torch.jit.save``), on the CPU."""
    try:
        return torch.jit.load(str(path), map_location="cpu")
    except (RuntimeError, ValueError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TorchImportError(
            f"{path} is not a TorchScript archive (torch.jit.save of a traced or scripted module; "
            f"a torch.save'd state dict or pickled nn.Module holds no program): {first}") from None


def input_names(module: torch.jit.ScriptModule) -> list[str]:
    """The names of ``forward``'s parameters (without ``self``): the model's input names."""
    try:
        arguments = module.forward.schema.arguments
    except (AttributeError, RuntimeError) as error:
        raise TorchImportError(f"the TorchScript module has no forward method: {error}") from None
    return [argument.name for argument in arguments[1:]]


def example_inputs_from_shapes(module: torch.jit.ScriptModule,
                               shape_dict: Mapping[str, Sequence[int | None]] | None) -> tuple[torch.Tensor, ...]:
    """Float32 example inputs of the shapes ``shape_dict`` gives each of ``forward``'s
    parameters: a saved archive records no shapes, so they must be given (CLI:
    ``--input-shapes``)."""
    names = input_names(module)
    shape_dict = dict(shape_dict or {})
    missing = [name for name in names if name not in shape_dict]
    unknown = sorted(set(shape_dict) - set(names))
    if missing or unknown:
        raise TorchImportError(
            f"a TorchScript module needs the shape of each input of forward({', '.join(names)}) in "
            f"shape_dict (CLI: --input-shapes \"{names[0] if names else 'x'}:[1,3,224,224]\"); "
            + (f"missing {missing}" if missing else f"unknown {unknown}"))
    tensors = []
    for name in names:
        shape = list(shape_dict[name])
        if any(d is None or not isinstance(d, int) or d < 0 for d in shape):
            raise TorchImportError(
                f"input {name!r}: a TorchScript module is converted for static shapes; got {shape}")
        tensors.append(torch.zeros(shape, dtype=torch.float32))
    return tuple(tensors)


def _frozen(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """``module`` frozen (a copy: the caller's module is left as it is)."""
    if module.training:
        raise TorchImportError("the TorchScript module is in training mode: tilecraft compiles for "
                               "inference; call module.eval() before tracing, scripting or saving")
    try:
        return torch.jit.freeze(module)
    except RuntimeError:
        return module  # a module freeze cannot take (no attributes to fold) converts as it is


def _data_dependent_branches(module: torch.jit.ScriptModule) -> list[str]:
    """``prim::If``/``prim::Loop`` statements whose condition comes from a tensor's value,
    each as ``kind at file:line``."""
    found = []
    try:
        graph = module.inlined_graph
    except RuntimeError:
        return found
    for node in graph.findAllNodes("prim::If") + graph.findAllNodes("prim::Loop"):
        condition = list(node.inputs())[0 if node.kind() == "prim::If" else 1]
        if condition.node().kind() in _TENSOR_TO_CONDITION:
            found.append(f"{node.kind()} at {_source_line(node)}")
    return found


def _source_line(node: Any) -> str:
    """``file:line`` of a TorchScript node (the first line of its source range)."""
    text = node.sourceRange().strip()
    first = text.splitlines()[0] if text else ""
    if first.startswith("File ") and ", line " in first:
        file, line = first[len("File "):].split(", line ", 1)
        return f"{file.strip(chr(34))}:{line.strip()}"
    return first or "an unknown line"


def torchscript_program(module: torch.jit.ScriptModule, example_inputs: Sequence[torch.Tensor] | torch.Tensor
                        ) -> ExportedProgram:
    """The decomposed ``torch.export`` program of a TorchScript module, its user inputs named
    by ``forward``'s parameters (what :func:`tilecraft.torch.compile` and the loader import)."""
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    names = input_names(module)
    if len(args) != len(names):
        raise TorchImportError(f"forward({', '.join(names)}) takes {len(names)} inputs, "
                               f"{len(args)} example inputs were given")
    frozen = _frozen(module)
    graph_inputs = list(frozen.graph.inputs())[1:]
    for value, name in zip(graph_inputs, names):
        value.setDebugName(name)  # the converter names its placeholders after these
    from torch._export.converter import TS2EPConverter

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = TS2EPConverter(frozen, args).convert()
    except Exception as error:  # the converter raises many kinds for what it cannot map
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TorchImportError(f"the TorchScript module could not be converted: {first}") from error
    flow = [node for node in program.graph.nodes
            if node.op == "call_function" and getattr(node.target, "__name__", "") in _CONTROL_FLOW_OPS]
    if flow:
        where = _data_dependent_branches(frozen) or [f"{len(flow)} {flow[0].target.__name__} node(s)"]
        raise TorchImportError(
            "the TorchScript module branches or loops on tensor data (" + "; ".join(where) + "), "
            "which a compiled straight-line program cannot follow: trace it with torch.jit.trace "
            "on the inputs of the path you want, or move the branch out of forward",
            problems=[(w.split(" at ")[-1], w.split(" at ")[0], "data-dependent control flow") for w in where])
    try:
        # The converter exports every dimension as dynamic (Dim.AUTO); exported again on the
        # example inputs, the program has their static shapes, as a traced module does.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            static = torch.export.export(program.module(), args)
            return static.run_decompositions()
    except Exception as error:  # torch.export raises many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TorchImportError(f"the converted TorchScript program could not be exported: {first}") from error
