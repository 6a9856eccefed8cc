"""Hashes of the generated dot-product and attention kernels, per shape: the check that a
rewrite of how a kernel is built (f-string text then, MLIR builders now) changed no op.

Each kernel function is put in a module, canonicalized (``canonicalize,cse``) and printed in
generic form, which names values by position, so the hash sees the ops, their order and
attributes, not how the builder spelled SSA names. Run it before and after a change to a
kernel builder and compare the lines:

    PYTHONPATH=<checkout parent> python benchmarks/kernel_ir_hashes.py
"""

from __future__ import annotations

import hashlib

from mlir import ir
from mlir.passmanager import PassManager

from tilecraft.pipelines.tensor import bf16_matmul, fused_attention, int8_matmul
from tilecraft.pipelines.tensor.fused_attention import AttentionShape, Extra, OperandView
from tilecraft.pipelines.tensor.int8_matmul import Epilogue, EpilogueOperand, Window

BF16_SHAPES = [(64, 64, 64, 1), (100, 48, 37, 4), (7, 130, 9, 2), (1, 16, 2, 1), (49, 1000, 512, 8)]
INT8_SHAPES = [(64, 64, 64, True, 1), (100, 48, 37, False, 4), (7, 130, 9, True, 2), (1, 16, 4, False, 1),
               (49, 1000, 512, True, 8)]
INT8_WINDOWS = [Window((1, 8, 8, 16), (3, 3), (1, 1), (1, 1), 6, 6), Window((2, 9, 9, 8), (3, 3), (2, 2), (1, 1), 4, 4)]
_EPILOGUES = [  # (epilogue, m, n, k, a unsigned, threads, window): operands of each kind, several results
    (Epilogue("body", (EpilogueOperand("full", "i32"), EpilogueOperand("column", "f32"), EpilogueOperand("scalar", "f32"),
                       EpilogueOperand("full", "i8")), 0, "i8"), 30, 70, 13, False, 2, None),
    (Epilogue("body", (EpilogueOperand("column", "i32"), EpilogueOperand("full", "i32")), 1, "f32"),
     64, 64, 64, True, 1, None),
    (Epilogue("body", (EpilogueOperand("full", "i32"), EpilogueOperand("scalar", "i32")), 0, "i32"),
     36, 32, 144, True, 2, Window((1, 8, 8, 16), (3, 3), (1, 1), (1, 1), 6, 6)),
]
_MASK = Extra("tensor<128x128xi8>", "i1", ("d1", "d2"), True)
_SCALE = Extra("tensor<128xf32>", "f32", ("d1",), False)
ATTENTION = [  # (shape, extras, threads, scores function, zeroing, ranged)
    (AttentionShape(8, 128, 128, 64, 64, (8, 128, 128)), [], 1, None, None, False),
    (AttentionShape(12, 50, 50, 32, 48, (12, 50, 50)), [], 4, None, None, False),
    (AttentionShape(4, 128, 128, 64, 64, (4, 128, 128)), [_MASK, _SCALE], 2, "scores", "masked", False),
    (AttentionShape(2, 20, 7, 16, 16, (2, 20, 7)), [], 1, None, None, True),
]
# Every other branch of the kernel builder: a rank-4 domain (batch indices), extras along the
# keys and per row of each stored kind, zeroing read from a tensor or "masked" without a chain,
# Q and V read through views, key ranges, Dv not a multiple of 16, a remainder row loop.
_BATCH_MASK = Extra("tensor<2x20x32xi8>", "i1", ("d1", "d2", "d3"), True)
_HEAD_SCALE = Extra("tensor<2x1xf32>", "f32", ("d0", "0"), False)
_ROW_FLAG = Extra("tensor<2x20xi8>", "i1", ("d1", "d2"), False)
_ADDITIVE = Extra("tensor<37x37xf32>", "f32", ("d1", "d2"), True)
_INT_BIAS = Extra("tensor<37xi32>", "i32", ("d1",), False)
_HALF_BIAS = Extra("tensor<3x37xf16>", "f16", ("d0", "d2"), True)
_ZERO_ROWS = Extra("tensor<2x2x20xi8>", "i8", ("d0", "d1", "d2"), False)
_ZERO_ROWS_3 = Extra("tensor<2x8xi8>", "i8", ("d0", "d1"), False)
# (source type, indices over (d0, d1, d2) = (flat batch, row or key, feature)): [seq, heads, d]
# projections merged from 2 x 2 batch dims; V's innermost index stays d2.
_Q_VIEW = ("tensor<2x20x2x16xf32>", ("((d0) floordiv 2) mod 2", "d1", "((d0) floordiv 1) mod 2", "d2"))
_V_VIEW = ("tensor<32x4x40xf32>", ("d1", "d0", "d2"))
_Q_VIEW_3 = ("tensor<37x3x24xf32>", ("d1", "d0", "d2"))
ATTENTION_VIEWS = [  # (shape, extras, threads, scores function, zeroing, q view, v view, ranged)
    (AttentionShape(4, 20, 32, 16, 40, (2, 2, 20, 32)), [_BATCH_MASK, _HEAD_SCALE, _ROW_FLAG], 3, "scores",
     _ZERO_ROWS, _Q_VIEW, _V_VIEW, True),
    (AttentionShape(3, 37, 37, 24, 24, (3, 37, 37)), [_ADDITIVE, _INT_BIAS, _HALF_BIAS], 8, "scores", None,
     _Q_VIEW_3, None, False),
    (AttentionShape(5, 9, 100, 8, 8, (5, 9, 100)), [], 2, None, "masked", None, None, True),
    (AttentionShape(2, 8, 16, 16, 20, (2, 8, 16)), [], 1, None, _ZERO_ROWS_3, None, None, False),
]


