"""Schedule templates: AutoTVM's ``@autotvm.template`` on tilecraft's TE-style schedule API.

    @tilecraft.template("tutorial/matmul")
    def matmul(N, L, M, dtype):
        A = placeholder((N, L), name="A"); B = placeholder((L, M), name="B")
        k = reduce_axis((0, L), "k")
        C = compute((N, M), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
        s = Schedule(C)
        y, x, k = s.get_loops(s.get_block("C"))
        cfg = tilecraft.tuning.get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_knob("vec", [0, 1])
        yo, yi = cfg["tile_y"].apply(s, C, y)
        ...
        return s, [A, B, C]

    task = tilecraft.tuning.task("tutorial/matmul", args=(512, 512, 512, "float32"))
    print(task.config_space)
    tilecraft.tuning.tune_template(task, tuner="xgb", trials=10, records="matmul.jsonl")
    with tilecraft.tuning.apply_history_best("matmul.jsonl"):
        s, tensors = matmul(512, 512, 512, "float32")     # the best config

Why the template reads its config from :func:`get_config` (AutoTVM's way) rather than an
argument: the template keeps the signature of the operator (``(N, L, M, dtype)``), so the
same call builds the default, a tuner's candidate or the best record, depending on the
context it runs in (task creation, measurement, :func:`apply_history_best`, none).

A config is stored as knob name -> index of the chosen candidate (records hold ints), so
the same tuners (``tuners.py``) and records (``schedule/records.py``) serve templates and the
model tuner: :class:`TemplateSpace` gives the tuners the interface of a
:class:`~tilecraft.schedule.space.ScheduleSpace` (knobs, size, point, validate, default,
random, neighbour, features). Index 0 of every knob is the default config; define_split
lists ``[extent, 1, ...]`` first, so the default is the unsplit loop nest.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import math
import os
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import ConfigSpaceError, KnobError, TemplateError
from ..pipelines.target import Target
from ..schedule.records import Record, best_records, canonical_target, load_records
from ..schedule.space import Config, Knob, SearchSpace, validate_config

_TEMPLATES: dict[str, Callable[..., Any]] = {}
_CURRENT: contextvars.ContextVar["ConfigEntity | None"] = contextvars.ContextVar(
    "tilecraft_template_config", default=None)
_HISTORY: contextvars.ContextVar["ApplyHistoryBest | None"] = contextvars.ContextVar(
    "tilecraft_template_history", default=None)
_ANNOTATIONS = ("none", "unroll", "vec", "parallel")


# -- what cfg[name] returns -------------------------------------------------------------------


@dataclass(frozen=True)
class SplitEntity:
    """A chosen split: the loop extents, outer to inner (AutoTVM's ``SplitEntity.size``)."""

    size: tuple[int, ...]

    def apply(self, sch: Any, op: Any, loop: Any) -> list[Any]:
        """Split ``loop`` of ``sch`` into ``len(size)`` loops (``op`` is kept for AutoTVM's
        signature ``cfg["tile_y"].apply(s, C, y)``; the loop knows its block)."""
        if len(self.size) == 1:
            return [loop]
        return sch.split(loop, factors=list(self.size))


@dataclass(frozen=True)
class OtherOptionEntity:
    """A chosen ``define_knob`` candidate: ``cfg["vec"].val``."""

    val: Any


@dataclass(frozen=True)
class ReorderEntity:
    """A chosen loop order: ``perm[i]`` is the index (in the defined axes) of the i-th loop."""

    perm: tuple[int, ...]

    def apply(self, sch: Any, op: Any, axes: Sequence[Any]) -> list[Any]:
        ordered = [axes[i] for i in self.perm]
        if list(self.perm) != sorted(self.perm):
            sch.reorder(*ordered)
        return ordered


@dataclass(frozen=True)
class AnnotateEntity:
    """A chosen annotation per axis: ``none``, ``unroll``, ``vec`` or ``parallel``."""

    anns: tuple[str, ...]

    def apply(self, sch: Any, op: Any, axes: Sequence[Any]) -> list[Any]:
        for axis, ann in zip(axes, self.anns):
            if ann == "unroll":
                sch.unroll(axis)
            elif ann == "vec":
                sch.vectorize(axis)
            elif ann == "parallel":
                sch.parallel(axis)
        return list(axes)


@dataclass(frozen=True)
class _KnobDef:
    """One defined knob: its kind, candidates (entities) and how it reads in print/records."""

    name: str
    kind: str  # split, knob, reorder, annotate
    candidates: tuple[Any, ...]

    def describe(self, index: int) -> str:
        entity = self.candidates[index]
        if self.kind == "split":
            return str(list(entity.size))
        if self.kind == "knob":
            return repr(entity.val)
        if self.kind == "reorder":
            return str(list(entity.perm))
        return str(list(entity.anns))


def _extent(axis: Any, what: str) -> int:
    if isinstance(axis, bool):
        raise ConfigSpaceError(f"{what}: expected a loop or a positive int extent, got {axis!r}")
    if isinstance(axis, int):
        extent = axis
    else:
        extent = getattr(axis, "extent", None)
    if not isinstance(extent, int) or extent < 1:
        raise ConfigSpaceError(f"{what}: expected a loop or a positive int extent, got {axis!r}")
    return extent


def _factorizations(extent: int, parts: int, allowed: Callable[[int], bool]) -> list[tuple[int, ...]]:
    """Ordered factorizations of ``extent`` into ``parts`` factors whose inner factors pass
    ``allowed``; the outermost factor absorbs the rest. Sorted so ``(extent, 1, ...)`` is first."""
    if parts == 1:
        return [(extent,)]
    found = []
    for inner in range(1, extent + 1):
        if extent % inner or not allowed(inner):
            continue
        for rest in _factorizations(extent // inner, parts - 1, allowed):
            found.append((*rest, inner))
    return sorted(found, key=lambda sizes: tuple(reversed(sizes)))


class ConfigEntity:
    """The ``cfg`` a template reads: defines knobs (first run) and hands out the chosen ones.

    While a task is created, ``space`` is being defined (``defining``): ``define_*`` adds a
    knob and ``cfg[name]`` answers the knob's first candidate. Afterwards ``define_*`` only
    checks that the knob exists, and ``cfg[name]`` answers the config's choice.
    """

    def __init__(self, space: "ConfigSpace", config: Mapping[str, int] | None = None,
                 *, defining: bool = False) -> None:
        self.space = space
        self.config = dict(config or {})
        self.defining = defining

    # -- definitions -----------------------------------------------------------------------
    def _define(self, name: str, kind: str, candidates: list[Any]) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigSpaceError(f"a knob name must be a non-empty string, got {name!r}")
        if not candidates:
            raise ConfigSpaceError(f"knob {name!r} has no candidates")
        if not self.defining:
            if name not in self.space.defs:
                raise ConfigSpaceError(f"knob {name!r} was not defined when the task was created "
                                       "(a template must define the same knobs on every run)")
            return
        if name in self.space.defs:
            raise ConfigSpaceError(f"knob {name!r} is defined twice")
        self.space.defs[name] = _KnobDef(name, kind, tuple(candidates))
        self.config[name] = 0

    def define_split(self, name: str, axis: Any, num_outputs: int = 2, *, policy: str = "factors",
                     max_factor: int | None = None,
                     filter: Callable[[SplitEntity], bool] | None = None) -> None:
        """Split ``axis`` (a loop, or an extent) into ``num_outputs`` loops; candidates are
        the exact factorizations (``policy="factors"``) or those whose inner factors are
        powers of two (``"power2"``), inner factors at most ``max_factor``."""
        if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
            raise ConfigSpaceError(f"define_split {name!r}: num_outputs must be a positive int, "
                                   f"got {num_outputs!r}")
        if policy not in ("factors", "power2"):
            raise ConfigSpaceError(f"define_split {name!r}: policy must be 'factors' or 'power2', "
                                   f"got {policy!r}")
        extent = _extent(axis, f"define_split {name!r}")
        limit = max_factor if max_factor is not None else extent

        def allowed(f: int) -> bool:
            return f <= limit and (policy == "factors" or f & (f - 1) == 0)

        candidates = [SplitEntity(sizes) for sizes in _factorizations(extent, num_outputs, allowed)]
        if filter is not None:
            candidates = [c for c in candidates if filter(c)]
        self._define(name, "split", candidates)

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        """A knob taking one of ``candidates`` (read as ``cfg[name].val``)."""
        self._define(name, "knob", [OtherOptionEntity(c) for c in list(candidates)])

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       candidate: Sequence[Sequence[int]] | None = None) -> None:
        """Orders of ``axes``: every permutation (``"all"``, at most 6 axes), the given order
        only (``"identity"``), or ``candidate``'s index lists (``"candidate"``)."""
        n = len(axes)
        if policy == "all":
            if n > 6:
                raise ConfigSpaceError(f"define_reorder {name!r}: {n} axes make {math.factorial(n)} "
                                       "orders; pass policy='candidate'")
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "candidate":
            perms = [tuple(p) for p in (candidate or [])]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ConfigSpaceError(f"define_reorder {name!r}: {list(p)} is not a "
                                           f"permutation of range({n})")
        else:
            raise ConfigSpaceError(f"define_reorder {name!r}: policy must be 'all', 'identity' "
                                   f"or 'candidate', got {policy!r}")
        self._define(name, "reorder", [ReorderEntity(p) for p in perms])

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str = "try_unroll",
                        candidate: Sequence[Sequence[str]] | None = None) -> None:
        """Annotations of ``axes``: ``"try_unroll"`` (each axis unrolled or not),
        ``"try_vec"`` (the last axis vectorized or not), ``"try_unroll_vec"`` (both),
        ``"candidate"`` (lists of ``none``/``unroll``/``vec``/``parallel``)."""
        n = len(axes)
        if policy == "candidate":
            choices = [tuple(c) for c in (candidate or [])]
            for c in choices:
                if len(c) != n or any(a not in _ANNOTATIONS for a in c):
                    raise ConfigSpaceError(f"define_annotate {name!r}: {list(c)} must name one of "
                                           f"{list(_ANNOTATIONS)} per axis")
        elif policy in ("try_unroll", "try_vec", "try_unroll_vec"):
            unroll = ("none", "unroll") if "unroll" in policy else ("none",)
            per_axis = [unroll] * max(n - 1, 0)
            if n:
                last = ("none", "vec") if "vec" in policy else unroll
                per_axis.append(last)
            choices = list(itertools.product(*per_axis))
        else:
            raise ConfigSpaceError(f"define_annotate {name!r}: unknown policy {policy!r}")
        self._define(name, "annotate", [AnnotateEntity(c) for c in choices])

    # -- choices ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        knob = self.space.defs.get(name)
        if knob is None:
            raise ConfigSpaceError(f"cfg[{name!r}]: the template never defined knob {name!r} "
                                   f"(defined: {sorted(self.space.defs)})")
        return knob.candidates[self.config.get(name, 0)]

    def __repr__(self) -> str:
        return ", ".join(f"{n}={d.describe(self.config.get(n, 0))}" for n, d in self.space.defs.items())


