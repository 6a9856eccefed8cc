"""The stages every CPU pipeline shares: the entry's calling convention, simplification, and
the lowering from scheduled linalg to the LLVM dialect.

Why a module of their own: the CPU pipeline (cpu.py) puts the graph passes and the schedule
between them, and the graph stage's constant folder compiles folded subgraphs with these
stages alone (a pipeline with a graph stage inside a graph pass would be a cycle).
Ordering constraints that bite (see ``../shared/STACK.md``): vector transfers are unrolled
(``full-unroll``) before reaching LLVM so no ``alloca`` lands inside loops;
``expand-strided-metadata`` runs before ``lower-affine``; the async runtime is lowered
before ``convert-to-llvm``; ``reconcile-unrealized-casts`` comes last.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from .tensor import extern  # noqa: F401  (registers tilecraft-lower-externs)
from .tensor import tensorize  # noqa: F401  (registers tilecraft-tensorize: scheduled_pipeline runs it)
from .buffer.bool_memory import WIDEN_BOOL_MEMORY
from .tensor.fusion_barrier import DROP_BARRIERS, INSERT_BARRIERS
from .tensor.inner_unit_dims import DROP_INNER_UNIT_DIMS
from .tensor.fused_attention import FUSE_ATTENTION_PASS, LANES as ATTENTION_LANES
from .tensor.int8_matmul import INT8_EPILOGUE_PASS, INT8_MATMUL_PASS, VNNI_DOTS_PASS
from .vector.merge_functions import MERGE_IDENTICAL_FUNCTIONS
from .vector.entry_loops import KEEP_ENTRY_LOOPS_ROLLED
from .buffer.parallel_loops import COLLAPSE_PARALLEL_LOOPS
from .buffer.parallel_for import MARK_PARALLEL_CALLS, PARALLEL_FOR
from .passes import register_pass
from .tensor.runtime_checks import INSERT_CHECKS, LOWER_CHECKS
from .vector.runtime_verification import GENERATE_VERIFICATION, ROUTE_VERIFICATION, VERIFY_VECTOR_ACCESSES
from .pipeline import Stage
from .buffer.pad_borders import FILL_PAD_BORDERS
from .tensor.call_destinations import CALL_DESTINATIONS
from .tensor.concat_destinations import CONCATS_AS_DESTINATIONS
from .tensor.concat_slices import SLICE_CONCAT_PARTS
from .tensor.transpose_reads import TRANSPOSES_AS_READS
from .tensor.pad_destinations import PADS_AS_DESTINATIONS
from .buffer.prefetch_blocks import PREFETCH_NEXT_BLOCKS
from .buffer.strided_copies import STRIDED_COPIES_TO_LINALG
from .target import Target
from .vector.vector_contract import CANONICALIZE_UNIT_CONTRACTIONS
from .vector.strided_gathers import UNIT_STRIDE_GATHERS
from .vector.transpose_shuffles import TRANSPOSE_SHUFFLES
from .vector.row_chains import ELEMENTWISE_BY_ROWS
from .vector.vector_math import APPROXIMATE_EXP, DIVIDE_BY_RECIPROCAL, REASSOCIATE_REDUCTIONS
from .vector.integer_round_trips import FOLD_INTEGER_ROUND_TRIPS

C_INTERFACE = "llvm.emit_c_interface"


def _public_functions(module: ir.Operation) -> list[ir.Operation]:
    functions = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func" or len(op.regions[0].blocks) == 0:
            continue
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
        if visibility is None or ir.StringAttr(visibility).value == "public":
            functions.append(op)
    return functions


@register_pass(
    "tilecraft-prepare-entry",
    "Make public functions callable from the runtime: C interface, read-only tensor arguments",
)
def prepare_entry_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the runtime calls ``_mlir_ciface_<name>`` with memref descriptors, and the
    caller's numpy arrays must never be overwritten, so bufferization may not write into
    function arguments in place (``bufferization.writable = false``)."""
    for func in _public_functions(module):
        func.attributes[C_INTERFACE] = ir.UnitAttr.get()
        function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        empty = ir.DictAttr.get({})
        existing = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
        merged = []
        for index, arg_type in enumerate(function_type.inputs):
            attrs = {} if existing is None else {
                named.name: named.attr for named in ir.DictAttr(existing[index])
            }
            if isinstance(arg_type, ir.RankedTensorType):
                attrs["bufferization.writable"] = ir.BoolAttr.get(False)
            merged.append(ir.DictAttr.get(attrs) if attrs else empty)
        if merged and (existing is not None or any(m != empty for m in merged)):
            func.attributes["arg_attrs"] = ir.ArrayAttr.get(merged)