def canonical_hash(source: str) -> str:
    with ir.Context():
        module = ir.Module.parse(source)
        PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
        text = module.operation.get_asm(print_generic_op_form=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def built(make, *arguments) -> str:
    """The text of the module ``make(*arguments)`` builds (a kernel_module function)."""
    with ir.Context(), ir.Location.unknown():
        return str(make(*arguments))


def kernels() -> list[tuple[str, str]]:
    """(label, kernel module text) for every case above."""
    found = [(f"bf16 {m}x{n}x{k} t{t}", built(bf16_matmul.kernel_module, m, n, k, t)) for m, n, k, t in BF16_SHAPES]
    found += [(f"int8 {m}x{n}x{k} {'u8' if u else 's8'} t{t}", built(int8_matmul.kernel_module, m, n, k, u, t))
              for m, n, k, u, t in INT8_SHAPES]
    for w in INT8_WINDOWS:
        found.append((f"int8 window{w.suffix()}",
                      built(int8_matmul.kernel_module, w.rows, 32, w.depth, True, 2, None, None, w)))
    for i, (epilogue, m, n, k, unsigned, threads, window) in enumerate(_EPILOGUES):
        found.append((f"int8 epilogue #{i} {m}x{n}x{k} -> {epilogue.result}",
                      built(int8_matmul.kernel_module, m, n, k, unsigned, threads, epilogue, "kern", window)))
    for i, (shape, extras, threads, scores, zeroing, ranged) in enumerate(ATTENTION):
        found.append((f"attention #{i} {shape.batch}x{shape.rows}x{shape.keys}x{shape.depth}x{shape.value_depth}"
                      f" extras={len(extras)} t{threads}{' ranged' if ranged else ''}",
                      fused_attention.kernel_source(f"attention{i}", shape, extras, threads, scores, zeroing,
                                                    ranged=ranged)))
    for i, (shape, extras, threads, scores, zeroing, q_view, v_view, ranged) in enumerate(ATTENTION_VIEWS):
        found.append((f"attention view #{i} {shape.batch}x{shape.rows}x{shape.keys}x{shape.depth}x{shape.value_depth}"
                      f" extras={len(extras)} t{threads}{' ranged' if ranged else ''}",
                      attention_source(f"view{i}", shape, extras, threads, scores, zeroing, q_view, v_view, ranged)))
    return found


def attention_source(name, shape, extras, threads, scores, zeroing, q_view, v_view, ranged) -> str:
    """The attention kernel's text with Q and V read through views of tensors of the given types."""
    with ir.Context():
        holders = []

        def view(spec):
            if spec is None:
                return None
            type_text, indices = spec
            holder = ir.Module.parse(f"func.func @view(%x: {type_text}) {{\n  return\n}}")
            holders.append(holder)
            return OperandView(holder.body.operations[0].regions[0].blocks[0].arguments[0], indices)

        return fused_attention.kernel_source(name, shape, extras, threads, scores, zeroing, view(q_view),
                                             view(v_view), ranged=ranged)


def main() -> None:
    for label, source in kernels():
        print(f"{label}: {canonical_hash(source)}")


if __name__ == "__main__":
    main()
