"""The ``tilecraft-schedule`` pass: tag every structured op, plan it (default plans, fusion
groups, or tuning records), render the plans and apply them with MLIR's transform
interpreter. A sequence that fails for an op or group is undone for it alone (the op then
lowers to scalar loops, a group to its ops' own loop nests) and a warning names it.

Ops an offload backend schedules itself (``tilecraft.backend_schedule``, set by the offload
pass: UMA's schedule hook) are not planned here; their own scripts run on them alone, with
the same checkpoint (:func:`apply_backend_schedules`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any, Callable, Mapping

from mlir import ir
from mlir.dialects.transform import interpreter

from ..pipelines.graph.fusion import mark_groups
from ..pipelines.ir_queries import ops_where
from ..pipelines.loop_nest import BACKEND_SCHEDULE_ATTR, LoopNest, analyze_loop_nests
from ..pipelines.offload import BACKEND_OP_TAG, BACKEND_ROOT_SEQUENCE, backend_transform_module
from ..pipelines.passes import bool_option, positive_int_option, register_pass
from ..pipelines.scratch import restore, scratch_copy
from ..pipelines.target import CacheHierarchy, Target
from .group import find_fusion_units, plan_groups, prepare_groups
from .op_schedule import TAG, GroupSchedule, OpSchedule
from .plan import plan_default_schedule
from .record_plan import RecordPlanner
from .repeated_kernels import inline_outlined, outline_repeated
from .records import Record, canonical_target
from .script import render_script
from .sketch import SketchSpace, is_sketch_config
from .space import space_for, task_nest
from .task import Task
from ..errors import InternalError


def init_fill(op: ir.Operation) -> ir.Operation | None:
    """The single-use ``linalg.fill`` producing ``op``'s (only) output, if there is one."""
    if len(op.results) != 1:
        return None
    init = op.operands[len(op.operands) - 1]
    producer = init.owner
    if not isinstance(producer, ir.Operation):
        producer = getattr(producer, "operation", None)
    if producer is None or not isinstance(producer, ir.Operation) or producer.name != "linalg.fill":
        return None
    if len(list(producer.results[0].uses)) != 1:
        return None
    return producer


# ``planner(op, nest, tag, unit)`` returns a plan for one op, or ``None`` for the default
# plan; ``unit`` is the fusion unit (schedule/group.py) the op anchors, if any.
OpPlanner = Callable[[ir.Operation, LoopNest, int, Any], "OpSchedule | None"]


def plan_module(module: ir.Operation, *, vector_bits: int, num_threads: int,
                planner: OpPlanner | None = None,
                fuse_groups: bool = False,
                caches: CacheHierarchy = CacheHierarchy()) -> list["OpSchedule | GroupSchedule"]:
    """Tag every structured op of ``module`` with ``tilecraft.op_id`` and plan its schedule.

    ``planner`` overrides the plan of the ops it answers for (the tuner's records); the init
    fill of an overridden op is fused the same way as for a default plan. ``fuse_groups``:
    the ops of each fusion group (the graph stage's partition, recomputed on this IR) become
    one loop nest, a :class:`GroupSchedule` (``schedule/group.py``).
    """
    units = []
    if fuse_groups:

        prepare_groups(module)
    analyzed = analyze_loop_nests(module)
    if fuse_groups:
        units = find_fusion_units(module, dict(analyzed))
    tags: dict[ir.Operation, int] = {}
    for tag, (op, _) in enumerate(analyzed):
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tag)
        tags[op] = tag
    # Built after tagging: an ir.Operation's hash changes with its attributes.
    unit_of_anchor = {unit.anchor: unit for unit in units}
    nests = {tags[op]: nest for op, nest in analyzed}
    plans: dict[int, OpSchedule] = {}
    fused: set[int] = set()
    for op, nest in analyzed:
        tag = tags[op]
        plan = planner(op, nest, tag, unit_of_anchor.get(op)) if planner is not None else None
        if plan is None:
            plan = plan_default_schedule(nest, tag, vector_bits=vector_bits, num_threads=num_threads,
                                         caches=caches)
        fill = init_fill(op)
        if plan.thread_tiles and plan.vectorize and fill is not None and fill in tags:
            fill_tag = tags[fill]
            # Why task extents: the fused fill runs per task, on the slice of the output
            # that one thread tile covers; register tiles planned for the whole output
            # (64 for a 128-row reduction split in 32-row tasks) left partial, dynamic
            # tiles that failed to vectorize, and the op fell back to scalar loops.
            fill_nest = nests[fill_tag]
            task_extents = tuple(
                extent if d is None else (plan.thread_tiles[d] or nest.ranges[d])
                for d, extent in zip(nest.output_dims, fill_nest.ranges)
            )
            fill_plan = plan_default_schedule(
                replace(fill_nest, ranges=task_extents), fill_tag,
                vector_bits=vector_bits, num_threads=1,
            )
            plan = OpSchedule(**{**plan.__dict__, "fused_init_tag": fill_tag,
                                 "init_register_tiles": fill_plan.register_tiles})
            fused.add(fill_tag)
        plans[tag] = plan
    op_plans = [plan for tag, plan in sorted(plans.items()) if tag not in fused]
    if not fuse_groups:
        return op_plans
    groups = plan_groups(units, analyzed, tags, plans, {p.tag for p in op_plans},
                         vector_bits=vector_bits, caches=caches)
    grouped = {tag for group in groups for tag in (group.tag, *(p.tag for p in group.producers))}
    merged: list[OpSchedule | GroupSchedule] = [*groups, *(p for p in op_plans if p.tag not in grouped)]
    return sorted(merged, key=lambda plan: plan.tag)