@register_pass(
    "tilecraft-set-target",
    "Set target-cpu / target-features on every llvm.func",
    options={"cpu": "LLVM CPU name, e.g. skylake-avx512", "features": "e.g. +avx512f,-avx512vl"},
)
def set_target_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the JIT compiles for the host; a named target's CPU and features travel as
    function attributes, which LLVM's code generator honours per function."""
    attributes = {}
    if options.get("cpu"):
        attributes["target_cpu"] = ir.StringAttr.get(options["cpu"])
    if options.get("features"):
        attributes["target_features"] = ir.Attribute.parse(
            "#llvm.target_features<[" + ", ".join(f'"{f}"' for f in options["features"].split(",")) + "]>"
        )
    if not attributes:
        return
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "llvm.func":
            for name, value in attributes.items():
                op.operation.attributes[name] = value


def input_stage() -> Stage:
    """The entry's calling convention (``tilecraft-prepare-entry``)."""
    return Stage("input", ("tilecraft-prepare-entry", "tilecraft-lower-externs"),
          "C interface on public functions; arguments read-only; extern calls in "
          "destination-passing style")


def simplify_stage(*, mark_groups: bool = False, runtime_checks: bool = True, vnni: bool = False,
                   num_threads: int = 1, fused_attention: bool = False,
                   attention_lanes: int = ATTENTION_LANES) -> Stage:
    """Canonicalization; with ``fused_attention``, attention (batch matmul, softmax, batch
    matmul) as one kernel (fused_attention.py; vectors of the target's ``attention_lanes``
    f32); 8-bit integer matmuls as VNNI kernels (``vnni``, split for
    ``num_threads``) or i32 matmuls (int8_matmul.py); elementwise fusion, with no producer
    fused where it would be recomputed (fusion_barrier.py); then the run-time checks of dynamic sizes
    (runtime_checks.py; ``runtime_checks=False`` removes every check, the emitters' too),
    with their sizes resolved to the arguments' dims; with ``mark_groups``, then the
    partition into fusion groups (``tilecraft-mark-groups``), made once here, on the ops
    the schedule will see."""
    checks = (f"{INSERT_CHECKS}{{enabled={int(runtime_checks)}}}", "resolve-ranked-shaped-type-result-dims")
    return Stage("simplify",
                 ("canonicalize", "cse",
                  # a roll over several dims copied once, not once per dim (concat_slices.py)
                  SLICE_CONCAT_PARTS,
                  *((f"{FUSE_ATTENTION_PASS}{{num-threads={num_threads} lanes={attention_lanes}}}",) if fused_attention else ()),
                  f"{INT8_MATMUL_PASS}{{vnni={int(vnni)} num-threads={num_threads}}}",
                  # a transpose only an elementwise op reads becomes that op's read (transpose_reads.py)
                  TRANSPOSES_AS_READS, INSERT_BARRIERS, "func.func(linalg-fuse-elementwise-ops)",
                  DROP_BARRIERS, INT8_EPILOGUE_PASS, DROP_INNER_UNIT_DIMS, *checks, "canonicalize",
                  *(("tilecraft-mark-groups",) if mark_groups else ())),
                 "fold constants; slices of concats from their parts; " + ("attention as one kernel; " if fused_attention else "") + "8-bit matmuls as dot-product kernels or i32 matmuls; fuse "
                 "elementwise producers into consumers; no unit dim innermost; run-time checks"
                 + ("; tag fusion groups" if mark_groups else ""))


