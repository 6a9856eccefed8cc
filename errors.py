"""The tilecraft exception family.

Every error tilecraft raises on purpose derives from :class:`TilecraftError`, so callers can
catch the whole family at once. Errors about the arguments of a compiled function also derive
from the matching builtin (``TypeError`` / ``ValueError``), so code written against numpy
conventions keeps working.
"""

from __future__ import annotations


class TilecraftError(Exception):
    """Base class of every error tilecraft raises deliberately."""


class TargetError(TilecraftError, ValueError):
    """A target string could not be parsed, or names a target this build cannot serve."""


class PipelineError(TilecraftError):
    """A pipeline description is malformed (unknown stage or pass, bad pass option)."""


class CompileError(TilecraftError):
    """MLIR rejected the input or a pass failed; the message carries MLIR's diagnostics."""

    def __init__(self, message: str, *, stage: str | None = None) -> None:
        super().__init__(f"[stage {stage}] {message}" if stage else message)
        self.stage = stage


class EntryPointError(TilecraftError, ValueError):
    """The module has no usable entry function, or several and none was chosen."""


class ArgumentTypeError(TilecraftError, TypeError):
    """A call passed an argument of the wrong kind or element type."""


class ArgumentValueError(TilecraftError, ValueError):
    """A call passed the wrong number of arguments, or an array of the wrong rank or shape."""