def remove_tags(module: ir.Operation) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        if TAG in op.attributes:
            del op.attributes[TAG]
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)


def find_sequence(transform_module: ir.Module, name: str) -> ir.Operation:
    for op in transform_module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise InternalError(name)


def apply_if_valid(module: ir.Operation, transform_module: ir.Module, name: str) -> str | None:
    """Apply sequence ``name`` to ``module``; if it fails, restore ``module`` as it was and
    return the error. ``None`` on success.

    Why a checkpoint rather than a trial run: the sequence is applied once. A trial on a
    scratch copy followed by the real application ran the transform interpreter twice per
    op or group (most of ResNet-50's schedule time), while copying the module is cheap
    (docs/performance.md). A failed sequence can leave its op half transformed
    (tiled but not vectorized), hence the restore."""
    sequence = find_sequence(transform_module, name)
    _container, checkpoint = scratch_copy(module)
    try:
        interpreter.apply_named_sequence(module, sequence, transform_module.operation)
    except ValueError as error:
        restore(module, checkpoint)
        return str(error) or "failed"
    return None


def apply_or_warn(module: ir.Operation, transform_module: ir.Module, name: str) -> bool:
    """Apply sequence ``name``; if it fails on a trial copy, leave ``module`` untouched."""
    error = apply_if_valid(module, transform_module, name)
    if error is not None:
        warnings.warn(
            f"tilecraft-schedule: {name} failed, the op keeps scalar loops: {error}",
            RuntimeWarning, stacklevel=2,
        )
        return False
    return True


def apply_schedule(module: ir.Operation, plans: list["OpSchedule | GroupSchedule"], *,
                   keep_kernels: bool = False) -> str:
    """Apply ``plans`` (op by op or group by group, then ``@cleanup``) to tagged ``module``;
    returns the script. A group whose sequence fails falls back to its ops' own plans.
    ``keep_kernels``: the outlined kernels stay functions called from the entry
    (schedule/repeated_kernels.py), so later stages lower each distinct kernel once."""
    script = render_script(plans)
    with module.context:
        transform_module = ir.Module.parse(script)
    # Each sequence's text without its name (which holds the tag): copies compare equal.
    texts = {ir.StringAttr(op.attributes["sym_name"]).value: str(op) for op in transform_module.body.operations}
    plans = outline_repeated(module, plans, {name: text[text.index("("):] for name, text in texts.items()},
                             keep_kernels=keep_kernels)
    for plan in plans:
        if isinstance(plan, GroupSchedule) and plan.fallback:
            # No warning: the fallback is the per-op schedule, correct but one loop nest
            # per op (CompiledModule.kernel_count shows it).
            if apply_if_valid(module, transform_module, plan.sequence_name) is not None:
                apply_schedule_ops(module, list(plan.fallback))
            continue
        apply_or_warn(module, transform_module, plan.sequence_name)
    inline_outlined(module, keep_repeated=keep_kernels)
    apply_backend_schedules(module)
    apply_or_warn(module, transform_module, "cleanup")
    remove_tags(module)
    return script


