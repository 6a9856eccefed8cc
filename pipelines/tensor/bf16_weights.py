"""Constant weights of contractions stored as bf16: ``tilecraft-bf16-weights``.

``precision="bf16"`` (compiler/precision.py) halves the bytes of every constant that a
matmul or convolution reads: the f32 constant becomes a bf16 one (rounded to nearest even by
``ml_dtypes``) and a ``linalg.generic`` widening it back (``arith.extf``) where it is read,
so products and sums stay in f32 and epilogues, softmax and norms see f32 as before. bf16
keeps f32's exponent range, so no weight overflows or flushes; it keeps 8 bits of mantissa,
so each weight moves by at most 2^-9 of itself (a relative error of ~0.4 % per weight,
averaging out over a long sum: the accuracy report measures what the model makes of it).

The pass runs after the graph stage's constant folding: batch norms are folded into conv
weights and matmul weights packed into panels first, and the bf16 constants are left alone
by the folder after this (graph/constant_folding.py keeps types numpy cannot hold).

With ``kernels=1`` (``with_bf16_weights`` sets it for AVX512-BF16 targets), plain matmuls and
NHWC convolutions (any window, even channel counts; 1x1 stride-1 ones with any) by such a
constant become calls of bf16 dot-product kernels instead
(bf16_matmul.py: ``vdpbf16ps``), which take the weights rounded to bf16 and packed for them.
A windowed convolution of an odd channel count (an RGB stem) takes them reading its windows
by kernel rows where its dilation along the width is 1 (bf16_matmul.RowSpan), else (3 or more
channels) on one more channel of zeros in its input and filter (graph/even_channels.py).

Left alone: non-constant operands, constants that are not f32, and small ones (at most
``RESOURCE_THRESHOLD`` elements, biases and scales: nothing to save).
"""

from __future__ import annotations

from typing import Mapping

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith

from ...ir import core
from ...errors import OptionError, PipelineError
from ...ir.core import RESOURCE_THRESHOLD
from ...ir.resources import is_resource_constant, resource_arrays
from .bf16_activations import BF16_ACTIVATIONS_PASS
from .fused_attention import with_bf16_products
from .bf16_matmul import BF16_DOTS_PASS, BF16_EPILOGUE_PASS, takes_kernel, takes_row_span_kernel, to_bf16_kernel
from .register_tiles import CONFIGS_OPTION, KernelConfig, parse_kernel_configs
from .int8_matmul import INT8_EPILOGUE_PASS
from ..graph.channel_scales import SCALE_FILTERS_BY_CHANNEL
from ..graph.even_channels import odd_channels, with_zero_channel
from ..ir_queries import defined_functions, defining_op
from ..passes import positive_int_option, register_pass
from ..pipeline import Pipeline
from ..target import Target

# graph/weight_panels.py's pass: packs constant matmul weights for the f32 schedule.
PACK_WEIGHT_PANELS = "tilecraft-pack-weight-panels"
# graph/padded_extents.py's pass: its cost for padding filters written in place is the f32 tile's.
PAD_MATMUL_EXTENTS = "tilecraft-pad-matmul-extents"

BF16_WEIGHTS = "tilecraft-bf16-weights"


def is_contraction(op: ir.Operation) -> bool:
    """A linalg op that sums products: a named matmul or convolution, or a generic with a
    reduction iterator whose body multiplies."""
    name = op.name
    if not name.startswith("linalg."):
        return False
    if "matmul" in name or "conv" in name:
        return True
    if name != "linalg.generic":
        return False
    if "reduction" not in str(op.attributes["iterator_types"]):
        return False
    return any(inner.operation.name == "arith.mulf" for inner in op.regions[0].blocks[0].operations)


