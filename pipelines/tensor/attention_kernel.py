"""The fused attention kernel: scaled dot-product attention over one batch of heads as a
generated function that never stores the scores (flash-attention's tiling over the keys, on a
CPU's vector registers). ``tilecraft-fuse-attention`` (fused_attention.py) matches the
attention ops and replaces them by a call of this kernel; this module builds it, and owns
the shape-dependent choices of its tiles (``AttentionShape``) and the descriptions of its
operands (``Extra``, ``OperandView``).

The kernel computes ``O = softmax(f(Q K^T, extras...)) V`` in vectors
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
  whose outputs, p, alpha and running max and sum are in a scratch in L1: per key block, a
  loop over register tiles of ``score_rows`` rows computes their scores (one load of each
  K^T vector for both) and each row's online-softmax step (p and alpha stored); then
  ``O = O * alpha + p @ V`` for the whole block, in register tiles of the block's rows by
  ``value_columns`` output vectors over the block's keys (each V vector loaded once for the
  4 rows, each p broadcast from the scratch), read from and written back to the scratch:
  the key block's K^T and V are read from L2 by the block's first rows and from L1 by the
  others. A row whose keys are all -inf so far uses 0 in place of
  its max, so the -inf - -inf of a fully masked block gives 0, not NaN; a row that stays
  fully masked ends 0 / 0 = NaN, as the unfused softmax does, unless the graph zeroes such
  rows after the softmax (``RowZeroing``: ONNX's Attention, PyTorch's decomposition).

Keys that a constant mask rules out for every row of a register tile are skipped
(``ranged``: a per-row [first, end) key range, read by the tile).

Built with MLIR's Python builders (ir/kernels.py), its operands' types and indexing maps
carried as MLIR objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func, scf, tensor, vector
from mlir.dialects import math as mlir_math

from ...errors import InternalError
from ...ir import core, kernels

# f32 lanes of the kernel's vectors unless the pass is told the target's (``lanes``): 16, a
# 512-bit vector (the 4 x 4 tile of 16-lane vectors was measured with it); AVX2 targets
# pass 8 (``Target.attention_lanes``). Each key block must be a multiple of it.
LANES = 16
KEY_BLOCKS = (64, 48, 32)  # keys per block (at most 4 vectors of scores per row)
ROWS = 4           # query rows per register tile: 4 x 4 score and 4 x 4 output vectors
BLOCK_ROWS = 4     # query rows per key block when their outputs are in L1 (AttentionShape.blocked)
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
# bf16 products (``bf16_products``): vdpbf16ps's 16 f32 lanes, each summing a pair of bf16
# products (bf16_matmul.py writes its kernels' dot products the same way).
BF16_LANES = 16
PAIR = 2


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
    # Whether the keys past the last whole block of KEY_BLOCKS[0] form one narrower block
    # (``tail_vectors``) instead of padding N to whole blocks: set by the pass where the
    # kernel allows it (16-lane vectors, whose 4-row register tile does not depend on the
    # block, and no key ranges).
    key_tail: bool = False

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
        if self.key_tail:
            return min(blocks[0], -(-self.keys // self.lanes) * self.lanes)
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
        if self.lanes >= LANES:
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
        """N padded to whole blocks, or with ``key_tail`` to whole vectors."""
        if self.key_tail:
            return -(-self.keys // self.lanes) * self.lanes
        kb = self.key_block
        return -(-self.keys // kb) * kb

    @property
    def tail_vectors(self) -> int:
        """Vectors of keys in the block after the whole ones (0: none; only with ``key_tail``).
        Why: a ViT's 197 keys padded to whole blocks of 32 (224) cost 14% more products and
        exps, and blocks of 32 twice the online softmax's steps of blocks of 64; three blocks
        of 64 and one of 16 compute 208 (docs/performance.md, "Attention: butterflies and
        a tail block")."""
        return self.padded_keys % self.key_block // self.lanes if self.key_tail else 0


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


def bf16_products_apply(shape: AttentionShape) -> bool:
    """Whether the kernel for ``shape`` can form its two products as bf16 dot products: with
    ``BF16_LANES`` f32 lanes (vdpbf16ps's; AVX512-BF16 targets have them) and the scores and
    outputs in registers (a blocked kernel's are AVX2's, which has no bf16 dot product)."""
    return shape.lanes == BF16_LANES and not shape.blocked


def k_view_applies(shape: AttentionShape, k_view: OperandView) -> bool:
    """Whether a bf16 kernel can pack K^T from ``k_view`` (``pack_keys_from_view``): D a
    multiple of 32 (whole blocks of 16 pairs), no keys to pad, and D the innermost dim of
    the view's source (K^T[b, d, key] read at its d1 = d: the 32 d of a key are one read)."""
    return (shape.depth % (PAIR * BF16_LANES) == 0 and shape.padded_keys == shape.keys
            and k_view.indices.results[-1] == ir.AffineDimExpr.get(1))


def _transpose(rows: list[ir.Value]) -> list[ir.Value]:
    """The square matrix whose rows are the 1-D vectors ``rows`` (as many as their lanes, a
    power of two) transposed, as two-source shuffles: per bit b of the index, each pair of rows
    i, i + b (bit b of i clear) trades the elements whose column has bit b set in one row and
    clear in the other, which swaps bit b between row and column index; log2(n) rounds of n
    shuffles (on AVX-512, each a vpermt2d or cheaper)."""
    size = len(rows)
    rows = list(rows)
    bit = size // 2
    while bit:
        low = [c if c & bit == 0 else size + c - bit for c in range(size)]
        high = [c + bit if c & bit == 0 else size + c for c in range(size)]
        for i in range(size):
            if i & bit == 0:
                rows[i], rows[i + bit] = (vector.shuffle(rows[i], rows[i + bit], low),
                                          vector.shuffle(rows[i], rows[i + bit], high))
        bit //= 2
    return rows


def _larger(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a > b ? a : b``: the max as one ``vmaxps`` / ``maxss``. Why not ``arith.maximumf``:
    its NaN and signed-zero rules lowered to five dependent instructions per max (a mask
    move, two blends, the max, an unordered compare), on the online softmax's critical path
    between a key block's scores and its ``p @ V``. A NaN score still reaches the output:
    the max may drop it, but ``exp(NaN - max)`` is NaN, and so are the row's sum and output,
    as with the unfused softmax."""
    return arith.select(arith.cmpf(arith.CmpFPredicate.OGT, a, b), a, b)


def _butterfly(value: ir.Value, combine) -> ir.Value:
    """Every lane of the 1-D vector ``value`` (a power of two lanes) set to ``combine`` of all
    its lanes: log2(lanes) rounds, each combining the vector with itself shuffled so that lane
    i meets lane i xor b. Why: ``vector.reduction``'s f32 add keeps the sequential order (16
    dependent scalar adds at 16 lanes) and its max the NaN rules of ``maximumf``; a key
    block's max and sum are on the path from its scores to its ``p @ V``, and 4 shuffles and
    4 vector ops are a quarter of that latency. The sums' order differs from a sequential
    sum's by rounding only."""
    size = ir.VectorType(value.type).shape[0]
    bit = size // 2
    while bit:
        value = combine(value, vector.shuffle(value, value, [i ^ bit for i in range(size)]))
        bit //= 2
    return value


def _row_block(shape: AttentionShape, threads: int) -> int:
    """Query rows per task: all of them when the batch alone gives two tasks per thread, else
    enough blocks for that (whole register tiles)."""
    blocks = max(1, -(-2 * threads // shape.batch))
    rows = -(-shape.rows // blocks)
    return min(shape.rows, -(-rows // shape.tile_rows) * shape.tile_rows)


def value_columns(rows: int, out_vectors: int) -> int:
    """Output vectors per register tile of a blocked kernel's ``O += p @ V`` over ``rows``
    query rows. One row takes up to 8 (V's vectors are FMA memory operands: its outputs and
    a broadcast are all that is live); several rows take as many as keep their accumulators
    at 12 of the 16 registers, the rest holding the loaded V vectors and a broadcast of p
    (4 rows: 3 columns). Why: a tile of one row loaded each V vector of the key block once
    per row, 9 loads per 8 FMAs; 4 rows x 3 columns load it once per 4 rows, 7 loads (3 of
    V, 4 broadcasts of p) per 12 FMAs. 4 x 4 (16 accumulators) spilled in the inner loop
    (AVX2's 16 registers; docs/performance.md, "Attention: p @ V across the block's rows")."""
    if rows == 1:
        return min(out_vectors, 8)
    return max(1, min(out_vectors, 12 // rows))


def build_kernel(name: str, shape: AttentionShape, extras: Sequence[Extra], threads: int,
                 scores_function: str | None = None, zeroing: "str | Extra | None" = None,
                 q_view: "OperandView | None" = None, v_view: "OperandView | None" = None,
                 ranged: bool = False, bf16: bool = False, k_view: "OperandView | None" = None) -> func.FuncOp:
    """The kernel (see the module docstring), built at the insertion point:
    ``(Q: BxMxD, K^T: BxDxNp, V: BxNpxDv, extras...[, rows to zero][, key ranges]) -> BxMxDv``,
    all f32, Np the keys padded to whole blocks, vectors of ``shape.lanes`` f32.
    ``scores_function`` (declared here, before the kernel; defined by the caller) maps a
    score vector and the extras' vectors to X. ``zeroing``: rows whose output is 0 rather
    than NaN: ``"masked"`` (every key -inf), or an i8 tensor read per row (nonzero: 0).
    ``q_view`` / ``v_view``: Q and V read through their views (V's last index must be d2, its
    innermost dim) in place of the [B, M, D] and [B, Np, Dv] tensors. ``ranged``: a last
    argument, M x 2 i32, gives each row's [first, end) keys; a register tile loops over the
    blocks that meet its rows' ranges. ``bf16``: Q K^T and p @ V as bf16 dot products
    (``bf16_products``; 16 lanes, not blocked)."""
    if bf16 and not bf16_products_apply(shape):
        raise InternalError(f"bf16 products need {BF16_LANES}-lane vectors and a kernel that is not blocked, "
                         f"got {shape.lanes} lanes")
    b, m, n, d, dv, lanes = shape.batch, shape.rows, shape.keys, shape.depth, shape.value_depth, shape.lanes
    kb, np_ = shape.key_block, shape.padded_keys
    key_vectors, out_vectors = kb // lanes, -(-dv // lanes)
    tail_vectors = shape.tail_vectors
    if shape.key_tail and (lanes < LANES or ranged):
        raise InternalError(f"a tail block of keys needs {LANES}-lane vectors and no key ranges, got "
                            f"{lanes} lanes, ranged={ranged}")
    rank = len(shape.domain)
    tile_rows, blocked, score_rows = shape.tile_rows, shape.blocked, shape.score_rows
    block_rows = _row_block(shape, threads)
    row_blocks = -(-m // block_rows)
    f32, i8, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    dynamic = ir.ShapedType.get_dynamic_size()
    q_type = q_view.tensor_type if q_view else ir.RankedTensorType.get([b, m, d], f32)
    if k_view is not None and not (bf16 and k_view_applies(shape, k_view)):
        raise InternalError("K read through its view needs bf16 products, D a multiple of 32, unpadded keys "
                         "and D innermost in the view's source")
    kt_type = k_view.tensor_type if k_view else ir.RankedTensorType.get([b, d, np_], f32)
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
        c_main = core.index(np_ - tail_vectors * lanes) if tail_vectors else None
        f0, one = core.scalar_constant(0.0, f32), core.scalar_constant(1.0, f32)
        ninf, i8_0 = core.scalar_constant(float("-inf"), f32), core.scalar_constant(0, i8)
        zero_v, ninf_v = kernels.zero_vector(lanes, f32), kernels.splat(float("-inf"), lanes, f32)
        columns = [c0, *(core.index(u * lanes) for u in range(1, out_vectors))]
        if blocked:
            padded_dv = out_vectors * lanes
            scratch_rows = [c0, *(core.index(r) for r in range(1, tile_rows))]
            key_columns = [core.index(padded_dv + v * lanes) for v in range(key_vectors)]
            c_lanes, c_max, c_sum = core.index(lanes), core.index(padded_dv + kb), core.index(padded_dv + kb + 1)
            c_alpha = core.index(padded_dv + kb + 2)
        if bf16:
            bf16_t = ir.BF16Type.get()
            bf0, c_pairs = core.scalar_constant(0.0, bf16_t), core.index(-(-d // PAIR))
            c_lanes = core.index(lanes)
            pair_type, pair_f32 = ir.VectorType.get([lanes, PAIR], bf16_t), ir.VectorType.get([lanes, PAIR], f32)
            flat_pairs, words = ir.VectorType.get([lanes * PAIR], bf16_t), ir.VectorType.get([lanes], i32)
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

            def spread(word: ir.Value) -> ir.Value:
                """A pair of bf16 values (an i32 ``word``) in every lane, widened: the
                broadcast operand of a bf16 dot product (``kernels.dot_product``)."""
                pairs = vector.shape_cast(pair_type, vector.bitcast(flat_pairs, vector.broadcast(words, word)))
                return arith.extf(pair_f32, pairs)

            def rounded_pairs(first: ir.Value, second: ir.Value) -> ir.Value:
                """Two f32 vectors interleaved lane by lane and rounded to bf16: lane i's pair
                is (first[i], second[i])."""
                return arith.truncf(flat_pairs, vector.interleave(first, second))

            def pack_queries() -> ir.Value:
                """The task's Q rows rounded to bf16, ``[block_rows, D rounded up to whole
                vectors]`` (zeros past D), so that a row's pair of d is one 4-byte broadcast.
                Read a vector at a time where d is Q's innermost dim, else element by element."""
                width = -(-d // lanes) * lanes
                packed = tensor.empty([block_rows, width], bf16_t)
                over_rows = kernels.for_loop(c0, nrows, c1, [packed])
                with ir.InsertionPoint(over_rows.body):
                    local, packed = over_rows.induction_variable, over_rows.inner_iter_args[0]
                    row = kernels.apply(lambda d0, d1: d0 + d1, m0, local)

                    def at(depth: ir.Value) -> list[ir.Value]:
                        return kernels.apply_results(q_view.indices, [batch, row, depth]) if q_view else [batch, row, depth]

                    if q_view is None or q_view.indices.results[-1] == ir.AffineDimExpr.get(2):
                        for u in range(width // lanes):
                            chunk = kernels.read(q_arg, at(core.index(u * lanes)), f0, lanes, in_bounds=d % lanes == 0)
                            packed = kernels.write(arith.truncf(ir.VectorType.get([lanes], bf16_t), chunk), packed,
                                                   [local, core.index(u * lanes)])
                    else:
                        if width != d:
                            for u in range(d // lanes * lanes, width, lanes):
                                packed = kernels.write(kernels.zero_vector(lanes, bf16_t), packed,
                                                       [local, core.index(u)])
                        over_depth = kernels.for_loop(c0, c_depth, c1, [packed])
                        with ir.InsertionPoint(over_depth.body):
                            depth, inner = over_depth.induction_variable, over_depth.inner_iter_args[0]
                            value = arith.truncf(bf16_t, tensor.extract(q_arg, at(depth)))
                            scf.YieldOp([tensor.insert(value, inner, [local, depth])])
                        packed = over_depth.results[0]
                    scf.YieldOp([packed])
                return over_rows.results[0]

            def pack_keys_from_view() -> ir.Value:
                """``pack_keys``'s result read from K in place (``k_view``: its source has D
                innermost, [seq, heads, d] as a projection makes it): per block of 16 keys and
                32 d, 16 reads of 32 d rounded to bf16 (16 pairs of d, one 32-bit word each),
                then that 16 x 16 block of words transposed in registers (``_transpose``), so
                that each pair of d has its 16 keys' words in one vector."""
                packed = tensor.empty([d // PAIR, PAIR * np_], bf16_t)
                over_keys = kernels.for_loop(c0, c_keys, c_lanes, [packed])
                with ir.InsertionPoint(over_keys.body):
                    key, packed = over_keys.induction_variable, over_keys.inner_iter_args[0]
                    at_key = kernels.apply(lambda d0: d0 * PAIR, key)
                    for chunk in range(d // (PAIR * lanes)):
                        block = []
                        for t in range(lanes):
                            row = kernels.apply(lambda d0: d0 + t, key)
                            at = kernels.apply_results(k_view.indices, [batch, core.index(chunk * PAIR * lanes), row])
                            values = kernels.read(kt_arg, at, f0, PAIR * lanes)
                            block.append(vector.bitcast(words, arith.truncf(flat_pairs, values)))
                        for w, word_row in enumerate(_transpose(block)):
                            packed = kernels.write(vector.bitcast(flat_pairs, word_row), packed,
                                                   [core.index(chunk * lanes + w), at_key])
                    scf.YieldOp([packed])
                return over_keys.results[0]

            def pack_keys() -> ir.Value:
                """K^T's rows in pairs, rounded to bf16: ``[D / 2, 2 Np]``, pair p's keys
                interleaved (K^T[2p, key], K^T[2p + 1, key]); a last odd row paired with 0."""
                packed = tensor.empty([-(-d // PAIR), PAIR * np_], bf16_t)

                def pair_row(pair: ir.Value, packed: ir.Value, odd: bool) -> ir.Value:
                    even_row = kernels.apply(lambda d0: d0 * PAIR, pair)
                    odd_row = kernels.apply(lambda d0: d0 * PAIR + 1, pair)
                    over_keys = kernels.for_loop(c0, c_keys, c_lanes, [packed])
                    with ir.InsertionPoint(over_keys.body):
                        key, inner = over_keys.induction_variable, over_keys.inner_iter_args[0]
                        first = kernels.read(kt_arg, [batch, even_row, key], f0, lanes)
                        second = zero_v if odd else kernels.read(kt_arg, [batch, odd_row, key], f0, lanes)
                        at = kernels.apply(lambda d0: d0 * PAIR, key)
                        scf.YieldOp([kernels.write(rounded_pairs(first, second), inner, [pair, at])])
                    return over_keys.results[0]

                over_pairs = kernels.for_loop(c0, core.index(d // PAIR), c1, [packed])
                with ir.InsertionPoint(over_pairs.body):
                    scf.YieldOp([pair_row(over_pairs.induction_variable, over_pairs.inner_iter_args[0], False)])
                packed = over_pairs.results[0]
                if d % PAIR:
                    packed = pair_row(core.index(d // PAIR), packed, True)
                return packed

            def pack_values() -> ir.Value:
                """V's rows (keys) in pairs, rounded to bf16: ``[Np / 2, 2 Dv rounded up to
                whole vectors]``, pair t's columns interleaved (V[2t, c], V[2t + 1, c])."""
                packed = tensor.empty([np_ // PAIR, PAIR * out_vectors * lanes], bf16_t)
                over_pairs = kernels.for_loop(c0, core.index(np_ // PAIR), c1, [packed])
                with ir.InsertionPoint(over_pairs.body):
                    pair, packed = over_pairs.induction_variable, over_pairs.inner_iter_args[0]
                    keys = [kernels.apply(lambda d0: d0 * PAIR + k, pair) for k in range(PAIR)]
                    for u in range(out_vectors):
                        halves = []
                        for key in keys:
                            at = kernels.apply_results(v_view.indices, [batch, key, columns[u]]) if v_view \
                                else [batch, key, columns[u]]
                            halves.append(kernels.read(v_arg, at, f0, lanes, in_bounds=dv_in_bounds))
                        packed = kernels.write(rounded_pairs(*halves), packed, [pair, core.index(u * PAIR * lanes)])
                    scf.YieldOp([packed])
                return over_pairs.results[0]

            if bf16:  # the task's operands rounded to bf16 and packed for the dot products
                q_pairs = pack_queries()
                kt_pairs = pack_keys_from_view() if k_view else pack_keys()
                v_pairs = pack_values()

            def extra_at(extra: Extra, row: ir.Value, key: ir.Value, results: int | None = None) -> list[ir.Value]:
                """An extra's indices at (batch, ``row``, ``key``): its map's first ``results``."""
                return kernels.apply_results(extra.indexing_map, [*batch_indices, row, key], results)

            def nonzero(value: ir.Value, zero: ir.Value) -> ir.Value:
                return arith.cmpi(arith.CmpIPredicate.ne, value, zero)

            def broadcast_row_values(row_values: dict, position: int, row: ir.Value) -> None:
                """The extras read once per row (not along the keys) at ``row``, broadcast to
                vectors: ``row_values[(extra, position)]``."""
                for x, extra in enumerate(extras):
                    if not extra.along_keys:
                        scalar = tensor.extract(extra_tensors[x], extra_at(extra, row, c0))
                        if extra.is_bool:
                            scalar = nonzero(scalar, i8_0)
                        row_values[(x, position)] = vector.broadcast(ir.VectorType.get([lanes], extra.element), scalar)

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
                        if not blocked:  # (a blocked kernel's are read per register tile of scores)
                            broadcast_row_values(row_values, r, rows[r])
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
                        over_keys = kernels.for_loop(j_lower, c_main if tail_vectors else j_upper, c_block,
                                                     [*accumulators, *[ninf] * mr, *[f0] * mr])
                        with ir.InsertionPoint(over_keys.body):
                            scf.YieldOp(key_block(mr, over_keys.induction_variable, list(over_keys.inner_iter_args),
                                                  rows, row_values))
                        carried = list(over_keys.results)
                        if tail_vectors:  # the keys past the whole blocks: one narrower block
                            carried = key_block(mr, c_main, carried, rows, row_values, tail_vectors)
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
                             row_values: dict, vectors: int = key_vectors) -> dict[tuple[int, int], ir.Value]:
                """X of the rows ``group`` (positions in ``rows``) at the block of keys from
                ``j``, per (row, key vector; ``vectors`` of them): S = Q rows x K^T block (one broadcast of Q per
                row and d, one load of each K^T vector shared by the rows), the chain, keys
                past N at -inf."""
                key_at = [kernels.apply(lambda d0: d0 + v * lanes, j) for v in range(vectors)]
                if bf16:  # per pair of d: one broadcast of Q's pair per row, one load of K^T's pairs per vector
                    over_depth = kernels.for_loop(c0, c_pairs, c1, [zero_v] * (len(group) * vectors))
                    with ir.InsertionPoint(over_depth.body):
                        pair, partial = over_depth.induction_variable, list(over_depth.inner_iter_args)
                        keys = [arith.extf(pair_f32, vector.shape_cast(pair_type, kernels.read(
                                    kt_pairs, [pair, kernels.apply(lambda d0: d0 * PAIR, key_at[v])], bf0, PAIR * lanes)))
                                for v in range(vectors)]
                        depth = kernels.apply(lambda d0: d0 * PAIR, pair)
                        new = []
                        for g, r in enumerate(group):
                            local = kernels.apply(lambda d0, d1: d0 - d1, rows[r], m0)
                            word = vector.bitcast(ir.VectorType.get([1], i32),
                                                  kernels.read(q_pairs, [local, depth], bf0, PAIR))
                            query = spread(kernels.first_element(word))
                            new += [kernels.dot_product(query, keys[v], partial[g * vectors + v])
                                    for v in range(vectors)]
                        scf.YieldOp(new)
                else:
                    over_depth = kernels.for_loop(c0, c_depth, c1, [zero_v] * (len(group) * vectors))
                    with ir.InsertionPoint(over_depth.body):
                        depth, partial = over_depth.induction_variable, list(over_depth.inner_iter_args)
                        keys = [kernels.read(kt_arg, [batch, depth, key_at[v]], f0, lanes) for v in range(vectors)]
                        new = []
                        for g, r in enumerate(group):
                            at = kernels.apply_results(q_view.indices, [batch, rows[r], depth]) if q_view \
                                else [batch, rows[r], depth]
                            query = vector.broadcast(vec, tensor.extract(q_arg, at))
                            new += [vector.fma(query, keys[v], partial[g * vectors + v]) for v in range(vectors)]
                        scf.YieldOp(new)
                scores = list(over_depth.results)
                # Keys past N are in the last block: the tail where there is one.
                masked = np_ != n and not (tail_vectors and vectors == key_vectors)
                if masked:
                    valid = [vector.create_mask(ir.VectorType.get([lanes], ir.IntegerType.get_signless(1)),
                                                [kernels.apply(lambda d0: n - d0 - v * lanes, j)])
                             for v in range(vectors)]
                xs = {}
                for g, r in enumerate(group):
                    for v in range(vectors):
                        score = scores[g * vectors + v]
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
                        if masked:
                            score = arith.select(valid[v], score, ninf_v)
                        xs[(r, v)] = score
                return xs

            def online_softmax(row_x: list[ir.Value], maximum: ir.Value,
                               total: ir.Value) -> tuple[list[ir.Value], ir.Value, ir.Value, ir.Value]:
                """One row's step of the online softmax over a block of keys: (p per key vector,
                the new max, the new sum, alpha as a vector: what the row's output is scaled by)."""
                peak = row_x[0]
                for x in row_x[1:]:
                    peak = _larger(peak, x)
                block_max = kernels.first_element(_butterfly(peak, _larger))
                new_max = _larger(block_max, maximum)
                # A row all -inf so far shifts by 0: -inf - -inf would be NaN.
                shift = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, new_max, ninf), f0, new_max)
                shift_v = vector.broadcast(vec, shift)
                alpha_v = mlir_math.exp(vector.broadcast(vec, arith.subf(maximum, shift)))
                alpha = kernels.first_element(alpha_v)
                probabilities, row_total = [], None
                for x in row_x:
                    probabilities.append(mlir_math.exp(arith.subf(x, shift_v)))
                    row_total = probabilities[-1] if row_total is None else arith.addf(row_total, probabilities[-1])
                row_sum = kernels.first_element(_butterfly(row_total, arith.addf))
                return probabilities, new_max, arith.addf(arith.mulf(total, alpha), row_sum), alpha_v

            def key_block(mr: int, j: ir.Value, carried: list[ir.Value], rows: list[ir.Value],
                          row_values: dict, vectors: int = key_vectors) -> list[ir.Value]:
                """One block of keys from ``j`` for a register tile of ``mr`` rows (their
                outputs carried in registers; ``vectors`` vectors of keys: fewer in the tail block): the scores, the online softmax's update of
                each row's max and sum, O += p @ V; returns what the loop carries."""
                accumulators = carried[:mr * out_vectors]
                maxima, sums = carried[mr * out_vectors:mr * out_vectors + mr], carried[mr * out_vectors + mr:]
                xs = block_scores(range(mr), j, rows, row_values, vectors)
                probabilities, new_maxima, new_sums, rescaled = {}, [], [], {}
                for r in range(mr):
                    row_p, new_max, new_sum, alpha_v = online_softmax(
                        [xs[(r, v)] for v in range(vectors)], maxima[r], sums[r])
                    for v in range(vectors):
                        probabilities[(r, v)] = row_p[v]
                    new_maxima.append(new_max)
                    new_sums.append(new_sum)
                    for u in range(out_vectors):
                        rescaled[(r, u)] = arith.mulf(accumulators[r * out_vectors + u], alpha_v)
                if bf16:  # O += p @ V block, per pair of keys: one load of V's pairs per vector, p's pair broadcast
                    for v in range(vectors):
                        p_words = [vector.bitcast(ir.VectorType.get([lanes // PAIR], i32),
                                                  arith.truncf(ir.VectorType.get([lanes], bf16_t), probabilities[(r, v)]))
                                   for r in range(mr)]
                        for k in range(lanes // PAIR):
                            pair = kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, PAIR) + (v * lanes // PAIR + k), j)
                            values = [arith.extf(pair_f32, vector.shape_cast(pair_type, kernels.read(
                                          v_pairs, [pair, core.index(u * PAIR * lanes)], bf0, PAIR * lanes)))
                                      for u in range(out_vectors)]
                            for r in range(mr):
                                p = spread(kernels.lane(p_words[r], k))
                                for u in range(out_vectors):
                                    rescaled[(r, u)] = kernels.dot_product(p, values[u], rescaled[(r, u)])
                    return [*(rescaled[(r, u)] for r in range(mr) for u in range(out_vectors)), *new_maxima, *new_sums]
                for v in range(vectors):  # O += p @ V block
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
                outputs, running max and sum are in the ``scratch``: a loop over register
                tiles of ``score_rows`` rows computes their scores (rows x key vectors in
                registers) and each row's online-softmax step (p, alpha, max and sum stored
                in the scratch); then ``O = O * alpha + p @ V`` for all ``mr`` rows at once
                (``value_product``), so that each V vector is loaded once per block of rows,
                not once per row. Every scratch access depends on the tile's row: no
                schedule hoists it out."""
                group = min(score_rows, mr)
                over_rows = kernels.for_loop(c0, core.index(mr), core.index(group), [scratch])
                with ir.InsertionPoint(over_rows.body):
                    pair, scratch = over_rows.induction_variable, over_rows.inner_iter_args[0]
                    local = [kernels.apply(lambda d0: d0 + g, pair) for g in range(group)]
                    rows = [kernels.apply(lambda d0, d1, d2: d0 + d1 + d2 + g, m0, i, pair) for g in range(group)]
                    row_values = {}
                    for g in range(group):
                        broadcast_row_values(row_values, g, rows[g])
                    xs = block_scores(range(group), j, rows, row_values)
                    for g in range(group):
                        maximum = tensor.extract(scratch, [local[g], c_max])
                        total = tensor.extract(scratch, [local[g], c_sum])
                        row_p, new_max, new_sum, alpha_v = online_softmax(
                            [xs[(g, v)] for v in range(key_vectors)], maximum, total)
                        scratch = tensor.insert(new_max, scratch, [local[g], c_max])
                        scratch = tensor.insert(new_sum, scratch, [local[g], c_sum])
                        scratch = tensor.insert(kernels.first_element(alpha_v), scratch, [local[g], c_alpha])
                        for v in range(key_vectors):
                            scratch = kernels.write(row_p[v], scratch, [local[g], key_columns[v]])
                    scf.YieldOp([scratch])
                return value_product(mr, j, over_rows.results[0])

            def value_product(mr: int, j: ir.Value, scratch: ir.Value) -> ir.Value:
                """``O = O * alpha + p @ V`` for the ``mr`` rows of the scratch at the block of
                keys from ``j``: a loop over chunks of ``width`` output vectors (a last,
                narrower chunk where they do not divide Dv / L), each an ``mr`` x ``width``
                register tile of outputs read from the scratch and scaled by the rows'
                alpha, then per key of the block ``width`` loads of V shared by the
                ``mr`` rows (a broadcast of each row's p from the scratch) and written back."""
                width = value_columns(mr, out_vectors)
                alphas = [vector.broadcast(vec, tensor.extract(scratch, [scratch_rows[r], c_alpha])) for r in range(mr)]
                whole = out_vectors // width * width

                def chunk(column: ir.Value, count: int, scratch: ir.Value) -> ir.Value:
                    at_column = [kernels.apply(lambda d0: d0 + u * lanes, column) for u in range(count)]
                    outputs = [arith.mulf(kernels.read(scratch, [scratch_rows[r], at_column[u]], f0, lanes), alphas[r])
                               for r in range(mr) for u in range(count)]
                    over_values = kernels.for_loop(c0, c_block, c_lanes, outputs)
                    with ir.InsertionPoint(over_values.body):  # a vector of keys at a time
                        t, sums_v = over_values.induction_variable, list(over_values.inner_iter_args)
                        for lane in range(lanes):
                            at_key = kernels.apply(lambda d0: d0 + (padded_dv + lane), t)
                            key = kernels.apply(lambda d0, d1: d0 + d1 + lane, j, t)
                            values = []
                            for u in range(count):
                                at = kernels.apply_results(v_view.indices, [batch, key, at_column[u]]) if v_view \
                                    else [batch, key, at_column[u]]
                                values.append(kernels.read(v_arg, at, f0, lanes, in_bounds=dv_in_bounds))
                            for r in range(mr):
                                p = vector.broadcast(vec, tensor.extract(scratch, [scratch_rows[r], at_key]))
                                for u in range(count):
                                    sums_v[r * count + u] = vector.fma(p, values[u], sums_v[r * count + u])
                        scf.YieldOp(sums_v)
                    for r in range(mr):
                        for u in range(count):
                            scratch = kernels.write(over_values.results[r * count + u], scratch,
                                                    [scratch_rows[r], at_column[u]])
                    return scratch

                over_chunks = kernels.for_loop(c0, core.index(whole * lanes), core.index(width * lanes), [scratch])
                with ir.InsertionPoint(over_chunks.body):
                    scf.YieldOp([chunk(over_chunks.induction_variable, width, over_chunks.inner_iter_args[0])])
                scratch = over_chunks.results[0]
                if whole < out_vectors:
                    scratch = chunk(core.index(whole * lanes), out_vectors - whole, scratch)
                return scratch

            # A blocked kernel's scratch, a row per query row of the block: its outputs (Dv
            # rounded up to whole vectors), p of the key block, the running max and sum, and
            # alpha, the factor the block's step scales the row's outputs by.
            carried = [tile, tensor.empty([tile_rows, padded_dv + kb + 3], f32)] if blocked else [tile]
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
                  ranged: bool = False, bf16: bool = False, k_view: "OperandView | None" = None) -> ir.Module:
    """The kernel (and its scores function's declaration) alone in a new module, in the
    current context: to read, test or define the scores function in."""
    with ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            build_kernel(name, shape, extras, threads, scores_function, zeroing, q_view, v_view, ranged, bf16, k_view)
    return module
