"""``tilecraft-keep-entry-loops-rolled``: LLVM does not unroll the loops of the entry function
when the kernels run outside it.

Why: with several threads, every parallel kernel is outlined into its own function
(``parallel_compute_fn_<n>``, by the async lowering), and what stays in the public entry is
glue: allocations, dispatches, error checks, and the serial loops that fill pad borders and
copy slices (DenseNet's concatenations). LLVM's -O2 unrolled those loops into straight-line
vector stores: DenseNet-121's entry came out as 145,000 instructions (60,000 ``vmovaps``)
and its code generation took 11 of the JIT's 33 CPU seconds, more than all 389 kernels
together; with its loops kept rolled, 1.1 s (docs/performance.md, "Compile time, part 2").
The loops copy and fill memory a vector at a time either way.

How: each back edge of a public ``llvm.func`` — a branch to a block at or before its own in
the region, which is how ``convert-scf-to-cf`` lays out loops — carries
``#llvm.loop_annotation<unroll = <disable = true>>`` (``llvm.loop.unroll.disable``).
Only loops that move memory (loads, stores, address arithmetic, memory intrinsics): a
kernel that runs inside the entry (one with no thread level) keeps its unrolling, and so
does a loop that builds or takes apart a vector lane by lane (``insertelement`` /
``extractelement`` at the loop's index: how a broadcast ``vector.transfer_read`` of one
value per row is lowered): unrolled, LLVM makes it a broadcast or a vector load; rolled, a
dynamic-lane insert per element (a LayerNorm's row mean read so ran 100x slower).
Nothing else changes: vectorization stays LLVM's to decide, and the parallel kernels
(``parallel_compute_fn_<n>``) are untouched. The kernel functions the entry calls
(``tilecraft-schedule{keep-kernels=1}``, named ``__tilecraft_kernel_<n>``) are the entry's
code moved out to be lowered once, and are treated as the entry: their serial copies and
fills unrolled made ResNet-50's JIT 40 % slower. A module without other private functions
(one thread: the kernels run inside the entry or its kernel functions) is left as it is, so
its kernels' code does not change either.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from ..ir_queries import KERNEL_FUNCTION_PREFIX
from ..passes import register_pass

KEEP_ENTRY_LOOPS_ROLLED = "tilecraft-keep-entry-loops-rolled"
LOOP_ANNOTATION = "loop_annotation"
_BRANCHES = ("llvm.br", "llvm.cond_br")


def _visibility(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_visibility"]).value if "sym_visibility" in op.attributes else "public"


def _defined_functions(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "llvm.func" and op.operation.regions[0].blocks]


# Intrinsics that move memory rather than compute on it: a loop of them and of loads, stores
# and address arithmetic is a copy or a fill.
_MEMORY_INTRINSICS = ("mem", "prefetch", "masked", "lifetime", "stack", "assume", "invariant")


# Lane-indexed vector ops: in a loop they index lanes by the loop's counter, which only
# unrolling makes constant (see the module docstring).
_LANE_OPS = ("llvm.insertelement", "llvm.extractelement")


def _computes(op: ir.Operation) -> bool:
    """Whether ``op`` is arithmetic a kernel's speed rests on: floating-point operations, math
    and target intrinsics, integer operations on vectors (int8 kernels), and lane-indexed
    inserts and extracts (a vector built or taken apart element by element)."""
    name = op.name
    if name in _LANE_OPS:
        return True
    if name.startswith(("llvm.fadd", "llvm.fsub", "llvm.fmul", "llvm.fdiv", "llvm.frem", "llvm.fneg", "llvm.fcmp")):
        return True
    if name.startswith("llvm.intr."):
        return not any(word in name for word in _MEMORY_INTRINSICS)
    if name in ("llvm.add", "llvm.sub", "llvm.mul", "llvm.and", "llvm.or", "llvm.xor", "llvm.shl", "llvm.ashr",
                "llvm.lshr", "llvm.sext", "llvm.zext", "llvm.trunc", "llvm.icmp", "llvm.select"):
        return any(isinstance(result.type, ir.VectorType) for result in op.results)
    return False


def _annotate_back_edges(function: ir.Operation, annotation: ir.Attribute) -> int:
    """Set ``annotation`` on every branch of ``function`` to a block at or before its own
    whose loop (the blocks from that one to the branch's, as ``convert-scf-to-cf`` lays
    them out) only moves memory; returns how many. A loop that computes (a kernel with no
    thread level runs inside the entry) keeps LLVM's unrolling: with every loop rolled,
    SqueezeNet ran 1.07x and Inception-v1 1.03x slower. Branches already annotated keep
    their annotation."""
    blocks = list(function.regions[0].blocks)
    index = {block: position for position, block in enumerate(blocks)}
    computes = [any(_computes(op.operation) for op in block.operations) for block in blocks]
    annotated = 0
    for position, block in enumerate(blocks):
        operations = block.operations
        if len(operations) == 0:
            continue
        terminator = operations[len(operations) - 1].operation
        if terminator.name not in _BRANCHES or LOOP_ANNOTATION in terminator.attributes:
            continue
        headers = [index[successor] for successor in terminator.successors if index[successor] <= position]
        if headers and not any(computes[min(headers):position + 1]):
            terminator.attributes[LOOP_ANNOTATION] = annotation
            annotated += 1
    return annotated


def _kernel_function(function: ir.Operation) -> bool:
    """A kernel the schedule kept as a function (``keep-kernels``): code of the entry's,
    moved out so that it is lowered once, whose loops get the entry's treatment."""
    return ir.StringAttr(function.attributes["sym_name"]).value.startswith(KERNEL_FUNCTION_PREFIX)


def keep_entry_loops_rolled(module: ir.Operation) -> int:
    """Disable LLVM's unrolling on the loops of ``module``'s public functions, and of the
    kernel functions the entry calls, when it defines other private functions (parallel
    kernels outlined by the async lowering); returns how many loops were annotated."""
    functions = _defined_functions(module)
    if not any(_visibility(function) == "private" and not _kernel_function(function) for function in functions):
        return 0
    annotation = ir.Attribute.parse("#llvm.loop_annotation<unroll = <disable = true>>", context=module.context)
    return sum(_annotate_back_edges(function, annotation)
               for function in functions if _visibility(function) == "public" or _kernel_function(function))


@register_pass(
    KEEP_ENTRY_LOOPS_ROLLED,
    "Disable LLVM's loop unrolling in the entry function when the kernels are outlined",
)
def keep_entry_loops_rolled_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    keep_entry_loops_rolled(module)
