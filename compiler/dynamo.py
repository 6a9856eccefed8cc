"""The ``torch.compile`` backend: ``torch.compile(model, backend="tilecraft")``.

Registered through the ``torch_dynamo_backends`` entry point (pyproject.toml), so PyTorch
finds it by name without the caller importing tilecraft.

Dynamo hands the backend one FX graph per captured region, with example inputs. The backend
exports that graph (``torch.export``, core ATen decomposition), imports it with the same op
table as :func:`tilecraft.torch.compile`, and compiles it once per set of input shapes and
integer arguments: Dynamo's guards decide when a region is re-entered or recompiled, and
whatever shapes reach this callable are served correctly, so a dynamic batch simply compiles
one more specialization on first sight.

Never a wrong answer, never a crash: in a graph with ATen ops tilecraft does not cover, the
regions of supported ops are still compiled (``CapabilityBasedPartitioner`` on the exported
ATen graph) and the unsupported ops run eagerly between them, after one warning listing the
ops and where the model uses them. A graph whose compilation fails for another reason runs
eagerly as a whole (the warning gives the reason), and so does any call that needs autograd
(the compiled code computes no gradients).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Callable, Sequence

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..errors import TilecraftError, TorchImportError
from ..frontend.torch.export import export
from ..frontend.torch.importer import TORCH_TO_NUMPY, describe_location, op_name
from ..frontend.torch.ops import ATEN_OPS
from .torch_module import CompiledTorchModule, compile_exported

_GENERATED = re.compile(r"<eval_with_key>\.\d+:(\d+)")


class TilecraftFallbackWarning(RuntimeWarning):
    """A graph (or a call) runs in PyTorch eager mode instead of tilecraft's code."""


