"""Generated search spaces: a space derived from an op's loop structure (Ansor's sketches).

The hand spaces of ``schedule/space.py`` know three kernel classes; a :class:`SketchSpace`
is derived from any static ``linalg`` op's iterator types and extents alone, by the rules
of Ansor's sketch policy mapped onto the levels of an :class:`~.plan.OpSchedule`:

- *multi-level tiling* of the parallel loops (``S``: a thread tile, ``scf.forall``, on
  the outer parallel loops, then a register tile on every parallel loop) and of the
  reduction loops (``R``: a cache block, then the step of the innermost reduction loop),
  i.e. Ansor's ``S R S R`` structure: ``sk_par_d*`` (0: no forall on that loop),
  ``sk_kc_d*`` (0: no cache block), ``sk_reg_d*``, ``sk_step_d*``;
- *vectorize the innermost tile*: the innermost loop's register or step tile takes
  multiples of the target's vector lanes; vectorization stays as the default plan has it
  (an op the default leaves scalar stays scalar: ``sk_vectorize``, one value);
- *fuse consumers*: a task is a fusion group (``schedule/group.py``); its anchor's plan,
  taken from this space, tiles the group's root, and the consumers are fused into that
  loop nest as they are for the default schedule;
- *decomposition* of convolutions and pooling stays the default plan's: the loops it needs
  tiled to 1 keep that tile.

Every other field of the op's default plan (decomposition of convolutions, the fused fill,
interchanges, packed operands) is kept, so the default point's plan *is* the default plan
and a point differs from it only in its tiles. Unrolling has no level of its own here: a
step tile above 1 of a vectorized loop is unrolled by the vectorizer. Configs whose knobs
all start with ``sk_`` are this space's (:func:`is_sketch_config`): the records planner
rebuilds this space for them.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Mapping

from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import Target
from .op_schedule import OpSchedule
from .plan import generic_vector_dim
from .space import Config, Knob, ScheduleSpace, _divisors, _powers
from .task import Task

PREFIX = "sk_"
# Parallel loops that get a thread-tile knob (the outermost ones with more than one
# iteration): Ansor's outer S level; more would multiply the space for little gain.
THREAD_LOOPS = 2


def is_sketch_config(config: Mapping[str, object]) -> bool:
    """Whether ``config`` is a point of a :class:`SketchSpace` (its knobs' prefix)."""
    return bool(config) and all(str(name).startswith(PREFIX) for name in config)


class SketchSpace(ScheduleSpace):
    """The space of one op generated from its loop nest (see the module docstring)."""

    kind = "sketch"

    def __init__(self, task: Task, nest: LoopNest, target: Target) -> None:
        n = len(nest.ranges)
        self.inner = generic_vector_dim(nest)
        self.parallel_loops = [d for d in range(n) if nest.parallel[d] and nest.ranges[d] > 1]
        self.reduction_loops = [d for d in range(n) if not nest.parallel[d] and nest.ranges[d] > 1]
        self.thread_loops = self.parallel_loops[:THREAD_LOOPS]
        super().__init__(task, nest, target)

    @cached_property
    def pinned(self) -> frozenset[int]:
        """Loops whose inner tiles stay the default plan's: those a decomposed convolution or
        pooling needs tiled to 1 (``transform.structured.decompose`` turns the 2-D window
        into a 1-D one only then)."""
        plan = self.default_plan
        if not plan.decompose:
            return frozenset()
        inner = [max(self._tile_of(plan.register_tiles, d), self._tile_of(plan.reduction_tiles, d))
                 for d in range(len(self.nest.ranges))]
        return frozenset(d for d, tile in enumerate(inner) if tile == 1)

    @property
    def register_loops(self) -> list[int]:
        return [d for d in self.parallel_loops if d not in self.pinned]

    @property
    def step_loops(self) -> list[int]:
        return [d for d in self.reduction_loops if d not in self.pinned]

    # -- the knobs, from the default plan and the loop structure ---------------------------
    @staticmethod
    def _tile_of(tiles: tuple[int, ...] | None, d: int) -> int:
        return tiles[d] if tiles else 0

    def _default_values(self) -> Config:
        plan = self.default_plan
        values: Config = {}
        for d in self.thread_loops:
            values[f"{PREFIX}par_d{d}"] = self._tile_of(plan.thread_tiles, d)
        for d in self.step_loops:
            values[f"{PREFIX}kc_d{d}"] = self._tile_of(plan.cache_tiles, d)
        for d in self.register_loops:
            values[f"{PREFIX}reg_d{d}"] = self._tile_of(plan.register_tiles, d)
        for d in self.step_loops:
            values[f"{PREFIX}step_d{d}"] = self._tile_of(plan.reduction_tiles, d)
        values[f"{PREFIX}vectorize"] = int(plan.vectorize)
        return values

    def _inner_sizes(self, d: int) -> list[int]:
        sizes = [1, 2, 4, 8]
        if d == self.inner:
            sizes += [self.lanes * f for f in (1, 2, 4, 8)]
        return sizes

    def _knobs(self) -> list[Knob]:
        r = self.nest.ranges
        default = self._default_values()

        def values(d: int, sizes: list[int], name: str) -> tuple[int, ...]:
            # The tiles that divide the loop, and the default's, which may not: a tile the
            # default plan peels (32 of 48 channels: a two-vector tile over three vectors).
            # Why: dropped, the default point was no point of its space, and its record
            # (every tuning run commits the default's) was refused when applied.
            return tuple(sorted({*_divisors(r[d], sizes), default[name]}))

        knobs = []
        for d in self.thread_loops:
            name = f"{PREFIX}par_d{d}"
            knobs.append(Knob(name, values(d, [0, *_powers(r[d])], name), f"thread tile of loop {d} (0: no forall)"))
        for d in self.step_loops:
            name = f"{PREFIX}kc_d{d}"
            knobs.append(Knob(name, values(d, [0, 16, 32, 64, 128, 256], name),
                              f"cache block of reduction loop {d} (0: none)"))
        for d in self.register_loops:
            name = f"{PREFIX}reg_d{d}"
            knobs.append(Knob(name, values(d, self._inner_sizes(d), name), f"register tile of parallel loop {d}"))
        for d in self.step_loops:
            name = f"{PREFIX}step_d{d}"
            knobs.append(Knob(name, values(d, self._inner_sizes(d), name), f"step of reduction loop {d}"))
        name = f"{PREFIX}vectorize"
        knobs.append(Knob(name, (default[name],), "vectorize the innermost tiles (as the default)"))
        return knobs

    # -- a point as a plan -----------------------------------------------------------------
    def _tiles(self, config: Mapping[str, int], key: str, loops: list[int],
               default: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """One level's tiles: the knobs of ``loops``, the default plan's elsewhere (``None``
        where no loop is tiled, as the planner writes an unused level)."""
        tiles = list(default) if default else [0] * len(self.nest.ranges)
        for d in loops:
            tiles[d] = config[f"{PREFIX}{key}_d{d}"]
        return tuple(tiles) if any(tiles) else None

    def plan(self, config: Mapping[str, int], tag: int = 0) -> OpSchedule:
        base = self.default_plan
        thread = self._tiles(config, "par", self.thread_loops, base.thread_tiles)
        register = self._tiles(config, "reg", self.register_loops, base.register_tiles)
        # The default's peeled loops stay peeled only where this point's register tile still
        # leaves a partial last tile (peeling a loop its tile divides fails).
        peeled = tuple(d for d in base.peeled_loops if register and register[d]
                       and ((thread[d] if thread else 0) or self.nest.ranges[d]) % register[d])
        return replace(
            base, tag=tag,
            thread_tiles=thread,
            cache_tiles=self._tiles(config, "kc", self.step_loops, base.cache_tiles),
            register_tiles=register,
            reduction_tiles=self._tiles(config, "step", self.step_loops, base.reduction_tiles),
            vectorize=bool(config[f"{PREFIX}vectorize"]),
            peeled_loops=peeled,
        )
