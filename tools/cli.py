"""``tilecraft``: compile, run, tune and benchmark models from the shell, as ``tvmc`` does.

    tilecraft compile model.onnx --target llvm --input-shapes "data:[1,3,224,224]" -o model.tar
    tilecraft run model.tar --inputs in.npz --output out.npz --print-time --repeat 100
    tilecraft tune model.onnx --target llvm -o records.jsonl --trials 200
    tilecraft bench model.onnx --vs onnxruntime
    tilecraft serve --port 9090 --key "$KEY"          # on the device (runtime only)
    tilecraft run model.tar --remote device:9090 --print-time --repeat 20

A thin layer over the Python API (``tilecraft.load``, ``tilecraft.compile``, ``tilecraft.run``, ``tilecraft.tune``):
argument parsing is separate from the work, and every :class:`TilecraftError` (and every
unreadable file) becomes one line ``tilecraft: error: ...`` on stderr. Exit codes: 0 success,
1 a tilecraft error, 2 a bad command line or a feature this build lacks. Heavy modules
(MLIR, onnx, onnxruntime) are imported by the subcommand that needs them, so ``tilecraft run``
works where only numpy is installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TilecraftError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a process Ctrl-C ended
TUNERS = ("xgb", "xgb_rank", "random", "grid")
ANCHORS = ("onnxruntime", "torch")
_SHAPE_ENTRY = re.compile(r"\s*([^\s:,\[\]]+)\s*:\s*\[([^\]]*)\]\s*,?")


class UsageError(TilecraftError):
    """A command-line value is malformed (exit code 2, like argparse's own errors)."""


class UnavailableError(TilecraftError):
    """The command needs a part of tilecraft this build lacks (exit code 2)."""


# ---- argument values --------------------------------------------------------------------

def parse_input_shapes(text: str) -> dict[str, list[int | None]]:
    """``"data:[1,3,224,224] mask:[1,?]"`` (tvmc's syntax; ``?`` or ``-1``: dynamic)."""
    shapes: dict[str, list[int | None]] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _SHAPE_ENTRY.match(text, position)
        if match is None:
            raise UsageError(
                f"--input-shapes: cannot parse {text[position:]!r}; expected name:[d0,d1,...] "
                "entries separated by spaces, e.g. \"data:[1,3,224,224]\""
            )
        name, dims = match.group(1), match.group(2)
        shape: list[int | None] = []
        for dim in (d.strip() for d in dims.split(",") if d.strip()):
            if dim in ("?", "-1"):
                shape.append(None)
            elif dim.isdigit():
                shape.append(int(dim))
            else:
                raise UsageError(f"--input-shapes: dimension {dim!r} of {name!r} is not a number or '?'")
        shapes[name] = shape
        position = match.end()
    if not shapes:
        raise UsageError("--input-shapes: no shapes given")
    return shapes


def parse_tasks(text: str) -> "list[int] | str":
    """``list`` or task indexes ``"0,3-5"`` (as printed by ``--tasks list``)."""
    if text.strip() == "list":
        return "list"
    indexes: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise UsageError(f"--tasks: {part!r} is not an index or a range like 3-5 (or 'list')")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise UsageError(f"--tasks: empty range {part!r}")
        indexes.extend(range(first, last + 1))
    return sorted(set(indexes))


def _positive(name: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
        return value

    return convert


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1.5h`` -> seconds (positive and finite)."""
    value, unit = text.strip(), "s"
    if value and value[-1].lower() in _DURATION_UNITS:
        value, unit = value[:-1], value[-1].lower()
    try:
        seconds = float(value) * _DURATION_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a duration like 90s, 30m or 1h, got {text!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"a positive duration, got {text!r}")
    return seconds


def parse_offload(text: str) -> tuple[str, ...]:
    """``"blas"`` or ``"blas,other"`` -> backend names (checked when the options are built)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


# A leading backend name of a composite target: an identifier and a comma.
_COMPOSITE_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*,(.*)", re.DOTALL)


def split_composite_target(text: str) -> tuple[str, tuple[str, ...]]:
    """tvmc's composite targets: ``"blas, llvm -mcpu=..."`` is the target ``llvm -mcpu=...``
    with the backends before it offloaded to, in order.

    Only leading bare names (backend names are identifiers) are split off, so a target's
    own commas stay in it: ``"blas, llvm -mattr=+avx2,+fma"`` is ``blas`` and the target
    ``llvm -mattr=+avx2,+fma``."""
    backends: list[str] = []
    rest = text
    while (head := _COMPOSITE_HEAD.fullmatch(rest)) is not None:
        backends.append(head.group(1))
        rest = head.group(2)
    if backends and not rest.strip():
        raise UsageError(f"--target {text!r}: a composite target ends with the target itself, "
                         f"as in \"{', '.join(backends)}, llvm\"")
    return (rest.strip() if backends else text), tuple(backends)


# ---- the parser -------------------------------------------------------------------------

MODEL_FORMATS = ("onnx", "torch", "torchscript", "keras", "tflite", "mlir")  # frontend/formats.py


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilecraft",
        description="Compile, run, tune and benchmark models with tilecraft (a tvmc-style CLI).",
    )
    parser.add_argument("--verbose", action="store_true", help="print full error messages and tracebacks")
    commands = parser.add_subparsers(dest="command", metavar="{compile,run,tune,bench,serve,keygen}")
    commands.required = True

    def model_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("model", help="a model file: ONNX (.onnx), torch.export (.pt2), "
                         "TorchScript (.pt), Keras (.keras, .h5), TFLite (.tflite) or MLIR (.mlir)")
        sub.add_argument("--target", default="llvm",
                         help="'llvm' (this CPU), 'llvm -mcpu=... -mattr=...', "
                              "'llvm -mtriple=aarch64-linux-gnu', 'c' (C99 sources, docs/c-target.md), "
                              "'cuda -arch=sm_80', or a target registered with tilecraft.register_target "
                              "(default: llvm)")
        sub.add_argument("--offload", type=parse_offload, default=(), metavar="BACKENDS",
                         help="offload matched ops to backends, comma-separated (e.g. blas); "
                              "tvmc-style, --target \"blas, llvm\" says the same")
        sub.add_argument("--input-shapes", type=parse_input_shapes, metavar="SHAPES",
                         help="override input shapes: \"name:[1,3,224,224] other:[1,?]\"")
        sub.add_argument("--model-format", choices=MODEL_FORMATS, default=None,
                         help="the model file's format when its suffix does not say it "
                              "(default: from the suffix, checked against the content)")
        sub.add_argument("--no-cache", dest="cache", action="store_false", default=None,
                         help="compile even when the compile cache holds this model "
                              "($TILECRAFT_CACHE_DIR; packages are always built)")

    compile_ = commands.add_parser("compile", help="compile a model into a deployable package",
                                   description="Compile a model into a package (model.tar): a "
                                   "shared library, a manifest and the weights.")
    model_options(compile_)
    compile_.add_argument("--tuning-records", metavar="FILE", help="records from `tilecraft tune`")
    compile_.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=3,
                          help="LLVM optimization level (default 3)")
    compile_.add_argument("--no-runtime-checks", dest="runtime_checks", action="store_false",
                          help="leave out the run-time checks of indices, dynamic sizes and "
                               "allocations (docs/robustness.md)")
    compile_.add_argument("--fast-math", dest="fast_math", action="store_true",
                          help="f32 tanh, exp, erf, sigmoid and GELU as fast approximations "
                               "(errors: docs/performance.md, \"Fast math\")")
    compile_.add_argument("--checked", action="store_true",
                          help="a checked build: every memory access verified at run time, a violation "
                               "is an error naming the op (docs/robustness.md)")
    compile_.add_argument("--precision", choices=("f32", "bf16", "int8"), default="f32",
                          help="bf16 weights or an int8 model quantized from the float one; prints an "
                               "accuracy report against the f32 build (docs/precision.md)")
    compile_.add_argument("--calibration", metavar="NPZ",
                          help="int8: calibration inputs by input name (.npz); default: dynamic quantization")
    compile_.add_argument("--max-error", type=float, metavar="REL",
                          help="refuse a reduced-precision build whose relative error exceeds REL")
    compile_.add_argument("--dump-ir", metavar="DIR", help="write the IR after every stage into DIR")
    compile_.add_argument("--profile", action="store_true",
                          help="also build the per-kernel profiling variant (for `run --profile`)")
    compile_.add_argument("-o", "--output", default="module.tar",
                          help="package path (default module.tar); for a CUDA target, a directory "
                          "for the kernels' .ptx/.cubin files")
    compile_.add_argument("--sign", metavar="KEYFILE",
                          help="sign the package with this key (`tilecraft keygen`); `run --trust` and "
                               "`serve --trust` then refuse it if changed (docs/robustness.md)")
    compile_.add_argument("--report-sizes", action="store_true",
                          help="--target c: cross-compile model.c for Cortex-M4F, rv32imafc and rv64gc "
                          "(zig cc) and print code size and static RAM per target")
    compile_.set_defaults(handler=command_compile)

    run = commands.add_parser("run", help="run a compiled package",
                              description="Run a package on inputs from an .npz file (random "
                              "inputs when none are given).")
    run.add_argument("package", help="a package written by `tilecraft compile`")
    run.add_argument("--inputs", metavar="NPZ", help="input arrays by input name (.npz)")
    run.add_argument("--output", metavar="NPZ", help="write the outputs to this .npz file")
    run.add_argument("--print-time", action="store_true", help="print the execution time summary")
    run.add_argument("--repeat", type=_positive("--repeat"), default=1, help="timed measurements (default 1)")
    run.add_argument("--number", type=_positive("--number"), default=1,
                     help="calls averaged in each measurement (default 1)")
    run.add_argument("--profile", action="store_true",
                     help="print per-kernel times (package compiled with --profile)")
    run.add_argument("--print-top", type=_positive("--print-top"), metavar="N",
                     help="print the N largest scores (and their indexes) of the first output "
                          "(of its first item for a batch)")
    run.add_argument("--remote", metavar="HOST:PORT",
                     help="upload the package to a tilecraft server and run it there "
                          "(`tilecraft serve` on the device)")
    run.add_argument("--key", help="the server's shared key (default: $TILECRAFT_RPC_KEY)")
    run.add_argument("--trust", metavar="KEYFILE",
                     help="run the package only if it is signed with this key and unchanged since")
    run.add_argument("--tls-ca", metavar="PEM",
                     help="with --remote: connect over TLS, trusting the server's certificate "
                          "issued by this CA (or self-signed: the certificate itself)")
    run.set_defaults(handler=command_run)

    tune = commands.add_parser("tune", help="search schedules, write tuning records",
                               description="Tune the model's ops and write the records that "
                               "`tilecraft compile --tuning-records` applies.")
    model_options(tune)
    tune.add_argument("-o", "--output", metavar="FILE",
                      help="records file (.jsonl), appended to; a run resumes from the measurements "
                           "already in it (a killed run: the same command again); required unless --tasks list")
    tune.add_argument("--precision", choices=("f32", "bf16", "int8"), default="f32",
                      help="bf16 or int8: tune the dot-product kernels of that build (their register tile "
                           "and task split; docs/tuning.md) instead of the f32 build's ops")
    tune.add_argument("--calibration", metavar="NPZ",
                      help="int8: the calibration inputs `compile --calibration` will get (.npz; static "
                           "quantization makes the convolutions kernels too); default: dynamic quantization")
    tune.add_argument("--trials", type=_positive("--trials"), default=64,
                      help="measured candidates in total, the defaults included (default 64)")
    tune.add_argument("--trials-per-task", type=int, default=0, metavar="N",
                      help="the minimum every task gets before the task scheduler hands the rest "
                      "to the tasks with the largest expected gain (default 0)")
    tune.add_argument("--time-budget", type=parse_duration, metavar="DURATION",
                      help="stop searching after this long (90s, 30m, 1h)")
    tune.add_argument("--tuner", choices=TUNERS, default="xgb", help="search strategy (default xgb)")
    tune.add_argument("--early-stopping", type=_positive("--early-stopping"), metavar="N",
                      help="stop a task after N trials without improvement")
    tune.add_argument("--prior-records", metavar="FILE",
                      help="another records file to resume from (its configs are not measured again)")
    tune.add_argument("--cost-model", metavar="FILE",
                      help="warm-start from the cost model another run saved (<records>.costmodel.npz; "
                           "default: the one beside -o, if any)")
    tune.add_argument("--no-transfer", action="store_true",
                      help="no warm start and no cost model saved beside the records")
    tune.add_argument("--report", metavar="FILE",
                      help="write the tuning report: FILE.html (table + figure) or FILE.png")
    tune.add_argument("--timeout", type=float, default=10.0, help="seconds per measurement (default 10)")
    tune.add_argument("--batch-size", type=_positive("--batch-size"), default=8, metavar="N",
                      help="candidates proposed per tuner step (default 8)")
    tune.add_argument("--validate-top", type=int, default=4, metavar="N",
                      help="re-measure each task's N best configs and the default side by side "
                           "after its search; 0: no validation (default 4)")
    tune.add_argument("--seed", type=int, default=0, help="seed of the tuners' random choices (default 0)")
    tune.add_argument("--no-end-to-end", action="store_true",
                      help="skip compiling and timing the model default vs tuned after the search")
    tune.add_argument("--no-headroom", action="store_true",
                      help="weigh tasks by their time alone, not by their gap to their roofline bound (FMA peak or bandwidth)")
    tune.add_argument("--tasks", type=parse_tasks, metavar="list|0,3-5",
                      help="'list' prints the tasks; indexes restrict tuning to them")
    tune.add_argument("--runner", default="local", metavar="local|remote://HOST:PORT|ray|ray://HOST:PORT",
                      help="where candidates are timed: this machine (default), a tilecraft "
                           "server (built here), or a Ray cluster, local or joined (built and "
                           "timed on its nodes; pip install 'tilecraft[distributed]')")
    tune.add_argument("--key", help="the remote runner's server key (default: $TILECRAFT_RPC_KEY)")
    tune.set_defaults(handler=command_tune)

    bench = commands.add_parser("bench", help="compile and time against onnxruntime / torch",
                                description="Compile a model, check its outputs against the "
                                "anchors and print median latencies and ratios, in one run.")
    model_options(bench)
    bench.add_argument("--vs", default="onnxruntime", metavar="ANCHORS",
                       help=f"comma-separated anchors among {', '.join(ANCHORS)} (default onnxruntime)")
    bench.add_argument("--tuning-records", metavar="FILE", help="records from `tilecraft tune`")
    bench.add_argument("--repeat", type=_positive("--repeat"), default=10,
                       help="paired rounds, each a block of calls per runtime (default 10)")
    bench.set_defaults(handler=command_bench)

    from ..runtime import server

    serve = commands.add_parser("serve", help="serve remote runs of packages (on a device)",
                                description="Serve uploads and timed runs of packages to "
                                "`tilecraft run --remote` and tilecraft.remote.connect; needs "
                                "numpy and the tilecraft runtime only.")
    server.add_arguments(serve)
    serve.set_defaults(handler=command_serve)

    keygen = commands.add_parser("keygen", help="write a new key for signing packages",
                                 description="Write a new random 32-byte key (hex) for "
                                 "`compile --sign` and `run/serve --trust`, readable by its owner only.")
    keygen.add_argument("keyfile", help="the file to create (an existing one is not overwritten)")
    keygen.set_defaults(handler=command_keygen)
    return parser


