"""Graph-level passes over linalg on tensors, before the schedule: constant folding,
combining parallel matmuls, layout transformation (NCHW -> NHWC), operator fusion into
``graph.fusion_group`` ops (the graph dialect, ``tilecraft.dialects.graph``) and the
lowering of groups back to tagged linalg ops.

:func:`graph_pass_elements` says which run at each ``opt_level`` (TVM's PassContext levels):

====  ==================================================================================
0     none
1     ``canonicalize``, ``cse`` (dead code and common subexpressions)
2     + ``tilecraft-combine-parallel-matmul`` (Q/K/V in one matmul),
      ``tilecraft-contraction-operand-layout`` (a transposed B read in the layout the schedule
      vectorizes: ``operand_layout.py``), ``tilecraft-pad-matmul-extents`` (a matmul whose
      rows or columns have no good register tile, such as a ViT's 197 tokens, computed on
      padded extents: ``padded_extents.py``) and ``tilecraft-fold-constants`` (BatchNormalization / Mul / Add by per-channel constants
      folded into conv and matmul weights and biases, constant subgraphs such as transposes
      of weights evaluated), after ``loop-invariant-code-motion`` (what a loop body does to
      constants, such as a recurrent step packing its weights, moves out of the loop, where
      the folder sees it), then ``tilecraft-materialize-weight-fills`` (a contraction's or
      convolution's weight that is one value everywhere, such as ``ConstantOfShape``
      weights, stored as a constant like any weight instead of fused into the kernels as a
      splat: ``weight_fills.py``)
3     + ``tilecraft-convert-layout`` and ``tilecraft-lower-layout-converts`` (NCHW
      convolutions and pooling in NHWC, conversions only at the model's boundaries; before
      the folder, which packs the transposed filters), ``tilecraft-slice-channel-shuffles``
      (a channel shuffle read only by channel splits becomes one shuffle per split, of the
      channels it keeps: ``channel_shuffles.py``), and ``tilecraft-pack-weight-panels``
      (matmuls with constant weights read them as column panels ``B'[n/16, k, n%16]``,
      packed by the folder: ``weight_panels.py``; left out when offload backends are named)
      and, after the folder, ``tilecraft-split-padded-taps`` (dilated convolutions split by
      the output rows / columns whose taps read the input, not padding: ``dilated_convs.py``)
      and ``tilecraft-contiguous-reduction-loops`` (a reduction reading its input through a
      permutation, such as an NHWC global pool iterated ``(n, c, h, w)``, runs its loops in
      the input's order: ``reduction_order.py``) and ``tilecraft-scale-filters-by-channel``
      (a convolution reading its input scaled per channel, a squeeze-excite gate, scales its
      filter instead where the filter is the smaller: ``channel_scales.py``)
====  ==================================================================================

At opt_level 3 the CPU pipeline also partitions the graph into fusion groups, once:
``tilecraft-mark-groups`` (the partition of ``tilecraft-fuse-ops``, as ``tilecraft.group =
<n>`` tags on the ops instead of ``graph.fusion_group`` ops) ends the ``simplify`` stage,
after the elementwise fusion that replaces ops, and the schedule reads the tags.
"""

from __future__ import annotations

from . import combine, constant_folding, fusion, layout, operand_layout, padded_extents, weight_panels, winograd  # noqa: F401  (their decorators register passes)
from . import channel_scales, channel_shuffles, dilated_convs, reduction_order, weight_fills  # noqa: F401
from ...errors import OptionError

OPT_LEVELS = (0, 1, 2, 3)


def graph_pass_elements(opt_level: int, lanes: int = 8) -> list[str]:
    """The graph stage's pass elements at ``opt_level`` (table in the module docstring), for
    a target of ``lanes`` f32 vector lanes (padded convolution filters: padded_extents.py)."""
    if opt_level not in OPT_LEVELS:
        raise OptionError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    elements: list[str] = []
    if opt_level >= 1:
        elements += ["canonicalize", "cse"]
    if opt_level >= 2:
        # Combining first: the concatenated weights are constants the folder evaluates.
        elements += ["tilecraft-combine-parallel-matmul"]
    if opt_level >= 3:
        # Before folding: the transposed filters are constants the folder evaluates, and
        # batch norms fold into the NHWC convolutions as they would into NCHW ones.
        elements += ["tilecraft-convert-layout", "tilecraft-lower-layout-converts"]
        # After the layout pass, which leaves a channel shuffle one NHWC transpose: the
        # splits of a shuffle shuffle the channels they keep (channel_shuffles.py).
        elements += ["tilecraft-slice-channel-shuffles"]
    if opt_level >= 2:
        # Operand layout before folding: a transposed constant B is transposed back once.
        elements += ["tilecraft-contraction-operand-layout"]
        # After the operand layout (B read (K, N)), before the panels (which then pack the
        # padded columns) and the folder (which pads constant weights).
        elements += [f"tilecraft-pad-matmul-extents{{lanes={lanes}}}"]
    if opt_level >= 3:
        # Constant weights as column panels, packed by the folder (weight_panels.py).
        elements += ["tilecraft-pack-weight-panels"]
    if opt_level >= 2:
        # The folder makes a splat result a fill again (ir/core.constant): weight fills are
        # materialized after it, in the layout the kernels read (weight_fills.py).
        # cse first: a weight several ops read (ALBERT's shared layer) is then packed once,
        # one folded constant for all its readers (frontend/onnx/importer.py, materialize).
        elements += ["loop-invariant-code-motion", "cse", "tilecraft-fold-constants",
                     "tilecraft-materialize-weight-fills", "canonicalize", "cse"]
    if opt_level >= 3:
        elements += ["tilecraft-split-padded-taps"]  # after folding: dilated_convs.py
        # After the layout pass, whose NHWC pools iterate (n, c, h, w): reduction_order.py.
        elements += ["tilecraft-contiguous-reduction-loops"]
        # After folding: the filter it scales has its batch norm folded in and is padded.
        elements += ["tilecraft-scale-filters-by-channel"]
    return elements
