"""Hashes of the generated dot-product and attention kernels, per shape: the check that a
rewrite of how a kernel is built (f-string text then, MLIR builders now) changed no op.
The attention cases cover every branch of its builder (hashed on the f-string kernel first).

Each kernel function is put in a module, canonicalized (``canonicalize,cse``) and printed in
generic form, which names values by position, so the hash sees the ops, their order and
attributes, not how the builder spelled SSA names. Run it before and after a change to a
kernel builder and compare the lines:

    PYTHONPATH=<checkout parent> python benchmarks/kernel_ir_hashes.py
"""

from __future__ import annotations

import hashlib

import numpy as np
from mlir import ir
from mlir.passmanager import PassManager

from tilecraft.ir import core
from tilecraft.ir import kernels as kernel_builders
from tilecraft.pipelines.tensor import attention_kernel, bf16_matmul, int8_matmul
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape, Extra, OperandView
from tilecraft.pipelines.tensor.int8_matmul import Epilogue, EpilogueOperand, Window
from tilecraft.pipelines.tensor.kernel_destinations import PaddedResult
from tilecraft.pipelines.tensor.register_tiles import KernelConfig

BF16_SHAPES = [(64, 64, 64, 1), (100, 48, 37, 4), (7, 130, 9, 2), (1, 16, 2, 1), (49, 1000, 512, 8)]
INT8_SHAPES = [(64, 64, 64, True, 1), (100, 48, 37, False, 4), (7, 130, 9, True, 2), (1, 16, 4, False, 1),
               (49, 1000, 512, True, 8)]
INT8_WINDOWS = [Window((1, 8, 8, 16), (3, 3), (1, 1), (1, 1), 6, 6), Window((2, 9, 9, 8), (3, 3), (2, 2), (1, 1), 4, 4)]
BF16_WINDOWS = [Window((1, 8, 8, 16), (3, 3), (1, 1), (1, 1), 6, 6), Window((2, 9, 9, 8), (3, 3), (2, 2), (1, 1), 4, 4)]
# Kernels built with a non-default config (register_tiles.KernelConfig: rows, vectors, task
# rows), as a tuning record gives one: (m, n, k, threads, config), int8 ones with an unsigned A.
CONFIGURED = [(100, 48, 37, 4, KernelConfig(3, 2, 9)), (49, 1000, 512, 8, KernelConfig(1, 1, 7))]
_EPILOGUES = [  # (epilogue, m, n, k, a unsigned, threads, window): operands of each kind, several results
    (Epilogue("body", (EpilogueOperand("full", "i32"), EpilogueOperand("column", "f32"), EpilogueOperand("scalar", "f32"),
                       EpilogueOperand("full", "i8")), 0, "i8"), 30, 70, 13, False, 2, None),
    (Epilogue("body", (EpilogueOperand("column", "i32"), EpilogueOperand("full", "i32")), 1, "f32"),
     64, 64, 64, True, 1, None),
    (Epilogue("body", (EpilogueOperand("full", "i32"), EpilogueOperand("scalar", "i32")), 0, "i32"),
     36, 32, 144, True, 2, Window((1, 8, 8, 16), (3, 3), (1, 1), (1, 1), 6, 6)),
]


def _extra(shape: list[int], dtype: type, body, along_keys: bool) -> Extra:
    """An Extra of a ``dtype`` tensor of ``shape`` read at ``body(d0, ...)`` of the chain's
    domain (its rank: the lambda's arity); bools passed as bytes."""
    element = core.element_type(dtype)
    stored = ir.IntegerType.get_signless(8) if dtype is np.bool_ else element
    return Extra(ir.RankedTensorType.get(shape, stored), element,
                 kernel_builders.affine_map(body, body.__code__.co_argcount), along_keys)


def _view(scratch: ir.Module, shape: list[int], body) -> OperandView:
    """An f32 tensor of ``shape`` (an argument of a function in ``scratch``) read at
    ``body(b, i, j)``."""
    with ir.InsertionPoint(scratch.body):
        holder = kernel_builders.private_function("view", [ir.RankedTensorType.get(shape, ir.F32Type.get())], [])
    return OperandView(holder.arguments[0], kernel_builders.affine_map(body, 3))


def _split(expr, stride: int, extent: int):
    return ir.AffineExpr.get_mod(ir.AffineExpr.get_floor_div(expr, stride), extent)