# ---- the commands -----------------------------------------------------------------------

def _compile_options(args: argparse.Namespace, **settings: Any) -> Any:
    """The :class:`CompileOptions` the command line asks for: one object for compile, bench
    and tune, as the Python API takes it."""
    from ..compiler.options import CompileOptions

    return CompileOptions(target=args.target, tuning_records=getattr(args, "tuning_records", None),
                          opt_level=getattr(args, "opt_level", 3), offload=getattr(args, "offload", ()),
                          runtime_checks=getattr(args, "runtime_checks", True),
                          fast_math=getattr(args, "fast_math", False), cache=getattr(args, "cache", None),
                          **({"checked": True} if getattr(args, "checked", False) else {}), **settings)


def command_compile(args: argparse.Namespace) -> int:
    import tilecraft
    from ..pipelines.target_registry import target_plugin

    model = tilecraft.load(args.model, shape_dict=args.input_shapes, model_format=args.model_format)
    target = tilecraft.Target.parse(args.target)
    plugin = target_plugin(target.kind)
    if not plugin.runs_in_process:
        return _compile_artifact(args, model, target)
    if args.report_sizes:
        raise UsageError("--report-sizes reports the C target's objects: use it with --target c")
    try:
        plugin.check_output(args.output)
    except TilecraftError as error:
        raise UsageError(str(error)) from None
    package = plugin.is_package_output(args.output)
    start = time.perf_counter()
    # Given only when set: CompileOptions refuses --calibration or --max-error without a precision.
    reduced = {name: value for name, value in (("precision", args.precision), ("calibration", args.calibration),
                                                ("max_error", args.max_error)) if value not in (None, "f32")}
    compiled = tilecraft.compile(model, _compile_options(
        args, package_path=args.output if package else None, profile=args.profile,
        keep_ir=args.dump_ir is not None, **reduced))
    seconds = time.perf_counter() - start
    if getattr(compiled, "accuracy", None) is not None:
        print(compiled.accuracy)
    if not package:
        print(plugin.write_output(compiled, args.output))
    elif args.sign:
        from ..runtime.package_signing import sign_package

        sign_package(args.output, args.sign)
    if args.dump_ir:
        directory = Path(args.dump_ir)
        directory.mkdir(parents=True, exist_ok=True)
        for index, stage in enumerate(compiled.stages):
            (directory / f"{index:02d}-{stage}.mlir").write_text(compiled.ir(stage))
        print(f"IR after each stage written to {directory}/")
    print(f"compiled {model.name} for '{compiled.target}' in {seconds:.1f} s -> {args.output}")
    return 0


