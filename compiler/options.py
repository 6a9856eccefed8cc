"""The options of a compile session, shared by ``tilecraft.compile``, the ``tilecraft``
command, ``tilecraft.torch.compile`` and the ``torch.compile`` backend.

One frozen object instead of keyword lists repeated at every door: a new option is added
here once, validated here once, and documented here once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping, Sequence

from ..errors import OptionError
from ..pipelines.offload import backend_named
from ..pipelines.pipeline import Pipeline
from ..pipelines.target import Target
from ..pipelines.target_registry import target_plugin


# The numeric precisions a compile can ask for (compiler/precision.py).
PRECISIONS = ("f32", "bf16", "int8")


@dataclass(frozen=True)
class CompileOptions:
    """How to compile a model.

    Attributes:
      target: ``"llvm"`` for the host CPU or ``"llvm -mcpu=... -mattr=..."``;
        ``"cuda -arch=sm_80"`` for an NVIDIA GPU (docs/cuda.md: compiles anywhere, runs
        where a CUDA driver is). Parsed into a :class:`Target`.
      shape_dict: for ONNX models, input name -> shape (``None`` keeps a dim dynamic).
      entry: the public function to call; optional when there is exactly one.
      pipeline: a (possibly edited) pipeline; default ``cpu_pipeline(target)``.
      opt_level: 0-3, like TVM's PassContext opt_level: the LLVM optimization level for
        the JIT (at most 2 there: pipelines/jit/engine.py's ``jit_llvm_opt_level``), and which
        graph passes run (``pipelines/graph``: 1 dead code and CSE,
        2 + constant folding and combined parallel matmuls, 3 + operator fusion; default
        3). Applies to the default pipeline; a given ``pipeline`` is run as it is.
      keep_ir: keep the IR after each stage for :meth:`CompiledModule.ir`.
      tuning_records: a JSON-lines file written by :func:`tilecraft.tune`; each op with a
        successful record for ``target`` gets the fastest record's schedule, the others the
        default schedule.
      package_path: also write a deployable package there (``model.tar``: shared library,
        manifest; load it with :func:`tilecraft.runtime.load`, no MLIR needed).
      profile: with ``package_path``, add the per-kernel profiling variant to the package.
      offload: backend names (``["blas"]``; pipelines/offload/) whose matched ops become
        calls of external libraries, in order; applies to the default CPU pipeline.
      runtime_checks: compile the run-time checks in (default): out-of-range gather and
        scatter indices, dynamic dims that disagree (through reshapes, slices, matmuls,
        broadcasts) and dynamic allocations above ``TILECRAFT_MAX_TENSOR`` raise a
        ``RuntimeCheckError`` subclass instead of computing garbage (docs/robustness.md).
        ``False`` leaves them out (for measuring their cost); applies to the default CPU
        pipeline.
      specialize_shapes: for an ONNX model with dynamic input dims compiled for the CPU
        (and no ``package_path``), how many distinct input shapes get a compile of their own
        with every dim static, as XLA and ``torch.compile`` specialize. The schedules' register
        tiles need static extents: a dynamic-batch MLP ran far behind onnxruntime through
        the dynamic kernels, and level with it once its batch was known (docs/performance.md,
        round 15). The first call with a new
        shape runs the dynamic module (its checks and errors are the model's) and then
        compiles that shape (seconds); later calls with it run the static module. Shapes past
        the limit keep the dynamic module; ``0`` turns specialization off
        (compiler/specialized.py, docs/performance.md round 15). Default 4.
      fast_math: replace f32 ``tanh``, ``exp``, ``erf``, sigmoid and GELU by polynomial /
        rational approximations (``tilecraft-fast-math``, pipelines/vector/fast_math.py; their
        maximum errors are listed there and in docs/performance.md). Default ``False``.
      kernel_calls: each distinct kernel (schedule/repeated_kernels.py: a network's repeated
        blocks make the same ones) stays a function the entry calls, so bufferization, the
        lowering to LLVM and LLVM's code generator handle it once, not once per copy
        (docs/performance.md, "Each distinct kernel lowered once"). ``False``: every call is
        inlined after the schedule, as before. Same outputs bit for bit; default CPU pipeline
        only. Default ``True``.
      checked: a checked build: MLIR's run-time verification of every memref access
        (indices in bounds, views inside their buffers, casts, alignment) on top of the
        run-time checks; a violation raises ``RuntimeVerificationError`` naming the op and
        its location instead of reading or writing out of bounds
        (pipelines/vector/runtime_verification.py; its cost: docs/robustness.md). Default CPU
        pipeline only. Default: ``TILECRAFT_CHECKED=1`` in the environment turns it on for
        every compile (a test suite or a fuzz run under checked builds).
      cache: the persistent compile cache (compiler/cache.py): a model compiled before with
        the same options, target and tilecraft loads from ``$TILECRAFT_CACHE_DIR`` (default
        ``$XDG_CACHE_HOME/tilecraft`` or ``~/.cache/tilecraft``) instead of compiling.
        ``None`` (default): on, unless ``TILECRAFT_COMPILE_CACHE=0``; ``False``: off
        (CLI: ``--no-cache``); ``True``: on whatever the environment says.
      verbose: show the compile's progress (stage, elapsed seconds, kernels) on a terminal
        once it has taken a few seconds (compiler/progress.py); never when stderr is not a
        terminal. ``False``: quiet.
      precision: ``"f32"`` (default), ``"bf16"`` (weights of matmuls and convolutions stored
        as bf16, widened to f32 in the kernels, which accumulate in f32) or ``"int8"`` (the
        ONNX model quantized to QDQ by onnxruntime's tool, then compiled on the int8 path).
        A reduced precision also builds the f32 module and returns the result with an
        ``accuracy`` report (compiler/precision.py, docs/precision.md). CPU targets only.
      calibration: for ``precision="int8"``, a list of ``{input name: array}`` dicts or an
        ``.npz`` path: static quantization with calibrated activation scales; without it,
        dynamic quantization of MatMul/Gemm activations. For any reduced precision, the
        inputs of the accuracy report (default: 8 seeded random inputs).
      max_error: refuse (``AccuracyError``) a reduced-precision build whose maximum
        relative error on some output exceeds this; ``None`` (default): report only.
    """

    target: "str | Target" = "llvm"
    shape_dict: Mapping[str, Sequence[int | None]] | None = None
    entry: str | None = None
    pipeline: Pipeline | None = None
    opt_level: int = 3
    keep_ir: bool = True
    tuning_records: "str | os.PathLike[str] | None" = None
    package_path: "str | os.PathLike[str] | None" = None
    profile: bool = False
    offload: Sequence[str] = ()
    runtime_checks: bool = True
    specialize_shapes: int = 4
    fast_math: bool = False
    kernel_calls: bool = True
    checked: bool = field(default_factory=lambda: os.environ.get("TILECRAFT_CHECKED", "") not in ("", "0"))
    cache: bool | None = None
    verbose: bool = True
    precision: str = "f32"
    calibration: Any = None
    max_error: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", Target.parse(self.target))
        offload = (self.offload,) if isinstance(self.offload, str) else tuple(self.offload)
        object.__setattr__(self, "offload", offload)
        for name in offload:
            backend_named(name)  # an unknown name fails here, listing the known ones
        if isinstance(self.opt_level, bool) or self.opt_level not in (0, 1, 2, 3):
            raise OptionError(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level!r}")
        if self.pipeline is not None and not isinstance(self.pipeline, Pipeline):
            raise OptionError(
                f"pipeline must be a tilecraft.Pipeline (e.g. tilecraft.cpu_pipeline(target)), "
                f"got {type(self.pipeline).__name__}"
            )
        for name in ("tuning_records", "package_path"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise OptionError(f"{name} must be a path, got {type(value).__name__}")
        if self.shape_dict is not None and not isinstance(self.shape_dict, Mapping):
            raise OptionError(f"shape_dict must map input names to shapes, got {type(self.shape_dict).__name__}")
        if self.entry is not None and not isinstance(self.entry, str):
            raise OptionError(f"entry must be a function name, got {type(self.entry).__name__}")
        if not isinstance(self.runtime_checks, bool):
            raise OptionError(f"runtime_checks must be True or False, got {self.runtime_checks!r}")
        if not isinstance(self.kernel_calls, bool):
            raise OptionError(f"kernel_calls must be True or False, got {self.kernel_calls!r}")
        if not isinstance(self.checked, bool):
            raise OptionError(f"checked must be True or False, got {self.checked!r}")
        if isinstance(self.specialize_shapes, bool) or not isinstance(self.specialize_shapes, int) \
                or self.specialize_shapes < 0:
            raise OptionError(f"specialize_shapes must be a count >= 0, got {self.specialize_shapes!r}")
        if not isinstance(self.fast_math, bool):
            raise OptionError(f"fast_math must be True or False, got {self.fast_math!r}")
        if self.cache is not None and not isinstance(self.cache, bool):
            raise OptionError(f"cache must be True, False or None, got {self.cache!r}")
        if not isinstance(self.verbose, bool):
            raise OptionError(f"verbose must be True or False, got {self.verbose!r}")
        if self.precision not in PRECISIONS:
            raise OptionError(f"precision must be one of {list(PRECISIONS)}, got {self.precision!r}")
        if self.precision not in target_plugin(self.target.kind).precisions:
            raise OptionError(f"precision={self.precision!r} is not available for target {self.target}, "
                              f"which compiles {list(target_plugin(self.target.kind).precisions)}; "
                              "reduced precisions compile for CPU targets ('llvm ...')")
        if self.calibration is not None and self.precision == "f32":
            raise OptionError("calibration is read by reduced-precision compiles: pass precision='int8' or 'bf16'")
        if self.max_error is not None and (isinstance(self.max_error, bool) or not isinstance(
                self.max_error, (int, float)) or not self.max_error >= 0):
            raise OptionError(f"max_error must be a relative error >= 0, got {self.max_error!r}")
        if self.max_error is not None and self.precision == "f32":
            raise OptionError("max_error bounds a reduced-precision build: pass precision='int8' or 'bf16'")
        target_plugin(self.target.kind).check_options(self)  # what this target cannot honour

    @classmethod
    def of(cls, options: "CompileOptions | None" = None, **overrides: Any) -> "CompileOptions":
        """``options`` (default: the defaults) with ``overrides`` applied; an unknown
        option name raises ``TypeError`` listing the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise OptionError(f"unknown compile option(s) {unknown}; options: {sorted(known)}")
        return replace(options or cls(), **overrides)
