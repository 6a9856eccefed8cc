"""What the AVX-512 dot-product kernels share: the int8 VNNI kernels (int8_matmul.py,
``vpdpbusd``) and the bf16 kernels (bf16_matmul.py, ``vdpbf16ps``).

Both keep a register tile of MR rows x NT columns of accumulators (as many lanes as the
instruction's: 16 for both 512-bit instructions) over the whole of k, read the weights
packed at compile time so that one 64-byte load holds a group of k (4 bytes, or 2 bf16
values) of 16 columns, split the work into (row block, column tile)
tasks, and write each dot product as the portable ``vector.contract`` that a late pass
turns into the instruction. Only the element types, the group of k and the instruction
differ; they are the parameters here, so that a change to the tile's shape, the packing or
the task split is made once for both. The tile's shape and the task split are a
:class:`KernelConfig`, tunable (tuning/kernel_tasks.py); the kernel passes take the configs
of tuning records as their ``configs`` option.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import vector

from ...errors import PipelineError
from ...ir.maps import indexing_map_texts
from ..ir_queries import defining_op, ops_where

MAX_VECTORS = 4   # accumulator vectors per row of the register tile (64 columns)
MAX_ROWS = 12     # rows of the register tile: one broadcast of A per row and step of k
ACCUMULATORS = 24  # of the 32 vector registers; the rest hold the weights and A's broadcast

# acc[i] += sum_j a[i, j] * b[i, j] on (lanes, a group of k): one dot-product instruction
# (ir/kernels.dot_product builds it).
_DOT_MAPS = ["(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0)"]
# A plain matmul's indexing maps: C[m, n] += A[m, k] * B[k, n].
MATMUL_MAPS = ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"]


def register_tile(n: int, lanes: int) -> tuple[int, int]:
    """(rows MR, accumulator vectors per row NV) of the register tile for N columns, in
    accumulators of ``lanes`` lanes (the dot-product instruction's)."""
    vectors = min(MAX_VECTORS, -(-n // lanes))
    return min(MAX_ROWS, ACCUMULATORS // vectors), vectors


def pack_k_groups(weights: np.ndarray, columns: int, group: int, dtype: np.dtype) -> np.ndarray:
    """``W'[n / NT, k / G, (n % NT) * G + k % G]`` of a (K, N) ``weights`` (NT = ``columns``,
    G = ``group``), as ``dtype``, zero-padded to whole groups and column tiles: one load of
    ``columns * group`` values holds a group of k of ``columns`` columns."""
    k, n = weights.shape
    groups, tiles = -(-k // group), -(-n // columns)
    padded = np.zeros((groups * group, tiles * columns), dtype)
    padded[:k, :n] = weights
    return np.ascontiguousarray(
        padded.reshape(groups, group, tiles, columns).transpose(2, 0, 3, 1)
    ).reshape(tiles, groups, columns * group)


def row_block(m: int, column_tiles: int, rows: int, threads: int) -> int:
    """Rows per task: whole register tiles, about two tasks per thread in all."""
    wanted = max(1, -(-2 * threads // column_tiles)) if threads > 1 else 1
    tiles = -(-m // rows)
    return rows * -(-tiles // min(wanted, tiles))


@dataclass(frozen=True)
class KernelConfig:
    """The parameters a register-tile kernel is built with: ``rows`` (MR) x ``vectors``
    (NV accumulator vectors of the instruction's lanes: NT = NV * lanes columns) per register
    tile, and ``task_rows`` rows per task (a multiple of ``rows``; a task is ``task_rows``
    rows by one column tile of NT columns). There is no K block: all of k stays in the
    accumulators (int8_matmul.build_kernel says why).

    :meth:`default` is the choice the builders made before the kernels were tunable; the
    tuner (tuning/kernel_tasks.py) searches the others, and :meth:`check` refuses one the
    kernel cannot be built with (a ``PipelineError``), so a bad config fails the build
    instead of building a different kernel."""

    rows: int
    vectors: int
    task_rows: int

    @classmethod
    def default(cls, m: int, n: int, lanes: int, threads: int) -> "KernelConfig":
        """The register tile of :func:`register_tile` and about two tasks per thread."""
        rows, vectors = register_tile(n, lanes)
        return cls(rows, vectors, row_block(m, -(-n // (vectors * lanes)), rows, threads))

    def check(self, m: int, n: int, lanes: int) -> "KernelConfig":
        """This config, when an M x N kernel of ``lanes``-lane accumulators can take it."""
        problems = []
        if not 1 <= self.rows <= MAX_ROWS:
            problems.append(f"rows {self.rows} not in 1..{MAX_ROWS}")
        if not 1 <= self.vectors <= min(MAX_VECTORS, -(-n // lanes)):
            problems.append(f"vectors {self.vectors} not in 1..{min(MAX_VECTORS, -(-n // lanes))} "
                            f"(N = {n}, {lanes} lanes)")
        if self.rows * self.vectors > ACCUMULATORS:
            problems.append(f"{self.rows} x {self.vectors} accumulators, more than {ACCUMULATORS}")
        if self.task_rows < 1 or self.rows < 1 or self.task_rows % self.rows:
            problems.append(f"task_rows {self.task_rows} not a positive multiple of rows {self.rows}")
        elif self.task_rows > self.rows * -(-m // self.rows):
            problems.append(f"task_rows {self.task_rows} past M = {m} rounded up to whole register tiles")
        if problems:
            raise PipelineError(f"kernel config {self} for M = {m}, N = {n}: " + "; ".join(problems))
        return self

    def suffix(self) -> str:
        """What a kernel built with this (non-default) config adds to its name."""
        return f"_r{self.rows}v{self.vectors}b{self.task_rows}"

    def as_list(self) -> list[int]:
        return [self.rows, self.vectors, self.task_rows]

    @classmethod
    def from_list(cls, values: "list[int]") -> "KernelConfig":
        rows, vectors, task_rows = values
        return cls(rows, vectors, task_rows)


@dataclass(frozen=True)
class TaskGrid:
    """How a kernel of ``config`` splits an M x N product: ``columns`` (NT) per column tile,
    ``tiles`` column tiles, ``row_blocks`` blocks of ``config.task_rows`` rows; the
    ``scf.forall`` runs over (row blocks, column tiles)."""

    config: KernelConfig
    columns: int
    tiles: int
    row_blocks: int

    @classmethod
    def of(cls, m: int, n: int, lanes: int, config: KernelConfig) -> "TaskGrid":
        columns = config.vectors * lanes
        return cls(config, columns, -(-n // columns), -(-m // config.task_rows))


def kernel_config(m: int, n: int, lanes: int, threads: int, config: "KernelConfig | None") -> KernelConfig:
    """``config`` checked for an M x N kernel, or the default one (``None``)."""
    return (config or KernelConfig.default(m, n, lanes, threads)).check(m, n, lanes)


def config_suffix(m: int, n: int, lanes: int, threads: int, config: "KernelConfig | None") -> str:
    """The kernel name's config part: none for the default config (whose kernels keep the
    names they had before configs), :meth:`KernelConfig.suffix` for another."""
    if config is None or config == KernelConfig.default(m, n, lanes, threads):
        return ""
    return config.suffix()


# The kernel passes' ``configs`` option: ``<default kernel name>:<rows>.<vectors>.<task rows>``,
# comma-separated (no spaces or braces: it travels in a textual pass pipeline).
CONFIGS_OPTION = "configs"


def format_kernel_configs(configs: "dict[str, KernelConfig]") -> str:
    """The ``configs`` option's value for ``configs`` (default kernel name -> config)."""
    return ",".join(f"{name}:{'.'.join(map(str, config.as_list()))}" for name, config in sorted(configs.items()))


def parse_kernel_configs(text: str, pass_name: str) -> "dict[str, KernelConfig]":
    """The configs a ``configs`` option names (:func:`format_kernel_configs`'s form);
    malformed text is a ``PipelineError`` naming ``pass_name``."""
    configs = {}
    for item in filter(None, text.split(",")):
        name, _, values = item.partition(":")
        parts = values.split(".")
        if not name or len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise PipelineError(f"{pass_name}: configs item {item!r} is not <kernel>:<rows>.<vectors>.<task rows>")
        configs[name] = KernelConfig.from_list([int(p) for p in parts])
    return configs


def add_kernel(module: ir.Operation, name: str, build: Callable[[], object]) -> str:
    """``name``, its function added to ``module`` unless a function of that name is already
    there: one kernel per shape, however many calls. ``build`` makes the function at the
    insertion point (the module's end)."""
    body = module.regions[0].blocks[0]
    for op in body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return name
    with ir.InsertionPoint(body), ir.Location.unknown(module.context):
        build()
    return name


@dataclass(frozen=True)
class DotInstruction:
    """A dot-product instruction as the kernels write it (``ir/kernels.dot_product``: a
    ``vector.contract`` of two extended ``operand`` vectors into an ``accumulator``) and as the
    LLVM intrinsic ``intrinsic`` that computes it on the operands viewed as ``flat``."""

    intrinsic: str
    accumulator: str            # e.g. vector<16xi32>
    operand: str                # e.g. vector<16x4xi8>: 16 lanes, a group of k
    flat: str                   # e.g. vector<64xi8>: the intrinsic's operand type
    extensions: tuple[str, str]  # the ops that extend the first and second operand

    @property
    def lanes(self) -> int:
        """Lanes of the accumulator: the kernels' vector width is the instruction's."""
        return int(self.accumulator.removeprefix("vector<").split("x", 1)[0])


def dot_operands(op: ir.Operation, instruction: DotInstruction) -> tuple[ir.Value, ir.Value] | None:
    """The two unextended operands of a ``vector.contract`` that means one ``instruction``,
    else ``None``."""
    if op.name != "vector.contract" or str(op.results[0].type) != instruction.accumulator:
        return None
    if indexing_map_texts(op) != _DOT_MAPS:
        return None
    if "#vector.kind<add>" not in str(op.attributes["kind"]):
        return None
    sources = []
    for operand, extension in zip(op.operands[:2], instruction.extensions):
        ext = defining_op(operand)
        if ext is None or ext.name != extension or str(ext.operands[0].type) != instruction.operand:
            return None
        sources.append(ext.operands[0])
    return sources[0], sources[1]


def call_dot_instructions(module: ir.Operation, instruction: DotInstruction) -> None:
    """Every ``vector.contract`` in ``module`` that means one ``instruction`` becomes a call
    of its intrinsic. Why a late pass rather than the intrinsic in the kernels:
    bufferization refuses ops with unknown memory effects (an LLVM intrinsic call), and the
    contraction is the portable meaning, correct on any target if this does not run."""
    dots = [(op, dot_operands(op, instruction)) for op in ops_where(module, lambda o: o.name == "vector.contract")]
    for op, operands in dots:
        if operands is None:
            continue
        with ir.InsertionPoint(op), op.location:
            flat = ir.Type.parse(instruction.flat)
            values = [op.operands[2], *(vector.shape_cast(flat, v) for v in operands)]
            call = ir.Operation.create(
                "llvm.call_intrinsic", results=[op.results[0].type], operands=values,
                attributes={"intrin": ir.StringAttr.get(instruction.intrinsic),
                            "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 0])})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()