def _compile_artifact(args: argparse.Namespace, model: Any, target: Any) -> int:
    """A target that does not run in process (``--target c``: a tar of model.c, model.h,
    main.c and a Makefile); with ``--report-sizes``, its cross-compiled objects' sizes."""
    import tilecraft
    from ..pipelines.target_registry import target_plugin

    plugin = target_plugin(target.kind)
    if args.profile or args.dump_ir or args.tuning_records or args.offload or args.sign:
        raise UsageError(f"--target {target} takes none of --profile, --dump-ir, --tuning-records, "
                         "--offload, --sign")
    start = time.perf_counter()
    compiled = tilecraft.compile(model, _compile_options(args, package_path=args.output))
    seconds = time.perf_counter() - start
    print(f"compiled {model.name} for '{target}' in {seconds:.1f} s -> {args.output}")
    print(plugin.write_output(compiled, args.output))
    if args.report_sizes:
        for line in plugin.report_sizes(compiled):
            print(line)
    return 0


def command_run(args: argparse.Namespace) -> int:
    from ..runtime.run import run
    from ..runtime.package import load

    timed = args.print_time
    if args.remote is not None:
        result = _run_remote(args)
    else:
        package = load(args.package, trust=args.trust)
        result = run(package, args.inputs, repeat=args.repeat if timed else 0, number=args.number,
                     profile=args.profile)
    if args.output:
        result.save(args.output)
        print(f"outputs written to {args.output} ({', '.join(result.outputs)})")
    elif not (timed or args.profile or args.print_top):
        for name, array in result.outputs.items():
            print(f"{name}: {array.dtype} {list(array.shape)}\n{np.array2string(array, threshold=20)}")
    if args.print_top:
        name, array = next(iter(result.outputs.items()))
        if array.ndim >= 2:  # a batch: the first item's scores, as tvmc shows them
            name, array = f"{name}[0]", array[0]
        flat = array.reshape(-1)
        top = np.argsort(flat)[::-1][: args.print_top]
        print(f"top {len(top)} of {name}: " + ", ".join(f"[{i}] {flat[i]:.4g}" for i in top))
    if timed:
        print(result.format_times())
    if args.profile:
        print(result.format_profile())
    return 0