def apply_backend_schedules(module: ir.Operation) -> int:
    """Run each backend-scheduled op's own script on that op; returns how many applied.

    Each op is tagged ``tilecraft.backend_op = n`` and its script wrapped in a root sequence
    matching the tag (``backend_transform_module``); a script that fails leaves its op as it
    was (scalar loops) and a warning names the backend."""
    marked = ops_where(module, lambda op: BACKEND_SCHEDULE_ATTR in op.attributes)
    i64 = ir.IntegerType.get_signless(64)
    scripts = []
    for tag, op in enumerate(marked):
        spec = ir.DictAttr(op.attributes[BACKEND_SCHEDULE_ATTR])
        scripts.append(tuple(ir.StringAttr(spec[key]).value for key in ("backend", "entry", "script")))
        del op.attributes[BACKEND_SCHEDULE_ATTR]
        op.attributes[BACKEND_OP_TAG] = ir.IntegerAttr.get(i64, tag)
    applied = 0
    with module.context:
        for tag, (backend, entry, script) in enumerate(scripts):
            transform_module = backend_transform_module(backend, script, entry, tag)
            error = apply_if_valid(module, transform_module, BACKEND_ROOT_SEQUENCE)
            if error is None:
                applied += 1
            else:
                warnings.warn(f"tilecraft-schedule: backend {backend!r}'s schedule failed, "
                              f"the op keeps scalar loops: {error}", RuntimeWarning, stacklevel=2)
    for op in ops_where(module, lambda op: BACKEND_OP_TAG in op.attributes):
        del op.attributes[BACKEND_OP_TAG]
    return applied


def apply_schedule_ops(module: ir.Operation, plans: list[OpSchedule]) -> None:
    """Apply per-op ``plans`` (no ``@cleanup``): a failed group's fallback."""
    with module.context:
        transform_module = ir.Module.parse(render_script(plans))
    for plan in plans:
        apply_or_warn(module, transform_module, plan.sequence_name)


@register_pass(
    "tilecraft-schedule",
    "Tile, parallelize and vectorize every linalg op with the default CPU schedule",
    options={
        "vector-bits": "vector register width to plan for (default 512)",
        "num-threads": "threads to split parallel loops for (default 1)",
        "tuning-records": "JSON-lines tuning records: ops with a record get its best schedule",
        "cpu": "with tuning-records: the target CPU the records were tuned for (default host)",
        "features": "with tuning-records: the target's -mattr features (default none)",
        "fuse-groups": "1: each fusion group (TVM FuseOps rules) becomes one loop nest "
                       "(default 0: one loop nest per op)",
        "keep-kernels": "1: each distinct outlined kernel stays a private function the entry "
                        "calls, lowered once by the later stages (default 0: calls inlined)",
        "l1d": "L1 data cache per core, e.g. 48K (default 32K)",
        "l2": "L2 cache per core (default 256K)",
        "l3": "shared L3 cache (default 8M)",
    },
)
def default_schedule_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    planner = None
    if options.get("tuning-records"):
        # Imported here: tilecraft.tuning builds on this module (its spaces render through
        # ScriptWriter), so a module-level import would be circular.

        planner = RecordPlanner.from_pass_options(options)
    plans = plan_module(
        module,
        vector_bits=positive_int_option("vector-bits", options.get("vector-bits", "512")),
        num_threads=positive_int_option("num-threads", options.get("num-threads", "1")),
        planner=planner,
        fuse_groups=bool_option("fuse-groups", options.get("fuse-groups", "0")),
        caches=CacheHierarchy().with_sizes(options, what="option of tilecraft-schedule"),
    )
    apply_schedule(module, plans, keep_kernels=bool_option("keep-kernels", options.get("keep-kernels", "0")))


def reproducer(task: Task, config: Mapping[str, int] | None, target: "str | Target" = "llvm") -> str:
    """The task's payload (ops tagged) followed by the schedule script of ``config``.

    ``tilecraft-opt file.mlir --transform-interpreter`` applies it with no Python in the
    loop; ``config=None`` gives the default schedule. The script is exactly what
    ``tilecraft-schedule`` applies for a record with this config.
    """
    target = Target.parse(target)
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task.payload)
        mark_groups(module.operation)  # the payload partitioned as the pipeline partitions it

        # The planner compile uses, given a record of this config: the script is the one
        # tilecraft-schedule applies (a group's config goes to its anchor).
        planner = None
        if config is not None:
            space = SketchSpace(task, task_nest(task), target) if is_sketch_config(config) \
                else space_for(task, target)
            space.validate(config)  # a bad knob raises KnobError here
            record = Record(task=task.describe(), config=dict(config), status="ok", costs=[],
                            gflops=0.0, target=canonical_target(target))
            planner = RecordPlanner({task.key: record}, target)
        plans = plan_module(module.operation, vector_bits=target.vector_bits,
                            num_threads=target.num_threads, planner=planner, caches=target.caches,
                            fuse_groups=True)
        return str(module) + render_script(plans)