def lowering_stages(target: Target, *, checked: bool = False) -> tuple[Stage, ...]:
    """Scheduled linalg on tensors to the LLVM dialect: bufferize, loops (parallel loops as
    calls of the runtime's flat parallel-for when ``target`` has several threads), vector, llvm. ``checked``: MLIR's
    run-time verification of every memref access, failures reported as typed errors
    (pipelines/vector/runtime_verification.py)."""
    target = Target.parse(target)
    threads = target.num_threads
    async_lowering = (
        (
            # Loops are collapsed to one dimension first (parallel_loops.py), then each
            # becomes one call of the runtime's flat parallel-for on its outlined body
            # (parallel_for.py). The loops it cannot take (reductions, dynamic
            # multi-dimensional bounds, captured values of other types) go on to
            # async-parallel-for. min-task-size=1: each scf.forall iteration is already a
            # task the planner sized; with the default (1000 iterations per task) a loop of
            # fewer than 1000 iterations ran whole on the calling thread.
            COLLAPSE_PARALLEL_LOOPS,
            PARALLEL_FOR,
            f"async-parallel-for{{num-workers={threads} min-task-size=1}}",
            "async-to-async-runtime",
            "async-runtime-ref-counting",
            "async-runtime-ref-counting-opt",
            "convert-async-to-llvm",
            # convert-async-to-llvm declares the whole async runtime API (22 functions)
            # whatever the module calls: a module whose loops all became parallel-for calls
            # (or that has none) then needed symbols it never calls (nm -u of its object).
            # symbol-dce drops every private declaration nothing references.
            "symbol-dce",
        )
        if threads > 1
        else ()
    )
    target_options = " ".join(
        f"{key}={value}"
        for key, value in (("cpu", target.mcpu), ("features", ",".join(target.mattr)))
        if value
    )
    return (
        Stage("bufferize",
              # allow-return-allocs-from-loops: an ONNX Scan's state is a new tensor each
              # iteration (frontend/onnx/ops/control_flow.py), not an update in place.
              # Pads become border fills plus an insert that their source's producer writes
              # into, concats one insert per part (eliminate-empty-tensors); cse then merges
              # the subviews bufferization made of one slice, so that canonicalize drops the
              # copies onto themselves.
              # Kernels kept as functions (tilecraft-schedule's keep-kernels): a call that
              # writes a slice of a pad or concat takes the whole tensor (call_destinations.py),
              # and a kernel's result that is its destination argument (after canonicalize
              # folds the loops that carry it) is dropped, so nothing is copied across calls.
              (PADS_AS_DESTINATIONS, CONCATS_AS_DESTINATIONS, "eliminate-empty-tensors",
               CALL_DESTINATIONS,
               "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
               "function-boundary-type-conversion=identity-layout-map}",
               "cse", "canonicalize", "drop-equivalent-buffer-results", "buffer-deallocation-pipeline",
               "convert-bufferization-to-memref"),
              "pads and concats as their parts' destination (through kernel calls too); tensors to "
              "buffers, kernels' destinations passed as arguments; results returned as fresh "
              "allocations the caller frees"),
        Stage("loops",
              # Bool buffers become byte buffers once nothing but loads and stores
              # touches them, and before async lowering outlines parallel bodies.
              # Prefetches are placed while each task is still an scf.forall body whose
              # loops read as the schedule made them (prefetch_blocks.py).
              (PREFETCH_NEXT_BLOCKS, FILL_PAD_BORDERS, STRIDED_COPIES_TO_LINALG,
               "convert-linalg-to-loops", WIDEN_BOOL_MEMORY,
               "func.func(scf-forall-to-parallel)", *async_lowering),
              "next blocks of block-major constants prefetched; pads fill their borders only; "
              "remaining linalg to loops; i1 buffers as bytes; "
              "parallel loops as flat parallel-for calls (async runtime for the rest)"),
        Stage("vector",
              # Why lower-vector-multi-reduction: vectorized reductions (sum, max,
              # softmax) leave vector.multi_reduction, which convert-vector-to-llvm does
              # not lower (it survived as an unrealized cast and the JIT failed). The
              # default schedule keeps reduced dims innermost, hence inner-reduction.
              # APPROXIMATE_EXP: LLVM would scalarize vector exp into expf calls;
              # REASSOCIATE_REDUCTIONS: it would add a float reduction's lanes in order.
              # CANONICALIZE_UNIT_CONTRACTIONS: it would lower a contraction over several
              # unit reduction dims (a reduction over [dir, hidden]) to scalar code.
              # VNNI_DOTS_PASS: the int8 kernels' dot products as vpdpbusd (int8_matmul.py).
              # FOLD_INTEGER_ROUND_TRIPS: a QuantizeLinear + DequantizeLinear pair in one body
              # converts a clamped integral float to u8 and back (integer_round_trips.py).
              # DIVIDE_BY_RECIPROCAL: a vector divide is far slower than a multiply (QuantizeLinear).
              # UNIT_STRIDE_GATHERS: LLVM's lowering of a gather needs a unit innermost stride.
              # TRANSPOSE_SHUFFLES: register-tile transposes as butterfly shuffles, before the
              # transfers are unrolled (MLIR's lowering moved them element by element).
              # ELEMENTWISE_BY_ROWS: a register tile's epilogue (after the exp's expansion) row
              # by row; op by op, every row's intermediates were live at once (row_chains.py).
              ((VNNI_DOTS_PASS,) if target.has_avx512_vnni else ()) + (UNIT_STRIDE_GATHERS, FOLD_INTEGER_ROUND_TRIPS,
               DIVIDE_BY_RECIPROCAL, TRANSPOSE_SHUFFLES,
               CANONICALIZE_UNIT_CONTRACTIONS,
               "func.func(lower-vector-multi-reduction{lowering-strategy=inner-reduction})",
               REASSOCIATE_REDUCTIONS, "convert-vector-to-scf{full-unroll=true}",
               APPROXIMATE_EXP, ELEMENTWISE_BY_ROWS, "canonicalize"),
              "multi-reductions to 1-D reductions (lanes summed as a tree); unroll vector "
              "transfers to 1-D (no alloca in loops); vector exp as a polynomial"),
        Stage("llvm",
              (LOWER_CHECKS, *((GENERATE_VERIFICATION, VERIFY_VECTOR_ACCESSES) if checked else ()),
               "expand-strided-metadata", "lower-affine", "convert-scf-to-cf",
               *((ROUTE_VERIFICATION,) if checked else ()),
               # After every early return exists (failed checks): each ends the call.
               *((MARK_PARALLEL_CALLS,) if threads > 1 else ()),
               "convert-vector-to-llvm{vector-contract-lowering=outerproduct}",
               # Again: lowering a dot-product vector.contract makes unflagged float sums.
               REASSOCIATE_REDUCTIONS,
               "convert-to-llvm", "reconcile-unrealized-casts", "canonicalize",
               # Repeated blocks' kernels are the same functions: LLVM compiles each once.
               MERGE_IDENTICAL_FUNCTIONS,
               # The entry's glue loops (pad fills, slice copies) not unrolled by LLVM.
               KEEP_ENTRY_LOOPS_ROLLED)
              + ((f"tilecraft-set-target{{{target_options}}}",) if target_options else ()),
              "run-time checks to reports and early returns; everything to the LLVM dialect; "
              "identical private functions merged; the entry's loops kept rolled"),
    )