def _run_remote(args: argparse.Namespace) -> Any:
    """Upload the package to ``--remote``, run (and time) it there: a :class:`RunResult`."""
    from ..runtime import remote

    if args.profile:
        raise UsageError("--profile runs the package here: it cannot be combined with --remote")
    if args.trust:
        raise UsageError("--trust checks a package loaded here; with --remote the server checks it "
                         "(`tilecraft serve --trust KEYFILE`)")
    session = remote.connect(args.remote, key=args.key, tls_ca=args.tls_ca)
    package = session.upload(args.package)
    print(f"uploaded {package} to {session.address} ({session.info()['machine']})")
    return session.time(package, args.inputs, repeat=args.repeat if args.print_time else 0,
                        number=args.number)


def command_keygen(args: argparse.Namespace) -> int:
    from ..runtime.package_signing import generate_key

    path = generate_key(args.keyfile)
    print(f"key written to {path} (keep it secret: whoever holds it can sign packages)")
    return 0


def command_serve(args: argparse.Namespace) -> int:
    from ..runtime import server

    return server.serve(args)


def _tuning_api() -> Any:
    try:
        import tilecraft.tuning as tuning
    except ImportError as error:
        raise UnavailableError(f"tuning is not available in this build ({error})") from None
    if not hasattr(tuning, "tune"):
        raise UnavailableError("tuning is not available in this build")
    return tuning


