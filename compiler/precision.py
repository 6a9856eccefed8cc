"""Reduced-precision compiles (``precision="bf16"`` / ``"int8"``) and their accuracy report.

A faster, less exact build is only useful when its user knows what it cost. So every
reduced-precision compile here builds two modules, the f32 one and the reduced one, runs
both on the same inputs (the calibration data, or seeded random inputs) and attaches an
:class:`AccuracyReport` to the module it returns (``module.accuracy``); ``max_error``
refuses the build instead when the report is over it. OpenVINO switches its default
precision to bf16 on CPUs that have it and reports nothing; that is the gap this closes.

How each precision changes the build, with the rest of the compile as it is:
  int8  the ONNX model is quantized to QDQ by onnxruntime's tool (frontend/quantize.py) and
        that model compiled: the existing int8 path (frontend/onnx/qdq.py,
        pipelines/tensor/int8_matmul.py) runs its QDQ matmuls and convolutions on 8-bit operands.
  bf16  the pipeline gains ``tilecraft-bf16-weights`` at the end of its graph stage
        (pipelines/tensor/bf16_weights.py): constant matmul and convolution weights stored as bf16,
        widened to f32 where they are read, so products accumulate in f32; on AVX512-BF16
        targets plain matmuls and convolutions become ``vdpbf16ps`` kernels instead
        (pipelines/tensor/bf16_matmul.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..errors import AccuracyError, CalibrationError, TargetError
from ..frontend.loader import is_onnx_source
from ..frontend.quantize import InputSpec, Sample, onnx_proto, quantize, read_calibration
from ..pipelines.tensor.bf16_weights import with_bf16_weights
from ..runtime.host import host_cpu_flags
from .source import load

if TYPE_CHECKING:
    from .options import CompileOptions
    from ..pipelines.pipeline import Pipeline

# Random report inputs when no calibration is given: enough rows for a top-1 figure, few
# enough that the report costs little next to the compile.
RANDOM_SAMPLES = 8
# At most this many calibration samples are run for the report (all of them calibrate).
MAX_REPORT_SAMPLES = 64


@dataclass(frozen=True)
class OutputAccuracy:
    """How far one output of the reduced build is from the f32 build's, over all samples.

    Errors are relative to the output's scale, its largest f32 magnitude over all samples,
    not elementwise (an elementwise ratio is unbounded where the f32 value is near zero):
    ``max_relative_error`` is ``max|y - y32| / max|y32|`` and ``mean_relative_error``
    ``mean|y - y32| / max|y32|``.
    ``top1_agreement``: for a classifier output (rank 2, a row of 2+ scores per item), the
    fraction of rows whose arg-max is the f32 build's; ``None`` for other outputs.
    """

    name: str
    max_relative_error: float
    mean_relative_error: float
    top1_agreement: float | None = None


@dataclass(frozen=True)
class AccuracyReport:
    """The accuracy of a reduced-precision build against the f32 build of the same model."""

    precision: str
    samples: int
    inputs: str  # "calibration" or "random"
    outputs: tuple[OutputAccuracy, ...] = field(default_factory=tuple)

    @property
    def max_relative_error(self) -> float:
        """The worst output's maximum relative error (what ``max_error`` bounds)."""
        errors = [o.max_relative_error for o in self.outputs]
        return float("nan") if any(e != e for e in errors) else max(errors, default=0.0)  # NaN wins

    def __str__(self) -> str:
        lines = [f"accuracy of {self.precision} vs f32 on {self.samples} {self.inputs} input(s):"]
        for output in self.outputs:
            line = (f"  {output.name}: max relative error {output.max_relative_error:.3g}, "
                    f"mean {output.mean_relative_error:.3g}")
            if output.top1_agreement is not None:
                line += f", top-1 agreement {output.top1_agreement:.1%}"
            lines.append(line)
        return "\n".join(lines)


def compile_reduced(source: Any, options: "CompileOptions", compile: Callable[..., Any],
                    default_pipeline: Callable[["CompileOptions"], "Pipeline"]) -> Any:
    """``source`` compiled at ``options.precision``, with its accuracy report attached.

    ``compile`` is ``tilecraft.compile`` and ``default_pipeline`` the pipeline it would run
    for ``options`` (passed in: compile.py imports this module, not the reverse). Both
    builds go through ``compile`` with ``precision="f32"``: what makes the reduced one
    reduced is its model (int8: the QDQ model) or its pipeline (bf16), so the compile cache
    keys them apart by those.
    """
    _check_runs_here(options)
    plain = replace(options, precision="f32", calibration=None, max_error=None)
    if is_onnx_source(getattr(source, "source", source)) and not getattr(source, "outputs", None):
        source = load(source, options.shape_dict)  # the ONNX graph's output names name the report's rows
    reference = compile(source, replace(plain, package_path=None, profile=False, keep_ir=False))
    inputs = _input_specs(reference)
    samples = None
    if options.calibration is not None:
        if inputs is None:
            raise CalibrationError("this module's inputs are not known before it runs; calibration needs them")
        samples = read_calibration(options.calibration, inputs)
    if options.precision == "int8":
        shapes = getattr(source, "shape_dict", None) or plain.shape_dict  # a loaded Model's own shapes
        reduced = compile(quantize(onnx_proto(source), samples), replace(plain, shape_dict=shapes))
    else:
        reduced = compile(source, replace(plain, pipeline=with_bf16_weights(default_pipeline(plain), plain.target)))
    # The loaded model's output names: a module from the compile cache may not carry them.
    names = getattr(source, "output_names", None) or getattr(reference, "output_names", None)
    if samples:
        report = accuracy_report(options.precision, reference, reduced, samples[:MAX_REPORT_SAMPLES], "calibration",
                                 names)
    else:
        report = accuracy_report(options.precision, reference, reduced, _random_samples(inputs), "random", names)
    # "not <=": a NaN error (an output the reduced build made NaN) is refused too.
    if options.max_error is not None and not report.max_relative_error <= options.max_error:
        worst = max(report.outputs, key=lambda o: (np.nan_to_num(o.max_relative_error, nan=np.inf)))
        raise AccuracyError(
            f"the {options.precision} build's output {worst.name!r} is {worst.max_relative_error:.3g} (relative) "
            f"from the f32 build's, above max_error={options.max_error:g}; compile in f32, or raise "
            f"max_error\n{report}", report)
    reduced.accuracy = report
    return reduced


