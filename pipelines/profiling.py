"""Per-kernel profiling: ``tilecraft-profile-kernels`` brackets every top-level kernel of the
entry function (each loop nest the schedule made from one linalg op, each call of a kernel
function, an extern or an offloaded op, and each pad or concat that still copies, named after
its ONNX node) with ``tilecraft_profile_begin/end(id)`` calls, timed by runtime/profile_timer.c
in a package's ``profile.so`` (compiler/package.py builds it with :func:`profiling_pipeline`).

A kernel is named by its op's location, so a rewrite that replaces ops must say whose kernel
the new op is: int8_matmul.py's ``fuse_epilogue`` gives the call of a product fused with its
epilogue the location ``fused[product, epilogue]`` (the first name counts). With the
epilogue's location alone, int8 ResNet-50's stem and downsample read ~0 us: their names were
on the layout copies before them, their time under the QuantizeLinear after them.
"""

from __future__ import annotations

import re
from typing import Mapping

from mlir import ir

from .passes import register_pass
from .pipeline import Pipeline

PROFILE_PASS = "tilecraft-profile-kernels"

# loc("name"), loc("name"(child)) (ONNX nodes), loc("file":line:col) (MLIR files)
_LOCATION = re.compile(r'^loc\("([^"]*)"(?::(\d+):\d+)?(?:\(.*\))?\)$')
# loc(fused["name"(child), ...]): ops merged by elementwise fusion; the first name is taken
_FUSED_LOCATION = re.compile(r'^loc\(fused\["([^"]*)"')


def kernel_name(op: ir.Operation, index: int) -> str:
    """``<node>(<OpType>)`` from an ONNX model's locations (the first node of a fused
    location: a GELU's generic made of several ONNX nodes), ``<op> (line N)`` for MLIR files.
    Tuning tasks name their kernels the same way (``Task.kernels``), so a profile joins them."""
    location = str(op.location)
    fused = _FUSED_LOCATION.match(location)
    if fused is not None:
        return fused.group(1)
    match = _LOCATION.match(location)
    if match is None:
        return f"kernel{index} ({op.name})"
    name, line = match.groups()
    return f"{op.name} (line {line})" if line else name


_KERNEL_OPS = ("scf.forall", "scf.for", "scf.parallel")
# Ops left at function level that still move data once bufferized: a pad fills its borders
# (and copies its source in when no producer writes into it, pipelines/tensor/pad_destinations.py),
# a concat copies the parts no producer writes into. Unbracketed, their time was in no kernel.
_COPY_OPS = ("tensor.pad", "tensor.concat")


@register_pass(
    PROFILE_PASS,
    "Bracket each top-level loop nest / linalg op of public functions with timer calls",
)
def profile_kernels_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why after the schedule: each linalg op is then one top-level loop nest (or a linalg
    op the schedule left alone), and nothing later moves code across an opaque call, so the
    timers measure exactly that kernel. The kernel names go into ``tilecraft.kernels`` on
    the module for the manifest."""
    # Its own location: run alone (tilecraft-opt) no caller establishes one.
    with ir.InsertionPoint(module.regions[0].blocks[0]), ir.Location.unknown(module.context):
        i64 = ir.IntegerType.get_signless(64)
        for name in ("tilecraft_profile_begin", "tilecraft_profile_end"):
            ir.Operation.create(
                "func.func",
                attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get([i64], [])),
                    "sym_visibility": ir.StringAttr.get("private"),
                },
                regions=1,
            )
    names: list[str] = []
    for func in list(module.regions[0].blocks[0].operations):
        func = func.operation
        if func.name != "func.func" or not func.regions[0].blocks:
            continue
        if "sym_visibility" in func.attributes:
            continue
        for op in list(func.regions[0].blocks[0].operations):
            op = op.operation
            copy = op.name in _COPY_OPS
            if not (copy or op.name in _KERNEL_OPS or op.name.startswith("linalg.") or _kernel_call(op)):
                continue
            index = len(names)
            # A pad or concat carries its consumer's location: named apart from that kernel.
            names.append(kernel_name(op, index) + (f" [{op.name}]" if copy else ""))
            with op.location:
                with ir.InsertionPoint(op):
                    _timer_call("tilecraft_profile_begin", index, i64)
                with ir.InsertionPoint.after(op):
                    _timer_call("tilecraft_profile_end", index, i64)
    module.attributes["tilecraft.kernels"] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])


def _kernel_call(op: ir.Operation) -> bool:
    """A call that is a kernel of its own: an int8 kernel function (int8_matmul.py), an
    extern or offloaded call; not the timers."""
    if op.name != "func.call":
        return False
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    return not callee.startswith("tilecraft_profile_")


def _timer_call(callee: str, index: int, i64: ir.Type) -> None:
    constant = ir.Operation.create(
        "arith.constant", results=[i64], attributes={"value": ir.IntegerAttr.get(i64, index)}
    )
    ir.Operation.create(
        "func.call",
        operands=[constant.result],
        attributes={"callee": ir.FlatSymbolRefAttr.get(callee)},
    )


def profiling_pipeline(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with the kernel timers inserted at the end of its schedule stage."""
    stage = pipeline.stage("schedule")
    return pipeline.replace("schedule", (*stage.passes, PROFILE_PASS))
