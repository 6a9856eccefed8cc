"""The ``torch.compile`` backend: ``torch.compile(model, backend="tilecraft")``.

Registered through the ``torch_dynamo_backends`` entry point (pyproject.toml), so PyTorch
finds it by name without the caller importing tilecraft.

Dynamo hands the backend one FX graph per captured region, with example inputs. The backend
exports that graph (``torch.export``, core ATen decomposition), imports it with the same op
table as :func:`tilecraft.torch.compile`, and compiles it once per set of input shapes and
integer arguments: Dynamo's guards decide when a region is re-entered or recompiled, and
whatever shapes reach this callable are served correctly, so a dynamic batch simply compiles
one more specialization on first sight.

Never a wrong answer, never a crash: a graph with ATen ops tilecraft does not cover runs
eagerly, after one warning listing the ops and where the model uses them; so does a graph
whose compilation fails for another reason (with the reason), and any call that needs
autograd (the compiled code computes no gradients).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Callable, Sequence

import torch
from torch import fx

from ...errors import TilecraftError, TorchImportError
from .compiler import CompiledTorchModule, compile as compile_module
from .importer import describe_location

_GENERATED = re.compile(r"<eval_with_key>\.\d+:(\d+)")


class TilecraftFallbackWarning(RuntimeWarning):
    """A graph (or a call) runs in PyTorch eager mode instead of tilecraft's code."""


class _WithConstants(torch.nn.Module):
    """The Dynamo graph with its non-tensor arguments (ints from symbolic sizes) bound, so
    ``torch.export`` sees tensors only; one instance per specialization."""

    def __init__(self, graph: fx.GraphModule, arguments: Sequence[Any]) -> None:
        super().__init__()
        self.graph_module = graph
        self.arguments = list(arguments)

    def forward(self, *tensors: torch.Tensor) -> Any:
        supplied = iter(tensors)
        arguments = [next(supplied) if isinstance(a, torch.Tensor) else a for a in self.arguments]
        return self.graph_module(*arguments)


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
        self.compiled: dict[tuple, CompiledTorchModule] = {}
        self.fallback_reason: str | None = None
        self._warned_autograd = False

    def compile_for(self, arguments: Sequence[Any]) -> CompiledTorchModule | None:
        """The compiled code for these arguments' shapes, compiling on first sight; ``None``
        (after one warning) when the graph must run eagerly."""
        if self.fallback_reason is not None:
            return None
        key = _key(arguments)
        if key not in self.compiled:
            module = _WithConstants(self.graph, arguments).eval()
            tensors = tuple(a for a in arguments if isinstance(a, torch.Tensor))
            try:
                self.compiled[key] = compile_module(module, tensors, **self.options)
            except TorchImportError as error:
                self._fall_back(_unsupported_message(error, self.graph))
                return None
            except (TilecraftError, NotImplementedError, ValueError, TypeError) as error:
                self._fall_back(f"tilecraft could not compile the graph ({type(error).__name__}: "
                                f"{str(error).splitlines()[0] if str(error) else ''})")
                return None
        return self.compiled[key]

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
        return compiled(*[a for a in arguments if isinstance(a, torch.Tensor)])


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