def _weight_constants(function: ir.Operation) -> list[tuple[ir.Operation, int, ir.Operation]]:
    """(contraction, operand index, constant) for every large f32 resource constant read by
    a contraction's inputs."""
    found = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if is_contraction(op):
            inputs = len(op.operands) - len(op.results)  # destination-passing style: inits last
            for index in range(inputs):
                constant = defining_op(op.operands[index])
                if constant is None or not is_resource_constant(constant):
                    continue
                tensor_type = ir.RankedTensorType(constant.results[0].type)
                if str(tensor_type.element_type) == "f32" and np.prod(tensor_type.shape) > RESOURCE_THRESHOLD:
                    found.append((op, index, constant))
        return ir.WalkResult.ADVANCE

    function.walk(visit)
    return found


def _key(op: ir.Operation) -> ir.Operation:
    """One key per operation whichever Python wrapper reaches it: each read of an operand's
    owner makes a new wrapper (``id()`` differs), while ``ir.Operation`` compares and hashes
    by the operation itself."""
    return op.operation


def store_weights_as_bf16(function: ir.Operation, kernel_threads: int = 0,
                          configs: "Mapping[str, KernelConfig] | None" = None) -> int:
    """Rewrite the weights of ``function``'s contractions; returns how many were rewritten.
    ``kernel_threads`` > 0: plain matmuls and convolutions (``bf16_matmul.takes_kernel``)
    become calls of bf16 dot-product kernels split for
    that many threads (bf16_matmul.py; ``configs``: their configs by default kernel name,
    from tuning records), the other contractions read widened weights."""
    found = _weight_constants(function)
    if not found:
        return 0
    # Keyed by the operation, not by the Python object: two reads of one constant come back
    # as two wrappers of it, and erasing it twice crashed the process (CBAM's shared MLP,
    # applied to its average- and its max-pooled features).
    constants = list({_key(c): c for _, _, c in found}.values())
    arrays = dict(zip(map(_key, constants), resource_arrays(constants)))
    widened: dict[ir.Operation, ir.Value] = {}
    module = function.parent if kernel_threads else None
    for op, index, constant in found:
        if kernel_threads and index == 1 and takes_row_span_kernel(op):
            to_bf16_kernel(module, op, np.asarray(arrays[_key(constant)]), kernel_threads, configs, row_span=True)
            continue
        if kernel_threads and index == 1 and odd_channels(op):
            op = _even_channels_for_kernel(op, np.asarray(arrays[_key(constant)]), module, kernel_threads)
            if op is None:
                continue
        if kernel_threads and index == 1 and takes_kernel(op):
            to_bf16_kernel(module, op, np.asarray(arrays[_key(constant)]), kernel_threads, configs)
            continue
        if _key(constant) not in widened:
            with ir.InsertionPoint(constant), constant.location:
                narrow = core.constant(np.asarray(arrays[_key(constant)]).astype(ml_dtypes.bfloat16),
                                       name="bf16_weight")
                f32 = ir.F32Type.get()
                widened[_key(constant)] = core.elementwise([narrow], f32, lambda x: arith.extf(f32, x))
        op.operands[index] = widened[_key(constant)]
    for constant in constants:
        if not list(constant.results[0].uses):
            constant.erase()
    return len(found)


def _even_channels_for_kernel(op: ir.Operation, weights: np.ndarray, module: ir.Operation,
                              threads: int) -> ir.Operation | None:
    """A convolution of an odd channel count (graph/even_channels.py) as a bf16 kernel on one
    more, zero, channel: ``None`` once done; ``op`` itself, untouched, where the convolution
    with the zero channel would not take the kernel either (its accumulator is not a zero
    fill, say)."""
    even, padded = with_zero_channel(op, weights)
    image = defining_op(even.operands[0])
    filter_ = defining_op(even.operands[1])
    if not takes_kernel(even):
        even.erase()
        for dead in (filter_, image):
            dead.erase()
        return op
    source = defining_op(op.operands[0])
    op.results[0].replace_all_uses_with(even.results[0])
    op.erase()
    if source is not None and source.name == "tensor.pad" and not list(source.results[0].uses):
        source.erase()  # the spatial pad that the channel's pad took over
    to_bf16_kernel(module, even, padded, threads)
    filter_.erase()  # the kernel took its own packed bf16 copy
    return None


