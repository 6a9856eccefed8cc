"""Offload by pattern (BYOC): backends take the linalg ops they match and turn each into a
call of an extern function (pipelines/tensor/extern.py); everything else goes through the normal
pipeline.

A backend (UMA-style: a small class, registered with one call, or installed by another
package under the ``tilecraft.backends`` entry-point group) names the linalg ops it looks at
and, for each, answers one of four ways: ``None`` (declined: the op stays a compiled kernel
with the default schedule), the values replacing its results (MLIR it emitted for the
region, typically a call of its own extern), an :class:`ExternFunction` (called on the op's
inputs and accumulator), or a :class:`TransformSchedule` (the op stays in the compiler but
gets the backend's transform script instead of the default plan, fusion and tuning).

A backend may also take a matched op's epilogue with it (BYOC's composite patterns: a
matmul + bias + ReLU as one region): ``takes_epilogue`` is asked about each consumer in turn
(the only user of the region's result so far, in the same block), and ``lower_region`` answers
for the grown :class:`Region` as a whole. ``tilecraft-offload{backends=blas num-threads=4}``
runs the backends in order over the graph stage's output, before fusion groups are tagged:
the calls are no fusion group's anchor, so the epilogue ops a backend did not take (a GELU
after a BLAS matmul) stay compiled kernels after them, and no schedule or tuning task sees an
offloaded op. Each call carries ``tilecraft.offload =
"<backend>:<op>"``, so ``CompiledModule.ir("graph")`` shows which ops went where, and the
module's ``tilecraft.offload`` attribute counts them per backend (``offload_summary``).

The built-in backend ``blas`` (backends/blas.py) sends matmuls, batch matmuls and 1x1
convolutions to OpenBLAS's ``cblas_sgemm``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Mapping, Sequence, Union

from mlir import ir

from ...errors import BackendError
from ...runtime.extern import ExternFunction
from ..tensor.extern import emit_call
from ..ir_queries import defined_functions, defining_op, ops_where, users
# On an op a backend schedules itself: {backend, entry, script} (schedule/backend_schedule.py).
from ..loop_nest import BACKEND_SCHEDULE_ATTR
from ..passes import positive_int_option, register_pass

OFFLOAD_ATTR = "tilecraft.offload"
# On a call that also computes its op's epilogue: the epilogue ops' names, in order.
EPILOGUE_ATTR = "tilecraft.offload_epilogue"
# The summary's count of epilogue ops taken with their anchors (beside the per-op counts).
EPILOGUE_KEY = "epilogue ops"
# Built-in backends, imported (and so registered) when first named.
BUILTIN_BACKENDS = {"blas": ".backends.blas"}
# Backends other packages install: ``[project.entry-points."tilecraft.backends"]`` naming a
# Backend subclass or instance, loaded when the CLI or ``offload=`` first names it.
ENTRY_POINT_GROUP = "tilecraft.backends"


@dataclass(frozen=True)
class TransformSchedule:
    """A backend's own schedule for one matched op (TVM UMA's schedule hook).

    ``script`` is transform-dialect text defining ``transform.named_sequence @<entry>(%op:
    !transform.any_op {transform.consumed})`` (and whatever sequences it includes); the
    schedule stage applies it to the op in place of the default plan. The op is left out of
    fusion groups and tuning tasks: it is the backend's. Parsed when the backend returns it,
    so a malformed script is a :class:`BackendError` naming the backend.
    """

    script: str
    entry: str = "schedule"


# What ``Backend.lower`` may return besides ``None``.
Lowering = Union["list[ir.Value]", ExternFunction, TransformSchedule]


@dataclass(frozen=True)
class Region:
    """A matched op and the consumers its backend computes with it (a composite pattern).

    ``epilogue`` follows ``anchor`` in order, each op the only user of the one before's single
    result and in the same block; the region's results are ``last``'s. The partitioner grows a
    region one consumer at a time while :meth:`Backend.takes_epilogue` says yes, so a backend
    only ever judges one more op against what it already holds.
    """

    anchor: ir.Operation
    epilogue: tuple[ir.Operation, ...] = ()

    @property
    def last(self) -> ir.Operation:
        """The op whose results the region's lowering replaces."""
        return self.epilogue[-1] if self.epilogue else self.anchor

    @property
    def ops(self) -> tuple[ir.Operation, ...]:
        return (self.anchor, *self.epilogue)