class ModelImportError(TilecraftError):
    """A model could not be imported: not a model, malformed, or using unsupported features.

    ``problems`` lists every offending node as ``(node name, op type, reason)`` so one error
    reports all unsupported operators of a model at once.
    """

    def __init__(self, message: str, *, problems: "list[tuple[str, str, str]] | None" = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class HostOpError(TilecraftError, RuntimeError):
    """A node run on the host instead of compiled (an op on string tensors,
    frontend/onnx/string_partition.py) failed on the values it was given; the message names
    the segment's ops and the cause."""


class PackageError(TilecraftError):
    """A deployable package cannot be written or loaded: not a tilecraft package, truncated or
    corrupted (content hash mismatch), or written by an incompatible package format."""


class PackageTargetError(PackageError, TargetError):
    """A package was built for a machine this one is not (another architecture, or CPU
    features this CPU lacks)."""


class ToolchainError(TilecraftError):
    """An external tool that turns MLIR into a shared library (mlir-translate, opt, llc, the C
    compiler or cross compiler) is missing or failed; the message carries its output."""


class TorchImportError(ModelImportError):
    """A PyTorch module could not be imported: an unsupported ATen op (``problems`` lists each
    as ``(FX node, ATen op, source location)``), a training-mode module, a non-tensor output,
    or example inputs ``torch.export`` rejects."""


class TuningError(TilecraftError):
    """The tuner was misused or its inputs are unusable (see the subclasses)."""


class TunerNameError(TuningError, ValueError):
    """An unknown tuner name; the message lists the valid ones."""


class KnobError(TuningError, ValueError):
    """A schedule configuration names a knob the task's space lacks, or a value outside it."""


class TemplateError(TuningError, ValueError):
    """A schedule template is misused: a name registered twice, ``task()`` of a name never
    registered, ``get_config()`` outside a template."""


class ConfigSpaceError(KnobError):
    """A template's config space is malformed: ``define_split`` with a non-positive
    ``num_outputs``, a knob with no candidates, a knob defined twice, or ``cfg[name]`` of a
    knob the template never defined."""


class TaskExtractionError(TuningError, ValueError):
    """A model has no tunable task (e.g. only dynamic shapes), or ``tasks=`` names none of them."""


class GraphError(CompileError):
    """Graph-dialect IR is malformed (a fusion group whose terminator, anchor or signature
    disagrees with its body, an unknown kind or layout), or a graph pass was given IR it
    cannot transform; names the op."""


class DeviceUnavailableError(TargetError):
    """Code compiled for a GPU was loaded or called where it cannot run: no CUDA driver (the
    message says "no CUDA driver"), no GPU, or a driver without an entry point tilecraft's CUDA
    runtime needs. Compiling for the GPU needs none of them."""


class CudaError(TilecraftError, RuntimeError):
    """A CUDA driver call failed while a CUDA module or package ran (out of device memory, a
    kernel the driver could not load or launch); names the call and the CUresult."""


class GpuScheduleError(CompileError):
    """The GPU schedule cannot map an op onto blocks and threads (dynamic shapes, an op kind
    it has no plan for, or a plan the transform interpreter rejected); names the op."""


class OptionError(TilecraftError, TypeError, ValueError):
    """A compile, tune or pass option has the wrong type or a value outside its range
    (``pipeline="text"``, ``opt_level=nan``, a negative count, a missing records file).

    Derives from both ``TypeError`` and ``ValueError`` so code written before the option was
    checked, which caught the builtin the unchecked value used to raise, keeps working."""


class ResourceLimitError(TilecraftError):
    """A model needs more than a configured limit allows: a tensor (or all of them together)
    larger than the size limits, an element count that overflows int64, or MLIR text nested
    deeper than the parser can take. The message names the tensor and the limit, and how to
    raise it (docs/robustness.md)."""


class ExternError(CompileError):
    """An extern function (``tilecraft.extern``) cannot be used: a call names a function that
    was never registered, or one that cannot go where it is asked to (a Python callable in a
    deployable package). Raised at compile time, never from inside the JIT."""


class ExternSignatureError(ExternError, TypeError):
    """A registered extern's signature is malformed, or a call's operand and result types
    disagree with it (count, rank, element type or a static dimension)."""


class ExternLibraryError(ExternError):
    """The shared library of a C extern cannot be loaded, or lacks the symbol."""


class BackendError(CompileError, ValueError):
    """An offload backend is unknown (the message lists the registered ones), or cannot be
    made ready (its library is missing or its C shim does not build)."""


class RemoteError(TilecraftError):
    """A remote run failed (see the subclasses); the message names the server."""


class RemoteAddressError(RemoteError, ValueError):
    """A server address is not ``HOST:PORT`` (or ``remote://HOST:PORT``) with a port in
    1-65535."""


class RemoteConnectionError(RemoteError):
    """The server cannot be reached (unknown host, connection refused, no answer in time), or
    what answered does not speak the tilecraft protocol."""


class RemoteAuthError(RemoteError):
    """The server refused the request's signature: no key, a wrong key, or a stale request."""


class RemoteLimitError(RemoteError, ResourceLimitError):
    """A request exceeds one of the server's limits (upload size, run timeout, memory)."""


class RemoteRunError(RemoteError):
    """The package's child process died on the server (a signal, such as a segfault in the
    model's library, or a run past the memory limit); the server itself keeps serving."""


class RemoteTimeoutError(RemoteError):
    """The package's child process ran past the server's time limit and was killed."""


class CTargetError(CompileError):
    """The C target (``target="c"``) cannot lower a model: an op it has no C for (the message
    names it and its location), or a dynamic shape (its workspace is planned at compile time,
    so every shape must be static: pass ``shape_dict``)."""


class CTargetUnsupportedOpError(CTargetError):
    """An op the C target cannot translate to C99 (the message names it)."""


class CTargetShapeError(CTargetError):
    """A dynamic dimension reached the C target, which needs static shapes."""


class RuntimeCheckError(TilecraftError, ValueError):
    """A check compiled into the generated code failed during a call (docs/robustness.md,
    "Run-time checks"): the arguments are of valid shapes and dtypes one by one, but their
    values or the relations between their dimensions are invalid for the model. The
    message names the op, its node and the bad value; the call's outputs were discarded."""


class IndexOutOfRangeError(RuntimeCheckError, IndexError):
    """A Gather/GatherElements/GatherND/Scatter*-style index (or a PyTorch ``index_select``,
    ``embedding``, ``gather``, ``index``) is outside ``[-size, size)`` of the axis it
    indexes; onnxruntime and PyTorch raise for it too."""


class ShapeMismatchError(RuntimeCheckError):
    """Dynamic dimensions that the compiled code needs to agree do not: a reshape whose
    element counts differ, a slice or matmul whose sizes do not fit, operands of an
    elementwise op that cannot broadcast. Computing on would read outside a buffer."""


class AllocationLimitError(ResourceLimitError, RuntimeCheckError):
    """A buffer whose size is known only at the call would exceed ``TILECRAFT_MAX_TENSOR``
    (read at compile time); the generated code refuses it instead of calling ``malloc``
    with that size."""


class ModelBuilderError(TilecraftError, ValueError):
    """A model under construction with :class:`tilecraft.builder.ModelBuilder` is malformed:
    a bad name, a value of another builder, a shape that does not match, a missing output."""


class PackageSignatureError(PackageError):
    """A package refused under a trusted key (``trust=``, ``--trust``): unsigned, signed with
    another key, or changed after signing (runtime/package_signing.py)."""


class RemoteRateLimitError(RemoteAuthError):
    """The server refuses this client address for a while: too many failed authentications
    (its ``--max-auth-failures``)."""


class RuntimeVerificationError(RuntimeCheckError):
    """A checked build (``checked=True``, ``--checked``) caught a memory access outside its
    buffer, a view outside its source, a wrong cast or a misaligned buffer; the message names
    the op and its location (pipelines/vector/runtime_verification.py)."""


class ModelFormatError(ModelImportError, ValueError):
    """A model file's format is unknown, or its suffix (or the declared ``model_format``)
    disagrees with its content, or the package that reads the format is not installed; the
    message lists the formats tilecraft reads and the extra that installs each."""


class CalibrationError(TilecraftError, ValueError):
    """Calibration data for a reduced-precision compile is unusable: an empty list, a missing
    or unreadable ``.npz`` file, an input name the model does not have (or one it needs that
    is missing), or an array whose shape or element type the model's input does not take; the
    message names the sample and the input (compiler/precision.py, frontend/quantize.py)."""


class QuantizationError(TilecraftError):
    """onnxruntime's quantization tool could not quantize the model (frontend/quantize.py);
    the message carries its own error."""


class AccuracyError(TilecraftError, ValueError):
    """A reduced-precision build (``precision="bf16"`` / ``"int8"``) is further from the f32
    build than ``max_error`` allows; the message names the output and its error, and the
    error's ``report`` holds the whole accuracy report."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class OperandError(TilecraftError, ValueError):
    """An op builder (the IR emitters in ir/, an ONNX handler's or a PyTorch op's
    converter) was given operands or attributes it cannot build the op for: a rank, shape,
    element type or attribute value the op does not take, or a case tilecraft does not
    support. It is the model's fault, so the importers turn it into a
    :class:`ModelImportError` (:class:`TorchImportError`) naming the node; anything else an
    op builder raises is a bug and surfaces as an :class:`InternalError`.

    Derives from ``ValueError`` because the emitters raised that before it existed."""


class OperandTypeError(OperandError, TypeError):
    """An operand's element type (or a numpy dtype) has no MLIR counterpart the op takes.

    Derives from ``TypeError`` too: callers caught that builtin before this existed."""


class InternalError(TilecraftError, RuntimeError):
    """A bug in tilecraft, not a problem with the input: an invariant the code relies on does
    not hold (a handler registered twice, an op converter that crashed). The message says
    where it happened (for the importers, the node); please report it with the model."""


class IRNotKeptError(TilecraftError, KeyError):
    """``module.ir(stage)`` names a stage whose IR was not kept: an unknown stage, a module
    compiled with ``keep_ir=False``, or a model whose every node runs on the host.

    Derives from ``KeyError`` (a lookup by name), which ``ir()`` raised before."""
class LinAlgError(RuntimeCheckError):
    """A linear-algebra routine met a matrix it cannot handle during a call, where PyTorch
    raises ``torch.linalg.LinAlgError``: a singular matrix to ``solve``/``inv``, one that is
    not positive-definite to ``cholesky``, an eigen or singular value decomposition that
    did not converge. The message names the op, its node and LAPACK's ``info``."""
