"""``tilecraft-fuse-attention``: scaled dot-product attention as one kernel that never stores
the scores (flash-attention's tiling over the keys, on a CPU's vector registers).

The frontends emit attention as the ops of its definition (ONNX's MatMul / Softmax / MatMul
of an exported transformer, ONNX's ``Attention`` function, PyTorch's
``scaled_dot_product_attention`` decomposition)::

    S = batch_matmul(Q, K^T)                     [B, M, N], B = batch x heads
    X = f(S, extras...)                          elementwise chain: scale, masks (optional)
    E = exp(X - rowmax(X));  P = E * (1 / rowsum(E))
    O = batch_matmul(P, V)                       [B, M, Dv]

Run op by op, S, X, E and P are each B x M x N floats written and read back: for BERT-base
(12 x 128 x 128) 786 KB each, four round trips through L2 per layer for a computation whose
inputs are 3 x 393 KB. This pass replaces the whole pattern by a call of a generated kernel
(one per site; identical ones are merged before LLVM) that keeps S in registers, in vectors
of L f32 lanes (the pass option ``lanes``, the target's: 16 with AVX-512, 8 on AVX2):

* ``scf.forall`` over (B, row blocks of the queries), about two tasks per thread;
* per register tile of ``ROWS`` query rows (on AVX2, as many as 16 registers hold:
  ``AttentionShape.tile_rows``), a loop over blocks of KB keys (one of ``KEY_BLOCKS``,
  ``NARROW_KEY_BLOCKS`` on AVX2) carrying each row's output accumulators (Dv / L vectors), running max
  ``m`` and running sum ``l``:

  - ``S`` tile = Q rows x K^T block (one broadcast of Q per row and d, KB / L loads of K^T);
  - ``X`` = the chain's bodies on those vectors (vector_bodies.py), its extra operands read
    at the tile's place through their indexing maps; keys past N (K^T and V padded to a
    multiple of KB) are set to -inf;
  - online softmax: ``m' = max(m, rowmax(X))``, ``p = exp(X - m')``,
    ``alpha = exp(m - m')``, ``l' = l * alpha + rowsum(p)``, ``O = O * alpha + p @ V``
    (a broadcast of each p and Dv / L loads of V per key);

  and ``O * (1 / l)`` is stored. With 8-lane vectors (AVX2) and Dv >= 32 one row's outputs
  and scores fill the 16 registers, and a tile of one row read all of K and V from L2 per
  query row; there (``AttentionShape.blocked``) the tile is a block of ``BLOCK_ROWS`` rows
  whose outputs, p and running max and sum are in a scratch in L1: per key block, a loop
  over register tiles of ``score_rows`` rows computes their scores (one load of each K^T
  vector for both), each row's online-softmax step (p stored), then its output row read,
  scaled by alpha, ``+= p @ V`` by a loop over the block's key vectors and written back:
  the key block's K^T and V are read from L2 by the block's first rows and from L1 by the
  others. A row whose keys are all -inf so far uses 0 in place of
  its max, so the -inf - -inf of a fully masked block gives 0, not NaN; a row that stays
  fully masked ends 0 / 0 = NaN, as the unfused softmax does, unless the graph zeroes such
  rows after the softmax (``RowZeroing``: ONNX's Attention, PyTorch's decomposition).

The result differs from the unfused one by rounding only (the sums are formed in another
order). Why a generated kernel rather than a transform-dialect schedule of the five ops:
the online softmax rescales the accumulators by a factor computed inside the loop over
keys, which no tiling or fusion of the original ops expresses (MLIR has no
``linalg.softmax`` decomposition into an online form).

Key blocks a constant mask rules out are skipped. When the chain's last op adds a literal
constant mask of [M, N] (broadcast over the batch), or selects -inf by a literal bool one,
the pass reads, per query row, the range of keys the mask leaves finite (``key_ranges``).
Each register tile then loops only over the key blocks that meet its rows' ranges. A
causal mask does about half the work; a NaN or +inf score at a masked key no longer turns
its row into NaN there.

A chain that regroups the batch dims between its ops is not followed, whatever the reshape:
Swin's window attention (a bias per head over [windows, heads, M, N], then, reshaped to
[batch, windows, heads, M, N], the shifted windows' mask per window) stays unfused. Why:
fused through those reshapes (a path this matcher had), the whole Swin-T-style model ran
level with its unfused form (1.01x with 16-lane vectors, 0.99x with 8, one thread), and the
unfused window attention is level with onnxruntime's (docs/performance.md, "Swin's window
attention stays unfused").
A bias or mask is an extra like any other: read from its tensor at each call, a constant or
not.

Q and V are read in place through the transposes (and batch merges) that made them from
a projection's [seq, heads, d] result (``OperandView``): those copies are not made (a
padded V is still copied). K^T is read as it is, contiguous along the keys.

The kernel is built with MLIR's Python builders (``build_kernel``; ir/kernels.py), its
operands' types and indexing maps carried as MLIR objects (``Extra``, ``OperandView``).

Matched only where the shapes are static, Q, K, V and the scores f32 (a chain operand may
be of any type; bools are passed as bytes), Dv is at most MAX_VALUE_DEPTH (64: BERT, GPT-2,
ViT; wider heads run as fast unfused, see there), and the intermediate values have no other
users. Anything else keeps the unfused ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, scf, tensor, vector
from mlir.dialects import math as mlir_math
from mlir.passmanager import PassManager

from ...ir.maps import has_indexing_maps, indexing_map_texts, operand_map
from ...errors import PipelineError
from ...ir import core, kernels
from ...ir.resources import literal_array
from ..ir_queries import defined_functions, defining_op, is_zero_fill, ops_where, users
from ..passes import positive_int_option, register_pass
from .vector_bodies import clonable_body, clone_body, declared_function, is_all_parallel, is_identity

FUSE_ATTENTION_PASS = "tilecraft-fuse-attention"
KERNEL_PREFIX = "tilecraft_attention"
# f32 lanes of the kernel's vectors unless the pass is told the target's (``lanes``): 16, a
# 512-bit vector (the 4 x 4 tile of 16-lane vectors was measured with it); AVX2 targets
# pass 8 (``Target.attention_lanes``). Each key block must be a multiple of it.
LANES = 16
KEY_BLOCKS = (64, 48, 32)  # keys per block (at most 4 vectors of scores per row)
ROWS = 4           # query rows per register tile: 4 x 4 score and 4 x 4 output vectors
BLOCK_ROWS = 4     # query rows per key block when their outputs are in L1 (AttentionShape.blocked)
BLOCKED_ON_NARROW_VECTORS = True  # AttentionShape.blocked's switch (docs/performance.md)
# Narrower vectors (8 f32 lanes: AVX2, whose 16 ymm registers hold half of AVX-512's 32
# zmm at half the width): key blocks of up to 7 vectors (40 keys pad 197 to 200, not 224;
# 56 pad Swin's 49 to 56, not 64), and as many query rows as the register file holds beside
# each row's output and score vectors (``AttentionShape.tile_rows``).
NARROW_KEY_BLOCKS = (56, 48, 40, 32)
# Widest Dv fused. Wider, the output accumulators (ROWS x Dv / 16 vectors) no longer fit in
# registers beside the scores; measured on one thread, 8 heads x 256 x 256 with Dv = 128: no
# variant tried (ROWS in {1, 2, 3, 4}, key blocks of 32 or 64, P @ V in chunks of 4 or 8
# output vectors, the accumulators in registers or in the output tile) beat the unfused ops,
# while at Dv = 64 the kernel does (docs/performance.md).
MAX_VALUE_DEPTH = 64
_MAX_CHAIN = 8     # elementwise ops between the scores and the softmax


@dataclass(frozen=True)
class Extra:
    """An extra operand of the score chain (a scale, a mask), read at the tile's place
    through ``indexing_map`` (over the chain's domain: batch dims, query row, key); along the
    keys when its last result is the key dim (``along_keys``), else one value per row,
    broadcast. A bool (i1) ``element`` is passed and read as bytes (``tensor_type`` and
    ``stored`` say i8: i1 tensors are bytes in memory) and compared with 0."""

    tensor_type: ir.RankedTensorType   # as the kernel takes it
    element: ir.Type                   # as the chain reads it
    indexing_map: ir.AffineMap
    along_keys: bool

    @property
    def is_bool(self) -> bool:
        return isinstance(self.element, ir.IntegerType) and ir.IntegerType(self.element).width == 1

    @property
    def stored(self) -> ir.Type:
        """The element type the kernel reads."""
        return ir.IntegerType.get_signless(8) if self.is_bool else self.element


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    rows: int       # M: queries
    keys: int       # N
    depth: int      # D: Q's and K's feature size
    value_depth: int  # Dv
    domain: tuple[int, ...]  # the chain's domain (batch dims..., M, N)
    lanes: int = LANES       # f32 lanes of the kernel's vectors: the target's

    @property
    def key_blocks(self) -> tuple[int, ...]:
        """The key blocks to choose from: KEY_BLOCKS for 16-lane vectors and wider,
        NARROW_KEY_BLOCKS for narrower ones."""
        return KEY_BLOCKS if self.lanes >= LANES else NARROW_KEY_BLOCKS

    @property
    def key_block(self) -> int:
        """Keys per block: the one of ``key_blocks`` (or all keys, rounded up to whole
        vectors, when fewer) that pads N least, the larger on a tie."""
        blocks = self.key_blocks
        if self.keys <= blocks[-1]:
            return -(-self.keys // self.lanes) * self.lanes
        return min(blocks, key=lambda kb: (-(-self.keys // kb) * kb, -kb))

    @property
    def tile_rows(self) -> int:
        """Query rows per register tile: ROWS with 16-lane vectors (the 4 x 4 tile measured
        on AVX-512's 32 registers); with narrower ones, as many rows (at most ROWS) as 16
        registers hold, each row's output vectors (Dv / L) and score vectors (KB / L) live
        across the key loop beside one broadcast. Why: on AVX2 the 16-lane tile was 64
        ymm values live for 16 registers, and the ViT's attention at 197 tokens ran 2.6x
        onnxruntime's time (docs/performance.md, "Odd-N contractions and AVX2 attention")."""
        if self.lanes >= LANES:
            return ROWS
        if self.blocked:
            return BLOCK_ROWS
        per_row = -(-self.value_depth // self.lanes) + self.key_block // self.lanes
        return max(1, min(ROWS, (16 - 1) // per_row))

    @property
    def blocked(self) -> bool:
        """Whether the rows' outputs accumulate in a scratch in L1 rather than in
        registers: with narrow vectors when a row's outputs and scores do not leave room
        for a second row in 16 registers. Why: with one row per register tile (Dv = 64 on
        AVX2) every query row streamed the whole K and V from L2; a block of BLOCK_ROWS rows
        per key block reads them from L2 once per block (docs/performance.md, "AVX2
        attention blocks and Swin windows")."""
        if self.lanes >= LANES or not BLOCKED_ON_NARROW_VECTORS:
            return False
        per_row = -(-self.value_depth // self.lanes) + self.key_block // self.lanes
        return (16 - 1) // per_row < 2

    @property
    def score_rows(self) -> int:
        """Rows whose scores one register tile computes in a blocked kernel: two when their
        score vectors and two broadcasts leave a register of the 16 free, else one (7
        vectors of keys by 2 rows spilled: Swin's 49-token windows ran 1.2x slower)."""
        return 2 if 2 * (self.key_block // self.lanes) + 2 < 16 else 1

    @property
    def padded_keys(self) -> int:
        kb = self.key_block
        return -(-self.keys // kb) * kb


@dataclass
class AttentionSite:
    """The ops of one matched attention: the two batch matmuls and the chain between them."""

    scores: ir.Operation                       # batch_matmul(Q, K^T)
    chain: list["ChainStep"]                   # the elementwise generics from S to X
    context: ir.Operation                      # batch_matmul(P, V)
    dead: list[ir.Operation]                   # every op the kernel replaces, last first
    shape: AttentionShape
    zeroing: "RowZeroing | None" = None        # rows whose output is set to 0


# ---- matching ------------------------------------------------------------------------------

def _single_user(value: ir.Value) -> ir.Operation | None:
    found = users(value)
    return found[0] if len(found) == 1 else None


def _map_results(generic: ir.Operation, index: int) -> list[str]:
    value = operand_map(generic, index)
    return [str(e) for e in value.results]


def _body(generic: ir.Operation) -> list[ir.Operation]:
    """The body's ops, the yield last."""
    return [op.operation for op in generic.regions[0].blocks[0].operations]


def _arguments(generic: ir.Operation) -> list[ir.Value]:
    return list(generic.regions[0].blocks[0].arguments)


def _is_f32(value: ir.Value) -> bool:
    return (isinstance(value.type, ir.RankedTensorType) and ir.RankedTensorType(value.type).has_static_shape
            and str(ir.RankedTensorType(value.type).element_type) == "f32")


def _constant_value(value: ir.Value) -> float | None:
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(op.attributes["value"]).value


def _reduction_over_keys(value: ir.Value, rank: int) -> tuple[ir.Operation, ir.Operation, str] | None:
    """(expand_shape, reduction, its combining op's name) when ``value`` is ``expand_shape``
    (a trailing unit dim) of a ``linalg.generic`` that reduces its one input over the last
    dim by one op of its two block arguments, each used once; else ``None``."""
    expand = defining_op(value)
    if expand is None or expand.name != "tensor.expand_shape" or _single_user(value) is None:
        return None
    reduction = defining_op(expand.operands[0])
    if (reduction is None or reduction.name != "linalg.generic" or len(reduction.operands) != 2
            or len(users(reduction.results[0])) != 1):
        return None
    iterators = [str(i) for i in ir.ArrayAttr(reduction.attributes["iterator_types"])]
    if iterators != ['#linalg.iterator_type<parallel>'] * (rank - 1) + ['#linalg.iterator_type<reduction>']:
        return None
    if _map_results(reduction, 0) != [f"d{i}" for i in range(rank)] \
            or _map_results(reduction, 1) != [f"d{i}" for i in range(rank - 1)]:
        return None
    body = _body(reduction)
    if len(body) != 2 or sorted(map(str, body[0].operands)) != sorted(map(str, _arguments(reduction))) \
            or len(body[0].operands) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    return expand, reduction, body[0].name


def _row_reduction(value: ir.Value, combine: str, start: float, rank: int) -> ir.Value | None:
    """The reduced operand when ``value`` is a reduction over the keys
    (``_reduction_over_keys``) by ``combine`` from a fill of ``start``; else ``None``."""
    found = _reduction_over_keys(value, rank)
    if found is None or found[2] != combine:
        return None
    reduction = found[1]
    fill = defining_op(reduction.operands[1])
    if fill is None or fill.name != "linalg.fill" or _constant_value(fill.operands[0]) != start:
        return None
    return reduction.operands[0]


def _row_broadcast(generic: ir.Operation, index: int, rank: int) -> bool:
    return _map_results(generic, index) == [f"d{i}" for i in range(rank - 1)] + ["0"]


def _elementwise_with_row_value(op: ir.Operation | None, rank: int) -> bool:
    """An all-parallel generic of (a full tensor, one value per row broadcast over the
    keys): softmax's exp and normalization steps."""
    return (op is not None and is_all_parallel(op) and len(op.operands) == 3
            and _map_results(op, 0) == [f"d{i}" for i in range(rank)] and _row_broadcast(op, 1, rank))


def _softmax_input(p: ir.Value, rank: int) -> tuple[ir.Value, list[ir.Operation]] | None:
    """``X`` when ``p`` is softmax(X) over the last dim as reduction.softmax emits it:
    ``e = exp(X - rowmax(X))`` and ``e * (1 / rowsum(e))`` (or ``e / rowsum(e)``); with the
    ops to erase. X's users are the caller's to check (the max, the exp and perhaps the
    test for fully masked rows)."""
    normalize = defining_op(p)
    if not _elementwise_with_row_value(normalize, rank):
        return None
    e_arg, s_arg, _ = _arguments(normalize)
    body = _body(normalize)
    reciprocal = (len(body) == 3 and body[0].name == "arith.divf" and _constant_value(body[0].operands[0]) == 1.0
                  and body[0].operands[1] == s_arg and body[1].name == "arith.mulf"
                  and set(body[1].operands) == {e_arg, body[0].results[0]})
    divide = len(body) == 2 and body[0].name == "arith.divf" and list(body[0].operands) == [e_arg, s_arg]
    if not (reciprocal or divide) or body[-1].operands[0] != body[-2].results[0]:
        return None
    e, sums = normalize.operands[0], normalize.operands[1]
    if _row_reduction(sums, "arith.addf", 0.0, rank) != e or len(users(e)) != 2:
        return None
    exponential = defining_op(e)
    if not _elementwise_with_row_value(exponential, rank):
        return None
    x_arg, m_arg, _ = _arguments(exponential)
    body = _body(exponential)
    if (len(body) != 3 or body[0].name != "arith.subf" or list(body[0].operands) != [x_arg, m_arg]
            or body[1].name != "math.exp" or body[1].operands[0] != body[0].results[0]
            or body[2].operands[0] != body[1].results[0]):
        return None
    x, peaks = exponential.operands[0], exponential.operands[1]
    if _row_reduction(peaks, "arith.maximumf", float("-inf"), rank) != x:
        return None
    dead = [normalize, defining_op(sums), defining_op(defining_op(sums).operands[0]), exponential,
            defining_op(peaks), defining_op(defining_op(peaks).operands[0])]
    return x, dead


def _batch_view(value: ir.Value, rank: int, op_name: str) -> tuple[ir.Value, ir.Operation | None]:
    """``value`` seen with its batch dims merged (rank 3): through the reshape ``op_name``
    whose reassociation is [[batch dims], [M], [N]], or as it is at rank 3."""
    if rank == 3:
        return value, None
    reshape = defining_op(value) if op_name == "tensor.expand_shape" else _single_user(value)
    if reshape is None or reshape.name != op_name:
        return value, None
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(reshape.attributes["reassociation"])]
    if groups != [list(range(rank - 2)), [rank - 2], [rank - 1]]:
        return value, None
    return (reshape.operands[0] if op_name == "tensor.expand_shape" else reshape.results[0]), reshape


# linalg.batch_matmul's own maps (b, m, n, k): an op carrying others reads a transposed operand.
_BATCH_MATMUL_MAPS = ["(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)",
                      "(d0, d1, d2, d3) -> (d0, d1, d2)"]


def _plain_batch_matmul(op: ir.Operation | None) -> bool:
    """A ``linalg.batch_matmul`` of static f32 operands, with its default maps, into zeros."""
    if op is None or op.name != "linalg.batch_matmul":
        return False
    if has_indexing_maps(op) and indexing_map_texts(op) != _BATCH_MATMUL_MAPS:
        return False
    return is_zero_fill(op.operands[2]) and all(_is_f32(v) for v in op.operands)


def _extra(generic: ir.Operation, index: int, rank: int) -> Extra | None:
    """The chain's extra operand ``index`` of ``generic`` read over the chain's domain (of
    ``rank`` dims), or ``None`` when the kernel cannot read it as vectors."""
    value = generic.operands[index]
    if not isinstance(value.type, ir.RankedTensorType) or not ir.RankedTensorType(value.type).has_static_shape:
        return None
    tensor_type = ir.RankedTensorType(value.type)
    element = tensor_type.element_type
    if str(element) == "i1":  # passed as bytes (see Extra)
        tensor_type = ir.RankedTensorType.get(tensor_type.shape, ir.IntegerType.get_signless(8))
    indexing_map = operand_map(generic, index)
    results = [str(e) for e in indexing_map.results]
    key = f"d{rank - 1}"
    along_keys = bool(results) and results[-1] == key
    if any(key in r for r in (results[:-1] if along_keys else results)):
        return None  # the key dim elsewhere than innermost: not a vector read
    return Extra(tensor_type, element, indexing_map, along_keys)


class ChainStep(NamedTuple):
    """One elementwise generic of the score chain and the position of the running value
    among its inputs."""

    generic: ir.Operation
    position: int


def _score_chain(x: ir.Value, rank: int) -> tuple[ir.Value, list[ChainStep], list[ir.Operation]] | None:
    """(S, the elementwise generics from S to ``x`` in order, the chain's ops from ``x`` back
    to S) when ``x`` is S through at most _MAX_CHAIN such generics over the same domain, S
    being the (reshaped) result of a plain batch matmul; else ``None``. A reshape between
    them ends the match (see the module docstring: Swin's regrouped window chains)."""
    def walk(value: ir.Value, depth: int) -> tuple[ir.Value, list[ChainStep], list[ir.Operation]] | None:
        source, reshape = _batch_view(value, rank, "tensor.expand_shape")
        # value's own users are the caller's to count (X's: the max, the exp, ...).
        if _plain_batch_matmul(defining_op(source)) and (reshape is None or len(users(source)) == 1):
            return value, [], []
        op = defining_op(value)
        if depth == _MAX_CHAIN or op is None:
            return None
        if not is_all_parallel(op) or not clonable_body(op) or not is_identity(operand_map(op, -1)):
            return None
        inputs = list(op.operands)[:-1]
        for position, operand in enumerate(inputs):
            if _map_results(op, position) != [f"d{i}" for i in range(rank)] or not _is_f32(operand):
                continue
            if len(users(operand)) != 1 or inputs.count(operand) != 1:
                continue
            if any(_extra(op, i, rank) is None for i in range(len(inputs)) if i != position):
                continue
            found = walk(operand, depth + 1)
            if found is not None:
                return found[0], [*found[1], ChainStep(op, position)], [op, *found[2]]
        return None

    return walk(x, 0)


@dataclass
class RowZeroing:
    """Output rows set to 0: the softmax's result went through ``select(c, 0, P)`` with ``c``
    one value per query row (how ONNX's Attention and PyTorch's decomposition of
    ``scaled_dot_product_attention`` turn the NaN of a fully masked row into 0).

    ``kind``: ``masked`` when ``c`` is "every key of the row is -inf" computed from X (the
    kernel knows it: the row's running max is still -inf; ``dead`` are the ops computing
    it), ``tensor`` when ``c`` is read from ``condition`` (independent of X)."""

    generic: ir.Operation
    kind: str
    condition: ir.Value | None = None
    condition_map: ir.AffineMap | None = None
    dead: tuple[ir.Operation, ...] = ()


def _splat_value(value: ir.Value) -> float | int | bool | None:
    """The element of a splat constant tensor (or of a ``linalg.fill`` with a constant)."""
    op = defining_op(value)
    if op is not None and op.name == "linalg.fill":
        return _scalar_constant(op.operands[0])
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.DenseElementsAttr):
        return None
    attr = ir.DenseElementsAttr(op.attributes["value"])
    if not attr.is_splat:
        return None
    element = attr.get_splat_value()
    if isinstance(element, ir.FloatAttr):
        return ir.FloatAttr(element).value
    if isinstance(element, ir.IntegerAttr):
        return ir.IntegerAttr(element).value
    if isinstance(element, ir.BoolAttr):
        return ir.BoolAttr(element).value
    return None


def _integer_constant(value: ir.Value) -> int | None:
    """The value of a scalar integer (or i1: 0 / 1) ``arith.constant``."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return int(ir.BoolAttr(attr).value)
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _scalar_constant(value: ir.Value) -> float | int | None:
    """The value of a scalar float or integer ``arith.constant``."""
    number = _constant_value(value)
    return number if number is not None else _integer_constant(value)


def _scalar_operand(generic: ir.Operation, value: ir.Value) -> float | int | None:
    """The constant a body operand ``value`` stands for: a captured scalar constant, or a
    block argument whose input is a splat constant."""
    arguments = _arguments(generic)
    if value in arguments:
        return _splat_value(generic.operands[arguments.index(value)])
    return _scalar_constant(value)


def _negation(value: ir.Value) -> tuple[ir.Value, ir.Operation] | None:
    """(x, op) when ``value`` is ``xori(x, true)`` of an i1 tensor, elementwise."""
    op = defining_op(value)
    if op is None or not is_all_parallel(op) or len(op.operands) != 2 or len(users(value)) != 1:
        return None
    body = _body(op)
    if len(body) != 2 or body[0].name != "arith.xori" or body[1].operands[0] != body[0].results[0]:
        return None
    argument = _arguments(op)[0]
    others = [v for v in body[0].operands if v != argument]
    if len(others) != 1 or _integer_constant(others[0]) not in (1, -1):  # i1 true
        return None
    return op.operands[0], op


def _strip_negation(value: ir.Value, ops: list[ir.Operation]) -> tuple[ir.Value, bool]:
    """(x, True) when ``value`` is ``xori(x, true)`` (its op appended to ``ops``), else
    (``value``, False)."""
    found = _negation(value)
    if found is None:
        return value, False
    ops.append(found[1])
    return found[0], True


def _all_keys_masked(condition: ir.Value, x: ir.Value, rank: int) -> list[ir.Operation] | None:
    """The ops computing ``condition`` when it is "every key of the row is -inf" of ``x``,
    kept as ``expand_shape`` of a reduction over the keys: ``all(x == -inf)`` or
    ``not(any(not(x == -inf)))`` and the like; else ``None``."""
    ops: list[ir.Operation] = []
    condition, negated_after = _strip_negation(condition, ops)
    found = _reduction_over_keys(condition, rank)
    if found is None:
        return None
    expand, reduction, combine = found
    start = _splat_value(reduction.operands[1])
    if combine in ("arith.maxui", "arith.ori") and start in (0, False):
        reduce_any = True
    elif combine in ("arith.minui", "arith.andi") and start in (1, -1, True):
        reduce_any = False
    else:
        return None
    ops += [expand, reduction]
    tested, negated_before = _strip_negation(reduction.operands[0], ops)
    compare = defining_op(tested)
    if compare is None or not is_all_parallel(compare) or len(users(tested)) != 1:
        return None
    body = _body(compare)
    if len(body) != 2 or body[0].name != "arith.cmpf":
        return None
    inputs = list(compare.operands)[:-1]
    arguments = _arguments(compare)
    if x not in inputs or _map_results(compare, inputs.index(x)) != [f"d{i}" for i in range(rank)]:
        return None
    x_argument = arguments[inputs.index(x)]
    others = [v for v in body[0].operands if v != x_argument]
    if len(others) != 1 or x_argument not in body[0].operands or _scalar_operand(compare, others[0]) != float("-inf"):
        return None
    predicate = ir.IntegerAttr(body[0].attributes["predicate"]).value
    equal = {1: True, 6: False, 13: False}.get(predicate)  # oeq; one; une
    if equal is None:
        return None
    ops.append(compare)
    # all(x == -inf) <=> not(any(x != -inf))
    is_equal = equal != negated_before
    if (is_equal and not reduce_any and not negated_after) or (not is_equal and reduce_any and negated_after):
        return ops
    return None


def _row_zeroing(p: ir.Value, rank: int) -> tuple[ir.Value, RowZeroing | None] | None:
    """(the softmax's result, the zeroing of rows) when ``p`` is ``select(c, 0, P)`` with ``c``
    per row; (``p``, ``None``) when ``p`` is not such a select; ``None`` when it is one this
    pass cannot take. ``kind`` stays unset (``""``) for a ``c`` that X's match decides."""
    op = defining_op(p)
    if op is None or not is_all_parallel(op) or len(op.operands) != 4:
        return p, None
    body = _body(op)
    arguments = _arguments(op)
    if len(body) != 2 or body[0].name != "arith.select" or body[1].operands[0] != body[0].results[0] \
            or not all(v in arguments for v in body[0].operands):
        return p, None
    c, zero, kept = (arguments.index(v) for v in body[0].operands)
    if len({c, zero, kept}) != 3 or _map_results(op, kept) != [f"d{i}" for i in range(rank)]:
        return None
    if _splat_value(op.operands[zero]) not in (0, 0.0) or len(users(op.operands[kept])) != 1:
        return None
    if any(f"d{rank - 1}" in r for r in _map_results(op, c)):
        return None  # c varies along the keys: not a row's
    condition = op.operands[c]
    if _splat_value(condition) in (0, False):
        return op.operands[kept], RowZeroing(op, "none")
    return op.operands[kept], RowZeroing(op, "", condition, operand_map(op, c))


def match_attention(context: ir.Operation, lanes: int = LANES) -> AttentionSite | None:
    """The attention whose second batch matmul is ``context`` (its kernel's vectors of
    ``lanes`` f32), or ``None``."""
    if not _plain_batch_matmul(context):
        return None
    p3, v3 = context.operands[0], context.operands[1]
    if len(users(p3)) != 1:
        return None
    collapse = defining_op(p3)
    if collapse is not None and collapse.name == "tensor.collapse_shape":
        p = collapse.operands[0]
        rank = ir.RankedTensorType(p.type).rank
        if _batch_view(p, rank, "tensor.collapse_shape") != (p3, collapse) or len(users(p)) != 1:
            return None
    else:
        p, rank, collapse = p3, 3, None
    zeroing_match = _row_zeroing(p, rank)
    if zeroing_match is None:
        return None
    p, zeroing = zeroing_match
    softmax = _softmax_input(p, rank)
    if softmax is None:
        return None
    x, softmax_ops = softmax
    x_users = 2
    if zeroing is not None and zeroing.kind == "":
        masked = _all_keys_masked(zeroing.condition, x, rank)
        if masked is not None:
            zeroing = RowZeroing(zeroing.generic, "masked", dead=tuple(masked))
            x_users = 3
        elif ir.RankedTensorType(zeroing.condition.type).has_static_shape:
            zeroing = RowZeroing(zeroing.generic, "tensor", zeroing.condition, zeroing.condition_map)
        else:
            return None
    if len(users(x)) != x_users:
        return None
    chain = _score_chain(x, rank)
    if chain is None:
        return None
    s, steps, chain_ops = chain
    s3, expand = _batch_view(s, rank, "tensor.expand_shape")
    scores = defining_op(s3)
    q3, kt3 = scores.operands[0], scores.operands[1]
    b, m, d = ir.RankedTensorType(q3.type).shape
    n = ir.RankedTensorType(kt3.type).shape[2]
    dv = ir.RankedTensorType(v3.type).shape[2]
    if dv > MAX_VALUE_DEPTH:
        return None
    domain = tuple(ir.RankedTensorType(s.type).shape)
    dead = [context, *([collapse] if collapse else []), *([zeroing.generic] if zeroing else []), *softmax_ops,
            *(zeroing.dead if zeroing else ()), *chain_ops,
            *([expand] if expand else []), scores]
    if zeroing is not None and zeroing.kind == "none":
        zeroing = None
    return AttentionSite(scores, steps, context, dead, AttentionShape(b, m, n, d, dv, domain, lanes), zeroing)


@dataclass(frozen=True)
class OperandView:
    """How the kernel reads a rank-3 operand X[b, i, j] (Q, V): at ``indices`` (a map from
    (d0, d1, d2) = (b, i, j) to ``source``'s indices) of ``source``, the tensor X was copied
    from by transposes and a merge of batch dims. Why: Q and V usually come from a
    projection through a transpose ([seq, heads, d] -> [heads, seq, d]); read in place,
    those copies (each as large as the operand) are not made."""

    source: ir.Value
    indices: ir.AffineMap

    @property
    def tensor_type(self) -> ir.RankedTensorType:
        return ir.RankedTensorType(self.source.type)


def operand_view(value: ir.Value) -> OperandView:
    """``value``'s view through single-use ``linalg.transpose`` ops and batch-merging
    ``tensor.collapse_shape`` ops (the identity view when there are none)."""
    indices = [ir.AffineDimExpr.get(i) for i in range(3)]
    while True:
        op = defining_op(value)
        if op is None or len(users(value)) != 1:
            break
        if op.name == "linalg.transpose":
            permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            source_indices = list(indices)
            for position, dim in enumerate(permutation):  # result dim i is input dim perm[i]
                source_indices[dim] = indices[position]
            indices, value = source_indices, op.operands[0]
        elif op.name == "tensor.collapse_shape":
            groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)]
                      for g in ir.ArrayAttr(op.attributes["reassociation"])]
            source_shape = ir.RankedTensorType(op.operands[0].type).shape
            if any(len(group) != 1 for group in groups[1:]) or not ir.RankedTensorType(op.operands[0].type).has_static_shape:
                break  # only leading (batch) dims merged
            merged = []
            for k, dim in enumerate(groups[0]):
                stride = 1
                for later in groups[0][k + 1:]:
                    stride *= source_shape[later]
                merged.append(ir.AffineExpr.get_mod(ir.AffineExpr.get_floor_div(indices[0], stride), source_shape[dim]))
            indices, value = merged + indices[1:], op.operands[0]
        else:
            break
    return OperandView(value, ir.AffineMap.get(3, 0, indices))


def _row_key_mask(generic: ir.Operation, value: ir.Value, rank: int, shape: "AttentionShape") -> np.ndarray | None:
    """``value`` (an input of ``generic``) as an M x N array, when it is a literal constant
    read at (row, key) and broadcast over the batch dims."""
    results = _map_results(generic, list(generic.operands).index(value))
    array = literal_array(value)
    if array is None or results[-2:] != [f"d{rank - 2}", f"d{rank - 1}"]:
        return None
    if any(extent != 1 for extent in array.shape[:-2]):
        return None  # one mask per batch entry
    if array.size != shape.rows * shape.keys or array.shape[-2:] != (shape.rows, shape.keys):
        return None
    return array.reshape(shape.rows, shape.keys)


def key_ranges(site: "AttentionSite") -> np.ndarray | None:
    """Per query row, the [first, end) keys a literal mask leaves finite, as an M x 2 i32
    array; ``None`` unless the chain's last op sets X to -inf where a literal constant (read
    at (row, key), broadcast over the batch dims) says so, whatever the score:
    ``addf(x, mask)`` (-inf entries; short of a +inf or NaN score) or
    ``select(mask, x, -inf)`` / ``select(mask, -inf, x)`` (false / true entries)."""
    if not site.chain:
        return None
    generic, position = site.chain[-1]
    rank = len(site.shape.domain)
    body = _body(generic)
    arguments = _arguments(generic)
    inputs = list(generic.operands)[:-1]
    running = arguments[position]
    if len(body) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    op = body[0]
    finite = None
    if op.name == "arith.addf" and running in op.operands and len(inputs) == 2:
        other = [v for v in op.operands if v != running]
        if len(other) == 1 and other[0] in arguments:
            mask = _row_key_mask(generic, inputs[arguments.index(other[0])], rank, site.shape)
            if mask is not None and mask.dtype == np.float32:
                finite = mask != -np.inf
    elif op.name == "arith.select" and op.operands[0] in arguments:
        condition, on_true, on_false = op.operands
        mask = _row_key_mask(generic, inputs[arguments.index(condition)], rank, site.shape)
        if mask is not None and mask.dtype == np.bool_:
            if on_true == running and _scalar_operand(generic, on_false) == float("-inf"):
                finite = mask
            elif on_false == running and _scalar_operand(generic, on_true) == float("-inf"):
                finite = ~mask
    if finite is None:
        return None
    keys = site.shape.keys
    first = np.where(finite.any(axis=1), finite.argmax(axis=1), keys)
    end = np.where(finite.any(axis=1), keys - finite[:, ::-1].argmax(axis=1), 0)
    if (first == 0).all() and (end == keys).all():
        return None  # nothing to skip
    return np.stack([first, end], axis=1).astype(np.int32)


# ---- the kernel ----------------------------------------------------------------------------

def _row_block(shape: AttentionShape, threads: int) -> int:
    """Query rows per task: all of them when the batch alone gives two tasks per thread, else
    enough blocks for that (whole register tiles)."""
    blocks = max(1, -(-2 * threads // shape.batch))
    rows = -(-shape.rows // blocks)
    return min(shape.rows, -(-rows // shape.tile_rows) * shape.tile_rows)


def build_kernel(name: str, shape: AttentionShape, extras: Sequence[Extra], threads: int,
                 scores_function: str | None = None, zeroing: "str | Extra | None" = None,
                 q_view: "OperandView | None" = None, v_view: "OperandView | None" = None,
                 ranged: bool = False) -> func.FuncOp:
    """The kernel (see the module docstring), built at the insertion point:
    ``(Q: BxMxD, K^T: BxDxNp, V: BxNpxDv, extras...[, rows to zero][, key ranges]) -> BxMxDv``,
    all f32, Np the keys padded to whole blocks, vectors of ``shape.lanes`` f32.
    ``scores_function`` (declared here, before the kernel; defined by the caller) maps a
    score vector and the extras' vectors to X. ``zeroing``: rows whose output is 0 rather
    than NaN: ``"masked"`` (every key -inf), or an i8 tensor read per row (nonzero: 0).
    ``q_view`` / ``v_view``: Q and V read through their views (V's last index must be d2, its
    innermost dim) in place of the [B, M, D] and [B, Np, Dv] tensors. ``ranged``: a last
    argument, M x 2 i32, gives each row's [first, end) keys; a register tile loops over the
    blocks that meet its rows' ranges."""
    b, m, n, d, dv, lanes = shape.batch, shape.rows, shape.keys, shape.depth, shape.value_depth, shape.lanes
    kb, np_ = shape.key_block, shape.padded_keys
    key_vectors, out_vectors = kb // lanes, -(-dv // lanes)
    rank = len(shape.domain)
    tile_rows, blocked, score_rows = shape.tile_rows, shape.blocked, shape.score_rows
    block_rows = _row_block(shape, threads)
    row_blocks = -(-m // block_rows)
    f32, i8, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    dynamic = ir.ShapedType.get_dynamic_size()
    q_type = q_view.tensor_type if q_view else ir.RankedTensorType.get([b, m, d], f32)
    kt_type = ir.RankedTensorType.get([b, d, np_], f32)
    v_type = v_view.tensor_type if v_view else ir.RankedTensorType.get([b, np_, dv], f32)
    o_type = ir.RankedTensorType.get([b, m, dv], f32)
    ranges_type = ir.RankedTensorType.get([m, 2], i32)
    tile_type = ir.RankedTensorType.get([dynamic, dv], f32)
    vec = ir.VectorType.get([lanes], f32)
    dv_in_bounds, keys_in_bounds = dv % lanes == 0, np_ == n
    if scores_function:
        kernels.declare_function(scores_function, [vec, *(ir.VectorType.get([lanes], e.element) for e in extras)],
                                 [vec])
    inputs = [q_type, kt_type, v_type, *(e.tensor_type for e in extras)]
    inputs += [zeroing.tensor_type] if isinstance(zeroing, Extra) else []
    inputs += [ranges_type] if ranged else []
    function = func.FuncOp(name, (inputs, [o_type]))  # public: the caller makes its copy private
    function.add_entry_block()
    q_arg, kt_arg, v_arg, *rest = function.arguments
    extra_tensors = rest[:len(extras)]
    zero_rows = rest[len(extras)] if isinstance(zeroing, Extra) else None
    key_ranges_tensor = rest[-1] if ranged else None
    with ir.InsertionPoint(function.entry_block):
        # Every constant here, in this order (a canonical form's constants keep it).
        c0, c1, c_depth, c_keys, c_block, c_rows = (core.index(x) for x in (0, 1, d, np_, kb, tile_rows))
        f0, one = core.scalar_constant(0.0, f32), core.scalar_constant(1.0, f32)
        ninf, i8_0 = core.scalar_constant(float("-inf"), f32), core.scalar_constant(0, i8)
        zero_v, ninf_v = kernels.zero_vector(lanes, f32), kernels.splat(float("-inf"), lanes, f32)
        columns = [c0, *(core.index(u * lanes) for u in range(1, out_vectors))]
        if blocked:
            padded_dv = out_vectors * lanes
            scratch_rows = [c0, *(core.index(r) for r in range(1, tile_rows))]
            key_columns = [core.index(padded_dv + v * lanes) for v in range(key_vectors)]
            c_lanes, c_max, c_sum = core.index(lanes), core.index(padded_dv + kb), core.index(padded_dv + kb + 1)
        pads = [core.scalar_constant(0, e.stored) for e in extras]
        i8_0_v = kernels.zero_vector(lanes, i8)
        empty = tensor.empty([b, m, dv], f32)
        forall = scf.ForallOp([0, 0], [b, row_blocks], [1, 1], [empty])
        with ir.InsertionPoint(forall.body):
            batch, rb = forall.induction_variables
            out = forall.inner_iter_args[0]
            m0 = kernels.apply(lambda d0: d0 * block_rows, rb)
            nrows = kernels.minimum(lambda d0: [ir.AffineConstantExpr.get(block_rows), m - d0 * block_rows], rb)
            tile = tensor.extract_slice(tile_type, out, [batch, m0], [nrows], [],
                                        [dynamic, dynamic, 0], [1, dynamic, dv], [1, 1, 1])
            main = kernels.apply(lambda d0: d0 - d0 % tile_rows, nrows)
            batch_dims = shape.domain[:-2]
            batch_indices = []  # the chain's batch indices of the flat batch
            for k, extent in enumerate(batch_dims):
                stride = math.prod(batch_dims[k + 1:])
                batch_indices.append(kernels.apply(
                    lambda d0: ir.AffineExpr.get_mod(ir.AffineExpr.get_floor_div(d0, stride), extent), batch))

            def extra_at(extra: Extra, row: ir.Value, key: ir.Value, results: int | None = None) -> list[ir.Value]:
                """An extra's indices at (batch, ``row``, ``key``): its map's first ``results``."""
                return kernels.apply_results(extra.indexing_map, [*batch_indices, row, key], results)

            def nonzero(value: ir.Value, zero: ir.Value) -> ir.Value:
                return arith.cmpi(arith.CmpIPredicate.ne, value, zero)

            def row_loop(mr: int, lower: ir.Value, upper: ir.Value, step: ir.Value,
                         carried: list[ir.Value]) -> list[ir.Value]:
                """Register tiles (or blocks) of ``mr`` rows from ``lower``; carries the
                output tile (and in a blocked kernel the outputs' scratch)."""
                loop = kernels.for_loop(lower, upper, step, carried)
                with ir.InsertionPoint(loop.body):
                    i, written = loop.induction_variable, loop.inner_iter_args[0]
                    scratches = list(loop.inner_iter_args[1:])  # a blocked kernel's (see below)
                    local, rows, row_values, row_zeroed = [], [], {}, {}
                    for r in range(mr):
                        local.append(kernels.apply(lambda d0: d0 + r, i))
                        rows.append(kernels.apply(lambda d0, d1: d0 + d1 + r, m0, i))
                        for x, extra in enumerate(extras):  # one value per row, broadcast
                            if not extra.along_keys:
                                scalar = tensor.extract(extra_tensors[x], extra_at(extra, rows[r], c0))
                                if extra.is_bool:
                                    scalar = nonzero(scalar, i8_0)
                                row_values[(x, r)] = vector.broadcast(ir.VectorType.get([lanes], extra.element), scalar)
                        if isinstance(zeroing, Extra):
                            row_zeroed[r] = nonzero(tensor.extract(zero_rows, extra_at(zeroing, rows[r], c0)), i8_0)
                    j_lower, j_upper = c0, c_keys
                    if ranged:  # the blocks that meet the tile's rows' key ranges
                        firsts, ends = [], []
                        for r in range(mr):
                            first = tensor.extract(key_ranges_tensor, [rows[r], c0])
                            end = tensor.extract(key_ranges_tensor, [rows[r], c1])
                            firsts.append(arith.index_cast(ir.IndexType.get(), first))
                            ends.append(arith.index_cast(ir.IndexType.get(), end))
                        first, end = firsts[0], ends[0]
                        for r in range(1, mr):
                            first, end = arith.minui(first, firsts[r]), arith.maxui(end, ends[r])
                        j_lower = kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, kb) * kb, first)
                        j_upper = kernels.apply(lambda d0: ir.AffineExpr.get_ceil_div(d0, kb) * kb, end)
                    if blocked:  # the rows' outputs and statistics in the scratch (L1)
                        scratch = scratches[0]
                        for r in range(mr):
                            for u in range(out_vectors):
                                scratch = kernels.write(zero_v, scratch, [scratch_rows[r], columns[u]])
                            scratch = tensor.insert(ninf, scratch, [scratch_rows[r], c_max])
                            scratch = tensor.insert(f0, scratch, [scratch_rows[r], c_sum])
                        over_keys = kernels.for_loop(j_lower, j_upper, c_block, [scratch])
                        with ir.InsertionPoint(over_keys.body):
                            scf.YieldOp([blocked_key_block(mr, over_keys.induction_variable,
                                                           over_keys.inner_iter_args[0], i)])
                        scratches = list(over_keys.results)
                        scratch = scratches[0]
                        maxima = [tensor.extract(scratch, [scratch_rows[r], c_max]) for r in range(mr)]
                        sums = [tensor.extract(scratch, [scratch_rows[r], c_sum]) for r in range(mr)]
                        outputs = [[kernels.read(scratch, [scratch_rows[r], columns[u]], f0, lanes)
                                    for u in range(out_vectors)] for r in range(mr)]
                    else:
                        accumulators = [zero_v] * (mr * out_vectors)
                        over_keys = kernels.for_loop(j_lower, j_upper, c_block,
                                                     [*accumulators, *[ninf] * mr, *[f0] * mr])
                        with ir.InsertionPoint(over_keys.body):
                            scf.YieldOp(key_block(mr, over_keys.induction_variable, list(over_keys.inner_iter_args),
                                                  rows, row_values))
                        carried = list(over_keys.results)
                        outputs = [carried[r * out_vectors:(r + 1) * out_vectors] for r in range(mr)]
                        maxima = carried[len(accumulators):len(accumulators) + mr]
                        sums = carried[len(accumulators) + mr:]
                    for r in range(mr):
                        inverse = vector.broadcast(vec, arith.divf(one, sums[r]))
                        if zeroing == "masked":
                            row_zeroed[r] = arith.cmpf(arith.CmpFPredicate.OEQ, maxima[r], ninf)
                        for u in range(out_vectors):
                            value = arith.mulf(outputs[r][u], inverse)
                            if zeroing is not None:
                                value = arith.select(row_zeroed[r], zero_v, value)
                            written = kernels.write(value, written, [local[r], columns[u]], in_bounds=dv_in_bounds)
                    scf.YieldOp([written, *scratches])
                return list(loop.results)

            def block_scores(group: Sequence[int], j: ir.Value, rows: list[ir.Value],
                             row_values: dict) -> dict[tuple[int, int], ir.Value]:
                """X of the rows ``group`` (positions in ``rows``) at the block of keys from
                ``j``, per (row, key vector): S = Q rows x K^T block (one broadcast of Q per
                row and d, one load of each K^T vector shared by the rows), the chain, keys
                past N at -inf."""
                key_at = [kernels.apply(lambda d0: d0 + v * lanes, j) for v in range(key_vectors)]
                over_depth = kernels.for_loop(c0, c_depth, c1, [zero_v] * (len(group) * key_vectors))
                with ir.InsertionPoint(over_depth.body):
                    depth, partial = over_depth.induction_variable, list(over_depth.inner_iter_args)
                    keys = [kernels.read(kt_arg, [batch, depth, key_at[v]], f0, lanes) for v in range(key_vectors)]
                    new = []
                    for g, r in enumerate(group):
                        at = kernels.apply_results(q_view.indices, [batch, rows[r], depth]) if q_view else [batch, rows[r], depth]
                        query = vector.broadcast(vec, tensor.extract(q_arg, at))
                        new += [vector.fma(query, keys[v], partial[g * key_vectors + v]) for v in range(key_vectors)]
                    scf.YieldOp(new)
                scores = list(over_depth.results)
                if np_ != n:
                    valid = [vector.create_mask(ir.VectorType.get([lanes], ir.IntegerType.get_signless(1)),
                                                [kernels.apply(lambda d0: n - d0 - v * lanes, j)])
                             for v in range(key_vectors)]
                xs = {}
                for g, r in enumerate(group):
                    for v in range(key_vectors):
                        score = scores[g * key_vectors + v]
                        if scores_function:
                            values = [score]
                            for x, extra in enumerate(extras):
                                if extra.along_keys:
                                    at = extra_at(extra, rows[r], key_at[v], -1)
                                    read = kernels.read(extra_tensors[x], [*at, key_at[v]], pads[x], lanes,
                                                        in_bounds=keys_in_bounds)
                                    values.append(nonzero(read, i8_0_v) if extra.is_bool else read)
                                else:
                                    values.append(row_values[(x, r)])
                            score = func.CallOp([vec], ir.FlatSymbolRefAttr.get(scores_function), values).results[0]
                        if np_ != n:
                            score = arith.select(valid[v], score, ninf_v)
                        xs[(r, v)] = score
                return xs

            def online_softmax(row_x: list[ir.Value], maximum: ir.Value,
                               total: ir.Value) -> tuple[list[ir.Value], ir.Value, ir.Value, ir.Value]:
                """One row's step of the online softmax over a block of keys: (p per key vector,
                the new max, the new sum, alpha as a vector: what the row's output is scaled by)."""
                peak = row_x[0]
                for x in row_x[1:]:
                    peak = arith.maximumf(peak, x)
                block_max = kernels.reduce(vector.CombiningKind.MAXIMUMF, peak)
                new_max = arith.maximumf(maximum, block_max)
                # A row all -inf so far shifts by 0: -inf - -inf would be NaN.
                shift = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, new_max, ninf), f0, new_max)
                shift_v = vector.broadcast(vec, shift)
                alpha_v = mlir_math.exp(vector.broadcast(vec, arith.subf(maximum, shift)))
                alpha = kernels.first_element(alpha_v)
                probabilities, row_total = [], None
                for x in row_x:
                    probabilities.append(mlir_math.exp(arith.subf(x, shift_v)))
                    row_total = probabilities[-1] if row_total is None else arith.addf(row_total, probabilities[-1])
                row_sum = kernels.reduce(vector.CombiningKind.ADD, row_total)
                return probabilities, new_max, arith.addf(arith.mulf(total, alpha), row_sum), alpha_v

            def key_block(mr: int, j: ir.Value, carried: list[ir.Value], rows: list[ir.Value],
                          row_values: dict) -> list[ir.Value]:
                """One block of keys from ``j`` for a register tile of ``mr`` rows (their
                outputs carried in registers): the scores, the online softmax's update of
                each row's max and sum, O += p @ V; returns what the loop carries."""
                accumulators = carried[:mr * out_vectors]
                maxima, sums = carried[mr * out_vectors:mr * out_vectors + mr], carried[mr * out_vectors + mr:]
                xs = block_scores(range(mr), j, rows, row_values)
                probabilities, new_maxima, new_sums, rescaled = {}, [], [], {}
                for r in range(mr):
                    row_p, new_max, new_sum, alpha_v = online_softmax(
                        [xs[(r, v)] for v in range(key_vectors)], maxima[r], sums[r])
                    for v in range(key_vectors):
                        probabilities[(r, v)] = row_p[v]
                    new_maxima.append(new_max)
                    new_sums.append(new_sum)
                    for u in range(out_vectors):
                        rescaled[(r, u)] = arith.mulf(accumulators[r * out_vectors + u], alpha_v)
                for v in range(key_vectors):  # O += p @ V block
                    for lane in range(lanes):
                        key = kernels.apply(lambda d0: d0 + (v * lanes + lane), j)
                        values = []
                        for u in range(out_vectors):
                            at = kernels.apply_results(v_view.indices, [batch, key, columns[u]]) if v_view else [batch, key, columns[u]]
                            values.append(kernels.read(v_arg, at, f0, lanes, in_bounds=dv_in_bounds))
                        for r in range(mr):
                            p = vector.broadcast(vec, kernels.lane(probabilities[(r, v)], lane))
                            for u in range(out_vectors):
                                rescaled[(r, u)] = vector.fma(p, values[u], rescaled[(r, u)])
                return [*(rescaled[(r, u)] for r in range(mr) for u in range(out_vectors)), *new_maxima, *new_sums]

            def blocked_key_block(mr: int, j: ir.Value, scratch: ir.Value, i: ir.Value) -> ir.Value:
                """One block of keys from ``j`` for the block of ``mr`` rows from ``i``, whose
                outputs, running max and sum are in the ``scratch``: a loop over
                register tiles of ``score_rows`` rows (K^T and V read from L1 after the
                first): their scores (rows x key vectors in registers); per row the online
                softmax's step, p stored (in the scratch), then its output row
                read, scaled by alpha, ``+= p @ V`` by a loop over the block's key vectors (a
                broadcast of each p from L1, Dv / L accumulators) and written back. Every
                scratch access depends on the tile's row: no schedule hoists it out."""
                group = min(score_rows, mr)
                over_rows = kernels.for_loop(c0, core.index(mr), core.index(group), [scratch])
                with ir.InsertionPoint(over_rows.body):
                    pair, scratch = over_rows.induction_variable, over_rows.inner_iter_args[0]
                    local = [kernels.apply(lambda d0: d0 + g, pair) for g in range(group)]
                    rows = [kernels.apply(lambda d0, d1, d2: d0 + d1 + d2 + g, m0, i, pair) for g in range(group)]
                    row_values = {}
                    for g in range(group):
                        for x, extra in enumerate(extras):  # one value per row, broadcast
                            if not extra.along_keys:
                                scalar = tensor.extract(extra_tensors[x], extra_at(extra, rows[g], c0))
                                if extra.is_bool:
                                    scalar = nonzero(scalar, i8_0)
                                row_values[(x, g)] = vector.broadcast(ir.VectorType.get([lanes], extra.element), scalar)
                    xs = block_scores(range(group), j, rows, row_values)
                    for g in range(group):
                        maximum = tensor.extract(scratch, [local[g], c_max])
                        total = tensor.extract(scratch, [local[g], c_sum])
                        row_p, new_max, new_sum, alpha_v = online_softmax(
                            [xs[(g, v)] for v in range(key_vectors)], maximum, total)
                        scratch = tensor.insert(new_max, scratch, [local[g], c_max])
                        scratch = tensor.insert(new_sum, scratch, [local[g], c_sum])
                        for v in range(key_vectors):
                            scratch = kernels.write(row_p[v], scratch, [local[g], key_columns[v]])
                        output = [arith.mulf(kernels.read(scratch, [local[g], columns[u]], f0, lanes), alpha_v)
                                  for u in range(out_vectors)]
                        over_values = kernels.for_loop(c0, c_block, c_lanes, output)
                        with ir.InsertionPoint(over_values.body):  # O += p @ V, a vector of keys at a time
                            t, sums_v = over_values.induction_variable, list(over_values.inner_iter_args)
                            for lane in range(lanes):
                                at_key = kernels.apply(lambda d0: d0 + (padded_dv + lane), t)
                                key = kernels.apply(lambda d0, d1: d0 + d1 + lane, j, t)
                                p = vector.broadcast(vec, tensor.extract(scratch, [local[g], at_key]))
                                for u in range(out_vectors):
                                    at = kernels.apply_results(v_view.indices, [batch, key, columns[u]]) if v_view \
                                        else [batch, key, columns[u]]
                                    value = kernels.read(v_arg, at, f0, lanes, in_bounds=dv_in_bounds)
                                    sums_v[u] = vector.fma(p, value, sums_v[u])
                            scf.YieldOp(sums_v)
                        for u in range(out_vectors):
                            scratch = kernels.write(over_values.results[u], scratch, [local[g], columns[u]])
                    scf.YieldOp([scratch])
                return over_rows.results[0]

            # A blocked kernel's scratch, a row per query row of the block: its outputs (Dv
            # rounded up to whole vectors), p of the key block, the running max and sum.
            carried = [tile, tensor.empty([tile_rows, padded_dv + kb + 2], f32)] if blocked else [tile]
            carried = row_loop(tile_rows, c0, main, c_rows, carried)
            if not (m % block_rows == 0 and block_rows % tile_rows == 0):
                carried = row_loop(1, main, nrows, c1, carried)
            result = carried[0]
            kernels.insert_in_parallel(result, out, [batch, m0], [nrows], [dynamic, dynamic, 0],
                                       [1, dynamic, dv], [1, 1, 1])
        func.ReturnOp([forall.results[0]])
    return function


def kernel_module(name: str, shape: AttentionShape, extras: Sequence[Extra], threads: int,
                  scores_function: str | None = None, zeroing: "str | Extra | None" = None,
                  q_view: "OperandView | None" = None, v_view: "OperandView | None" = None,
                  ranged: bool = False) -> ir.Module:
    """The kernel (and its scores function's declaration) alone in a new module, in the
    current context: to read, test or define the scores function in."""
    with ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            build_kernel(name, shape, extras, threads, scores_function, zeroing, q_view, v_view, ranged)
    return module


# ---- the rewrite ---------------------------------------------------------------------------

def _extras(site: AttentionSite) -> list[tuple[ir.Value, Extra]]:
    rank = len(site.shape.domain)
    found = []
    for generic, position in site.chain:
        inputs = list(generic.operands)[:-1]
        found += [(value, _extra(generic, i, rank)) for i, value in enumerate(inputs) if i != position]
    return found


def _define_scores_function(kernel: ir.Module, name: str, site: AttentionSite) -> None:
    """``name``'s body: the chain's generic bodies, one after the other, on vectors."""
    function = declared_function(kernel, name)
    with site.context.location:
        entry = function.add_entry_block()
    arguments = list(entry.arguments)
    running, extra_arguments = arguments[0], iter(arguments[1:])
    with ir.InsertionPoint(entry), site.context.location:
        for generic, position in site.chain:
            inputs = [running if i == position else next(extra_arguments)
                      for i in range(len(generic.operands) - 1)]
            running = clone_body(generic, inputs, site.shape.lanes)
        func.ReturnOp([running])


def _kernel_name(module: ir.Operation, shape: AttentionShape) -> str:
    existing = {ir.StringAttr(op.operation.attributes["sym_name"]).value
                for op in module.regions[0].blocks[0].operations if "sym_name" in op.operation.attributes}
    base = (f"{KERNEL_PREFIX}_{shape.batch}x{shape.rows}x{shape.keys}x{shape.depth}x{shape.value_depth}")
    return next(f"{base}_{i}" for i in range(len(existing) + 1) if f"{base}_{i}" not in existing)


def fuse_attention(module: ir.Operation, site: AttentionSite, threads: int) -> None:
    """Replace ``site``'s ops by a call of a kernel generated for it."""
    shape = site.shape
    extras = _extras(site)
    name = _kernel_name(module, shape)
    scores_function = f"{name}_scores" if site.chain else None
    zeroing = site.zeroing
    zero_rows: str | Extra | None = None
    if zeroing is not None and zeroing.kind == "masked":
        zero_rows = "masked"
    elif zeroing is not None:  # read as bytes: i1 tensors are bytes in memory, not vectors
        bytes_type = ir.RankedTensorType.get(ir.RankedTensorType(zeroing.condition.type).shape,
                                             ir.IntegerType.get_signless(8))
        zero_rows = Extra(bytes_type, bytes_type.element_type, zeroing.condition_map, False)
    q_view = operand_view(site.scores.operands[0])
    v_view = operand_view(site.context.operands[1])
    if q_view.source == site.scores.operands[0]:
        q_view = None
    # V in place only when its keys need no padding and Dv stays innermost (vector reads).
    if v_view.source == site.context.operands[1] or shape.padded_keys != shape.keys \
            or v_view.indices.results[-1] != ir.AffineDimExpr.get(2):
        v_view = None
    ranges = key_ranges(site)
    with module.context:
        kernel = kernel_module(name, shape, [e for _, e in extras], threads, scores_function, zero_rows,
                               q_view, v_view, ranges is not None)
    if scores_function:
        _define_scores_function(kernel, scores_function, site)
        PassManager.parse("builtin.module(inline, symbol-dce)", module.context).run(kernel.operation)
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        for op in kernel.body.operations:
            clone = op.operation.clone()
            clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    q = q_view.source if q_view else site.scores.operands[0]
    kt = site.scores.operands[1]
    v = v_view.source if v_view else site.context.operands[1]
    padding = shape.padded_keys - shape.keys
    with ir.InsertionPoint(site.context), site.context.location:
        kt = core.pad_constant(kt, [0, 0, 0], [0, 0, padding], 0.0)
        if v_view is None:
            v = core.pad_constant(v, [0, 0, 0], [0, padding, 0], 0.0)
        rows = []
        if isinstance(zero_rows, Extra):
            i8 = ir.IntegerType.get_signless(8)
            rows = [core.elementwise([zeroing.condition], i8, lambda c: arith.extui(i8, c))]
        if ranges is not None:
            rows.append(core.constant(ranges, name="attention_key_ranges"))
        i8 = ir.IntegerType.get_signless(8)
        extra_values = [core.elementwise([value], i8, lambda c: arith.extui(i8, c)) if extra.is_bool else value
                        for value, extra in extras]
        call = func.CallOp([site.context.results[0].type], ir.FlatSymbolRefAttr.get(name),
                           [q, kt, v, *extra_values, *rows])
    site.context.results[0].replace_all_uses_with(call.results[0])
    for op in site.dead:
        output = defining_op(op.operands[-1]) if op.name.startswith("linalg.") else None
        op.erase()
        # The zero or -inf fill of a linalg op's output, unless shared.
        if output is not None and output.name == "linalg.fill" and not list(output.results[0].uses):
            output.erase()


@register_pass(
    FUSE_ATTENTION_PASS,
    "batch_matmul(Q, K^T), an elementwise chain (scale, masks), softmax over the keys and "
    "batch_matmul(P, V) become one kernel with an online softmax over blocks of keys",
    options={"num-threads": "threads the kernels' parallel loops are split for (default 1)",
             "lanes": f"f32 lanes of the kernels' vectors, the target's (default {LANES}; a divisor of "
                      f"{', '.join(map(str, KEY_BLOCKS))})"},
)
def fuse_attention_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    lanes = positive_int_option("lanes", options.get("lanes", str(LANES)))
    blocks = AttentionShape(1, 1, 1, 1, 1, (1, 1, 1), lanes).key_blocks
    if any(block % lanes for block in blocks):
        raise PipelineError(f"{FUSE_ATTENTION_PASS}: lanes={lanes} does not divide the key blocks {blocks}")
    for function in defined_functions(module):
        for op in ops_where(function, lambda o: o.name == "linalg.batch_matmul"):
            site = match_attention(op, lanes)
            if site is not None:
                fuse_attention(module, site, threads)
