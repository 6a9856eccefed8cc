"""Random-sampling ATen ops (``bernoulli``, ``normal``, ``rand_like``, dropout's mask...): each
draw is a call, at run time, of PyTorch's own kernel on PyTorch's default CPU generator.

Why not a random-number generator in the compiled code: a user expects
``torch.manual_seed(s); compiled(x)`` to equal ``torch.manual_seed(s); module(x)`` draw for
draw (what inductor gives with ``fallback_random=True``), and only PyTorch's kernels, on
its generator, give PyTorch's streams. So each random node becomes a ``func.call`` of a
Python extern function (runtime/extern.py ``register_python``; destination-passing: the
node's tensor operands, then the buffers the callback fills), whose body runs the ATen
overload on ``torch.from_numpy`` views with the node's constant arguments. A ``func.call``
of an external function has unknown side effects, so no pass reorders, merges or drops two
draws: they happen in program order, as in eager. What is deterministic around a draw stays
compiled: dropout's scaling and mask multiply, the QR and SVD of ``pca_lowrank``.

An extern's name is the op's name and a digest of its constant arguments and signature:
compiling one model twice registers one function, and an error about a target that cannot
call Python (a package, the C target) names the op.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith, func
from torch.utils import _pytree

from ....errors import InternalError, OperandError, OperandTypeError
from ....ir import core
from ....ir.kernels import declare_in_module
from ....runtime.extern import ELEMENT_TYPES, register_python
from ..importer import OpContext, numpy_dtype, op_name
from . import table

# The overloads drawn by PyTorch's kernel at call time (the functional forms torch.export
# leaves of the in-place ``bernoulli_``, ``normal_``, ``uniform_``, ``exponential_``...).
RANDOM_OPS = (
    "bernoulli.default", "bernoulli.p", "bernoulli.Tensor",
    "cauchy.default", "exponential.default", "geometric.default", "log_normal.default",
    "multinomial.default",
    "normal.Tensor_Tensor", "normal.Tensor_float", "normal.float_Tensor", "normal.float_float",
    "normal_functional.default", "uniform.default",
    "rand.default", "randn.default", "randint.default", "randint.low", "randperm.default",
    "rand_like.default", "randn_like.default", "randint_like.default", "randint_like.low_dtype",
    "randint_like.Tensor",
    "rrelu_with_noise_functional.default",
)
# Prefix of the registered externs' names (``torch_random_bernoulli_p_<digest>``).
EXTERN_PREFIX = "torch_random_"
# Element types an extern passes as they are (runtime/extern.py ELEMENT_TYPES); bool and
# uint8 travel as i8 and are viewed back.
_CARRIER = {np.dtype(np.bool_): np.dtype(np.int8), np.dtype(np.uint8): np.dtype(np.int8)}
_PASSED = {dtype for dtype, _, _ in ELEMENT_TYPES.values()}


def overloads() -> list[torch._ops.OpOverload]:
    """The ATen overloads of :data:`RANDOM_OPS` this torch has (kept whole by the export's
    decompositions: torch's ``bernoulli`` decomposition, ``rand_like(p) < p``, draws another
    stream than the kernel)."""
    found = []
    for name in RANDOM_OPS:
        packet, overload = name.split(".")
        target = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if target is not None:
            found.append(target)
    return found


def _carrier(dtype: np.dtype, op: str) -> np.dtype:
    """The dtype a tensor of ``dtype`` crosses the extern boundary in."""
    carried = _CARRIER.get(dtype, dtype)
    if carried not in _PASSED:
        raise OperandTypeError(f"{op}: dtype {dtype} cannot be passed to PyTorch's random kernel "
                               f"(supported: {', '.join(sorted(str(d) for d in _PASSED | set(_CARRIER)))})")
    return carried


def _static_shape(meta: Any, op: str) -> tuple[int, ...]:
    shape = tuple(meta.shape)
    if not all(isinstance(d, int) for d in shape):
        raise OperandError(f"{op}: a random result of symbolic shape {list(shape)} is not supported "
                           "(the buffer PyTorch's kernel fills is allocated before the call)")
    return shape


def _constant_key(leaf: Any) -> str:
    """A stable text for one constant argument (arrays by a digest of their bytes)."""
    if isinstance(leaf, np.ndarray):
        return f"array({leaf.dtype},{leaf.shape},{hashlib.sha256(np.ascontiguousarray(leaf).tobytes()).hexdigest()})"
    return repr(leaf)


def call_torch(ctx: OpContext, op: str, key: str, operands: Sequence[ir.Value],
               operand_dtypes: Sequence[np.dtype], result_metas: Sequence[Any],
               body: Callable[[list[torch.Tensor]], Sequence[torch.Tensor]]) -> list[ir.Value]:
    """Call ``body`` (torch tensors of ``operands`` in, the results' tensors out) at run time.

    ``key`` names everything ``body`` captures: the extern is registered under the op's name
    and a digest of ``key`` and the signature, so equal keys must mean equal bodies."""
    input_dtypes = list(operand_dtypes)
    input_carriers = [_carrier(dtype, op) for dtype in input_dtypes]
    outputs = [(numpy_dtype(meta.dtype), _static_shape(meta, op)) for meta in result_metas]
    output_carriers = [_carrier(dtype, op) for dtype, _ in outputs]
    values = [ctx.tensor(v, carrier) for v, carrier in zip(operands, input_carriers)]
    input_specs = ["memref<" + "?x" * core.tensor_type(v).rank + str(core.element_type(c)) + ">"
                   for v, c in zip(values, input_carriers)]
    output_specs = ["memref<" + "".join(f"{d}x" for d in shape) + str(core.element_type(c)) + ">"
                    for (_, shape), c in zip(outputs, output_carriers)]
    digest = hashlib.sha256(repr((op, key, input_specs, output_specs, [str(d) for d in input_dtypes],
                                  [str(d) for d, _ in outputs])).encode()).hexdigest()[:16]
    name = EXTERN_PREFIX + op.replace(".", "_") + "_" + digest
    count = len(values)

    def run(*arrays: np.ndarray) -> None:
        inputs = [torch.from_numpy(a.view(d)) for a, d in zip(arrays[:count], input_dtypes)]
        results = body(inputs)
        for array, dtype, result in zip(arrays[count:], [d for d, _ in outputs], results):
            torch.from_numpy(array.view(dtype)).copy_(result)

    register_python(name, run, inputs=input_specs, outputs=output_specs)
    result_types = [ir.RankedTensorType.get(list(shape), core.element_type(c))
                    for (_, shape), c in zip(outputs, output_carriers)]
    declare_in_module(ctx.importer.module.body, name, [v.type for v in values], result_types)
    call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), values)
    return [ctx.tensor(r, dtype) if carrier != dtype else r
            for r, (dtype, _), carrier in zip(call.results, outputs, output_carriers)]


@table.aten(*RANDOM_OPS)
def draw(ctx: OpContext, *args: Any, **kwargs: Any) -> Any:
    """The node's ATen overload on its operands, with its constant arguments, at run time."""
    target = ctx.node.target
    op = op_name(target).removeprefix("aten.")
    if kwargs.get("generator") is not None:
        raise OperandError(f"{op}: an explicit generator is not supported (compiled draws come from "
                           "PyTorch's default CPU generator)")
    leaves, spec = _pytree.tree_flatten((args, kwargs))
    # the same structure with each FX node's FakeTensor: the torch dtype of each operand
    # (MLIR integers are signless: a uint8 operand is i8 in the IR)
    metas = _pytree.tree_leaves(torch.fx.node.map_arg((ctx.node.args, ctx.node.kwargs),
                                                      lambda n: n.meta.get("val")))
    if len(metas) != len(leaves):
        raise InternalError(f"{op}: {len(leaves)} argument leaves but {len(metas)} in the FX node")
    operands, dtypes, positions = [], [], []
    for position, (leaf, leaf_meta) in enumerate(zip(leaves, metas)):
        if isinstance(leaf, ir.Value):
            if not isinstance(leaf.type, ir.RankedTensorType):
                raise OperandError(f"{op}: a symbolic size is not supported (its result's buffer is "
                                   "allocated before the call)")
            operands.append(leaf)
            dtypes.append(numpy_dtype(leaf_meta.dtype))
            positions.append(position)
    constants = {p: leaf for p, leaf in enumerate(leaves) if p not in positions}
    key = repr(spec) + "|" + "|".join(f"{p}={_constant_key(v)}" for p, v in sorted(constants.items()))
    frozen = {p: torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v for p, v in constants.items()}
    meta = ctx.meta
    multiple = isinstance(meta, (tuple, list))
    result_metas = list(meta) if multiple else [meta]

    def body(inputs: list[torch.Tensor]) -> Sequence[torch.Tensor]:
        filled = [frozen.get(p) for p in range(len(leaves))]
        for position, tensor in zip(positions, inputs):
            filled[position] = tensor
        call_args, call_kwargs = _pytree.tree_unflatten(filled, spec)
        result = target(*call_args, **call_kwargs)
        return list(result) if multiple else [result]

    results = call_torch(ctx, op, key, operands, dtypes, result_metas, body)
    return tuple(results) if multiple else results[0]


@table.aten("native_dropout.default")
def native_dropout(ctx: OpContext, x: Any, p: float, train: bool | None) -> tuple[ir.Value, ir.Value]:
    """Dropout (what ``F.dropout(x, p, training=True)`` and ``nn.Dropout`` in train mode
    export to): the keep mask is drawn by PyTorch's kernel, as eager's dropout draws it
    (``empty_like(x).bernoulli_(1 - p)``); the scaling and the multiply stay compiled, in
    eager's order (``x * (mask / (1 - p))``), so the result is eager's bit for bit."""
    meta = ctx.meta[0]
    dtype = numpy_dtype(meta.dtype)
    element = core.element_type(dtype)
    boolean = core.element_type(np.dtype(np.bool_))
    x = ctx.tensor(x, dtype)
    extents = core.sizes(x)
    if train is not None and not train:
        return x, core.filled(extents, True, boolean)
    if p == 1:  # eager multiplies by zero and draws nothing
        zero = core.elementwise([x], element, lambda v: arith.mulf(v, core.scalar_constant(0.0, element)))
        return zero, core.filled(extents, False, boolean)
    keep = 1.0 - p
    shape, torch_dtype = _static_shape(meta, "native_dropout"), meta.dtype
    [mask] = call_torch(ctx, "native_dropout", f"empty({shape}, {torch_dtype}).bernoulli_({keep!r})", [], [],
                        [meta], lambda _: [torch.empty(shape, dtype=torch_dtype).bernoulli_(keep)])
    output = core.elementwise(
        [x, mask], element, lambda v, m: arith.mulf(v, arith.divf(m, core.scalar_constant(keep, element))))
    kept = core.elementwise([mask], boolean, lambda m: arith.cmpf(
        arith.CmpFPredicate.UNE, m, core.scalar_constant(0.0, element)))
    return output, kept