class _WithConstants(torch.nn.Module):
    """The Dynamo graph with its non-tensor arguments (ints from symbolic sizes) bound, so
    ``torch.export`` sees tensors only, and its module state (the positions in ``state``:
    parameters and buffers Dynamo lifted to inputs) held as buffers, so the export carries
    them as the module's constants; one instance per specialization."""

    def __init__(self, graph: fx.GraphModule, arguments: Sequence[Any], state: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.graph_module = graph
        self.arguments = list(arguments)
        self.state = state
        for position in sorted(state):
            self.register_buffer(f"state_{position}", arguments[position].detach())

    def forward(self, *tensors: torch.Tensor) -> Any:
        supplied = iter(tensors)
        arguments = [getattr(self, f"state_{i}") if i in self.state
                     else next(supplied) if isinstance(a, torch.Tensor) else a
                     for i, a in enumerate(self.arguments)]
        return self.graph_module(*arguments)


def module_state_positions(graph: fx.GraphModule) -> frozenset[int]:
    """Positions of the graph's inputs that are its module's parameters and buffers.

    Why: Dynamo lifts an ``nn.Module``'s parameters and buffers to graph inputs. Compiled as
    inputs, a convolution's filter is transposed and its batch norm applied on every call,
    no constant is folded or packed, and each of those per-weight computations is one more
    kernel for LLVM: MobileNetV2 through ``torch.compile(backend="tilecraft")`` spent most of
    a several-minute compile generating them. Compiled as constants (as
    :func:`tilecraft.torch.compile` and inductor's freezing do), they fold at compile time;
    :class:`DynamoGraph` recompiles when one of them changes in place or is replaced."""
    from torch._dynamo.source import is_from_unspecialized_param_buffer_source

    positions = set()
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    for position, node in enumerate(placeholders):
        argument = node.meta.get("grapharg")
        source = getattr(argument, "source", None)
        if source is not None and is_from_unspecialized_param_buffer_source(source):
            positions.add(position)
    return frozenset(positions)


def _state_version(arguments: Sequence[Any], state: frozenset[int]) -> tuple:
    """What identifies the module state's values: each tensor's storage and its in-place
    version counter (bumped by ``optimizer.step()``, ``copy_``, ``load_state_dict``)."""
    return tuple((arguments[i].data_ptr(), arguments[i]._version) for i in sorted(state))


def _key(arguments: Sequence[Any]) -> tuple:
    return tuple(
        (tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else ("value", a)
        for a in arguments
    )


class DynamoGraph:
    """The callable the backend returns for one Dynamo graph."""

    def __init__(self, graph: fx.GraphModule, options: dict[str, Any]) -> None:
        self.graph = graph
        self.options = options
        self.compiled: dict[tuple, Callable[..., Any]] = {}
        self.state = module_state_positions(graph)
        self._state_versions: dict[tuple, tuple] = {}
        self.fallback_reason: str | None = None
        self.warned_unsupported = False
        self._warned_autograd = False

    def compile_for(self, arguments: Sequence[Any]) -> Callable[..., Any] | None:
        """The compiled code for these arguments' shapes, compiling on first sight; ``None``
        (after one warning) when the graph must run eagerly as a whole."""
        if self.fallback_reason is not None:
            return None
        key = _key(arguments)
        if key in self.compiled and self._state_versions[key] != _state_version(arguments, self.state):
            del self.compiled[key]  # the weights changed since this was compiled
        if key not in self.compiled:
            try:
                program = self._export(arguments)
                try:
                    self.compiled[key] = compile_exported(program, **self.options)
                except TorchImportError as error:
                    if not error.problems:
                        raise
                    self.compiled[key] = self._compile_supported_regions(program, self._inputs(arguments), error)
            except (TilecraftError, NotImplementedError, ValueError, TypeError, RuntimeError) as error:
                self._fall_back(f"tilecraft could not compile the graph ({type(error).__name__}: "
                                f"{str(error).splitlines()[0] if str(error) else ''})")
                return None
            self._state_versions[key] = _state_version(arguments, self.state)
        return self.compiled[key]

    def _export(self, arguments: Sequence[Any]) -> ExportedProgram:
        """The graph exported with its module state as constants, less any state the graph
        writes (a BatchNorm's running statistics in training mode): that stays an input,
        or each call would change the constants and compile again."""
        program = export(_WithConstants(self.graph, arguments, self.state).eval(), tuple(self._inputs(arguments)))
        written = {int(name.removeprefix("state_"))
                   for name in program.graph_signature.buffers_to_mutate.values() if name.startswith("state_")}
        if not written:
            return program
        self.state = self.state - written
        self.compiled.clear()  # compiled with the written state as constants: their inputs differ
        return export(_WithConstants(self.graph, arguments, self.state).eval(), tuple(self._inputs(arguments)))

    def _inputs(self, arguments: Sequence[Any]) -> list[torch.Tensor]:
        """The tensors the compiled code takes: the graph's tensor inputs less its module state."""
        return [a for i, a in enumerate(arguments) if isinstance(a, torch.Tensor) and i not in self.state]

    def _compile_supported_regions(self, program: ExportedProgram, tensors: Sequence[torch.Tensor],
                                   error: TorchImportError) -> fx.GraphModule:
        """``program`` with each region of supported ops compiled, the rest eager ATen."""
        regions = compile_supported_regions(program, tensors, self.options)
        if not self.warned_unsupported:
            self.warned_unsupported = True
            warnings.warn(f"{_unsupported_message(error, self.graph)}: they run in PyTorch eager mode, "
                          f"{regions.compiled_regions} region(s) of the graph around them are compiled",
                          TilecraftFallbackWarning, stacklevel=4)
        return regions

    def _fall_back(self, reason: str) -> None:
        self.fallback_reason = reason
        warnings.warn(f"{reason}; this graph runs in PyTorch eager mode", TilecraftFallbackWarning,
                      stacklevel=3)

    def __call__(self, *arguments: Any) -> Any:
        if torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in arguments):
            if not self._warned_autograd:
                self._warned_autograd = True
                warnings.warn("tilecraft compiles inference graphs; a call that needs gradients runs "
                              "in PyTorch eager mode (use torch.no_grad() or torch.inference_mode())",
                              TilecraftFallbackWarning, stacklevel=2)
            return self.graph(*arguments)
        compiled = self.compile_for(arguments)
        if compiled is None:
            return self.graph(*arguments)
        return compiled(*self._inputs(arguments))


class _SupportedOps(OperatorSupportBase):
    """A call with a handler whose tensors all have a dtype the runtime carries."""

    def is_node_supported(self, submodules: Any, node: fx.Node) -> bool:
        if node.op != "call_function" or op_name(node.target) not in ATEN_OPS:
            return False
        values = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
        tensors = [t for t in torch.utils._pytree.tree_leaves(values) if isinstance(t, torch.Tensor)]
        return all(t.dtype in TORCH_TO_NUMPY for t in tensors)


class _CompiledRegion(torch.nn.Module):
    """A fused region of the partitioned graph, replaced by its compiled code."""

    def __init__(self, compiled: CompiledTorchModule) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *tensors: torch.Tensor) -> Any:
        return self.compiled(*tensors)


