"""Warp-level contractions onto tensor cores: ``vector.contract`` -> ``nvgpu.mma.sync``.

With the ``tensor-cores=f16`` schedule option, a contraction of f16 inputs into f32 (with
``tensor-cores=tf32``, of f32 inputs) is planned with warp tiles (``schedule.py``,
``_plan_tensor_core``): the block's operand tiles are staged in shared memory K slice by K
slice, and each warp's output tile becomes ``vector.contract`` ops of the ``mma.sync`` shape
(16x8x16 for f16, 16x8x8 for tf32), executed by the warp as a whole.
After the loops are mapped (``tilecraft-gpu-map``), :func:`contractions_to_mma_sync` runs
upstream's ``convert-vector-to-gpu{use-nvgpu=true}``, which distributes each such contraction
over the warp's lanes: ``nvgpu.ldmatrix`` of the A and B fragments from shared memory (B
transposed where it is stored K-major), per-lane loads and stores of the f32 accumulator
fragment, and ``nvgpu.mma.sync``; ``convert-nvgpu-to-nvvm`` (the ``kernel`` stage) makes
those ``ldmatrix.sync.aligned`` and ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``
(``m16n8k8...tf32.tf32.f32``, the f32 ``mma.sync`` marked ``tf32Enabled`` here).

Why in isolation: the pass converts every contraction it can in a function, and a
thread-level contraction (the FMA schedule's register tiles, one per thread) distributed over
lanes as if a warp ran it would compute a wrong answer; worse, the pass aborts the process
(an assertion) on some thread-level kernels, with no contraction converted (an f32 matmul's
4 x 4 register tiles beside an f16 one: "vector types must have positive constant sizes").
So each launch carrying :data:`TENSOR_CORE_LAUNCH` (set by the mapping for launches with
warp loops) is cloned alone into a scratch function, the values it uses from outside as the
function's arguments; the pass runs there, and the converted launch replaces the original.
Afterwards every warp-distributed op (``nvgpu.*``, ``gpu.lane_id``) must be in a converted
launch and no ``vector.contract`` may be left in one: anything else is a
:class:`~tilecraft.errors.GpuScheduleError`, not a silently wrong kernel.
"""

from __future__ import annotations

from mlir import ir, passmanager

from ...errors import GpuScheduleError
from ...pipelines.ir_queries import ops_where

# Discardable attribute on a gpu.launch whose warp loops hold tensor-core contractions.
TENSOR_CORE_LAUNCH = "tilecraft.tensor_cores"

_CONVERT = ("builtin.module(func.func(convert-vector-to-gpu{use-nvgpu=true}), "
            "canonicalize)")


def _enclosing_launch(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "gpu.launch":
        parent = parent.parent
    return parent


def _inside(value: ir.Value, launch: ir.Operation) -> bool:
    """Whether ``value`` is defined in ``launch`` (by an op in it, or as a block argument of
    one of its regions)."""
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        if op.operation == launch.operation:
            return True
        op = op.parent
    return False


def _replace_operands(root: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        for i, operand in enumerate(op.operands):
            if operand in mapping:
                op.operands[i] = mapping[operand]
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)


def _convert_alone(launch: ir.Operation) -> ir.Operation:
    """``launch`` with its contractions converted to ``mma.sync``, the pass having seen
    nothing else (module docstring); returns the launch that replaced it."""
    from mlir.dialects import func

    if len(launch.results):
        raise GpuScheduleError(f"tensor cores: an asynchronous launch is not expected here "
                               f"(at {launch.location})")
    free: list[ir.Value] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        for operand in op.operands:
            if operand not in free and not _inside(operand, launch):
                free.append(operand)
        return ir.WalkResult.ADVANCE

    launch.walk(collect, ir.WalkOrder.PRE_ORDER)
    with launch.context, launch.location:
        scratch = ir.Module.create()
        with ir.InsertionPoint(scratch.body):
            function = func.FuncOp("tensor_core_launch", ir.FunctionType.get([v.type for v in free], []))
            entry = function.add_entry_block()
        with ir.InsertionPoint(entry):
            alone = launch.clone()
            func.ReturnOp([])
        _replace_operands(alone, dict(zip(free, entry.arguments)))
        try:
            passmanager.PassManager.parse(_CONVERT).run(scratch.operation)
        except ir.MLIRError as error:
            raise GpuScheduleError(f"tensor cores: converting warp-level contractions to "
                                   f"mma.sync failed: {error}") from None
        # Back in place: what canonicalization hoisted out of the launch (constants) first.
        mapping = dict(zip(entry.arguments, free))
        converted = None
        for op in entry.operations:
            if op.name == "gpu.launch":
                converted = op
            elif op.name != "func.return":
                with ir.InsertionPoint(launch):
                    hoisted = op.clone()
                _replace_operands(hoisted, mapping)
                mapping.update(zip(op.results, hoisted.results))
        with ir.InsertionPoint(launch):
            replacement = converted.clone()
        _replace_operands(replacement, mapping)
    launch.erase()
    return replacement


def contractions_to_mma_sync(module: ir.Operation) -> int:
    """Convert the warp-level contractions of the tensor-core launches in ``module`` to
    ``nvgpu.mma.sync``; returns how many ``mma.sync`` the module then has. A module without
    such a launch is left as it is."""
    launches = ops_where(module, lambda op: op.name == "gpu.launch"
                         and TENSOR_CORE_LAUNCH in op.attributes)
    if not launches:
        return 0
    converted = [_convert_alone(launch) for launch in launches]
    launches = converted
    for op in ops_where(module, lambda op: op.name.startswith("nvgpu.") or op.name == "gpu.lane_id"):
        launch = _enclosing_launch(op)
        if launch is None or TENSOR_CORE_LAUNCH not in launch.attributes:
            raise GpuScheduleError(
                f"tensor cores: {op.name} was created outside a tensor-core kernel (at "
                f"{op.location}); a thread-level contraction must not be distributed over a warp")
    count = 0
    for launch in launches:
        left = ops_where(launch, lambda op: op.name == "vector.contract")
        if left:
            raise GpuScheduleError(
                f"tensor cores: a warp-level contraction was not converted to mma.sync (at "
                f"{left[0].location})")
        for mma in ops_where(launch, lambda op: op.name == "nvgpu.mma.sync"):
            # f32 operands only come from tensor-cores=tf32 (the planner's choice): the tensor
            # cores take them as TF32, which nvgpu asks to be said explicitly.
            if isinstance(ir.VectorType(mma.operands[0].type).element_type, ir.F32Type):
                mma.attributes["tf32Enabled"] = ir.UnitAttr.get()
            count += 1
        del launch.attributes[TENSOR_CORE_LAUNCH]
    return count