def _runner_options(runner: str, key: str | None) -> dict[str, Any]:
    """``--runner`` as TuneOptions fields: ``local`` (none), ``ray`` (a local Ray cluster,
    ``ray="local"``), ``ray://HOST:PORT`` (a running one), else a tilecraft server's address."""
    if runner == "local":
        return {}
    if runner == "ray":
        return {"ray": "local"}
    if runner.startswith("ray"):
        return {"ray": runner}  # ray://HOST:PORT, or a malformed one TuneOptions names
    return {"remote": runner, "remote_key": key}


def _require_static_inputs(model: Any) -> None:
    """Tuning times kernels of fixed sizes: an input left dynamic (and not fixed by
    ``--input-shapes``) is a usage error naming the flag and its value for this model, not
    the API's "no tunable op ... shape_dict=" deep in task extraction."""
    dynamic = [(info.name, info.shape) for info in model.inputs
               if info.shape is not None and any(d is None for d in info.shape)]
    if not dynamic:
        return
    shown = ", ".join(f"{name} [{','.join('?' if d is None else str(d) for d in shape)}]" for name, shape in dynamic)
    example = " ".join(f"{name}:[{','.join('1' if d is None else str(d) for d in shape)}]"
                       for name, shape in dynamic)
    raise UsageError(f"tune: input(s) with dynamic dimensions: {shown}; tuning needs the sizes the "
                     f"model will run at: give them with --input-shapes, e.g. --input-shapes \"{example}\"")


