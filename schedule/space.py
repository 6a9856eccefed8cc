"""Schedule spaces: for each kernel class, the knobs a TVM user knows, on one task.

A point of a space (a *config*: knob name -> int) becomes an
:class:`~tilecraft.schedule.plan.OpSchedule`, which the default schedule's script writer
(``schedule/plan.py``) renders as a ``transform.named_sequence``: there is one renderer,
and the default schedule is :meth:`ScheduleSpace.default`, the point whose plan equals
``plan_default_schedule``'s. Knobs by class:

- ``matmul`` (matmul, batch matmul, any contraction): thread tiles of M and N
  (``par_m``/``par_n``, 0 = no ``scf.forall``), the K cache block (``cache_k``, 0 = none),
  register tiles (``reg_m`` x ``reg_n`` accumulators, kept in registers across the reduction
  loop by ``@cleanup``'s hoisting), the reduction step (``step_k``, unrolled into
  ``step_k`` outer products) and array packing of B (``pack_b``: each ``cache_k x reg_n``
  panel of B copied to a contiguous buffer before the M loop reuses it) or of A (``pack_a``:
  each ``reg_m x cache_k`` sliver, before the N loop reuses it; the default packs A where
  its sliver fits L1d);
- ``conv2d`` / ``depthwise_conv2d`` / ``pooling``: the thread tile of the outer output dim
  (``par``), register tiles of output channels/width (``reg_oc``, ``reg_c``, ``reg_ow``),
  the input-channel cache block and step (``cache_ic``, ``step_ic``); always decomposed to 1-D;
- ``elementwise`` / ``reduction``: the thread tile of the outer parallel dim (``par``), the
  innermost vector tile (``vec``) and the tile of the next loop out (``reg_outer``).

Every tile divides its loop (tiles stay static, so they vectorize), except the peeled ones
(a convolution's column tile, a matmul's column tile where no vector multiple divides N: the
partial last tile is peeled, as the default plan peels it); configs breaking a rule are
*invalid* and never measured (:meth:`ScheduleSpace.is_valid`).

The bf16 and int8 dot-product kernels of a reduced-precision build are not scheduled by a
script: :class:`KernelSpace` searches the parameters their builders take (register tile,
task rows; pipelines/tensor/register_tiles.py's ``KernelConfig``).
"""

from __future__ import annotations

import abc
import math
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

from mlir import ir

from ..errors import KnobError, PipelineError
from ..pipelines.graph.fusion import mark_groups
from ..pipelines.loop_nest import LoopNest, analyze_loop_nests
from ..pipelines.target import Target
from ..pipelines.tensor.bf16_matmul import VDPBF16PS
from ..pipelines.tensor.int8_matmul import VPDPBUSD
from ..pipelines.tensor.register_tiles import ACCUMULATORS, MAX_ROWS, MAX_VECTORS, KernelConfig
from .group import find_fusion_units
from .conv_plan import channels_outer, conv_channel_dim, depthwise_window_dim
from .matmul_plan import column_loop, weight_panel_dims
from .op_schedule import OpSchedule, vector_registers
from .plan import generic_thread_dim, generic_vector_dim, plan_default_schedule, transposed_read_dim
from .script import render_op_sequence
from .task import Task

Config = dict[str, int]


@dataclass(frozen=True)
class Knob:
    """One tunable parameter: its name, the values it may take, and what it controls."""

    name: str
    values: tuple[int, ...]
    doc: str


