"""``torch.export`` of an ``nn.Module`` and the import of the exported program into MLIR."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

import torch
from mlir import ir
from torch.export import ExportedProgram

from ...errors import TorchImportError
from .importer import import_program, op_name
from .ops import ATEN_OPS
from .ops import random as random_ops
from ...errors import OptionError

# Rounds of torch's own decompositions after the core ATen table (a decomposition may leave
# another op without a handler that has one in turn).
_DECOMPOSITION_ROUNDS = 3

# The composite ops torch.export may keep, by the dispatcher's registrations they came from.
_CIA_CACHE: dict[Any, set[Any]] = {}
_CIA_LOCK = threading.RLock()


# Layers whose training mode only means "draw at random", which compiled code does as eager
# does (frontend/torch/ops/random.py): a model in eval mode with these in train mode (Monte
# Carlo dropout) compiles.
_RANDOM_IN_TRAINING = (torch.nn.modules.dropout._DropoutNd, torch.nn.RReLU)


def _training_submodules(module: torch.nn.Module) -> list[str]:
    return [name or type(module).__name__ for name, m in module.named_modules()
            if m.training and not isinstance(m, _RANDOM_IN_TRAINING)]


_TRANSFORMER = torch.nn.modules.transformer
_PATCH_LOCK = threading.Lock()


def _causal_only_when_told(mask: "torch.Tensor | None", is_causal: "bool | None" = None,
                           size: "int | None" = None) -> bool:
    """``nn.Transformer*``'s causal-mask detection without looking at the mask's values."""
    return is_causal is True


@contextlib.contextmanager
def _no_causal_mask_detection() -> Iterator[None]:
    """During export, ``nn.TransformerEncoder``/``Decoder`` do not compare a given mask with a
    causal one. Why: the comparison (``bool((mask == causal).all())``) branches on tensor
    values, which ``torch.export`` cannot trace ("could not guard on data-dependent
    expression"), so every model built from PyTorch's own transformer layers with a mask was
    refused. The detection only lets eager pick a causal kernel in place of the mask; the
    mask is still applied, so the numbers are the same."""
    with _PATCH_LOCK:
        detect = _TRANSFORMER._detect_is_causal_mask
        _TRANSFORMER._detect_is_causal_mask = _causal_only_when_told
        try:
            yield
        finally:
            _TRANSFORMER._detect_is_causal_mask = detect


def export(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor,
    dynamic_shapes: Any = None,
) -> ExportedProgram:
    """``torch.export`` of ``module`` on ``example_inputs``, decomposed to core ATen ops.

    Raises ``TorchImportError`` for a module in training mode (its batch-norm behaviour, or
    its own code reading ``self.training``, would not be what an inference compiler
    computes; dropout and ``RReLU`` layers may be in training mode: they draw as eager does)
    and for anything
    ``torch.export`` rejects, with PyTorch's explanation chained.
    """
    if not isinstance(module, torch.nn.Module):
        raise OptionError(f"expected a torch.nn.Module, got {type(module).__name__}")
    training = _training_submodules(module)
    if training:
        shown = ", ".join(training[:5]) + (", ..." if len(training) > 5 else "")
        raise TorchImportError(
            f"the module is in training mode ({shown}): tilecraft compiles for inference; "
            "call module.eval() first")
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    try:
        with _no_causal_mask_detection():
            program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
        return decompose(program)
    except (torch._dynamo.exc.UserError, torch._dynamo.exc.Unsupported, RuntimeError, TypeError,
            ValueError, AssertionError, IndexError) as error:  # IndexError: a dim out of range
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TorchImportError(f"torch.export could not trace the module: {first_line}") from error


def decompose(program: ExportedProgram) -> ExportedProgram:
    """``program`` decomposed to the core ATen ops, then further where the importer has no
    handler (what :func:`export` does after ``torch.export.export``)."""
    with _cached_composite_ops(), _random_ops_kept():
        return _decompose_unhandled(program.run_decompositions(_core_decompositions()))


@contextlib.contextmanager
def _random_ops_kept() -> Iterator[None]:
    """Within: the dead-code elimination of torch's tracing keeps a random op whose result
    is unused. Why: its draw still advances the generator in eager, so dropping it would
    shift every later draw (inductor's ``fallback_random`` keeps them for the same reason;
    without it, FX treats random ops as pure while tracing)."""
    from torch._inductor import config as inductor_config

    with inductor_config.patch(fallback_random=True):
        yield


# Recurrent layers the importer keeps whole (ops/recurrent.py); their packed-sequence
# overloads (``.data``) are decomposed as before.
_RECURRENT_OPS = (torch.ops.aten.lstm.input, torch.ops.aten.gru.input, torch.ops.aten.rnn_tanh.input,
                  torch.ops.aten.rnn_relu.input)


def _core_decompositions() -> Any:
    """torch's core ATen table without the random ops the importer keeps whole
    (frontend/torch/ops/random.py): a decomposition such as ``bernoulli`` -> ``rand_like(p) < p``
    draws another stream than the kernel eager runs, so seeds would no longer match eager;
    without ``linear``, imported as the ONNX exporter writes it (ops/nn.py says why); and
    without the recurrent layers, imported as one time loop each instead of one cell per
    step (ops/recurrent.py says why)."""
    table = torch.export.default_decompositions()
    for target in (*random_ops.overloads(), torch.ops.aten.linear.default, *_RECURRENT_OPS):
        if target in table:
            table.pop(target)
    return table


@contextlib.contextmanager
def _cached_composite_ops() -> Iterator[None]:
    """Within: torch's list of the composite (CompositeImplicitAutograd) ops an export may
    keep is computed once per set of registered ops, not twice per ``run_decompositions``.

    Why: torch rebuilds that list from the dispatcher on every call (it walks every op
    namespace, materializing every composite op for each), the largest part of a small
    model's compile (docs/performance.md).
    The key is the dispatcher's list of composite registrations, so an op registered later
    (``torch.library``) makes a new entry: the cached list is the one torch would compute.
    A torch without these internals is left as it is.
    """
    from torch._export import utils as export_utils
    from torch.export import decomp_utils, exported_program

    modules = [m for m in (exported_program, decomp_utils) if hasattr(m, "_collect_all_valid_cia_ops")]
    if not modules or not hasattr(torch._C, "_dispatch_get_registrations_for_dispatch_key"):
        yield
        return
    compute = export_utils._collect_all_valid_cia_ops

    def cached() -> set[Any]:
        key = (tuple(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")),
               tuple(torch.ops._dir))
        if key not in _CIA_CACHE:
            _CIA_CACHE.clear()
            _CIA_CACHE[key] = compute()
        return set(_CIA_CACHE[key])  # callers must not modify torch's list; a copy is safe

    with _CIA_LOCK:
        saved = [(m, m._collect_all_valid_cia_ops) for m in modules]
        for module, _ in saved:
            module._collect_all_valid_cia_ops = cached
        try:
            yield
        finally:
            for module, original in saved:
                module._collect_all_valid_cia_ops = original


def _unhandled_decompositions(program: ExportedProgram) -> dict[Any, Any]:
    """torch's decompositions (``torch._decomp``) of the ops in ``program`` no handler covers."""
    from torch._decomp import decomposition_table

    targets = {node.target for node in program.graph.nodes if node.op == "call_function"}
    return {target: decomposition_table[target] for target in targets
            if isinstance(target, torch._ops.OpOverload) and op_name(target) not in ATEN_OPS
            and target in decomposition_table}


def _decompose_unhandled(program: ExportedProgram) -> ExportedProgram:
    """``program`` with the ops the importer has no handler for decomposed by torch's own
    table where it has one (``upsample_bilinear2d.vec``, ``grid_sampler_2d``, ``dist``,
    ``native_dropout``...). Why not the whole table up front: the handlers' fused forms of
    the ops they cover are faster than the decompositions, and the core ATen table already
    ran; this only reaches what would otherwise be refused."""
    for _ in range(_DECOMPOSITION_ROUNDS):
        table = _unhandled_decompositions(program)
        if not table:
            break
        try:
            program = program.run_decompositions(table)
        except Exception:  # noqa: BLE001 - a decomposition that cannot trace: keep the op, refused by name
            break
    return program


def import_exported(program: ExportedProgram, context: ir.Context | None = None) -> ir.Module:
    """The MLIR module (one public ``@main``) of an exported, decomposed program."""
    return import_program(program, ATEN_OPS, context)
