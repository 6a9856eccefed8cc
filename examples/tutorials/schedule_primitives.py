"""TVM's "Schedule Primitives in TVM" gallery: one small compute per primitive, its loops after.

    python examples/tutorials/schedule_primitives.py [--primitive split_factor] [--full-ir]

Each entry defines the tutorial's compute, applies one primitive (or the tutorial's pair),
prints the step as the schedule recorded it and the loop nest it made (the ``scf.for`` /
``scf.forall`` lines of ``sch.ir()`` and the ops inside them; ``--full-ir`` prints all of
it, TVM's ``tvm.lower(s, [A, B], simple_mode=True)``), then builds the schedule and checks
it against numpy. Differences from TVM's gallery:

- shapes are constants (TVM uses ``te.var("m")``); factors divide the extents, as tilecraft
  requires without ``pad=True`` (docs/scheduling.md);
- ``bind`` targets the GPU: it is built with ``target="cuda"`` and only its PTX is printed
  (running it needs a GPU; examples/tutorials/vector_add_gpu.py runs one where there is);
- the innermost part of a split is the tile the op computes (``linalg.generic`` on a
  ``tensor<8xf32>`` slice), not a loop of its own, until it is split again or vectorized;
- tilecraft schedules blocks by name (``sch.get_block("B")``), as TensorIR does, where TE
  writes ``s[B]``.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Callable

import numpy as np

import tilecraft.scheduling as te

M, N = 40, 30


def _loop_lines(ir_text: str) -> list[str]:
    """The loop structure of a scheduled function: its loops (without their iteration
    arguments) and the ops that compute inside them, named by block where they have one."""
    lines = []
    for line in ir_text.splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        loop = re.search(r"scf\.for(all)? .*?(?= iter_args| shared_outs| \{$|$)", line)
        if loop:
            lines.append(indent + loop.group(0))
            continue
        op = re.search(r"= (linalg\.(?!yield)\w+|vector\.contract|arith\.\w+f\b)", line)
        if op:
            block = re.search(r'tilecraft\.block = "([^"]+)"', line)
            lines.append(f"{indent}{op.group(1)}" + (f"  // block {block.group(1)}" if block else ""))
    return lines


def split_factor(sch: te.Schedule) -> None:
    """``split`` by a factor: the inner loop has ``factor`` iterations."""
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, factor=8)


def split_nparts(sch: te.Schedule) -> None:
    """``split`` by parts: the outer loop has ``nparts`` iterations."""
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, nparts=4)


def tile(sch: te.Schedule) -> None:
    """``tile``: split both axes and put both outer parts outside (xo, yo, xi, yi)."""
    i, j = sch.get_loops(sch.get_block("B"))
    sch.tile(i, j, 10, 5)


def fuse(sch: te.Schedule) -> None:
    """``fuse``: the two inner axes of a tile become one loop of 50 iterations."""
    i, j = sch.get_loops(sch.get_block("B"))
    xo, yo, xi, yi = sch.tile(i, j, 10, 5)
    sch.fuse(xi, yi)


def reorder(sch: te.Schedule) -> None:
    """``reorder``: after a tile, the loops in the order xi, yo, xo, yi.

    tilecraft keeps the parts of one axis outside-in (xo stays outside xi: a tiled op cannot
    step over its own outer tile), so the gallery's order becomes yo, xo, xi, yi here: the
    two outer parts exchanged, which is what the reorder changes."""
    i, j = sch.get_loops(sch.get_block("B"))
    xo, yo, xi, yi = sch.tile(i, j, 10, 5)
    sch.reorder(yo, xo, xi, yi)


def compute_at(sch: te.Schedule) -> None:
    """``compute_at``: B's values computed inside C's loop over rows, one row at a time."""
    (i, j) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)


def compute_inline(sch: te.Schedule) -> None:
    """``compute_inline``: B is not stored at all; C computes ``(A[i] + 1) * 2`` directly."""
    sch.compute_inline(sch.get_block("B"))


def compute_root(sch: te.Schedule) -> None:
    """``compute_root``: undoes a ``compute_at``; B is computed whole before C again."""
    (i, j) = sch.get_loops(sch.get_block("C"))
    B = sch.get_block("B")
    sch.compute_at(B, i)
    sch.compute_root(B)


def bind(sch: te.Schedule) -> None:
    """``bind``: the outer part of a split to ``blockIdx.x``, the inner to ``threadIdx.x``."""
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, factor=64)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def one_op(shape: tuple[int, ...]) -> Callable[[], tuple[list, Callable]]:
    def define():
        A = te.placeholder(shape, name="A")
        if len(shape) == 1:
            B = te.compute(shape, lambda i: A[i] * 2.0, name="B")
        else:
            B = te.compute(shape, lambda i, j: A[i, j] * 2.0, name="B")
        return [A, B], lambda a: a * 2.0
    return define


def producer_consumer() -> tuple[list, Callable]:
    """The gallery's chain for compute_at / compute_inline / compute_root: B = A + 1, C = 2B."""
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] * 2.0, name="C")
    return [A, C], lambda a: (a + 1.0) * 2.0


GALLERY: dict[str, tuple[Callable, Callable[[te.Schedule], None]]] = {
    "split_factor": (one_op((1024,)), split_factor),
    "split_nparts": (one_op((1024,)), split_nparts),
    "tile": (one_op((M, N)), tile),
    "fuse": (one_op((M, N)), fuse),
    "reorder": (one_op((M, N)), reorder),
    "bind": (one_op((1024,)), bind),
    "compute_at": (producer_consumer, compute_at),
    "compute_inline": (producer_consumer, compute_inline),
    "compute_root": (producer_consumer, compute_root),
}


def run(name: str, full_ir: bool) -> bool:
    """Apply one entry, print what it made, build it and check it; True when it matches."""
    define, apply = GALLERY[name]
    tensors, reference = define()
    sch = te.Schedule(te.create_func(tensors))
    apply(sch)
    print(f"== {name}: {apply.__doc__.splitlines()[0]}")
    for step in sch.history:
        print(f"   {step}")
    print("\n".join(sch.ir().splitlines() if full_ir else _loop_lines(sch.ir())))
    a = np.random.default_rng(0).random(tensors[0].shape, dtype=np.float32)
    if name == "bind":
        ptx = te.build(sch, target="cuda").ptx()
        ok = "%ctaid.x" in ptx and "%tid.x" in ptx
        print(f"   PTX: {len(ptx.splitlines())} lines, blockIdx.x -> %ctaid.x, threadIdx.x -> %tid.x: "
              f"{'OK' if ok else 'MISSING'}\n")
        return ok
    ok = bool(np.allclose(te.build(sch)(a), reference(a), rtol=1e-6))
    print(f"   numerics vs numpy: {'OK' if ok else 'MISMATCH'}\n")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--primitive", choices=sorted(GALLERY), action="append",
                        help="run only this entry (repeatable; default: all)")
    parser.add_argument("--full-ir", action="store_true", help="print the whole scheduled function")
    args = parser.parse_args(argv)
    results = [run(name, args.full_ir) for name in (args.primitive or GALLERY)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
