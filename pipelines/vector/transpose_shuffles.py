"""``tilecraft-transpose-shuffles``: a ``vector.transpose`` of R rows of C lanes (any rank, the
other dims of size 1) becomes log2 stages of two-source ``vector.shuffle``s, each exchanging
one bit of the row index with one bit of the lane index.

Why: the schedule reads a transpose's input as whole vectors along its contiguous dim and
transposes a register tile (schedule/plan.py ``transposed_read_dim``). MLIR's default lowering
of that ``vector.transpose`` (after ``convert-vector-to-scf`` unrolls the transfers) is one
``vector.from_elements`` per output row of scalars extracted from every input row, and LLVM
rebuilt that as a chain of inserts, broadcasts, blends and ``vpermt2ps`` with a constant
loaded for each: [1, 64, 56, 56] -> NHWC ran at 2.1x onnxruntime's time. The butterfly is
the textbook in-register transpose (the AVX 8 x 8 of ``unpcklps``/``shufps``/``vperm2f128``):
R x C elements in log2(min(R, C)) stages of R (or C) shuffles, each a one- or two-instruction
shuffle on x86, plus a concatenation of rows (R > C) or a split of the result (R < C).

The stages, with row index r (bits r0 .. r(n-1)) and lane c (bits c0 .. c(m-1)):

- R > C: rows r and r + 2^k are concatenated for k = m .. n-1 (lowest first, so the
  concatenated halves stack as the high bits of the output's lane index r), leaving 2^m
  rows of R lanes;
- swap stage k (k < min(n, m)): rows A and B, differing in row bit k (r_k), become
  A' = [A[l] if bit k of l is 0 else B[l - 2^k]] and B' = [A[l + 2^k] if bit k of l is 0
  else B[l]], so row bit k now holds c_k and lane bit k holds r_k;
- R < C: each row of C lanes is split in halves, top lane bit first, the halves' bit
  going in above the swapped row bits, until rows hold R lanes.

Extents that are not powers of two (a peeled remainder of 5 lanes, an image's 3 channels)
are padded to the next ones: lanes by a shuffle whose extra lanes are poison, rows by poison
rows; the result keeps its rows and lanes only. A transpose that keeps the lanes innermost
moves whole rows and keeps MLIR's lowering. The rewrite is exact: it only moves elements,
for any element type.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import ub, vector

from ..ir_queries import replace_each
from ..passes import register_pass

TRANSPOSE_SHUFFLES = "tilecraft-transpose-shuffles"

# A shuffle mask's index for a lane whose value does not matter (MLIR's poison index).
_POISON = -1


def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _row_transpose(op: ir.Operation) -> tuple[int, int] | None:
    """(row dim of the source, row dim of the result) of a ``vector.transpose`` that moves
    R rows of C lanes (the source's last dim) to C rows of R lanes (the result's last dim),
    all other dims of size 1; ``None`` for any other transpose."""
    if op.name != "vector.transpose":
        return None
    source = ir.VectorType(op.operands[0].type)
    if source.scalable or source.rank < 2:
        return None
    shape = list(source.shape)
    permutation = [int(p) for p in ir.DenseI64ArrayAttr(op.attributes["permutation"])]
    wide = [d for d, size in enumerate(shape) if size > 1]
    if len(wide) != 2 or wide[1] != source.rank - 1 or permutation[-1] != wide[0]:
        return None
    return wide[0], permutation.index(source.rank - 1)


def _position(rank: int, dim: int, index: int) -> list[int]:
    """The static position of row ``index`` along ``dim`` of a vector of ``rank`` dims, all
    but the last (the row's lanes) given."""
    return [index if d == dim else 0 for d in range(rank - 1)]


def butterfly_masks(rows: int, lanes: int) -> list[tuple[str, list[tuple[int, int, list[int]]]]]:
    """The shuffle stages transposing ``rows`` vectors of ``lanes`` lanes, as data: a list of
    (kind, [(first input, second input, mask), ...]) whose entries index the previous
    stage's list of vectors (the input rows first) and give the new list in order. Kept
    apart from the IR so that tests can replay it on numpy arrays."""
    n, m = rows.bit_length() - 1, lanes.bit_length() - 1
    count, width = rows, lanes
    stages = []
    # R > C: concatenate rows r and r + 2^m (the lowest concatenated bit sits at index bit
    # m each time, the bits below it being the rows still to swap).
    for _ in range(n - m):
        low = 1 << m
        pairs = [(i, i + low) for i in range(count) if not i & low]
        stages.append(("concat", [(a, b, list(range(2 * width))) for a, b in pairs]))
        count, width = count // 2, width * 2
    for k in range(min(n, m)):
        bit = 1 << k
        first = [lane if not lane & bit else width + lane - bit for lane in range(width)]
        second = [lane + bit if not lane & bit else width + lane for lane in range(width)]
        entries: list[tuple[int, int, list[int]] | None] = [None] * count
        for i in range(count):
            if not i & bit:
                entries[i] = (i, i + bit, first)
                entries[i + bit] = (i, i + bit, second)
        stages.append(("swap", entries))  # type: ignore[arg-type]
    # R < C: split rows in halves; the new row bit goes in at bit n, above the swapped bits.
    for _ in range(m - n):
        half = width // 2
        entries = [None] * (2 * count)
        for i in range(count):
            low, high = i & ((1 << n) - 1), i >> n
            for h, mask in enumerate((list(range(half)), list(range(half, width)))):
                entries[low | h << n | high << (n + 1)] = (i, i, mask)
        stages.append(("split", entries))  # type: ignore[arg-type]
        count, width = count * 2, half
    return stages


def _shuffled_transpose(op: ir.Operation) -> ir.Value:
    source_dim, result_dim = _row_transpose(op)
    source = op.operands[0]
    source_type, result_type = ir.VectorType(source.type), ir.VectorType(op.results[0].type)
    rows, lanes = source_type.shape[source_dim], source_type.shape[-1]
    padded_rows, padded_lanes = _next_power_of_two(rows), _next_power_of_two(lanes)
    vectors = [vector.extract(source, [], _position(source_type.rank, source_dim, r)) for r in range(rows)]
    if padded_lanes > lanes:
        vectors = [vector.shuffle(v, v, list(range(lanes)) + [_POISON] * (padded_lanes - lanes)) for v in vectors]
    if padded_rows > rows:
        vectors += [ub.poison(ir.VectorType.get([padded_lanes], source_type.element_type))] * (padded_rows - rows)
    for _kind, entries in butterfly_masks(padded_rows, padded_lanes):
        vectors = [vector.shuffle(vectors[a], vectors[b], mask) for a, b, mask in entries]
    vectors = vectors[:lanes]
    if padded_rows > rows:
        vectors = [vector.shuffle(v, v, list(range(rows))) for v in vectors]
    result = ub.poison(result_type)
    for c, row in enumerate(vectors):
        result = vector.insert(row, result, [], _position(result_type.rank, result_dim, c))
    return result


@register_pass(TRANSPOSE_SHUFFLES,
               "vector.transpose of power-of-two rows x lanes as butterfly vector.shuffle stages "
               "(MLIR's lowering went element by element)")
def transpose_shuffles_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    replace_each(module, lambda op: _row_transpose(op) is not None, _shuffled_transpose)
