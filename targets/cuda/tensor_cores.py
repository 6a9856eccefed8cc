"""Warp-level contractions onto tensor cores: ``vector.contract`` -> ``nvgpu.mma.sync``.

With the ``tensor-cores=f16`` schedule option, a contraction of f16 inputs into f32
is planned with warp tiles (``schedule.py``, ``_plan_tensor_core``): the block's operand
tiles are staged in shared memory K slice by K slice, and each warp's output tile becomes
``vector.contract`` ops of the ``mma.sync.m16n8k16`` shape, executed by the warp as a whole.
After the loops are mapped (``tilecraft-gpu-map``), :func:`contractions_to_mma_sync` runs
upstream's ``convert-vector-to-gpu{use-nvgpu=true}``, which distributes each such contraction
over the warp's lanes: ``nvgpu.ldmatrix`` of the A and B fragments from shared memory (B
transposed where it is stored K-major), per-lane loads and stores of the f32 accumulator
fragment, and ``nvgpu.mma.sync``; ``convert-nvgpu-to-nvvm`` (the ``kernel`` stage) makes
those ``ldmatrix.sync.aligned`` and ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``.

Why a guard around an upstream pass: the pass converts every contraction it can in the
function, and a thread-level contraction (the FMA schedule's 4 x 4 register tiles, one per
thread) distributed over lanes as if a warp ran it would compute a wrong answer. So it runs
only when a launch carries :data:`TENSOR_CORE_LAUNCH` (set by the mapping for launches with
warp loops), and afterwards every warp-distributed op (``nvgpu.*``, ``gpu.lane_id``) must be
in such a launch and no ``vector.contract`` may be left in one; anything else is a
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


def contractions_to_mma_sync(module: ir.Operation) -> int:
    """Convert the warp-level contractions of the tensor-core launches in ``module`` to
    ``nvgpu.mma.sync``; returns how many ``mma.sync`` the module then has. A module without
    such a launch is left as it is."""
    launches = ops_where(module, lambda op: op.name == "gpu.launch"
                         and TENSOR_CORE_LAUNCH in op.attributes)
    if not launches:
        return 0
    try:
        with module.context:
            passmanager.PassManager.parse(_CONVERT).run(module)
    except ir.MLIRError as error:
        raise GpuScheduleError(f"tensor cores: converting warp-level contractions to mma.sync "
                               f"failed: {error}") from None
    # The pass may have rebuilt nothing outside; still, find the launches afresh.
    launches = ops_where(module, lambda op: op.name == "gpu.launch"
                         and TENSOR_CORE_LAUNCH in op.attributes)
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
        count += len(ops_where(launch, lambda op: op.name == "nvgpu.mma.sync"))
        del launch.attributes[TENSOR_CORE_LAUNCH]
    return count