def compile_supported_regions(program: ExportedProgram, tensors: Sequence[torch.Tensor],
                              options: dict[str, Any]) -> fx.GraphModule:
    """The program as an FX graph whose maximal regions of supported ATen ops are each
    compiled by tilecraft; unsupported ops stay eager ATen calls between them.

    Each region is exported on its own with the tensors it receives in a run on
    ``tensors`` (recorded by a pre-hook), so its compiled shapes are the ones the graph
    passes it. ``compiled_regions`` on the result counts them.
    """
    graph = program.module()
    partitioner = CapabilityBasedPartitioner(graph, _SupportedOps(), allows_single_node_partition=True,
                                             non_compute_ops=["operator.getitem", "aten.sym_size.int"])
    fused = partitioner.partition_and_fuse(prefix="tilecraft_region_")
    names = [name for name, _ in fused.named_children() if name.startswith("tilecraft_region_")]
    seen: dict[str, tuple] = {}
    hooks = [getattr(fused, name).register_forward_pre_hook(
        lambda _, args, name=name: seen.setdefault(name, args)) for name in names]
    try:
        with torch.no_grad():  # on copies: the graph may write its inputs (BatchNorm's statistics)
            fused(*[t.clone() for t in tensors])
    finally:
        for hook in hooks:
            hook.remove()
    compiled = 0
    for name in names:
        inputs = seen.get(name)
        if inputs is None or not all(isinstance(t, torch.Tensor) for t in inputs):
            continue  # never reached, or takes sizes: stays eager
        region = getattr(fused, name).eval()
        setattr(fused, name, _CompiledRegion(compile_exported(export(region, inputs), **options)))
        compiled += 1
    fused.compiled_regions = compiled
    return fused


def _model_location(graph: fx.GraphModule, location: str) -> str:
    """The model source line behind a line of the Dynamo graph's generated code (where
    ``torch.export`` of that graph says an op comes from)."""
    match = _GENERATED.fullmatch(location)
    line_map = getattr(graph, "_lineno_map", None)
    if match is None or not line_map:
        return location
    index = line_map.get(int(match.group(1)) - getattr(graph, "_prologue_start", 0))
    nodes = list(graph.graph.nodes)
    return describe_location(nodes[index]) if index is not None and index < len(nodes) else location


def _unsupported_message(error: TorchImportError, graph: fx.GraphModule) -> str:
    if error.problems:
        ops = sorted({op for _, op, _ in error.problems})
        sites = dict.fromkeys(f"{op} at {_model_location(graph, location)}"
                              for _, op, location in error.problems)
        where = "; ".join(list(sites)[:10])
        return f"tilecraft does not support the ATen op(s) {', '.join(ops)} ({where})"
    return f"tilecraft could not import the graph ({error})"


def tilecraft_backend(graph: fx.GraphModule, example_inputs: Sequence[Any],
                      options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The Dynamo backend: compile ``graph`` with tilecraft, eager where it cannot.

    ``options`` (``torch.compile(..., options={...})``) go to :func:`tilecraft.torch.compile`,
    e.g. ``{"target": "llvm -mcpu=znver4"}``. Compilation happens here for the example
    inputs when they are real tensors, so the warning about unsupported ops comes at
    ``torch.compile`` time, and again for each new input shape Dynamo lets through.
    """
    compiled = DynamoGraph(graph, dict(options or {}))
    real = all(not isinstance(a, torch.Tensor) or not isinstance(a, torch._subclasses.FakeTensor)
               for a in example_inputs)
    if real and all(isinstance(a, (torch.Tensor, int, float, bool)) for a in example_inputs):
        compiled.compile_for(list(example_inputs))
    return compiled
