"""A model compiled with dynamic input dims that compiles a static version of itself for
each input shape it is called with (``CompileOptions.specialize_shapes``), as XLA and
``torch.compile`` specialize.

Why: the schedule's register tiles and thread tasks are sized from static extents
(schedule/plan.py). With a dynamic batch they cannot be, and the dynamic kernels run as
plain loops: a 64-row MLP, a small CNN and a dynamic-sequence BERT ran far behind
onnxruntime, and level with it once the same models were compiled with their shapes known
(docs/performance.md, round 15). Users export ONNX models with dynamic axes as a
matter of course (``torch.onnx.export(..., dynamic_axes=...)``).

The first call with a new shape runs the dynamic module, so its run-time checks and errors
are the ones the model has, then compiles the model with that shape fixed (``shape_dict``);
a shape whose static compile fails keeps the dynamic module, as do shapes past the limit.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TilecraftError
from ..pipelines.jit.compiled_module import CompiledModule
from ..runtime.timing import Timing, time_evaluator

ShapeKey = tuple[tuple[int, ...], ...]


class ShapeSpecializedModule:
    """Called like the :class:`CompiledModule` it wraps (``dynamic``), whose attributes it
    shows (``ir()``, ``signature``, ``compile_seconds`` ...); ``specializations`` maps each
    input-shape tuple compiled so far to its static module (``None`` where that compile
    failed)."""

    def __init__(self, dynamic: CompiledModule, input_names: Sequence[str],
                 compile_static: Callable[[ShapeKey], CompiledModule], limit: int) -> None:
        self.dynamic = dynamic
        self.input_names = list(input_names)
        self.limit = limit
        self.specializations: dict[ShapeKey, CompiledModule | None] = {}
        self._compile_static = compile_static
        self._lock = threading.Lock()

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ShapeKey | None:
        """The inputs' shapes in input order; ``None`` when the call does not name every
        input exactly once (the dynamic module then reports it)."""
        if len(args) > len(self.input_names) or set(kwargs) - set(self.input_names[len(args):]):
            return None
        values = dict(zip(self.input_names, args), **kwargs)
        if len(values) != len(self.input_names):
            return None
        return tuple(tuple(int(d) for d in np.shape(values[name])) for name in self.input_names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self._key(args, kwargs)
        static = self.specializations.get(key) if key is not None else None
        if static is not None:
            return static(*args, **kwargs)
        result = self.dynamic(*args, **kwargs)
        if key is not None:
            with self._lock:
                if key not in self.specializations and len(self.specializations) < self.limit:
                    try:
                        static = self._compile_static(key)
                    except TilecraftError:
                        static = None  # this shape keeps the dynamic module
                    self.specializations[key] = static
        return result

    def time_evaluator(self, name: str | None = None, *, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0.0) -> Callable[..., Timing]:
        """As :meth:`CompiledModule.time_evaluator`, timing calls of this module: after the
        warm-up call (which compiles the arguments' shape) they run the static module.
        ``export_library`` (through the wrapped module) writes the dynamic one."""
        self.dynamic.time_evaluator(name)  # the entry name check
        return time_evaluator(self, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def __getattr__(self, name: str) -> Any:
        if name == "dynamic":  # not set yet (copy, unpickling): no recursion through here
            raise AttributeError(name)
        return getattr(self.dynamic, name)

    def __repr__(self) -> str:
        compiled = sum(1 for m in self.specializations.values() if m is not None)
        return f"<ShapeSpecializedModule {self.dynamic.signature} static shapes={compiled}/{self.limit}>"
