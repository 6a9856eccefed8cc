"""Tuning tasks of the reduced-precision dot-product kernels (``precision="bf16"`` / ``"int8"``).

A bf16 or int8 build runs its matmuls and convolutions as register-tile kernels
(pipelines/tensor/bf16_matmul.py, int8_matmul.py) that the graph and simplify stages build
with fixed parameters, before the schedule stage, so the op tasks of schedule/task.py never
see them. Here each distinct kernel of such a build is one task:

- :func:`extract_kernel_tasks` runs the reduced build's pipeline up to the pass that makes
  the kernels and reads each kernel call's settings (shape, window, threads, A's
  signedness): one :class:`~tilecraft.schedule.task.Task` per default kernel name (kind
  ``bf16_kernel`` or ``int8_kernel``, the name is the kernel's), heaviest first;
- its payload is the smallest function whose build makes that kernel: a zero-filled
  matmul or NHWC convolution (bf16), or the integer matmul of raw bytes, after an im2col
  copy for a convolution (int8), its weights a ``tilecraft.weight`` argument;
- :func:`kernel_measured_module` is what a candidate compiles: the payload with random
  weights as resource constants (the kernel passes take only those), compiled by
  :func:`kernel_pipeline` (the CPU pipeline with bf16 weights for ``bf16_kernel``), so the
  kernel is measured alone with the model's layout and threads;
- the space is schedule/space.py's :class:`KernelSpace`; a record names its kernel, and
  ``compile(..., tuning_records=...)`` hands it to the kernel pass (schedule/record_plan.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import func, linalg

from ..compiler.options import CompileOptions
from ..errors import TaskExtractionError
from ..frontend.loader import load_module
from ..ir import core
from ..ir.contraction import collapse, generic_op, integer_matmul
from ..pipelines.cpu import cpu_pipeline
from ..pipelines.ir_queries import ops_where
from ..pipelines.pipeline import Pipeline
from ..pipelines.target import Target
from ..pipelines.tensor import bf16_matmul, int8_matmul
from ..pipelines.tensor.bf16_weights import BF16_WEIGHTS, with_bf16_weights
from ..pipelines.tensor.int8_matmul import INT8_MATMUL_PASS, Window, settings_of
from ..schedule.space import KERNEL_TASK_KINDS
from ..schedule.task import ENTRY, WEIGHT, Task

# precision -> (task kind, the pass that makes the kernels, the attribute on their calls)
_PRECISIONS = {"bf16": ("bf16_kernel", BF16_WEIGHTS, bf16_matmul.KERNEL_ATTRIBUTE),
               "int8": ("int8_kernel", INT8_MATMUL_PASS, int8_matmul.KERNEL_ATTRIBUTE)}


def is_kernel_task(task: "Task | dict[str, Any]") -> bool:
    """Whether ``task`` (or a record's task description) is a dot-product kernel's."""
    kind = task.get("kind") if isinstance(task, dict) else task.kind
    return kind in KERNEL_TASK_KINDS


def kernel_pipeline(kind: str, target: "str | Target", *, opt_level: int = 3, offload: Any = ()) -> Pipeline:
    """The pipeline a build whose kernels are of ``kind`` runs: the CPU pipeline, with bf16
    weights (and their kernels) for ``bf16_kernel``; int8 kernels come from the quantized
    model through the CPU pipeline as it is."""
    target = Target.parse(target)
    pipeline = cpu_pipeline(target, opt_level=opt_level, offload=offload)
    return with_bf16_weights(pipeline, target) if kind == "bf16_kernel" else pipeline


def payload_pipeline(kind: str, target: "str | Target") -> Pipeline:
    """The pipeline a task's stand-alone payload is measured with: :func:`kernel_pipeline`
    without the graph stage's ``tilecraft-pad-matmul-extents``.

    Why: a task's extents are its kernel's in the model, after that pass decided them (a
    filter count it pads, or one it leaves as it is because a concat or pad reads the
    result). Padding the payload again, with no such reader, would build another kernel
    than the task names, and a record keyed by that name would never apply to it.
    """
    pipeline = kernel_pipeline(kind, target)
    for stage in pipeline.stages:
        kept = tuple(p for p in stage.passes if p.split("{")[0] != "tilecraft-pad-matmul-extents")
        if len(kept) != len(stage.passes):
            pipeline = pipeline.replace(stage.name, kept)
    return pipeline


def _through_kernel_pass(pipeline: Pipeline, pass_name: str) -> Pipeline:
    """The stages of ``pipeline`` up to its ``pass_name`` element, that one included."""
    for index, stage in enumerate(pipeline.stages):
        names = [p.split("{")[0] for p in stage.passes]
        if pass_name in names:
            cut = Pipeline(pipeline.stages[: index + 1])
            return cut.replace(stage.name, stage.passes[: names.index(pass_name) + 1])
    raise TaskExtractionError(f"the pipeline has no {pass_name} pass: no kernels to tune")


def _task(kind: str, name: str, m: int, n: int, k: int, window: Window | None, a_unsigned: bool,
          count: int) -> Task:
    """The task of kernel ``name`` (its default name), with its payload."""
    weight_bytes = k * n * (2 if kind == "bf16_kernel" else 1)
    return Task(key=hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()[:16], name=name, kind=kind,
                op_name="func.call", ranges=(m, n, k), parallel=(True, True, False),
                element_type="bf16" if kind == "bf16_kernel" else "i8", flops=2 * m * n * k, count=count,
                payload=kernel_payload(kind, m, n, k, window, a_unsigned), kernels=((name,),) * count,
                weight_bytes=weight_bytes)


def reduced_build(model: Any, options: CompileOptions) -> tuple[Any, Pipeline]:
    """(the model to import, the pipeline) of ``model``'s reduced build at
    ``options.precision``, as ``compile`` makes it without its f32 twin: int8 quantizes the
    ONNX model as ``compile`` does (frontend/quantize.py: static with ``options.calibration``,
    else dynamic); bf16 adds bf16 weights and their kernels to the pipeline."""
    if options.precision not in _PRECISIONS:
        raise TaskExtractionError(f"kernel tasks are those of precision 'bf16' or 'int8', not {options.precision!r}")
    kind = _PRECISIONS[options.precision][0]
    if options.precision == "int8":
        from ..frontend.quantize import onnx_proto, quantize  # onnx and onnxruntime: optional

        model = quantize(onnx_proto(model), options.calibration)
    return model, kernel_pipeline(kind, options.target, opt_level=options.opt_level, offload=options.offload)


def extract_kernel_tasks(model: Any, options: CompileOptions) -> list[Task]:
    """The distinct dot-product kernels of ``model`` built at ``options.precision``
    (``"bf16"`` or ``"int8"``, on ``options.target``; :func:`reduced_build`), heaviest first. Raises
    :class:`TaskExtractionError` when the build has no kernel (a target without AVX512-BF16
    or VNNI, or no constant-weight matmul)."""
    model, pipeline = reduced_build(model, options)
    kind, pass_name, attribute = _PRECISIONS[options.precision]
    target = options.target
    pipeline = _through_kernel_pass(pipeline, pass_name)
    context = ir.Context()
    module = load_module(model, context, shape_dict=options.shape_dict)
    found: dict[str, tuple[int, int, int, Window | None, bool, int]] = {}
    with context, ir.Location.unknown():
        pipeline.run(module)
        for call in ops_where(module.operation, lambda o: o.name == "func.call" and attribute in o.attributes):
            settings = ir.DictAttr(call.attributes[attribute])
            threads, window, _ = settings_of(settings)
            a_unsigned = "a_unsigned" in settings and ir.BoolAttr(settings["a_unsigned"]).value
            m, k = (window.rows, window.depth) if window else ir.RankedTensorType(call.operands[0].type).shape
            n = ir.RankedTensorType(call.results[0].type).shape[1]
            name = (bf16_matmul.kernel_name(m, n, k, threads, window) if kind == "bf16_kernel"
                    else int8_matmul.kernel_name(m, n, k, a_unsigned, threads, window))
            count = found[name][-1] + 1 if name in found else 1
            found[name] = (m, n, k, window, a_unsigned, count)
    if not found:
        raise TaskExtractionError(
            f"the {options.precision} build of this model for '{target}' has no dot-product kernel "
            f"(they need {'AVX512-BF16' if kind == 'bf16_kernel' else 'AVX-512 VNNI'} in the target and "
            "matmuls or convolutions with constant weights)")
    tasks = [_task(kind, name, *shape) for name, shape in found.items()]
    return sorted(tasks, key=lambda t: -t.flops * t.count)


def kernel_payload(kind: str, m: int, n: int, k: int, window: Window | None, a_unsigned: bool) -> str:
    """``func.func @task`` whose build makes the kernel (module docstring), as text; its
    weights are an argument marked ``tilecraft.weight``."""
    f32, i8 = ir.F32Type.get, lambda: ir.IntegerType.get_signless(8)
    with ir.Context(), ir.Location.unknown():
        element = f32() if kind == "bf16_kernel" else i8()
        if window is None:
            a_shape, w_shape = [m, k], [k, n]
        else:
            a_shape = list(window.input_shape)
            w_shape = [*window.kernel, window.channels, n] if kind == "bf16_kernel" else [k, n]
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            a_type, w_type = (ir.RankedTensorType.get(s, element) for s in (a_shape, w_shape))
            result = _payload_result(kind, m, n, window)
            function = func.FuncOp(ENTRY, ir.FunctionType.get([a_type, w_type], [result]))
            function.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [ir.DictAttr.get({}), ir.DictAttr.get({WEIGHT: ir.UnitAttr.get()})])
            with ir.InsertionPoint(function.add_entry_block()):
                a, w = function.arguments
                func.ReturnOp([_product(kind, a, w, m, n, window, a_unsigned)])
        module.operation.verify()
        return str(module)


def _payload_result(kind: str, m: int, n: int, window: Window | None) -> ir.RankedTensorType:
    if kind == "bf16_kernel":
        shape = [window.input_shape[0], window.out_h, window.out_w, n] if window else [m, n]
        return ir.RankedTensorType.get(shape, ir.F32Type.get())
    return ir.RankedTensorType.get([m, n], ir.IntegerType.get_signless(32))


def _product(kind: str, a: ir.Value, w: ir.Value, m: int, n: int, window: Window | None,
             a_unsigned: bool) -> ir.Value:
    """The op the kernel pass replaces: a matmul or an NHWC convolution into a zero fill
    (bf16), or the integer matmul of raw bytes, of the im2col rows for a convolution (int8,
    the form ir/conv.py's ``integer_conv2d`` makes)."""
    if kind == "bf16_kernel":
        f32 = ir.F32Type.get()
        if window is None:
            return linalg.matmul(a, w, outs=[core.filled([m, n], 0.0, f32)])
        out = [window.input_shape[0], window.out_h, window.out_w, n]
        return linalg.conv_2d_nhwc_hwcf(a, w, outs=[core.filled(out, 0.0, f32)],
                                        strides=list(window.strides), dilations=list(window.dilations))
    if window is not None:
        (sh, sw), (dh, dw) = window.strides, window.dilations
        (kh, kw), channels = window.kernel, window.channels
        d = [ir.AffineDimExpr.get(i) for i in range(6)]  # n, oh, ow, kh, kw, c
        read = ir.AffineMap.get(6, 0, [d[0], d[1] * sh + d[3] * dh, d[2] * sw + d[4] * dw, d[5]])
        patches = generic_op([a], core.empty([window.input_shape[0], window.out_h, window.out_w, kh, kw, channels],
                                             ir.IntegerType.get_signless(8)),
                             [read, ir.AffineMap.get_identity(6)], 6, 0, lambda v, _: v)
        a = collapse(patches, [[0, 1, 2], [3, 4, 5]])
    return integer_matmul(a, w, a_unsigned=a_unsigned, b_unsigned=False)


def kernel_measured_module(payload: str, context: ir.Context, seed: int = 1) -> ir.Module:
    """A kernel task's payload as a candidate compiles it: its weight argument a constant of
    fixed random values (f32 in [-1, 1), or int8 in [-8, 8): the same in every worker, so
    outputs compare), made a resource constant as a model's weights are."""
    module = ir.Module.parse(payload, context=context)
    function = next(op for op in module.body.operations
                    if op.operation.name == "func.func" and op.sym_name.value == ENTRY)
    entry = function.regions[0].blocks[0]
    weight = entry.arguments[1]
    weight_type = ir.RankedTensorType(weight.type)
    rng = np.random.default_rng(seed)
    shape = tuple(weight_type.shape)
    if str(weight_type.element_type) == "f32":
        values = (rng.random(shape) * 2 - 1).astype(np.float32)
    else:
        values = rng.integers(-8, 8, size=shape).astype(np.int8)
    with context, ir.Location.unknown(), ir.InsertionPoint.at_block_begin(entry):
        weight.replace_all_uses_with(core.constant(values, name="kernel_weights"))
        entry.erase_argument(1)
        old_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(old_type.inputs[:1],
                                                                                   old_type.results))
        function.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get({})])
    return module