def _divisors(n: int, candidates: "list[int] | range", *, include: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Sorted candidates (and ``include``) that divide ``n``; 0 is kept as 'untiled'."""
    chosen = {c for c in (*candidates, *include) if c == 0 or (0 < c <= n and n % c == 0)}
    return tuple(sorted(chosen))


def _powers(limit: int) -> list[int]:
    return [1 << i for i in range(limit.bit_length())]


def validate_config(knobs: Sequence[Knob], config: Mapping[str, object], owner: str) -> Config:
    """``config`` as a clean dict over ``knobs``, or :class:`KnobError` naming the offending
    knob (``owner`` says whose knobs they are): every space's, CPU, GPU or template, check."""
    if not isinstance(config, Mapping):
        raise KnobError(f"a config must be a mapping knob -> int, got {type(config).__name__}")
    names = [k.name for k in knobs]
    unknown = sorted(set(config) - set(names))
    missing = [n for n in names if n not in config]
    if unknown or missing:
        raise KnobError(f"{owner} has knobs {names}; unknown {unknown}, missing {missing}")
    for knob in knobs:
        value = config[knob.name]
        if isinstance(value, bool) or not isinstance(value, int) or value not in knob.values:
            raise KnobError(f"knob {knob.name}={value!r} of {owner}: expected one of {list(knob.values)}")
    return {n: int(config[n]) for n in names}  # type: ignore[arg-type]


def knob_point(knobs: Sequence[Knob], index: int) -> Config:
    """The config at ``index`` of the product of ``knobs``' values, in mixed radix (the last
    knob varies fastest): how every schedule space, CPU or GPU, enumerates its points."""
    config: Config = {}
    for knob in reversed(knobs):
        index, digit = divmod(index, len(knob.values))
        config[knob.name] = knob.values[digit]
    return {k.name: config[k.name] for k in knobs}


class SearchSpace(abc.ABC):
    """What a search strategy walks: knobs, their valid points, and each point's script.

    The interface every space shares (this module's CPU spaces, the GPU space of
    ``targets/cuda/space.py``, the template space of ``tuning/templates.py``, the generated
    sketches of ``schedule/sketch.py``); a space generator (``tuning/roles.py``) makes one per
    task. Guarantees: :meth:`default` is the schedule the compiler uses without records;
    points are enumerated in mixed radix over :attr:`knobs` (:meth:`point`, :meth:`index`);
    :meth:`random` and :meth:`neighbour` return valid points; :meth:`validate` raises
    :class:`KnobError` naming a bad knob; :meth:`script` renders a point (stored in records).
    """

    kind = "generic"
    knobs: tuple[Knob, ...]

    @abc.abstractmethod
    def default(self) -> Config:
        """The point of the schedule the compiler uses without records."""

    @abc.abstractmethod
    def validate(self, config: Mapping[str, object]) -> Config:
        """``config`` as a clean dict, or :class:`KnobError` naming the offending knob."""

    @abc.abstractmethod
    def is_valid(self, config: Mapping[str, int]) -> bool:
        """Whether ``config`` is worth measuring (invalid points are never proposed)."""

    @abc.abstractmethod
    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        """The config's schedule as text (a transform script, or the template's choices)."""

    @property
    def size(self) -> int:
        return math.prod(len(k.values) for k in self.knobs)

    def point(self, index: int) -> Config:
        """The config at ``index`` in mixed radix (the last knob varies fastest)."""
        return knob_point(self.knobs, index)

    def index(self, config: Mapping[str, int]) -> int:
        index = 0
        for knob in self.knobs:
            index = index * len(knob.values) + knob.values.index(config[knob.name])
        return index

    def random(self, rng: random.Random) -> Config:
        """A uniformly drawn valid config (rejection sampling; the default if none is found)."""
        for _ in range(1000):
            config = {k.name: rng.choice(k.values) for k in self.knobs}
            if self.is_valid(config):
                return config
        return self.default()

    def neighbour(self, config: Mapping[str, int], rng: random.Random) -> Config:
        """``config`` with one knob moved to an adjacent value (simulated annealing's step)."""
        for _ in range(100):
            knob = rng.choice([k for k in self.knobs if len(k.values) > 1] or list(self.knobs))
            position = knob.values.index(config[knob.name]) + rng.choice((-1, 1))
            if 0 <= position < len(knob.values):
                moved = {**config, knob.name: knob.values[position]}
                if self.is_valid(moved):
                    return moved
        return dict(config)

    def feature_names(self) -> list[str]:
        return [f"knob.{k.name}" for k in self.knobs]

    def features(self, config: Mapping[str, int]) -> list[float]:
        """The cost model's row for ``config``: knob values (log2)."""
        return [math.log2(1 + abs(config[k.name])) for k in self.knobs]


class ScheduleSpace(SearchSpace):
    """The knobs of one task's kernel class and how a config becomes a plan.

    Built from the task's loop nest and the target (vector lanes, threads). Subclasses define
    :meth:`_knobs`, :meth:`plan` and :meth:`_derived_features`.
    """

    kind = "generic"

    def __init__(self, task: Task, nest: LoopNest, target: Target) -> None:
        self.task = task
        self.nest = nest
        self.target = target
        self.vector_bits = target.vector_bits
        self.threads = target.num_threads
        self.lanes = max(1, self.vector_bits // max(nest.element_bits, 8))
        self.default_plan = plan_default_schedule(
            nest, 0, vector_bits=self.vector_bits, num_threads=self.threads, caches=target.caches)
        self.knobs: tuple[Knob, ...] = tuple(self._knobs())

    # -- the space -------------------------------------------------------------------------
    def _knobs(self) -> list[Knob]:
        raise NotImplementedError

    def default(self) -> Config:
        """The default schedule's point: its plan equals ``plan_default_schedule``'s."""
        return self._default_values()

    def _default_values(self) -> Config:
        raise NotImplementedError

    def plan(self, config: Mapping[str, int], tag: int = 0) -> OpSchedule:
        raise NotImplementedError

    @cached_property
    def size(self) -> int:  # type: ignore[override]  (cached: the knobs never change)
        return math.prod(len(k.values) for k in self.knobs)

    def validate(self, config: Mapping[str, object]) -> Config:
        """``config`` as a clean dict, or :class:`KnobError` naming the offending knob."""
        return validate_config(self.knobs, config, f"{self.kind} space of {self.task.name}")

    def is_valid(self, config: Mapping[str, int]) -> bool:
        """Whether the tiles of every level divide the enclosing level's (static tiles)."""
        plan = self.plan(config)
        levels = [plan.thread_tiles, plan.cache_tiles, plan.outer_register_tiles,
                  plan.register_tiles, plan.reduction_tiles]
        for d, extent in enumerate(self.nest.ranges):
            current = extent
            for level in levels:
                if not level or not level[d]:
                    continue
                if current % level[d] and d not in plan.peeled_loops:
                    return False
                current = level[d]
        return True

    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        """The config's ``transform.named_sequence`` (human-readable, stored in records)."""
        return render_op_sequence(self.plan(config, tag))

    # -- features for the cost model ---------------------------------------------------------
    def feature_names(self) -> list[str]:
        return [f"knob.{k.name}" for k in self.knobs] + list(self._derived_names())

    def features(self, config: Mapping[str, int]) -> list[float]:
        """Knob values (log2) plus loop-nest features of the plan, for the cost model."""
        plan = self.plan(config)
        knob_part = [math.log2(1 + config[k.name]) for k in self.knobs]
        return knob_part + self._derived_features(plan)

    # Kernel classes one-hot in the transfer features (task.kernel_class's names).
    TRANSFER_KINDS = ("matmul", "conv2d", "depthwise_conv2d", "pooling", "reduction", "elementwise")

    def transfer_feature_names(self) -> list[str]:
        return [f"kind.{k}" for k in self.TRANSFER_KINDS] + ["log_flops"] + list(self._DERIVED)

    def transfer_features(self, config: Mapping[str, int]) -> list[float]:
        """Features that mean the same in every task's space, for a model trained across
        tasks (tuning/transfer.py): the kernel class, the task's size and the plan's
        loop-nest features. Knob values are left out: knobs differ between spaces."""
        plan = self.plan(config)
        kind = [float(self.task.kind == k) for k in self.TRANSFER_KINDS]
        # The base class's features on purpose: a subclass may add its own, and every
        # space's transfer rows must have the same columns.
        return kind + [math.log2(max(self.task.flops, 1))] + ScheduleSpace._derived_features(self, plan)

    _DERIVED = ("log_parallel_tasks", "log_thread_tile", "log_cache_tile", "log_register_tile",
                "log_reduction_step", "vector_use", "log_vectors_per_step", "arith_intensity",
                "log_register_footprint", "log_cache_footprint", "packed")

    def _derived_names(self) -> tuple[str, ...]:
        return self._DERIVED

    def _level(self, tiles: tuple[int, ...] | None, fallback: tuple[int, ...]) -> tuple[int, ...]:
        if not tiles:
            return fallback
        return tuple(t if t else f for t, f in zip(tiles, fallback))

    def _derived_features(self, plan: OpSchedule) -> list[float]:
        ranges = self.nest.ranges
        thread = self._level(plan.thread_tiles, ranges)
        cache = self._level(plan.cache_tiles, thread)
        outer = self._level(plan.outer_register_tiles, cache)
        register = self._level(plan.register_tiles, outer)
        reduction = self._level(plan.reduction_tiles, register)
        tasks = math.prod(r // t for r, t in zip(ranges, thread)) if plan.thread_tiles else 1
        inner = reduction[-1] if self.nest.parallel[-1] else register[-1]
        for d in range(len(ranges) - 1, -1, -1):
            if self.nest.parallel[d]:
                inner = register[d]
                break
        vectors = math.prod(
            t for t, p in zip(register, self.nest.parallel) if p) / max(self.lanes, 1)
        step = math.prod(t for t, p in zip(reduction, self.nest.parallel) if not p)
        bytes_per = max(self.nest.element_bits // 8, 1)
        reg_points = math.prod(reduction)
        reg_out = math.prod(t for t, p in zip(register, self.nest.parallel) if p)
        reg_footprint = (reg_out + reg_points / max(min(register[-1], reg_out), 1) * 2) * bytes_per
        cache_footprint = math.prod(cache) ** (2 / 3) * 3 * bytes_per
        intensity = 2 * reg_points / max(reg_footprint, 1)
        return [math.log2(tasks), math.log2(math.prod(thread)), math.log2(math.prod(cache)),
                math.log2(math.prod(register)), math.log2(max(step, 1)),
                (inner % self.lanes == 0) * min(inner / self.lanes, 8.0),
                math.log2(max(vectors, 1e-3) * max(step, 1)), intensity,
                math.log2(reg_footprint), math.log2(cache_footprint),
                float(bool(plan.packed_operands))]


class MatmulSpace(ScheduleSpace):
    """Contractions: thread, K-cache, packing and register levels (see the module docstring)."""

    kind = "matmul"

    def __init__(self, task: Task, nest: LoopNest, target: Target) -> None:
        batch, m_dims, n_dims, k_dims = nest.contraction
        self.m, self.n, self.k = m_dims[-1], n_dims[-1], k_dims[-1]
        self.batch = batch
        # Weights as column panels (graph/weight_panels.py): N is (panel, column in panel);
        # par_nb takes whole panels per task, reg_n stays within one panel and reg_nb puts
        # panels side by side in the register tile.
        self.panels = weight_panel_dims(nest)
        super().__init__(task, nest, target)

    def _default_values(self) -> dict[str, int]:
        plan = self.default_plan
        thread = plan.thread_tiles or (0,) * len(self.nest.ranges)
        cache_k = plan.cache_tiles[self.k] if plan.cache_tiles else 0
        packed = {index for index, _rank in plan.packed_operands}
        outer = plan.outer_register_tiles or (0,) * len(self.nest.ranges)
        return {"par_m": thread[self.m], "par_n": thread[self.n], "cache_k": cache_k,
                "reg_m": plan.register_tiles[self.m] or outer[self.m],
                "reg_n": plan.register_tiles[self.n] or outer[self.n],
                "step_k": plan.reduction_tiles[self.k], "pack_a": int(0 in packed),
                "pack_b": int(1 in packed), "n_outer": 0,
                **({"par_nb": thread[self.panels[0]], "reg_nb": plan.register_tiles[self.panels[0]]}
                   if self.panels else {})}

    def _knobs(self) -> list[Knob]:
        M, N, K = (self.nest.ranges[d] for d in (self.m, self.n, self.k))
        lanes = self.lanes
        d = self._default_values()
        threaded = self.default_plan.thread_tiles is not None or self.threads > 1
        par = [0] + ([16, 32, 64, 128, 256, 512] if threaded else [])
        return [
            Knob("par_m", _divisors(M, par + ([M] if threaded else []), include=(d["par_m"],)),
                 "rows of C per parallel task (0: no scf.forall)"),
            Knob("par_n", _divisors(N, [0] + ([32, 64, 128, 256, 512, 1024] if threaded else []),
                                    include=(d["par_n"],)),
                 "columns of C per parallel task (0: untiled)"),
            Knob("cache_k", _divisors(K, [0, 32, 64, 128, 256, 512], include=(d["cache_k"],)),
                 "K cache block (0: none)"),
            Knob("reg_m", tuple(sorted({*_divisors(M, [1, 2, 4, 6, 8, 12, 16]), d["reg_m"]})),
                 "accumulator rows in registers (the default's may leave a partial last tile, "
                 "peeled)"),
            Knob("reg_n", self._column_tiles(N, lanes, d["reg_n"]),
                 "accumulator columns in registers (multiples of the vector lanes; where N "
                 "has none that divides it, the last partial tile is peeled)"),
            Knob("step_k", _divisors(K, [1, 2, 4], include=(d["step_k"],)),
                 "reduction step: outer products per loop iteration"),
            Knob("pack_a", (0, 1), "copy each reg_m x cache_k sliver of A to a contiguous buffer"),
            Knob("pack_b", (0,) if self.panels else (0, 1),
                 "copy each cache_k x reg_n panel of B to a contiguous buffer (weights already "
                 "in panels: never)"),
            Knob("n_outer", (0, 1), "loop order of the register tiles: N outside M (1) or M "
                 "outside N (0); with pack_b, N is always outside, with pack_a M"),
        ] + ([Knob("par_nb", _divisors(self.nest.ranges[self.panels[0]],
                                       [0] + ([1, 2, 4, 8, 16] if threaded else []),
                                       include=(d["par_nb"],)),
                   "whole weight panels per parallel task (0: untiled)"),
                 Knob("reg_nb", _divisors(self.nest.ranges[self.panels[0]], [1, 2, 3, 4],
                                          include=(d["reg_nb"],)),
                      "weight panels side by side in the register tile (its columns: reg_nb x reg_n)"),
                 ] if self.panels else [])

    def _column_tiles(self, N: int, lanes: int, default: int) -> tuple[int, ...]:
        """``reg_n``'s values: the multiples of the lanes (1-4 vectors) that divide N; where
        none does (N = 517, 1000 with 16 lanes...), whole vectors anyway, the last partial
        tile peeled (``peeled_loops``), as the default plan peels M: otherwise such an N
        only had the default's narrow tile. Not for weight panels (their columns divide)."""
        vectors = [lanes * i for i in (1, 2, 3, 4)]
        divides = _divisors(N, vectors, include=(default,))
        if self.panels or any(N % v == 0 for v in vectors if v <= N):
            return divides
        return tuple(sorted({*divides, *(v for v in vectors[:2] if v < N)}))

    def _peels_columns(self, config: Mapping[str, int]) -> bool:
        return bool((config["par_n"] or self.nest.ranges[self.n]) % config["reg_n"])

    def plan(self, config: Mapping[str, int], tag: int = 0) -> OpSchedule:
        n_loops = len(self.nest.ranges)
        thread = None
        if config["par_m"] or config["par_n"] or config.get("par_nb"):
            thread = [0] * n_loops
            for d in self.batch:
                thread[d] = 1
            thread[self.m], thread[self.n] = config["par_m"], config["par_n"]
            if self.panels:
                thread[self.panels[0]] = config.get("par_nb", 0)
        cache = None
        if config["cache_k"]:
            cache = [0] * n_loops
            cache[self.k] = config["cache_k"]
        column = column_loop(self.nest)
        default_cache = self.default_plan.cache_tiles
        if thread is None and default_cache and default_cache[column]:
            # No thread level: the default plan's column blocks stay, as a cache level
            # outside the K block (matmul_plan.py ``column_blocks``), whatever the other knobs.
            cache = cache or [0] * n_loops
            cache[column] = default_cache[column]
        register = [0] * n_loops
        for d in self.nest.parallel_dims:
            register[d] = 1
        register[self.m] = config["reg_m"]
        register[self.n] = config["reg_n"]
        if self.panels:
            register[self.panels[0]] = config["reg_nb"]
        reduction = [0] * n_loops
        for d in self.nest.reduction_dims:
            reduction[d] = 1
        reduction[self.k] = config["step_k"]
        outer = None
        interchange = None
        if config["n_outer"] and not config["pack_b"] and not config["pack_a"]:
            order = list(range(n_loops))
            order.remove(self.n)
            order.insert(order.index(self.m), self.n)
            interchange = tuple(order)
        packed: tuple[tuple[int, int], ...] = ()
        # Packing happens once per outer-register tile, around the register loop that
        # reuses the packed operand: B's panel across the M loop, A's sliver across N.
        for knob, index, dim in (("pack_a", 0, self.m), ("pack_b", 1, self.n)):
            if config[knob]:
                outer = [0] * n_loops
                outer[dim] = register[dim]
                register[dim] = 0
                # The operand's own rank: its copy is tiled to single rows of it (script.py
                # ``pack_operands``). A: batch, M, K and B: batch, K, N where the rows are one
                # loop; an operand indexed by more loops (rows as several loops; a windowed
                # convolution's input x[b, y, x, g, c]) has more, and tiled as
                # len(batch) + 2 dims, its copy kept the register tile's rows: dynamic in a
                # peeled partial tile, where it did not vectorize (a build error).
                packed = ((index, len(self.nest.operand_dims[index])),)
        return OpSchedule(
            tag, thread_tiles=tuple(thread) if thread else None,
            cache_tiles=tuple(cache) if cache else None,
            outer_register_tiles=tuple(outer) if outer else None, packed_operands=packed,
            register_tiles=tuple(register), register_interchange=interchange,
            reduction_tiles=tuple(reduction), vectorize=True,
            peeled_loops=(((self.m,) if (config["par_m"] or self.nest.ranges[self.m]) % config["reg_m"] else ())
                          + ((self.n,) if self._peels_columns(config) else ())))

    def is_valid(self, config: Mapping[str, int]) -> bool:
        # A task (or the whole op) holding one panel of B (one sliver of A): the copy buys
        # nothing, and its one-trip copy loop did not bufferize ("cannot avoid RaW
        # conflict": 16 x 32 tasks of a 64 x 64 matmul with 32-column panels).
        if config["pack_b"] and config["reg_n"] == (config["par_n"] or self.nest.ranges[self.n]):
            return False
        if config["pack_a"] and config["reg_m"] == (config["par_m"] or self.nest.ranges[self.m]):
            return False
        if (config["pack_a"] or config["pack_b"]) and config["n_outer"]:
            return False  # the loop order is the packing's (the same nest without n_outer)
        if config["pack_a"] and config["pack_b"]:
            # Both at one level would pack a reg_m x reg_n tile's operands per tile: copying
            # as many elements as it computes with.
            return False
        if self._peels_columns(config) and (
                config["reg_n"] > (config["par_n"] or self.nest.ranges[self.n])
                or config["pack_a"] or config["pack_b"] or config["n_outer"]):
            # A peeled column tile: within its task, and only with the plain register
            # level (packing copies whole register tiles; n_outer's order is for whole ones).
            return False
        return super().is_valid(config)


class ConvSpace(ScheduleSpace):
    """2-D convolution, depthwise convolution and pooling; decomposed to 1-D, then vectorized."""

    def __init__(self, task: Task, nest: LoopNest, target: Target) -> None:
        self.kind = task.kind
        batch, image, out_channel, _filter, in_channel, depth = nest.convolution
        # The default plan's vector channel (NHWC depthwise/pooling) is no batch dim here.
        channel = conv_channel_dim(nest)
        self.batch, self.image = tuple(d for d in batch if d != channel), image
        self.oc = out_channel[-1] if out_channel else None
        self.c = channel if channel is not None else (depth[-1] if depth else None)
        self.ic = in_channel[-1] if in_channel else None
        self.ow = image[-1] if image else None
        # The channels split (output channels; NHWC depthwise/pooling channels), rows too
        # (the default plan's first choice, see conv_plan.plan_convolution); other pooling and
        # depthwise ops split rows as ``par``.
        split = self.oc if self.oc is not None else channel
        self.par_dim = split if split is not None else (image[0] if image else None)
        self.rows = image[0] if image and split is not None else None
        self.images = 1
        for d in batch:
            self.images *= nest.ranges[d]
        super().__init__(task, nest, target)

    def _default_values(self) -> dict[str, int]:
        plan = self.default_plan
        values = {}
        if self.par_dim is not None:
            values["par"] = plan.thread_tiles[self.par_dim] if plan.thread_tiles else 0
        if self.rows is not None:
            values["par_rows"] = plan.thread_tiles[self.rows] if plan.thread_tiles else 0
        if self.images > 1:
            values["par_images"] = int(bool(plan.thread_tiles))
        if self.oc is not None:
            values["reg_oc"] = plan.register_tiles[self.oc]
            values["oc_outer"] = int(plan.register_interchange is not None)
        if self.c is not None:
            values["reg_c"] = plan.register_tiles[self.c]
        if self.ow is not None:
            values["reg_ow"] = plan.register_tiles[self.ow]
        if self.ic is not None:
            values["cache_ic"] = 0
            values["step_ic"] = plan.reduction_tiles[self.ic]
        return values

    def _knobs(self) -> list[Knob]:
        r = self.nest.ranges
        d = self._default_values()
        knobs = []
        if self.par_dim is not None:
            knobs.append(Knob("par", _divisors(r[self.par_dim], [0, *_powers(r[self.par_dim])],
                                               include=(d["par"],)),
                              "thread tile of the outermost split output dim (0: no forall)"))
        if self.rows is not None:
            knobs.append(Knob("par_rows", _divisors(r[self.rows], [0, *_powers(r[self.rows])],
                                                    include=(d["par_rows"],)),
                              "thread tile of output rows (0: rows not split)"))
        if self.images > 1:
            knobs.append(Knob("par_images", (0, 1), "one task per image of the batch"))
        if self.oc is not None:
            # The default's tile may not divide the channels: a two-vector tile over an odd
            # count of vectors, its last tile peeled (conv_plan.paired_vector_tile).
            knobs.append(Knob("reg_oc", tuple(sorted({*_divisors(r[self.oc], [1, 2, 4, 8, 16, 32, 64]),
                                                      d["reg_oc"]})),
                              "output channels per register tile"))
            knobs.append(Knob("oc_outer", (0, 1),
                              "output-channel loop outside the image loops (filter reuse)"))
        if self.c is not None:
            knobs.append(Knob("reg_c", _divisors(r[self.c], [1, 4, 8, 16, 32, 64],
                                                 include=(d["reg_c"],)),
                              "channels per register tile (depthwise/pooling)"))
        if self.ow is not None:
            knobs.append(Knob("reg_ow", self._pixel_tiles(r[self.ow], d["reg_ow"]),
                              "output columns per register tile (the default's may leave a partial "
                              "last tile, peeled)"))
        if self.ic is not None:
            knobs.append(Knob("cache_ic", _divisors(r[self.ic], [0, 16, 32, 64, 128]),
                              "input-channel cache block (0: none)"))
            knobs.append(Knob("step_ic", _divisors(r[self.ic], [1, 2, 4, 8, 16],
                                                   include=(d["step_ic"],)),
                              "input channels per reduction step"))
        return knobs

    # Column tiles with a partial last tile, offered where the default plan itself peels the
    # columns (a row of 13 or 25 pixels has no divisor that fills the registers).
    PEELED_COLUMNS = (4, 6, 8, 12, 16)
    # The widest column tile taken from the row's own divisors.
    MAX_COLUMNS = 32

    def _pixel_tiles(self, extent: int, default: int) -> tuple[int, ...]:
        """``reg_ow``'s values: the usual tiles that divide the row, every other divisor of
        the row up to :data:`MAX_COLUMNS` (5 and 25 for a 25-pixel row, 13 for 13: such rows
        had only 1 and the default's peeled 8), and, where the default's tile already leaves
        a peeled partial tile, other peeled tiles (:data:`PEELED_COLUMNS`) narrower than the
        row. Derived from the extent alone, so every convolution with such rows gets them."""
        tiles = {*_divisors(extent, [1, 2, 4, 7, 8, 14, 16, 28, 32]),
                 *_divisors(extent, range(1, self.MAX_COLUMNS + 1)), default}
        if extent % default:
            tiles |= {c for c in self.PEELED_COLUMNS if c < extent}
        return tuple(sorted(tiles))

    def plan(self, config: Mapping[str, int], tag: int = 0) -> OpSchedule:
        n_loops = len(self.nest.ranges)
        register = [0] * n_loops
        for d in self.nest.parallel_dims:
            register[d] = 1
        for dim, name in ((self.oc, "reg_oc"), (self.c, "reg_c"), (self.ow, "reg_ow")):
            if dim is not None:
                register[dim] = config[name]
        reduction = [0] * n_loops
        for d in self.nest.reduction_dims:
            reduction[d] = 1
        window = depthwise_window_dim(self.nest, register, vector_registers(self.vector_bits))
        if window is not None:  # as in the default plan: the whole kw row per step
            reduction[window] = 0
        cache = None
        if self.ic is not None:
            reduction[self.ic] = config["step_ic"]
            if config["cache_ic"]:
                cache = [0] * n_loops
                cache[self.ic] = config["cache_ic"]
        thread = [0] * n_loops
        for d in self.batch:
            thread[d] = 1
        if self.par_dim is not None:
            thread[self.par_dim] = config["par"]
        if self.rows is not None:
            thread[self.rows] = config["par_rows"]
        split = any(thread[d] for d in range(n_loops) if d not in self.batch)
        if not split and not config.get("par_images", 0):
            thread = None
        interchange = channels_outer(self.nest) if config.get("oc_outer", 0) else None
        # A pixel tile that does not divide the row has its last tile peeled, as in the
        # default plan (conv_plan.py, ``register_row_tile``).
        peeled = (self.ow,) if self.ow is not None and self.nest.ranges[self.ow] % register[self.ow] else ()
        if not peeled and self.oc is not None and self.nest.ranges[self.oc] % register[self.oc]:
            peeled = (self.oc,)  # a two-vector tile over an odd count of vectors (conv_plan.paired_vector_tile)
        return OpSchedule(tag, thread_tiles=tuple(thread) if thread else None,
                          cache_tiles=tuple(cache) if cache else None,
                          register_tiles=tuple(register), register_interchange=interchange,
                          reduction_tiles=tuple(reduction), decompose=True, vectorize=True,
                          peeled_loops=peeled)


class GenericSpace(ScheduleSpace):
    """Elementwise/injective ops and reductions (softmax and layer-norm parts)."""

    def __init__(self, task: Task, nest: LoopNest, target: Target) -> None:
        self.kind = task.kind
        n = len(nest.ranges)
        self.inner = generic_vector_dim(nest)
        # A transpose's second register tile (plan.py transposed_read_dim) is its outer one.
        transposed = transposed_read_dim(nest, self.inner)
        self.outer_dim = transposed if transposed is not None else next(
            (d for d in range(n - 1, -1, -1) if d != self.inner), None)
        # A transpose's odd extent keeps the default's power-of-two tile, its last tile
        # peeled, and no task split on that loop (plan.py ``_transpose_tile``).
        peeled = plan_default_schedule(nest, 0, vector_bits=target.vector_bits, num_threads=target.num_threads,
                                       caches=target.caches).peeled_loops
        self.par_dim = generic_thread_dim(nest, peeled)
        super().__init__(task, nest, target)

    def _tiles(self, plan: OpSchedule) -> list[int]:
        return [max(a, b) for a, b in zip(plan.register_tiles or (0,) * len(self.nest.ranges),
                                           plan.reduction_tiles or (0,) * len(self.nest.ranges))]

    def _default_values(self) -> dict[str, int]:
        plan = self.default_plan
        tiles = self._tiles(plan)
        values = {"vec": tiles[self.inner]}
        if self.outer_dim is not None:
            values["reg_outer"] = tiles[self.outer_dim]
        if self.par_dim is not None:
            values["par"] = plan.thread_tiles[self.par_dim] if plan.thread_tiles else 0
        values["vectorize"] = int(plan.vectorize)
        return values

    def _knobs(self) -> list[Knob]:
        r = self.nest.ranges
        d = self._default_values()
        knobs = [Knob("vec", tuple(sorted({*_divisors(r[self.inner], [self.lanes * f for f in (1, 2, 4, 8)]
                                                    + [1, 2, 4, 8]), d["vec"]})),
                      "innermost tile (vector length after vectorization; the default's may "
                      "leave a partial last tile, peeled)")]
        if self.outer_dim is not None:
            knobs.append(Knob("reg_outer", tuple(sorted({*_divisors(r[self.outer_dim], [1, 2, 4, 8]),
                                                         d["reg_outer"]})),
                              "tile of the loop outside the innermost one"))
        if self.par_dim is not None:
            knobs.append(Knob("par", _divisors(r[self.par_dim], [0, *_powers(r[self.par_dim])],
                                               include=(d["par"],)),
                              "thread tile of the outer parallel loop (0: no forall)"))
        # A fixed knob: ops the default leaves scalar (see _plan_generic) stay scalar.
        knobs.append(Knob("vectorize", (d["vectorize"],), "vectorize the innermost tile"))
        return knobs

    def plan(self, config: Mapping[str, int], tag: int = 0) -> OpSchedule:
        n_loops = len(self.nest.ranges)
        register = [0] * n_loops
        reduction = [0] * n_loops
        for d in range(n_loops):
            (register if self.nest.parallel[d] else reduction)[d] = 1
        (register if self.nest.parallel[self.inner] else reduction)[self.inner] = config["vec"]
        if self.outer_dim is not None:
            tiles = register if self.nest.parallel[self.outer_dim] else reduction
            tiles[self.outer_dim] = config["reg_outer"]
        thread = None
        if self.par_dim is not None and config["par"]:
            thread = [0] * n_loops
            thread[self.par_dim] = config["par"]
        peeled = tuple(d for d in range(n_loops) if register[d] and self.nest.ranges[d] % register[d])
        return OpSchedule(tag, thread_tiles=tuple(thread) if thread else None,
                          register_tiles=tuple(register) if any(register) else None,
                          reduction_tiles=tuple(reduction) if any(reduction) else None,
                          vectorize=bool(config["vectorize"]), peeled_loops=peeled)


_SPACES: dict[str, type[ScheduleSpace]] = {
    "matmul": MatmulSpace, "conv2d": ConvSpace, "depthwise_conv2d": ConvSpace,
    "pooling": ConvSpace, "elementwise": GenericSpace, "reduction": GenericSpace,
}


def task_nest(task: Task) -> LoopNest:
    """The loop nest of the task's op — a fusion group's anchor — analysed from its payload
    (found the way the schedule finds it, so the space sees what the planner will)."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task.payload)
        mark_groups(module.operation)  # partitioned as the pipeline partitions it
        analyzed = analyze_loop_nests(module.operation)
        units = find_fusion_units(module.operation, dict(analyzed))
        if len(units) == 1:
            return dict(analyzed)[units[0].anchor]
        nests = [nest for op, nest in analyzed
                 if op.name != "linalg.fill" or task.op_name == "linalg.fill"]
    return nests[-1]


# Tasks of the reduced-precision dot-product kernels (tuning/kernel_tasks.py): kind -> the
# instruction's lanes (vdpbf16ps and vpdpbusd both fill 16 lanes of a zmm register).
KERNEL_TASK_KINDS: dict[str, int] = {"bf16_kernel": VDPBF16PS.lanes, "int8_kernel": VPDPBUSD.lanes}
# Row tasks (tasks along M) the kernel space offers, besides its default.
_ROW_TASKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


class KernelSpace(SearchSpace):
    """The knobs of a bf16 (``vdpbf16ps``) or int8 (``vpdpbusd``) dot-product kernel
    (pipelines/tensor/register_tiles.py's :class:`KernelConfig`), on one task of
    :func:`tilecraft.tuning.kernel_tasks.extract_kernel_tasks`:

    - ``kr_rows``: rows of the register tile (MR), one broadcast of A per row and step of k;
    - ``kr_vectors``: accumulator vectors per row (NV: NT = 16 NV columns per column tile);
    - ``kr_row_tasks``: tasks along M (each ``ceil(M / MR / kr_row_tasks)`` register tiles
      of rows by one column tile): the parallel split.

    Valid: at most 24 accumulators (MR x NV; the other registers hold the weights and A's
    broadcast), no column vector wholly past N, no more row tasks than register tiles.
    The default is the builders' own choice (``KernelConfig.default``), so a task without a
    record builds the kernel it always built. Unlike the schedule spaces, a config is not a
    transform script: the kernel pass builds the kernel from it (``configs`` option)."""

    kind = "kernel"

    def __init__(self, task: Task, target: "str | Target") -> None:
        if task.kind not in KERNEL_TASK_KINDS:
            raise KnobError(f"{task.name} is a {task.kind} task, not a dot-product kernel's")
        self.task = task
        self.target = Target.parse(target)
        self.m, self.n, self.k = task.ranges
        self.lanes = KERNEL_TASK_KINDS[task.kind]
        self.threads = self.target.num_threads
        self._default = KernelConfig.default(self.m, self.n, self.lanes, self.threads)
        default_tasks = -(-self.m // self._default.task_rows)
        self.knobs = (
            Knob("kr_rows", tuple(range(1, MAX_ROWS + 1)), "rows of the register tile (MR)"),
            Knob("kr_vectors", tuple(range(1, min(MAX_VECTORS, -(-self.n // self.lanes)) + 1)),
                 "accumulator vectors per row of the register tile (NT = lanes x NV columns)"),
            Knob("kr_row_tasks", tuple(sorted({*_ROW_TASKS, default_tasks})),
                 "tasks along M (the parallel split; each is one column tile wide)"),
        )

    def kernel_config(self, config: Mapping[str, int]) -> KernelConfig:
        """The builders' :class:`KernelConfig` of a point (``validate`` it first)."""
        rows = config["kr_rows"]
        row_tiles = -(-self.m // rows)
        return KernelConfig(rows, config["kr_vectors"], rows * -(-row_tiles // min(config["kr_row_tasks"], row_tiles)))

    def default(self) -> Config:
        config = self._default
        return {"kr_rows": config.rows, "kr_vectors": config.vectors,
                "kr_row_tasks": -(-self.m // config.task_rows)}

    def validate(self, config: Mapping[str, object]) -> Config:
        checked = validate_config(self.knobs, config, f"kernel space of {self.task.name}")
        if not self.is_valid(checked):
            raise KnobError(f"config {checked} of {self.task.name}: {self._problem(checked)}")
        return checked

    def _problem(self, config: Mapping[str, int]) -> str:
        """Why ``config`` is not valid ('' when it is)."""
        if config["kr_row_tasks"] > -(-self.m // config["kr_rows"]):
            return (f"kr_row_tasks {config['kr_row_tasks']} is more than the {-(-self.m // config['kr_rows'])} "
                    f"register tiles of M = {self.m}")
        try:
            self.kernel_config(config).check(self.m, self.n, self.lanes)
        except PipelineError as error:
            return str(error)
        return ""

    def is_valid(self, config: Mapping[str, int]) -> bool:
        return not self._problem(config)

    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        """What the kernel is built with, in words (stored in records)."""
        kernel = self.kernel_config(config)
        tasks = -(-self.m // kernel.task_rows) * -(-self.n // (kernel.vectors * self.lanes))
        return (f"{self.task.name}: register tile {kernel.rows} x {kernel.vectors * self.lanes}, "
                f"{kernel.task_rows} rows x {kernel.vectors * self.lanes} columns per task ({tasks} tasks)")

    def feature_names(self) -> list[str]:
        return [*super().feature_names(), "log_tasks", "tasks_per_thread", "accumulators",
                "column_waste", "row_waste"]

    def features(self, config: Mapping[str, int]) -> list[float]:
        """Knob values (log2), the number of tasks and their balance over the threads, the
        register tile's accumulators, and the padding a tile wastes past N and M."""
        kernel = self.kernel_config(config)
        columns = kernel.vectors * self.lanes
        column_tiles, row_tasks = -(-self.n // columns), -(-self.m // kernel.task_rows)
        tasks = column_tiles * row_tasks
        return [*super().features(config), math.log2(tasks), tasks / self.threads % 1.0,
                kernel.rows * kernel.vectors / ACCUMULATORS, column_tiles * columns / self.n - 1.0,
                -(-self.m // kernel.rows) * kernel.rows / self.m - 1.0]


def make_space(task: Task, nest: LoopNest, target: "str | Target") -> ScheduleSpace:
    """The schedule space of ``task`` (whose loop nest is ``nest``) on ``target``."""
    return _SPACES[task.kind](task, nest, Target.parse(target))


def space_for(task: Task, target: "str | Target" = "llvm") -> "ScheduleSpace | KernelSpace":
    """The schedule space of ``task``'s kernel class on ``target`` (a dot-product kernel's
    task: its :class:`KernelSpace`)."""
    if task.kind in KERNEL_TASK_KINDS:
        return KernelSpace(task, target)
    return make_space(task, task_nest(task), target)