class Backend:
    """An offload backend: subclass it, set ``name`` and ``patterns`` and define ``lower``,
    then :func:`register_backend` an instance; ``tilecraft.compile(..., offload=[name])`` and
    ``tilecraft compile --offload name`` use it.

    Attributes:
      name: what ``offload=`` names it by.
      patterns: the linalg op names (``"linalg.matmul"``) whose ops are offered to ``lower``.
    """

    name: str = ""
    patterns: tuple[str, ...] = ()

    def prepare(self) -> None:
        """Make the backend's externs callable (register them, build their libraries);
        called once per compile before the first ``lower``. Raise :class:`BackendError`
        when the backend cannot work here."""

    def lower(self, op: ir.Operation, module: ir.Operation, num_threads: int) -> "Lowering | None":
        """Say what becomes of ``op`` (an op named in ``patterns``); ``num_threads`` is the
        target's. One of:

        - ``None``: leave ``op`` to the compiler (not eligible: dynamic shapes, another
          element type, too small to gain);
        - a list of values replacing ``op``'s results, computed by IR emitted at the current
          insertion point (before ``op``), typically with
          :func:`tilecraft.pipelines.tensor.extern.emit_call` (scalar arguments such as strides are
          ``arith.constant`` values emitted here);
        - an :class:`ExternFunction`: called on ``op``'s inputs, then its accumulators (the
          ``outs`` operands), with fresh buffers for its results;
        - a :class:`TransformSchedule`: ``op`` is compiled with the backend's schedule."""
        raise NotImplementedError

    def takes_epilogue(self, region: Region, consumer: ir.Operation) -> bool:
        """Whether ``consumer`` joins ``region`` (it is the only user of the region's result,
        in the same block): override with the backend's composite patterns, e.g. a bias add
        then a ReLU after a matmul. The default takes nothing, so ``lower`` sees single ops."""
        return False

    def lower_region(self, region: Region, module: ir.Operation, num_threads: int) -> "list[ir.Value] | None":
        """The values replacing the results of ``region.last``, for a region with an epilogue,
        computed by IR emitted at the current insertion point (before ``region.last``, where
        every operand of the region is defined). ``None`` declines the epilogue: ``lower`` is
        then asked about the anchor alone. Override it together with ``takes_epilogue``."""
        raise BackendError(f"backend {self.name!r} takes epilogues (takes_epilogue) but does not "
                           "define lower_region to lower them")


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Make ``backend`` available by its name (a later registration under the same name
    replaces it)."""
    if not backend.name or not backend.name.isidentifier():
        raise BackendError(f"a backend needs a name that is an identifier, got {backend.name!r}")
    if not backend.patterns:
        raise BackendError(f"backend {backend.name!r} declares no patterns")
    _BACKENDS[backend.name] = backend
    return backend


def backend_named(name: str) -> Backend:
    """The registered backend ``name`` (a built-in one is loaded on first use), or
    :class:`BackendError` listing the known ones."""
    if name not in _BACKENDS and name in BUILTIN_BACKENDS:
        importlib.import_module(BUILTIN_BACKENDS[name], __package__)
    if name not in _BACKENDS:
        _load_installed(name)
    try:
        return _BACKENDS[name]
    except KeyError:
        installed = {e.name for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
        known = ", ".join(sorted(set(_BACKENDS) | set(BUILTIN_BACKENDS) | installed))
        raise BackendError(f"unknown offload backend {name!r}; known backends: {known}") from None


def _load_installed(name: str) -> None:
    """Register the backend an installed package declares under ``name`` in the
    ``tilecraft.backends`` entry-point group (a Backend subclass or instance), if any."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            loaded = entry.load()
            backend = loaded() if isinstance(loaded, type) else loaded
        except Exception as error:  # the plugin's own import failure, whatever it is
            raise BackendError(f"backend {name!r} from entry point {entry.value!r} failed to load: "
                               f"{type(error).__name__}: {error}") from error
        if not isinstance(backend, Backend):
            raise BackendError(f"entry point {entry.value!r} for backend {name!r} is not a "
                               f"tilecraft.Backend (got {type(backend).__name__})")
        if backend.name != name:
            raise BackendError(f"entry point {name!r} names a backend called {backend.name!r}")
        register_backend(backend)
        return


def offload_summary(module: ir.Operation) -> dict[str, dict[str, int]]:
    """Per backend, how many ops of each kind it took, and how many it declined
    (``"declined"``), from the module's ``tilecraft.offload`` attribute."""
    if OFFLOAD_ATTR not in module.attributes:
        return {}
    summary: dict[str, dict[str, int]] = {}
    for backend in ir.DictAttr(module.attributes[OFFLOAD_ATTR]):
        counts = ir.DictAttr(backend.attr)
        summary[backend.name] = {c.name: ir.IntegerAttr(c.attr).value for c in counts}
    return summary