class ConfigSpace:
    """The knobs a template defined (AutoTVM's ``ConfigSpace``): printable, ``len()`` points."""

    def __init__(self) -> None:
        self.defs: dict[str, _KnobDef] = {}

    def __len__(self) -> int:
        return math.prod(len(d.candidates) for d in self.defs.values())

    def __str__(self) -> str:
        lines = [f"ConfigSpace (len={len(self)}, {len(self.defs)} knobs)"]
        for i, d in enumerate(self.defs.values()):
            shown = [d.describe(j) for j in range(len(d.candidates))]
            more = f" ... ({len(shown)} in all)" if len(shown) > 12 else ""
            lines.append(f"  {i:2d} {d.name}: {d.kind}, candidates: [{', '.join(shown[:12])}]{more}")
        return "\n".join(lines)


# -- the registry -----------------------------------------------------------------------------


def template(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a schedule template ``(args...) -> (schedule, tensors)`` under ``name``.

    Calling the decorated function builds it with the config of its context: a task's
    candidate, the best record of :func:`apply_history_best`, or else the default (every
    knob's first candidate)."""
    if not isinstance(name, str) or not name:
        raise TemplateError(f"a template name must be a non-empty string, got {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _TEMPLATES:
            raise TemplateError(f"template {name!r} is already registered "
                                f"(by {getattr(_TEMPLATES[name], '__qualname__', '?')})")

        @functools.wraps(fn)
        def dispatch(*args: Any) -> Any:
            if _CURRENT.get() is not None:
                return fn(*args)
            history = _HISTORY.get()
            target = history.target if history is not None else "llvm"
            made = task(name, args=args, target=target)
            config = history.lookup(made) if history is not None else None
            return made.instantiate(config)

        dispatch.template_name = name  # type: ignore[attr-defined]
        _TEMPLATES[name] = fn
        return dispatch

    return register


def get_config() -> ConfigEntity:
    """The ``cfg`` of the template being built (AutoTVM's ``autotvm.get_config()``)."""
    cfg = _CURRENT.get()
    if cfg is None:
        raise TemplateError("get_config() is called inside a @tilecraft.template function, "
                            "while tilecraft builds it")
    return cfg


@contextlib.contextmanager
def _using(cfg: ConfigEntity) -> Iterator[None]:
    token = _CURRENT.set(cfg)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _key_args(args: Sequence[Any]) -> list[Any]:
    return [a if isinstance(a, (int, float, str, bool)) or a is None else repr(a) for a in args]


class TemplateTask:
    """One template with fixed arguments on one target: what the tuners search."""

    def __init__(self, name: str, args: tuple[Any, ...], target: "str | Target",
                 flops: int = 0) -> None:
        self.name = name
        self.args = args
        self.target = canonical_target(target)
        self.fn = _TEMPLATES[name]
        self.config_space = ConfigSpace()
        cfg = ConfigEntity(self.config_space, defining=True)
        with _using(cfg):
            self.fn(*args)
        self.flops = flops
        self.key = f"template:{name}({', '.join(map(repr, _key_args(args)))})"
        self.space = TemplateSpace(self)

    def describe(self) -> dict[str, Any]:
        """The task as records store it (``key`` is what :func:`apply_history_best` matches)."""
        return {"key": self.key, "name": self.name, "kind": "template", "template": self.name,
                "args": _key_args(self.args), "flops": self.flops}

    def instantiate(self, config: Mapping[str, int] | None = None) -> Any:
        """The template's ``(schedule, tensors)`` with ``config`` (default: index 0 of each knob)."""
        config = self.space.validate(config) if config is not None else self.space.default()
        with _using(ConfigEntity(self.config_space, config)):
            return self.fn(*self.args)

    def __repr__(self) -> str:
        return f"<TemplateTask {self.key} on {self.target}: {len(self.config_space)} configs>"


def task(name: str, args: Sequence[Any] = (), target: "str | Target" = "llvm",
         flops: int = 0) -> TemplateTask:
    """A tunable task of template ``name`` with ``args`` (AutoTVM's ``autotvm.task.create``);
    its space is the knobs the template defines. ``flops`` (optional) gives GFLOPS in records."""
    if name not in _TEMPLATES:
        known = ", ".join(sorted(_TEMPLATES)) or "none"
        raise TemplateError(f"no template {name!r} is registered (registered: {known})")
    return TemplateTask(name, tuple(args), target, flops)


# -- the space the tuners search --------------------------------------------------------------


class TemplateSpace(SearchSpace):
    """A template task's config space, a :class:`~tilecraft.schedule.space.SearchSpace` for
    the tuners (every point is valid: a candidate the schedule rejects fails
    its build and is recorded so, as a bad point of a model space would)."""

    kind = "template"

    def __init__(self, task: TemplateTask) -> None:
        self.task = task
        self.defs = task.config_space.defs
        self.knobs: tuple[Knob, ...] = tuple(
            Knob(d.name, tuple(range(len(d.candidates))), d.kind) for d in self.defs.values())

    def default(self) -> Config:
        return {k.name: 0 for k in self.knobs}

    def validate(self, config: Mapping[str, object]) -> Config:
        """``config`` as a clean dict of candidate indexes, or :class:`KnobError`."""
        return validate_config(self.knobs, config, f"template {self.task.name}")

    def is_valid(self, config: Mapping[str, int]) -> bool:
        return True

    def random(self, rng: random.Random) -> Config:
        return {k.name: rng.choice(k.values) for k in self.knobs}

    def neighbour(self, config: Mapping[str, int], rng: random.Random) -> Config:
        movable = [k for k in self.knobs if len(k.values) > 1]
        if not movable:
            return dict(config)
        for _ in range(20):
            knob = rng.choice(movable)
            position = config[knob.name] + rng.choice((-1, 1))
            if 0 <= position < len(knob.values):
                return {**config, knob.name: position}
        return dict(config)

    def describe(self, config: Mapping[str, int]) -> str:
        """The config as the template reads it (``tile_y=[64, 8], vec=16``)."""
        return ", ".join(f"{n}={d.describe(config[n])}" for n, d in self.defs.items())

    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        return self.describe(config)

    def feature_names(self) -> list[str]:
        names = []
        for d in self.defs.values():
            width = len(d.candidates[0].size) if d.kind == "split" else 1
            names += [f"{d.name}.{i}" for i in range(width)]
        return names

    def features(self, config: Mapping[str, int]) -> list[float]:
        """Per knob: log2 of each split factor, a numeric knob's value (log2), else the index."""
        row: list[float] = []
        for name, d in self.defs.items():
            entity = d.candidates[config[name]]
            if d.kind == "split":
                row += [math.log2(f) for f in entity.size]
            elif d.kind == "knob" and isinstance(entity.val, (int, float)) and not isinstance(entity.val, bool):
                row.append(math.log2(1 + abs(float(entity.val))))
            else:
                row.append(float(config[name]))
        return row


# -- best records ---------------------------------------------------------------------------


class ApplyHistoryBest:
    """Context of :func:`apply_history_best`: the best record per template task key."""

    def __init__(self, records: "str | os.PathLike[str] | Sequence[Record]",
                 target: "str | Target" = "llvm") -> None:
        self.target = canonical_target(target)
        loaded = load_records(records, target=self.target) if isinstance(records, (str, os.PathLike)) \
            else [r for r in records if r.target == self.target]
        self.best = best_records(r for r in loaded if r.task.get("kind") == "template")

    def lookup(self, made: TemplateTask) -> Config | None:
        """The best config of ``made``, or ``None`` (the default) when none is recorded or the
        record no longer fits the template's knobs."""
        record = self.best.get(made.key)
        if record is None:
            return None
        try:
            return made.space.validate(record.config)
        except KnobError:
            return None


@contextlib.contextmanager
def apply_history_best(records: "str | os.PathLike[str] | Sequence[Record]",
                       target: "str | Target" = "llvm") -> Iterator[ApplyHistoryBest]:
    """Within the block, calling a template builds its best recorded config (TVM's
    ``autotvm.apply_history_best``); tasks without a record build the default."""
    context = ApplyHistoryBest(records, target)
    token = _HISTORY.set(context)
    try:
        yield context
    finally:
        _HISTORY.reset(token)