def _check_runs_here(options: "CompileOptions") -> None:
    """The report runs both builds on this machine: a target whose reduced-precision kernels
    need an instruction set this CPU lacks (``vdpbf16ps``, ``vpdpbusd``) is refused here, with
    the reason, rather than failing (or faulting) in the JIT."""
    target = options.target
    flags = host_cpu_flags()
    needed = {"bf16": ("avx512_bf16", target.has_avx512_bf16),
              "int8": ("avx512_vnni", target.has_avx512_vnni)}[options.precision]
    flag, wanted = needed
    if wanted and flags and flag not in flags:
        raise TargetError(
            f"precision={options.precision!r} for '{target}' uses {flag} kernels, which this machine lacks; the "
            "accuracy report runs the build here: compile on a machine with it, or for this host's CPU")


def _input_specs(module: Any) -> list[InputSpec] | None:
    signature = getattr(module, "signature", None)
    if signature is None:
        return None
    return [InputSpec(spec.name, tuple(spec.shape or ()), np.dtype(spec.dtype)) for spec in signature.arguments]


def _random_samples(inputs: Sequence[InputSpec] | None, count: int = RANDOM_SAMPLES) -> list[Sample]:
    """Seeded inputs for a report without calibration data: standard-normal floats; integers
    0 or 1 (valid token ids, masks and indices for the models that take integers); dynamic
    dims of extent 1."""
    if inputs is None:
        raise CalibrationError("this module's inputs are not known before it runs: pass calibration inputs "
                               "for the accuracy report")
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(count):
        sample = {}
        for spec in inputs:
            shape = tuple(1 if d is None else d for d in spec.shape)
            if spec.dtype.kind == "f":
                sample[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
            elif spec.dtype.kind in "iub":
                sample[spec.name] = rng.integers(0, 2, shape).astype(spec.dtype)
            else:
                raise CalibrationError(f"input {spec.name!r} of element type {spec.dtype} has no random "
                                       "stand-in: pass calibration inputs for the accuracy report")
        samples.append(sample)
    return samples


def accuracy_report(precision: str, reference: Any, reduced: Any, samples: Sequence[Sample],
                    inputs: str = "calibration", output_names: Sequence[str] | None = None) -> AccuracyReport:
    """Run both modules on ``samples`` and compare every output (see :class:`OutputAccuracy`);
    ``inputs`` says where the samples came from ("calibration" or "random"); outputs are
    named by ``output_names``, else the reference module's, else by position."""
    expected: list[list[np.ndarray]] = []
    actual: list[list[np.ndarray]] = []
    for sample in samples:
        expected.append(_outputs(reference(**sample)))
        actual.append(_outputs(reduced(**sample)))
    names = output_names or getattr(reference, "output_names", None) or []
    names = list(names)[:len(expected[0])] + [f"output {i}" for i in range(len(names), len(expected[0]))]
    outputs = []
    for index, name in enumerate(names):
        ref = [np.asarray(e[index], dtype=np.float64) for e in expected]
        got = [np.asarray(a[index], dtype=np.float64) for a in actual]
        difference = np.concatenate([np.abs(g - r).ravel() for g, r in zip(got, ref)])
        magnitude = np.concatenate([np.abs(r).ravel() for r in ref])
        scale = float(magnitude.max(initial=0.0))
        outputs.append(OutputAccuracy(
            name,
            _ratio(float(difference.max(initial=0.0)), scale),
            _ratio(float(difference.mean()) if difference.size else 0.0, scale),
            _top1(ref, got)))
    return AccuracyReport(precision, len(samples), inputs, tuple(outputs))


def _ratio(difference: float, scale: float) -> float:
    if scale == 0.0:
        return 0.0 if difference == 0.0 else float("inf")
    return difference / scale


def _top1(reference: list[np.ndarray], reduced: list[np.ndarray]) -> float | None:
    """Top-1 agreement for rank-2 float outputs with 2+ scores per row; else ``None``."""
    if reference[0].ndim != 2 or reference[0].shape[-1] < 2:
        return None
    agree = sum(int((r.argmax(-1) == g.argmax(-1)).sum()) for r, g in zip(reference, reduced))
    rows = sum(r.shape[0] for r in reference)
    return agree / rows if rows else None


def _outputs(result: Any) -> list[np.ndarray]:
    return list(result) if isinstance(result, (tuple, list)) else [result]