@register_pass(BF16_WEIGHTS, "Constant f32 weights of matmuls and convolutions stored as bf16, "
                             "widened to f32 where they are read (precision='bf16')",
               options={"kernels": "1: plain matmuls and convolutions become bf16 dot-product kernels (bf16_matmul.py; "
                                   "default 0)",
                        "num-threads": "threads the kernels' parallel loops are split for (default 1)",
                        CONFIGS_OPTION: "kernel configs by default kernel name, <name>:<rows>.<vectors>.<task rows>, "
                                        "comma-separated (tuning records: schedule/record_plan.py); default none"})
def bf16_weights_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    kernels = options.get("kernels", "0")
    if kernels not in ("0", "1"):
        raise PipelineError(f"{BF16_WEIGHTS}: kernels must be 0 or 1, got {kernels!r}")
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    configs = parse_kernel_configs(options.get(CONFIGS_OPTION, ""), BF16_WEIGHTS)
    for function in defined_functions(module):
        store_weights_as_bf16(function, threads if kernels == "1" else 0, configs)


def _without_destination_padding(element: str) -> str:
    """``element`` with ``destination-padding=0`` when it is the matmul-extents padding pass
    (pipelines/graph/padded_extents.py): its cost for padding filters written into a pad or
    concat is the f32 register tile's, and bf16 dot-product kernels would compute the padded
    filters and then copy the result where they write it in place otherwise."""
    name, _, rest = element.partition("{")
    if name != PAD_MATMUL_EXTENTS:
        return element
    options = rest.rstrip("}").strip()
    return f"{name}{{{options + ' ' if options else ''}destination-padding=0}}"


def with_bf16_weights(pipeline: Pipeline, target: Target | None = None, *, kernels: bool | None = None) -> Pipeline:
    """``pipeline`` at ``precision="bf16"``: ``tilecraft-bf16-weights`` at the end of its
    graph stage (after constant folding), or first in its simplify stage when it has no
    graph stage.

    With ``kernels`` (default: whether ``target`` has AVX512-BF16), plain matmuls and
    convolutions become bf16 dot-product kernels: the graph stage packs no weight panels (the kernels pack their own),
    and the vector stage turns the kernels' dot products into ``vdpbf16ps`` where the target
    has it. ``kernels=True`` on another target keeps the portable dot products (for tests)."""
    target = Target.parse(target or "llvm")
    if kernels is None:
        kernels = target.has_avx512_bf16
    element = f"{BF16_WEIGHTS}{{kernels=1 num-threads={target.num_threads}}}" if kernels else BF16_WEIGHTS
    if any(p.split("{")[0] == BF16_WEIGHTS for stage in pipeline.stages for p in stage.passes):
        return pipeline
    for stage_name, at_end in (("graph", True), ("simplify", False)):
        if stage_name in pipeline.stage_names:
            # A squeeze-excite gate stays on the activation: scaled by it, the projection's
            # filter would be computed per call, no constant to store as bf16 (graph/channel_scales.py).
            passes = [p for p in pipeline.stage(stage_name).passes
                      if not (kernels and p == PACK_WEIGHT_PANELS) and p != SCALE_FILTERS_BY_CHANNEL]
            if kernels:  # the kernels tile their own filters: padding one written in place only adds its copy
                passes = [_without_destination_padding(p) for p in passes]
            pipeline = pipeline.replace(stage_name, [*passes, element] if at_end else [element, *passes])
            break
    else:
        raise OptionError("precision='bf16' needs a pipeline with a 'graph' or 'simplify' stage")
    if kernels and "simplify" in pipeline.stage_names and INT8_EPILOGUE_PASS in pipeline.stage("simplify").passes:
        passes = list(pipeline.stage("simplify").passes)
        at = passes.index(INT8_EPILOGUE_PASS) + 1
        passes[at:at] = [BF16_ACTIVATIONS_PASS, BF16_EPILOGUE_PASS]
        pipeline = pipeline.replace("simplify", [with_bf16_products(p) for p in passes])
    if kernels and target.has_avx512_bf16 and "vector" in pipeline.stage_names:
        pipeline = pipeline.replace("vector", [BF16_DOTS_PASS, *pipeline.stage("vector").passes])
    return pipeline