def summary_line(backend: str, counts: Mapping[str, int]) -> str:
    """``offload blas: 5 ops (linalg.matmul 4, linalg.batch_matmul 1) with 6 epilogue ops,
    2 left to the compiler``."""
    taken = {op: n for op, n in counts.items() if op not in ("declined", EPILOGUE_KEY)}
    detail = ", ".join(f"{op} {n}" for op, n in sorted(taken.items()))
    line = f"offload {backend}: {sum(taken.values())} ops" + (f" ({detail})" if detail else "")
    if counts.get(EPILOGUE_KEY):
        line += f" with {counts[EPILOGUE_KEY]} epilogue ops"
    return line + f", {counts.get('declined', 0)} left to the compiler"


def _record(module: ir.Operation, summary: Mapping[str, Mapping[str, int]]) -> None:
    i64 = ir.IntegerType.get_signless(64)
    module.attributes[OFFLOAD_ATTR] = ir.DictAttr.get({
        backend: ir.DictAttr.get({op: ir.IntegerAttr.get(i64, n) for op, n in counts.items()})
        for backend, counts in summary.items()})


def offload(module: ir.Operation, backends: Sequence[str], num_threads: int) -> dict[str, dict[str, int]]:
    """Run ``backends`` in order over ``module``; returns (and records) what each took."""
    summary = offload_summary(module)
    for name in backends:
        backend = backend_named(name)
        backend.prepare()
        counts = summary.setdefault(name, {"declined": 0})
        for function in defined_functions(module):
            matched = ops_where(function, lambda op: op.name in backend.patterns)
            # An op taken into an earlier region's epilogue is erased: it must not be read
            # again (an erased op's name reads freed memory), so it is skipped by position.
            position = {op: i for i, op in enumerate(matched)}
            erased: set[int] = set()
            for index, op in enumerate(matched):
                if index in erased:
                    continue
                region = _lower_one(backend, op, module, num_threads, counts)
                if region is not None:
                    erased.update(position[o] for o in region.epilogue if o in position)
                    _erase_region(region)
    _record(module, summary)
    return summary


def _grow(backend: Backend, op: ir.Operation) -> Region:
    """``op`` with the chain of consumers ``backend`` takes with it."""
    region = Region(op)
    while len(region.last.results) == 1:
        consumers = users(region.last.results[0])
        if len(consumers) != 1 or consumers[0].block != op.block:
            break
        if not backend.takes_epilogue(region, consumers[0]):
            break
        region = Region(op, (*region.epilogue, consumers[0]))
    return region


def _lower_one(backend: Backend, op: ir.Operation, module: ir.Operation, num_threads: int,
               counts: dict[str, int]) -> "Region | None":
    """Ask ``backend`` about ``op`` (and the epilogue it takes) and replace the uses of what
    it answers for; returns that region, still in the IR for the caller to erase (after
    noting which matched ops it holds), or None when the backend declined or scheduled ``op``."""
    name = backend.name
    calls_before = _calls_in(op.block)
    region, values = _grow(backend, op), None
    if region.epilogue:
        with ir.InsertionPoint(region.last), region.last.location:
            answer = backend.lower_region(region, module, num_threads)
            if answer is not None:
                values = _checked_values(region.last, name, answer)
    if values is None:
        region = Region(op)
        with ir.InsertionPoint(op), op.location:
            lowering = backend.lower(op, module, num_threads)
            if lowering is None:
                counts["declined"] += 1
                return None
            if isinstance(lowering, TransformSchedule):
                _attach_schedule(op, name, lowering)
                key = f"{op.name} (scheduled)"
                counts[key] = counts.get(key, 0) + 1
                return None
            values = _lowered_values(op, name, lowering, module)
    for old, new in zip(region.last.results, values):
        old.replace_all_uses_with(new)
    for call in _calls_in(op.block):  # tag the new call(s) with where the region went
        if call not in calls_before:
            call.attributes[OFFLOAD_ATTR] = ir.StringAttr.get(f"{name}:{op.name}")
            if region.epilogue:
                call.attributes[EPILOGUE_ATTR] = ir.StringAttr.get(
                    ",".join(o.name for o in region.epilogue))
    counts[op.name] = counts.get(op.name, 0) + 1
    if region.epilogue:
        counts[EPILOGUE_KEY] = counts.get(EPILOGUE_KEY, 0) + len(region.epilogue)
    return region


def _erase_region(region: Region) -> None:
    """Erase the replaced ``region`` (last op first) and the producers only it used."""
    inside = {result for o in region.ops for result in o.results}  # gone with the region
    operands = [v for o in region.ops for v in o.operands if v not in inside]
    for done in reversed(region.ops):
        done.erase()
    _erase_dead(operands)