def attention_cases(scratch: ir.Module) -> list[tuple]:
    """(shape, extras, threads, scores function, zeroing, q view, v view, ranged) per case:
    the pinned variants, then every other branch of the kernel builder: a rank-4 domain
    (batch indices), extras along the keys and per row of each stored kind, zeroing read
    from a tensor or "masked" without a chain, Q and V read through views ([seq, heads, d]
    projections merged from 2 x 2 batch dims; V's innermost index stays d2), key ranges, Dv
    not a multiple of 16, a remainder row loop."""
    mask = _extra([128, 128], np.bool_, lambda d0, d1, d2: [d1, d2], True)
    scale = _extra([128], np.float32, lambda d0, d1, d2: d1, False)
    batch_mask = _extra([2, 20, 32], np.bool_, lambda d0, d1, d2, d3: [d1, d2, d3], True)
    head_scale = _extra([2, 1], np.float32, lambda d0, d1, d2, d3: [d0, ir.AffineConstantExpr.get(0)], False)
    row_flag = _extra([2, 20], np.bool_, lambda d0, d1, d2, d3: [d1, d2], False)
    additive = _extra([37, 37], np.float32, lambda d0, d1, d2: [d1, d2], True)
    int_bias = _extra([37], np.int32, lambda d0, d1, d2: d1, False)
    half_bias = _extra([3, 37], np.float16, lambda d0, d1, d2: [d0, d2], True)
    zero_rows = _extra([2, 2, 20], np.int8, lambda d0, d1, d2, d3: [d0, d1, d2], False)
    zero_rows_3 = _extra([2, 8], np.int8, lambda d0, d1, d2: [d0, d1], False)
    q_view = _view(scratch, [2, 20, 2, 16], lambda b, i, j: [_split(b, 2, 2), i, _split(b, 1, 2), j])
    v_view = _view(scratch, [32, 4, 40], lambda b, i, j: [i, b, j])
    q_view_3 = _view(scratch, [37, 3, 24], lambda b, i, j: [i, b, j])
    return [
        (AttentionShape(8, 128, 128, 64, 64, (8, 128, 128)), [], 1, None, None, None, None, False),
        (AttentionShape(12, 50, 50, 32, 48, (12, 50, 50)), [], 4, None, None, None, None, False),
        (AttentionShape(4, 128, 128, 64, 64, (4, 128, 128)), [mask, scale], 2, "scores", "masked", None, None, False),
        (AttentionShape(2, 20, 7, 16, 16, (2, 20, 7)), [], 1, None, None, None, None, True),
        (AttentionShape(4, 20, 32, 16, 40, (2, 2, 20, 32)), [batch_mask, head_scale, row_flag], 3, "scores",
         zero_rows, q_view, v_view, True),
        (AttentionShape(3, 37, 37, 24, 24, (3, 37, 37)), [additive, int_bias, half_bias], 8, "scores", None,
         q_view_3, None, False),
        (AttentionShape(5, 9, 100, 8, 8, (5, 9, 100)), [], 2, None, "masked", None, None, True),
        (AttentionShape(2, 8, 16, 16, 20, (2, 8, 16)), [], 1, None, zero_rows_3, None, None, False),
    ]


PINNED_ATTENTION = 4  # the first cases, labelled "attention #i"; the others "attention view #i"


def canonical_hash(source: str) -> str:
    with ir.Context():
        module = ir.Module.parse(source)
        PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
        text = module.operation.get_asm(print_generic_op_form=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

# Kernels writing into a padded destination (kernel_destinations.PaddedResult): (m, n, k,
# threads, window, destination), a window convolution's and a 1x1 one's.
_PADDED_WINDOW = Window((2, 11, 12, 4), (3, 3), (1, 1), (1, 1), 9, 10)
PADDED = [(180, 40, 36, 2, _PADDED_WINDOW, PaddedResult((2, 11, 12, 40), (0, 1, 1, 0), (2, 9, 10))),
          (50, 24, 40, 2, None, PaddedResult((2, 7, 7, 24), (0, 1, 1, 0), (2, 5, 5)))]


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
    for w in BF16_WINDOWS:
        found.append((f"bf16 window{w.suffix()}", built(bf16_matmul.kernel_module, w.rows, 32, w.depth, 2, w)))
    for m, n, k, t, config in CONFIGURED:
        found.append((f"bf16 {m}x{n}x{k} t{t}{config.suffix()}",
                      built(lambda: bf16_matmul.kernel_module(m, n, k, t, config=config))))
        found.append((f"int8 {m}x{n}x{k} u8 t{t}{config.suffix()}",
                      built(lambda: int8_matmul.kernel_module(m, n, k, True, t, config=config))))
    for m, n, k, t, window, into in PADDED:
        found.append((f"bf16 {m}x{n}x{k} t{t}{into.suffix()}",
                      built(lambda: bf16_matmul.kernel_module(m, n, k, t, window, into=into))))
        found.append((f"int8 {m}x{n}x{k} u8 t{t}{into.suffix()}",
                      built(lambda: int8_matmul.kernel_module(m, n, k, True, t, window=window, into=into))))
    with ir.Context(), ir.Location.unknown():
        scratch = ir.Module.create()
        for i, (shape, extras, threads, scores, zeroing, q_view, v_view, ranged) in enumerate(attention_cases(scratch)):
            label = f"attention #{i}" if i < PINNED_ATTENTION else f"attention view #{i - PINNED_ATTENTION}"
            name = f"attention{i}" if i < PINNED_ATTENTION else f"view{i - PINNED_ATTENTION}"
            found.append((f"{label} {shape.batch}x{shape.rows}x{shape.keys}x{shape.depth}x{shape.value_depth}"
                          f" extras={len(extras)} t{threads}{' ranged' if ranged else ''}",
                          str(attention_kernel.kernel_module(name, shape, extras, threads, scores, zeroing, q_view,
                                                            v_view, ranged))))
    return found


def main() -> None:
    for label, source in kernels():
        print(f"{label}: {canonical_hash(source)}")


if __name__ == "__main__":
    main()
