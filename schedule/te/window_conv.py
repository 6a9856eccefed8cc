"""Windowed computes that are a (grouped) 2-D convolution, as a loop over groups of the
named NHWC convolution: the window loops stay inside the register tile.

:mod:`.window_taps` splits a windowed ``linalg.generic`` into one contraction per window
tap, each reading and writing the whole output: on a user's grouped 3x3 convolution (28 x 28
x 128 output) the tuned taps reached a third of ResNet-50's conv2_x layer's GFLOPS
(docs/tuning.md). A model's grouped convolutions (``ir/conv.py``'s ``_grouped_per_group``)
are instead a loop over the groups of one ``linalg.conv_2d_nhwc_hwcf`` each, on views of
the group's channels, which the convolution plan (schedule/conv_plan.py) decomposes and
vectorizes with a register tile of output pixels x filter vectors whose accumulators stay in
registers across every tap and input channel of the group.

This module finds that form in a user's compute, from the indexing maps alone: a generic
whose body is a multiply-accumulate of its two inputs, where one input (the image) reads
``n, y*s + ry*d, x*s + rx*d, c`` (and a group loop ``g`` on any axis), the other (the
filter) ``ry, rx, c, f`` (and ``g``), and the output ``n, y, x, f`` (and ``g``). Dropping
the group axis from each operand must leave exactly that axis order, so a group's operands
are rank-reducing slices (views, no copy): the rewrite preserves the user's layout. The
convolution accumulates into the group's slice of the generic's own init, so the result is
the generic's, whatever the init holds (a fill only the generic reads fills each group's
slice inside the loop, as in ``ir/conv.py``).

A compute of another shape (channels-first axes, a third window, a body that is not a
multiply-accumulate, mixed element types) is refused with the reason
(:func:`window_conv_refusal`); the auto-scheduler then keeps the taps form alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from ...pipelines.ir_queries import defining_op, users
from .window_taps import Window, window_layout


@dataclass(frozen=True)
class WindowConv:
    """A windowed generic recognized as a grouped NHWC convolution.

    Attributes:
      image, filter: operand positions of the windowed input and the filter.
      group: the group loop, ``None`` for an ungrouped convolution.
      image_group_axis, filter_group_axis, output_group_axis: where each operand has the
        group loop (``None`` when ungrouped).
      strides, dilations: of the two window axes (rows, columns).
    """

    image: int
    filter: int
    group: int | None
    image_group_axis: int | None
    filter_group_axis: int | None
    output_group_axis: int | None
    strides: tuple[int, int]
    dilations: tuple[int, int]


def _block_argument_index(value: ir.Value) -> int | None:
    if isinstance(value.owner, ir.Block):
        return ir.BlockArgument(value).arg_number
    return None


def _multiply_accumulate_inputs(op: ir.Operation) -> str | None:
    """``None`` when the body is ``yield out + in0 * in1`` (in either order) on one float
    element type; otherwise why not."""
    block = op.regions[0].blocks[0]
    body = [inner.operation for inner in block.operations]
    if len(body) != 3 or [o.name for o in body] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return ("its body is not a float multiply-accumulate (mulf, addf, yield): "
                f"{', '.join(o.name for o in body)}")
    mul, add, done = body
    if {_block_argument_index(v) for v in mul.operands} != {0, 1}:
        return "its multiply does not take the two inputs"
    operands = list(add.operands)
    if mul.results[0] not in operands or not any(_block_argument_index(v) == 2 for v in operands):
        return "its add does not accumulate the product into the output"
    if done.operands[0] != add.results[0]:
        return "it yields something other than the accumulated sum"
    types = {str(arg.type) for arg in block.arguments}
    if len(types) != 1:
        return f"its operands have different element types ({', '.join(sorted(types))})"
    return None


def _without(axes: list, axis: int | None) -> list:
    return [a for i, a in enumerate(axes) if i != axis]


def match_window_conv(op: ir.Operation) -> WindowConv | str:
    """The grouped convolution ``op`` is (module docstring), or why it is not one."""
    if op.name != "linalg.generic":
        return f"{op.name} is not a linalg.generic"
    if len(op.operands) != 3 or len(op.results) != 1:
        return "it does not read two inputs into one output"
    found = window_layout(op)
    if found is None:
        return ("its indices are not windows (y*s + ry*d over a reduction loop ry) and plain "
                "loops on static shapes")
    layout, windows = found
    why = _multiply_accumulate_inputs(op)
    if why is not None:
        return why
    if len(windows) != 2:
        return f"it has {len(windows)} window loop(s), not two (rows, columns)"
    windowed = [i for i in (0, 1) if any(isinstance(a, Window) for a in layout[i])]
    if len(windowed) != 1:
        return "both inputs read through a window"
    image, filter_ = windowed[0], 1 - windowed[0]
    x_axes, w_axes, out_axes = layout[image], layout[filter_], layout[2]
    if any(isinstance(a, Window) for a in w_axes):
        return "the filter reads through a window"
    if len(set(out_axes)) != len(out_axes) or len({a for a in w_axes}) != len(w_axes):
        return "an operand reads one loop on two axes"
    plain_x = [a for a in x_axes if isinstance(a, int)]
    groups = [d for d in out_axes if d in plain_x and d in w_axes]
    if len(groups) > 1:
        return f"{len(groups)} loops index the image, the filter and the output (one group loop at most)"
    group = groups[0] if groups else None
    axis = (lambda axes: axes.index(group) if group is not None else None)
    image_group, filter_group, output_group = axis(x_axes), axis(w_axes), axis(out_axes)
    x_rest, w_rest, out_rest = (_without(x_axes, image_group), _without(w_axes, filter_group),
                                _without(out_axes, output_group))
    if len(x_rest) != 4 or len(w_rest) != 4 or len(out_rest) != 4:
        return (f"without the group, its image, filter and output have ranks {len(x_rest)}, "
                f"{len(w_rest)}, {len(out_rest)}, not 4 (NHWC, HWCF, NHWF)")
    n, rows, columns, channels = x_rest
    if (not isinstance(n, int) or not isinstance(rows, Window) or not isinstance(columns, Window)
            or not isinstance(channels, int)):
        return ("the image's axes (without the group) are not (batch, rows window, columns "
                "window, channels): the window-inside form takes channels-last layouts")
    if w_rest[:3] != [rows.window, columns.window, channels]:
        return "the filter's axes (without the group) are not (rows tap, columns tap, channels, filters)"
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if "reduction" not in iterators[channels]:
        return "the channel loop the image and the filter share is not a reduction"
    filters = w_rest[3]
    if out_rest != [n, rows.outer, columns.outer, filters]:
        return "the output's axes (without the group) are not (batch, rows, columns, filters)"
    return WindowConv(image, filter_, group, image_group, filter_group, output_group,
                      (rows.stride, columns.stride), (rows.dilation, columns.dilation))


def window_conv_refusal(op: ir.Operation) -> str | None:
    """Why ``op`` has no window-inside form (``None`` when it has one)."""
    found = match_window_conv(op)
    return found if isinstance(found, str) else None


def _group_slice(value: ir.Value, group_axis: int, group: ir.Value) -> ir.Value:
    """``value`` at one group (rank-reducing: the group axis dropped), a view."""
    source = ir.RankedTensorType(value.type)
    shape = list(source.shape)
    sizes = shape[:group_axis] + [1] + shape[group_axis + 1:]
    offsets = [0] * len(shape)
    offsets[group_axis] = ir.ShapedType.get_dynamic_size()
    sliced = ir.RankedTensorType.get(shape[:group_axis] + shape[group_axis + 1:], source.element_type)
    return tensor.extract_slice(sliced, value, [group], [], [], offsets, sizes, [1] * len(shape))


def rewrite_op(op: ir.Operation, conv: WindowConv) -> None:
    """Replace ``op`` by its grouped-convolution form (module docstring)."""
    image, filter_, init = op.operands[conv.image], op.operands[conv.filter], op.operands[2]
    attributes = {"strides": list(conv.strides), "dilations": list(conv.dilations)}
    with ir.InsertionPoint(op), op.location:
        fill = None
        if conv.group is None:
            result = linalg.conv_2d_nhwc_hwcf(image, filter_, outs=[init], **attributes)
        else:
            # A fill the generic alone reads fills each group's slice in the loop instead (as
            # ir/conv.py's groups do): the fill is then fused into the group convolution's
            # task rather than a pass of its own over the whole output.
            fill = defining_op(init)
            if fill is None or fill.name != "linalg.fill" or len(users(init)) != 1:
                fill = None
            index = ir.IndexType.get()
            groups = ir.RankedTensorType(init.type).shape[conv.output_group_axis]
            loop = scf.ForOp(arith.constant(index, 0), arith.constant(index, groups),
                             arith.constant(index, 1), [init if fill is None else fill.operands[1]])
            with ir.InsertionPoint(loop.body):
                g = loop.induction_variable
                accumulator = loop.inner_iter_args[0]
                out = _group_slice(accumulator, conv.output_group_axis, g)
                if fill is not None:
                    out = linalg.fill(fill.operands[0], outs=[out])
                group_y = linalg.conv_2d_nhwc_hwcf(
                    _group_slice(image, conv.image_group_axis, g),
                    _group_slice(filter_, conv.filter_group_axis, g), outs=[out], **attributes)
                shape = list(ir.RankedTensorType(accumulator.type).shape)
                offsets = [0] * len(shape)
                offsets[conv.output_group_axis] = ir.ShapedType.get_dynamic_size()
                sizes = shape[:conv.output_group_axis] + [1] + shape[conv.output_group_axis + 1:]
                scf.YieldOp([tensor.insert_slice(group_y, accumulator, [g], [], [], offsets, sizes,
                                                 [1] * len(shape))])
            result = loop.results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if conv.group is not None and fill is not None:
        fill.erase()


def window_conv_refusals(module: ir.Module) -> list[str]:
    """Why each windowed generic of ``module`` has no window-inside form (empty when all do)."""
    reasons: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic" and window_layout(op) is not None:
            why = window_conv_refusal(op)
            if why is not None:
                reasons.append(why)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return reasons


def rewrite_window_convs(module: ir.Module) -> int:
    """Rewrite every windowed generic of ``module`` that is a grouped NHWC convolution into
    its loop over groups of ``linalg.conv_2d_nhwc_hwcf``, in place; returns how many."""
    found: list[tuple[ir.Operation, WindowConv]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic":
            conv = match_window_conv(op)
            if isinstance(conv, WindowConv):
                found.append((op, conv))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op, conv in found:
        rewrite_op(op, conv)
    return len(found)