def command_tune(args: argparse.Namespace) -> int:
    import tilecraft

    tuning = _tuning_api()
    model = tilecraft.load(args.model, shape_dict=args.input_shapes, model_format=args.model_format)
    # Given only when set: CompileOptions refuses a calibration without a reduced precision.
    reduced = {name: value for name, value in (("precision", args.precision), ("calibration", args.calibration))
               if value not in (None, "f32")}
    options = _compile_options(args, shape_dict=model.shape_dict, **reduced)
    search = None
    if args.tasks != "list":  # the flags checked first: they cost nothing, the tasks a lowering
        if args.output is None:
            raise UsageError("tune: -o/--output FILE is required (the records file), except with --tasks list")
        search = tuning.TuneOptions(
            trials=args.trials, trials_per_task=args.trials_per_task, time_budget=args.time_budget,
            tuning_records=args.output, tuner=args.tuner,
            early_stopping=args.early_stopping, prior_records=args.prior_records,
            timeout=args.timeout, cost_model=args.cost_model,
            batch_size=args.batch_size, validate_top=args.validate_top, seed=args.seed,
            end_to_end=not args.no_end_to_end, headroom=not args.no_headroom,
            transfer=not args.no_transfer, report=args.report, **_runner_options(args.runner, args.key))
    _require_static_inputs(model)
    if args.tasks is not None:
        # The tasks tune itself finds (offloaded ops left out, a reduced precision's kernels):
        # the indexes printed are the indexes tuned.
        tasks = tuning.model_tasks(model.source, options)
        if search is None:
            width = max(len("task"), *(len(task.name) for task in tasks))
            print(f"{'index':>5}  {'task':<{width}} {'kind':<18} {'count':>5} {'MFLOP':>12}")
            for index, task in enumerate(tasks):
                print(f"{index:>5}  {task.name:<{width}} {task.kind:<18} {task.count:>5} {task.flops / 1e6:12.1f}")
            return 0
        beyond = [i for i in args.tasks if i >= len(tasks)]
        if beyond:
            raise UsageError(f"--tasks: no task {beyond[0]}; the model has {len(tasks)} (0-{len(tasks) - 1}), see --tasks list")
        search = dataclasses.replace(search, tasks=[tasks[i] for i in args.tasks])
    try:
        result = tuning.tune(model.source, options, search)
    except KeyboardInterrupt:
        # Every measurement is on disk as it ends: say how to go on from them.
        # On a line of its own: the progress bar's line is left open.
        print(f"\ntilecraft: interrupted; the measurements so far are in {args.output}: the same "
              "command resumes from them", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(result.summary())
    print(f"tuning records written to {args.output}")
    return 0


def _onnxruntime_anchor(model: Any, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
    try:
        import onnxruntime
    except ImportError:
        raise UnavailableError("the onnxruntime anchor needs onnxruntime (pip install -e '.[onnx]')") from None
    from ..frontend.onnx.model import override_input_shapes

    options = onnxruntime.SessionOptions()
    proto = override_input_shapes(model.source, model.shape_dict)
    try:
        session = onnxruntime.InferenceSession(proto.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime's own Fail/InvalidGraph: the anchor is unavailable
        raise UnavailableError(f"onnxruntime cannot run this model: {_one_line(error)}") from error
    return lambda: session.run(None, inputs)


def _torch_anchor(model: Any, arrays: list[np.ndarray]) -> Callable[[], Any]:
    import torch

    module = model.torch_program.module()
    tensors = [torch.from_numpy(a) for a in arrays]

    def call() -> list[np.ndarray]:
        with torch.no_grad():
            outputs = module(*tensors)
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        return [o.numpy() for o in outputs]

    return call


# Sleep before each runtime's block of calls in `bench`: onnxruntime's and OpenBLAS's pool
# threads spin for a while after a call returns, and would be timed as the next runtime's load.
BENCH_PAUSE_S = 0.05


def command_bench(args: argparse.Namespace) -> int:
    import tilecraft
    from ..runtime.run import random_inputs
    from ..runtime.significance import compare, median_ms, paired_rounds

    anchors = [a.strip() for a in args.vs.split(",") if a.strip()]
    unknown = [a for a in anchors if a not in ANCHORS]
    if unknown:
        raise UsageError(f"--vs: unknown anchor(s) {unknown}; choose among {', '.join(ANCHORS)}")
    model = tilecraft.load(args.model, shape_dict=args.input_shapes, model_format=args.model_format)
    if "torch" in anchors and model.torch_program is None:
        raise UsageError(
            "the torch anchor needs a PyTorch model (a .pt2 file from torch.export.save); "
            "compare ONNX models with onnxruntime (--vs onnxruntime)"
        )
    if "onnxruntime" in anchors and isinstance(model.source, (str, bytes)):
        raise UsageError("the onnxruntime anchor runs ONNX models; use --vs torch for a .pt2 "
                         "program, --vs '' to time an MLIR model alone")
    start = time.perf_counter()
    compiled = tilecraft.compile(model, _compile_options(args, keep_ir=False))
    print(f"compiled {model.name} for '{compiled.target}' in {time.perf_counter() - start:.1f} s")
    inputs = random_inputs(compiled)
    print("inputs: " + ", ".join(f"{k} {v.dtype} {list(v.shape)}" for k, v in inputs.items()))
    ours = compiled(**inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    runners: dict[str, Callable[[], Any]] = {"tilecraft": lambda: compiled(**inputs)}
    for anchor in anchors:
        call = (_onnxruntime_anchor(model, inputs) if anchor == "onnxruntime"
                else _torch_anchor(model, [inputs[spec.name] for spec in compiled.signature.arguments]))
        reference = [np.asarray(r) for r in call()]
        errors = [
            float(np.max(np.abs(a.astype(np.float64) - b))) / (float(np.max(np.abs(b))) or 1.0)
            for a, b in zip(ours, reference) if a.size and a.dtype.kind == "f"
        ]
        if errors:
            print(f"outputs vs {anchor}: max error {max(errors):.2e} of the largest magnitude")
        runners[anchor] = call
    # Blocks of calls in paired rounds, a pause before each block (onnxruntime's and OpenBLAS's
    # pools spin on after a call returns): runtime/significance.py.
    samples = paired_rounds(runners, args.repeat, min_sample_s=0.02, pause_s=BENCH_PAUSE_S)
    print(f"{'runtime':<14} {'median (ms)':>12} {'min (ms)':>10}")
    for name, times in samples.items():
        print(f"{name:<14} {median_ms(times):12.3f} {min(times) * 1e3:10.3f}")
    for anchor in anchors:
        print(comparison_line(anchor, compare(samples[anchor], samples["tilecraft"])))
    return 0


def comparison_line(anchor: str, result: Any) -> str:
    """``bench``'s verdict on tilecraft against ``anchor`` (a :class:`Comparison` of the
    anchor's time over tilecraft's): the ratio of tilecraft's time to the anchor's with the
    interval *of that ratio* (the comparison's, inverted), or, where the interval does not
    clear the noise floor, "no measurable difference" and the interval alone: a ratio there
    would be noise presented as a result (issue #44's rule for tune's speedups)."""
    interval = (f"{result.confidence:.0%} interval {1.0 / result.high:.2f}-{1.0 / result.low:.2f}, "
                f"{result.rounds} paired rounds; below 1: tilecraft is faster")
    if not result.significant:
        return f"ratio tilecraft / {anchor}: no measurable difference ({interval})"
    return f"ratio tilecraft / {anchor}: {1.0 / result.ratio:.2f} (tilecraft {result.verdict()} than {anchor}; {interval})"


# ---- entry point ------------------------------------------------------------------------

def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    if len(lines) > 1:
        text += f" (+{len(lines) - 1} more lines; rerun with --verbose)"
    return text


def _one_line_warnings() -> Callable[..., None]:
    """``warnings.showwarning`` for the CLI: ``tilecraft: warning: ...`` on one line (not
    Python's two lines naming the source file and line of the ``warnings.warn`` call, which
    read as a crash), each text once per command (a records file with a corrupt line is read
    by several steps of one ``tune``, and said so each time)."""
    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = _one_line(message if isinstance(message, Warning) else Warning(message))
        if text not in shown:
            shown.add(text)
            print(f"tilecraft: warning: {text}", file=sys.stderr)

    return show


def run_cli(argv: Sequence[str]) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit code (no ``sys.exit``)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if hasattr(args, "offload"):
            args.target, composite = split_composite_target(args.target)
            args.offload = (*composite, *args.offload)
    except UsageError as error:  # raised by the type= converters above and the composite split
        parser.print_usage(sys.stderr)
        print(f"tilecraft: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings()
            return args.handler(args)
    except (UsageError, UnavailableError) as error:
        print(f"tilecraft: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TilecraftError as error:
        if args.verbose:
            raise
        print(f"tilecraft: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, json.JSONDecodeError) as error:
        if args.verbose:
            raise
        print(f"tilecraft: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_ERROR


def main() -> None:
    try:
        sys.exit(run_cli(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        print("tilecraft: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
