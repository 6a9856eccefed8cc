"""Tensor intrinsics: micro-kernels that ``Schedule.tensorize`` puts in place of a tile.

An intrinsic pairs a *definition*, a TE compute of fixed shape describing the tile it
replaces (TVM's ``te.decl_tensor_intrin`` takes the same), with an *implementation*, an
extern C function (``tilecraft.extern.register_c``: destination-passing style, one pointer to
an MLIR memref descriptor per operand)::

    a = placeholder((1, 64), name="a"); b = placeholder((64, 16), name="b")
    k = reduce_axis(64, name="k")
    c = compute((1, 16), lambda i, j: sum(a[i, k] * b[k, j], axis=k), name="c")
    register_intrinsic("gemv_update", c, compile_c(C_SOURCE))   # symbol gemv_update

``tensorize`` matches a block's tile against the definition (iterator kinds, indexing maps,
body, element types, the tile's shape) and annotates the tiled op; after bufferization
``tilecraft-tensorize`` (pipelines/tensor/tensorize.py) replaces it by a call of the extern on the
operands' subviews.

Semantics (why "update"): the call computes what the replaced op computes, linalg's
semantics: the output operand is read and written, so a reduction *accumulates* into the
output tile (TVM's ``update``); the tile is then correct whether or not a reduction loop
outside it splits the sum. The *reset* is the block's init, which stays a ``linalg.fill``
(``decompose_reduction`` places it). The descriptors are strided views into the whole
buffers: the C code must index ``aligned[offset + i * strides[0] + j * strides[1]]``.

Why in schedule/te and not runtime/extern.py: matching needs the definition's analysis
(payload.py), an MLIR-level fact; the implementation itself is an ordinary extern, so a
tensorized module binds it in the JIT like any other.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from mlir import ir

from ...runtime.extern import ArgSpec, ExternFunction, register_c
from ...runtime.native import build_shared_library, cache_dir
from .errors import ScheduleError
from .payload import DYNAMIC, OpInfo, analyze_function, find_function, load_payload
from ...errors import OptionError


@dataclass(frozen=True)
class TensorIntrin:
    """A registered intrinsic: ``op`` is the definition's analysed op (its dims, maps, body,
    element types), ``extern`` the function a tensorized tile calls."""

    name: str
    op: OpInfo
    extern: ExternFunction
    operand_shapes: tuple[tuple[int, ...], ...]  # per operand (inputs, then the output)

    @property
    def shape(self) -> tuple[int, ...]:
        """The iteration space the intrinsic computes, one extent per dim."""
        return tuple(self.op.ranges)

    @property
    def dim_names(self) -> list[str]:
        return list(self.op.dim_names)

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}={e}" for n, e in zip(self.op.dim_names, self.op.ranges))
        return f"TensorIntrin({self.name!r}, {dims}, extern={self.extern.name!r})"


_INTRINSICS: dict[str, TensorIntrin] = {}


def _definition_op(definition: Any, name: str) -> tuple[OpInfo, tuple[tuple[int, ...], ...]]:
    """The one computing op of ``definition`` (its init fill aside) and its operand shapes."""
    context = ir.Context()
    try:
        module, func_name = load_payload(definition, context, None)
    except ScheduleError as error:
        raise ScheduleError(f"register_intrinsic {name!r}: the definition: {error}") from None
    function = find_function(module, func_name)
    infos = analyze_function(module, function)
    inits = {p for info in infos for x, p in enumerate(info.producers)
             if p is not None and x >= info.n_inputs and infos[p].is_fill}
    ops = [info for info in infos if info.index not in inits]
    if len(ops) != 1:
        raise ScheduleError(
            f"register_intrinsic {name!r}: the definition must compute one op (plus its init), "
            f"it has {[info.tag for info in ops]}")
    op = ops[0]
    if any(extent == DYNAMIC or extent < 0 for extent in op.ranges):
        raise ScheduleError(f"register_intrinsic {name!r}: the definition's shape must be static, "
                            f"got {op.ranges}")
    shapes = []
    for results in op.maps:
        shape = []
        for result in results:
            if result.kind != "dim":
                raise ScheduleError(
                    f"register_intrinsic {name!r}: operands must be indexed by loop dims (an "
                    f"operand is indexed by {result.text or result.kind})")
            shape.append(op.ranges[result.value])
        shapes.append(tuple(shape))
    return op, tuple(shapes)


def _specs(op: OpInfo, shapes: Sequence[tuple[int, ...]]) -> list[ArgSpec]:
    return [ArgSpec(element, tuple(shape)) for element, shape in zip(op.element_types, shapes)]


def register_intrinsic(name: str, definition: Any, implementation: "ExternFunction | str | Path", *,
                       symbol: str | None = None) -> TensorIntrin:
    """Register the tensor intrinsic ``name`` (TVM's ``te.decl_tensor_intrin``).

    Args:
      name: what ``sch.tensorize(loop, name)`` names; a C identifier. Registering a name
        again replaces the intrinsic.
      definition: the tile it computes: a compute :class:`~tilecraft.schedule.te.Tensor`
        with static shapes (or MLIR text of a function with one linalg op), e.g. a 1x16x64
        matmul for a GEMV update.
      implementation: a C shared library (path; the function is ``symbol``, default
        ``name``, registered as the extern ``name`` with the definition's operand types), or
        an extern already registered with ``tilecraft.extern.register_c`` whose parameters
        accept those types. It receives the inputs' and then the output's memref
        descriptors and accumulates into the output (see the module docstring).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ScheduleError(f"register_intrinsic: the name must be a C identifier, got {name!r}")
    op, shapes = _definition_op(definition, name)
    specs = _specs(op, shapes)
    if isinstance(implementation, ExternFunction):
        extern = implementation
        if len(extern.inputs) != op.n_inputs or len(extern.outputs) != 1:
            raise ScheduleError(
                f"register_intrinsic {name!r}: the extern {extern.name!r} takes {len(extern.inputs)} "
                f"input(s) and {len(extern.outputs)} output(s); the definition has {op.n_inputs} "
                "input(s) and one output")
        for index, (declared, spec) in enumerate(zip(extern.parameters, specs)):
            if not declared.accepts(spec.element, spec.shape):
                raise ScheduleError(
                    f"register_intrinsic {name!r}: parameter {index} of extern {extern.name!r} is "
                    f"{declared}, but the definition's operand {index} is {spec}")
    elif isinstance(implementation, (str, Path)):
        extern = register_c(name, implementation, symbol, inputs=specs[: op.n_inputs],
                            outputs=specs[op.n_inputs:])
    else:
        raise OptionError(f"register_intrinsic: implementation must be a shared library path or an "
                        f"ExternFunction (tilecraft.extern.register_c), got {type(implementation).__name__}")
    intrinsic = TensorIntrin(name, op, extern, shapes)
    _INTRINSICS[name] = intrinsic
    return intrinsic


def lookup_intrinsic(name: "str | TensorIntrin", what: str = "tensorize") -> TensorIntrin:
    """The intrinsic ``name``, or :class:`ScheduleError` listing the registered ones."""
    if isinstance(name, TensorIntrin):
        return name
    intrinsic = _INTRINSICS.get(name) if isinstance(name, str) else None
    if intrinsic is None:
        known = ", ".join(sorted(_INTRINSICS)) or "none"
        raise ScheduleError(f"{what}: unknown intrinsic {name!r} (registered: {known}); register it "
                            "with tilecraft.scheduling.register_intrinsic")
    return intrinsic


def registered_intrinsics() -> dict[str, TensorIntrin]:
    """The registered intrinsics by name."""
    return dict(_INTRINSICS)


def unregister_intrinsic(name: str) -> None:
    """Forget intrinsic ``name`` (schedules already tensorized keep its extern)."""
    _INTRINSICS.pop(name, None)


def compile_c(source: str, *, name: str = "intrinsic", flags: Sequence[str] = ("-O3",)) -> Path:
    """Compile C ``source`` into a shared library (cached by content under
    ``$TILECRAFT_CACHE_DIR``) with ``$CC``; returns its path. ``flags`` follow ``-O2 -shared
    -fPIC``, e.g. ``("-O3", "-march=native")`` for a vectorized micro-kernel."""
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = cache_dir() / "intrinsic-sources" / f"{name}-{key}.c"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.write_text(source)
        scratch.replace(path)
    return build_shared_library(f"lib{name}.so", [path], list(flags), what=f"the intrinsic library {name!r}",
                                error=ScheduleError)