def _lowered_values(op: ir.Operation, backend: str, lowering: "Lowering",
                    module: ir.Operation) -> list[ir.Value]:
    """The values replacing ``op``'s results for what ``backend.lower`` returned."""
    if isinstance(lowering, ExternFunction):
        # Destination-passing style: a linalg op's accumulators are its last operands.
        return emit_call(module, lowering, list(op.operands), [r.type for r in op.results])
    return _checked_values(op, backend, lowering)


def _checked_values(op: ir.Operation, backend: str, answer: object) -> list[ir.Value]:
    """``answer`` as the values replacing ``op``'s results, or :class:`BackendError`."""
    values = list(answer) if isinstance(answer, (list, tuple)) else None
    if (values is None or len(values) != len(op.results)
            or not all(isinstance(v, ir.Value) for v in values)):
        raise BackendError(f"backend {backend!r} replaced {op.name} ({len(op.results)} result(s)) "
                           f"with {answer!r}: return one ir.Value per result, an extern "
                           "function, a TransformSchedule or None")
    for old, new in zip(op.results, values):
        if old.type != new.type:
            raise BackendError(f"backend {backend!r} replaced a {old.type} result of {op.name} "
                               f"with a {new.type}")
    return values


def _attach_schedule(op: ir.Operation, backend: str, schedule: TransformSchedule) -> None:
    """Mark ``op`` as scheduled by ``backend``; the script must parse and define its entry."""
    with op.context:
        backend_transform_module(backend, schedule.script, schedule.entry, tag=0)
    op.attributes[BACKEND_SCHEDULE_ATTR] = ir.DictAttr.get({
        "backend": ir.StringAttr.get(backend),
        "entry": ir.StringAttr.get(schedule.entry),
        "script": ir.StringAttr.get(schedule.script)})


BACKEND_OP_TAG = "tilecraft.backend_op"
BACKEND_ROOT_SEQUENCE = "__tilecraft_backend_root"


def backend_transform_module(backend: str, script: str, entry: str, tag: int) -> ir.Module:
    """``script`` with a root sequence that finds the op tagged ``tilecraft.backend_op =
    tag`` and includes ``@entry`` on it; :class:`BackendError` naming ``backend`` when the
    script does not parse or lacks the entry. Call with a context active."""
    if not entry.isidentifier():
        raise BackendError(f"backend {backend!r}: schedule entry {entry!r} is not an identifier")
    any_op = "!transform.any_op"
    text = (f"module attributes {{transform.with_named_sequence}} {{\n{script}\n"
            f"transform.named_sequence @{BACKEND_ROOT_SEQUENCE}(%root: {any_op} {{transform.readonly}}) {{\n"
            f'  %op = transform.structured.match attributes{{"{BACKEND_OP_TAG}" = {tag} : i64}} in %root'
            f" : ({any_op}) -> {any_op}\n"
            f"  transform.include @{entry} failures(propagate) (%op) : ({any_op}) -> ()\n"
            f"  transform.yield\n}}\n}}")
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as error:
        raise BackendError(f"backend {backend!r}: its transform schedule does not parse or has no "
                           f"@{entry}(%op: !transform.any_op): {error}") from None


# Ops a replaced op's operands may come from that are dead once it is gone (its zero-filled
# accumulator): erased here, since the fusion analysis expects no dead linalg ops.
_DEAD_WHEN_UNUSED = frozenset({"linalg.fill", "tensor.empty", "arith.constant"})


def _erase_dead(values: Sequence[ir.Value]) -> None:
    stack = list(values)
    while stack:
        producer = defining_op(stack.pop())
        if (producer is None or producer.name not in _DEAD_WHEN_UNUSED
                or any(True for result in producer.results for _ in result.uses)):
            continue
        stack.extend(producer.operands)
        producer.erase()


def _calls_in(block: ir.Block) -> list[ir.Operation]:
    return [o.operation for o in block.operations if o.operation.name == "func.call"]


def offload_element(backends: Sequence[str], num_threads: int) -> str:
    """The pass element offloading to ``backends`` for a target of ``num_threads``."""
    return f"tilecraft-offload{{backends={','.join(backends)} num-threads={num_threads}}}"


@register_pass(
    "tilecraft-offload",
    "Offload the linalg ops that backends match to calls of their extern functions",
    options={"backends": "comma-separated backend names, in order (e.g. blas)",
             "num-threads": "the target's thread count, handed to the backends"},
)
def offload_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    backends = [b for b in options.get("backends", "").split(",") if b]
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    offload(module, backends, threads)
