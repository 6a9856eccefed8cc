"""The GPU check for a lent CUDA machine, in two halves: ``prepare`` here, ``run`` there.

Here (with the project's venv; MLIR, LLVM and ptxas are needed to compile, no GPU)::

    echo /.cuda_check/ >> .git/info/exclude
    .venv/bin/python benchmarks/cuda_device_check.py prepare --arch sm_90 -o .cuda_check
    .venv/bin/python benchmarks/cuda_device_check.py prepare --arch sm_90 --models resnet_basic,gpt2 -o .cuda_check
    .venv/bin/python benchmarks/cuda_device_check.py prepare --models bert,vit,swin \
        --schedule-options "warp-reduce=1" -o .cuda_check      # a schedule option's numbers

builds each public-suite architecture (benchmarks/public_suite.py, tiny variants unless
``--full``) as users export it, compiles a CUDA package of it for the lent GPU's ``--arch``
(``model.tar``: host code with tilecraft's CUDA runtime linked in, the kernels as cubins,
the weights), draws seeded inputs and computes onnxruntime's CPU outputs for them
(``inputs.npz``, ``expected.npz``). That folder is what travels: the packages and the
arrays, nothing else (no MLIR, no LLVM). It prints the folder's size and keeps it under
``--limit-mib`` (default 48: the device tool carries 64 MiB with the working tree, which is
about 9 MiB) by leaving the largest packages out, named, for a second folder and call.

There (Python with numpy; torch with CUDA if it is installed, for the comparison)::

    # run tool: carry [".cuda_check"], timeout_s 540
    PYTHONUNBUFFERED=1 python3 benchmarks/cuda_device_check.py run .cuda_check --out $OUT

loads each package with ``tilecraft.runtime.package`` (which imports no MLIR), so the
kernels, the ``mgpu*`` runtime over the real driver, the weights kept on the device and the
copies are all exercised; compares the outputs with onnxruntime's (rtol/atol 1e-3 of the
output's largest magnitude, as the public suite); times the first call (weights uploaded)
and the median of ``--repeat`` warm calls (numpy in, numpy out: the copies included); and,
where ``torch.cuda.is_available()``, times the same architecture in PyTorch eager on the GPU
(median of synchronized calls on device tensors: no copies; its weights are the same
seeded ones, so its outputs are compared too, for information). Then the device-memory
items: the same call with device arrays (``Package.device_array``: inputs copied device to
device) must equal the host call bit for bit, timed too; so must the call with device
outputs (``Package.device_call``: results copied device to device into preallocated device
arrays, ``out=``, nothing to the host; timed, device arrays in and out); the runtime's
resident weight and activation
arena bytes are reported and must be 0 after ``close``; where torch has CUDA, CUDA tensors go
in through ``from_dlpack``, a device array comes out through ``torch.from_dlpack``, and a
device call's outputs are read as torch CUDA tensors (``dlpack`` in the report). The C API
(``c_runtime/``, built by prepare) runs each package too: host buffers must give the Python
call's outputs bit for bit, device buffers in and out the host-buffer run's (``c_api``).
Writes ``report.json``
and ``report.txt`` to ``--out``; exit status 1 when a model failed or mismatched.
It stops starting models after ``--budget-s`` (default 420 s) so the whole run ends well
inside the device tool's 8-minute plan.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RTOL = 1e-3
C_RUNTIME = "c_runtime/libtilecraft_runtime.so"  # in the folder: the C API, built by prepare


# ---- the models -----------------------------------------------------------------------------

#: Issue #47's goal models, full size: ResNet-50 (batch 1, 224x224) and a BERT-base encoder
#: (12 layers, width 768, 12 heads, 128 tokens). Their weights are drawn from four levels
#: (+-1, +-1/2 times the initializer's scale: a valid random network, not a degenerate one) so
#: that the package compresses about 10x with xz and fits the device tool's transfer; a GPU's
#: kernel times do not depend on the values.
GOAL_MODELS = ("resnet50", "bert_base")
ZOO_PREFIX = "zoo:"  # the onnx wheel's light model zoo: zoo:light_resnet50 ...


def _goal_builder(name: str) -> Any:
    sys.path.insert(0, str(HERE))
    import public_suite

    if name == "resnet50":
        return lambda: public_suite.resnet50(tiny=False)
    return lambda: public_suite._transformer(False, tokens=128, dim=768, heads=12, layers=12, causal=False,
                                             vocab=30522, post_norm=True)


def _four_level_weights(module: Any, seed: int) -> None:
    """Every floating-point parameter replaced, in place, by a random choice of
    (-1, -1/2, 1/2, 1) times its initial standard deviation (norm scales keep their value)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    levels = torch.tensor([-1.0, -0.5, 0.5, 1.0])
    with torch.no_grad():
        for parameter in module.parameters():
            scale = float(parameter.std()) if parameter.numel() > 1 else 0.0
            if scale == 0.0:  # constant initializers (norm weights 1, biases 0) stay as they are
                continue
            picks = torch.randint(0, 4, parameter.shape, generator=generator)
            parameter.copy_(levels[picks] * scale)


def build_model(name: str, full: bool) -> tuple[Any, tuple]:
    """The torch module and example inputs of a suite architecture or a goal model, built
    the same way here (prepare) and on the GPU machine (PyTorch's side of the comparison)."""
    sys.path.insert(0, str(HERE))
    import public_suite
    import torch

    if name in GOAL_MODELS:
        torch.manual_seed(0)
        module, inputs = _goal_builder(name)()
        _four_level_weights(module, seed=0)
        return public_suite.calibrate_batch_norm(module, inputs, seed=0), inputs
    return public_suite.build(name, tiny=not full)


def _zoo_model(name: str) -> tuple[bytes, dict[str, Any]]:
    """A light-zoo model's ONNX bytes and seeded inputs for its graph inputs."""
    import numpy as np
    import onnx

    from cuda_coverage import LIGHT_ZOO

    path = Path(LIGHT_ZOO) / f"{name[len(ZOO_PREFIX):]}.onnx"
    if not path.exists():
        raise SystemExit(f"no light-zoo model {name!r} ({path})")
    model = onnx.load(str(path))
    initialized = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for graph_input in model.graph.input:
        if graph_input.name in initialized:
            continue
        shape = [d.dim_value or 1 for d in graph_input.type.tensor_type.shape.dim]
        feeds[graph_input.name] = rng.standard_normal(shape).astype(np.float32)
    return path.read_bytes(), feeds


# ---- here: build what travels ---------------------------------------------------------------

def prepare(args: argparse.Namespace) -> int:
    import numpy as np
    import onnxruntime

    sys.path.insert(0, str(HERE))
    import public_suite
    import tilecraft
    from tilecraft.errors import TilecraftError
    from tilecraft.targets.cuda import cuda_pipeline

    names = list(public_suite.ARCHITECTURES) if args.models == "all" else args.models.split(",")
    if args.models == "zoo":
        from cuda_coverage import LIGHT_ZOO

        names = sorted(ZOO_PREFIX + path.stem for path in Path(LIGHT_ZOO).glob("*.onnx"))
    unknown = [name for name in names if name not in public_suite.ARCHITECTURES and name not in GOAL_MODELS
               and not name.startswith(ZOO_PREFIX)]
    if unknown:
        raise SystemExit(f"unknown architecture(s) {unknown}; choose from {', '.join(public_suite.ARCHITECTURES)}, "
                         f"{', '.join(GOAL_MODELS)}, zoo or {ZOO_PREFIX}<light-zoo model>")
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    index: dict[str, Any] = {"arch": args.arch, "full": args.full, "models": {},
                             "schedule_options": args.schedule_options}
    target_spec = f"cuda -arch={args.arch}"
    pipeline = cuda_pipeline(target_spec, schedule_options=args.schedule_options)
    for name in names:
        started = time.perf_counter()
        try:
            if name.startswith(ZOO_PREFIX):
                onnx_bytes, feeds = _zoo_model(name)
            else:
                module, inputs = build_model(name, args.full)
                onnx_bytes = public_suite.export_onnx(module, inputs)
                feeds = {f"input{i}": x.detach().numpy() for i, x in enumerate(inputs)}
            session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
            expected = session.run(None, feeds)
            target = folder / name
            target.mkdir(exist_ok=True)
            with tempfile.NamedTemporaryFile(suffix=".onnx") as model_file:
                model_file.write(onnx_bytes)
                model_file.flush()
                tilecraft.compile(model_file.name, target=target_spec, pipeline=pipeline,
                                  package_path=target / "model.tar", keep_ir=False)
            if name in GOAL_MODELS:  # four-level weights: xz brings them under the transfer limit
                _compress(target / "model.tar")
            np.savez(target / "inputs.npz", **feeds)
            np.savez(target / "expected.npz", *expected)
            size = sum(f.stat().st_size for f in target.iterdir())
            index["models"][name] = {"bytes": size, "full": args.full or name in GOAL_MODELS}
            print(f"{name:<20} ok      {time.perf_counter() - started:6.1f} s  {size / 2**20:6.2f} MiB", flush=True)
        except (TilecraftError, RuntimeError, ValueError) as error:
            index["models"][name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
            print(f"{name:<20} FAILED  {index['models'][name]['error']}", flush=True)
    index["c_runtime"] = _build_c_runtime(folder)
    built = [name for name, entry in index["models"].items() if "bytes" in entry]
    left_out = _fit(folder, index, args.limit_mib * 2**20)
    (folder / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"{len(built)} of {len(names)} packaged for {args.arch}; {len(built) - len(left_out)} in {folder}/: "
          f"{total / 2**20:.1f} MiB to carry")
    if left_out:
        print(f"left out to stay under {args.limit_mib:g} MiB (largest first): {','.join(left_out)} "
              "(a second call: prepare --models with those names into another folder)")
    return 0 if len(built) == len(names) else 1


def _compress(path: Path) -> None:
    """``path`` as ``path.xz`` (LZMA2 with 4-byte literal positions: f32 weights), ``path`` removed."""
    import lzma

    filters = [{"id": lzma.FILTER_LZMA2, "preset": 2, "lp": 2, "lc": 0, "pb": 2}]  # 11x on four-level weights, fast
    with open(path, "rb") as source, lzma.open(f"{path}.xz", "wb", format=lzma.FORMAT_XZ, filters=filters) as sink:
        shutil.copyfileobj(source, sink, 1 << 24)
    path.unlink()


def _package_path(folder: Path) -> Path:
    """The model's package in ``folder``, decompressed first where it travelled as ``.xz``."""
    import lzma

    path = folder / "model.tar"
    if not path.exists() and (folder / "model.tar.xz").exists():
        with lzma.open(folder / "model.tar.xz") as source, open(path, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 24)
    return path


def _build_c_runtime(folder: Path) -> str | None:
    """The C API's shared library (runtime/c_api, libc only) in ``folder``, for the run's C API
    check of each package; None (that check skipped) without make and a C compiler."""
    if not (shutil.which("make") and shutil.which("cc")):
        print("no make or cc: the C API check is skipped")
        return None
    build = (folder / "c_runtime").resolve()  # make -C runs in runtime/c_api: an absolute path
    made = subprocess.run(["make", "-C", str(HERE.parent / "runtime" / "c_api"), f"BUILD={build}"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        print(f"the C runtime did not build ({made.stderr.strip()[:300]}): the C API check is skipped")
        return None
    for built in build.iterdir():  # only the shared library travels
        if built.name != Path(C_RUNTIME).name:
            built.unlink()
    return C_RUNTIME


def _fit(folder: Path, index: dict[str, Any], limit: float) -> list[str]:
    """Drop the largest packaged models until the folder is under ``limit`` bytes (the device
    tool's transfer limit); returns their names, marked ``left_out`` in ``index``."""
    packaged = {name: entry["bytes"] for name, entry in index["models"].items() if "bytes" in entry}
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    left_out = []
    for name in sorted(packaged, key=packaged.get, reverse=True):
        if total <= limit:
            break
        shutil.rmtree(folder / name)
        total -= packaged[name]
        index["models"][name] = {"left_out": f"{packaged[name] / 2**20:.1f} MiB: over the transfer limit"}
        left_out.append(name)
    return left_out


# ---- there: run, compare, time ----------------------------------------------------------------

def _import_tilecraft() -> Any:
    """``tilecraft.runtime.package`` from this checkout, whatever its folder is called there
    (the repository root is the ``tilecraft`` package), ahead of any installed tilecraft."""
    shim = Path(tempfile.mkdtemp(prefix="tilecraft-shim-"))
    (shim / "tilecraft").symlink_to(HERE.parent, target_is_directory=True)
    sys.path.insert(0, str(shim))
    from tilecraft.runtime import package

    return package


def _matches(got: Any, want: Any) -> tuple[bool, float]:
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False, float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    error = float(np.max(np.abs(got - want))) / scale if scale else 0.0
    return bool(np.allclose(got, want, rtol=RTOL, atol=RTOL * scale)), error


def _median_ms(function: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def _torch_eager(name: str, feeds: dict[str, Any], full: bool, repeat: int, inductor: bool = False) -> dict[str, Any]:
    """PyTorch eager CUDA on the same seeded architecture: the median synchronized call on
    device tensors, and its output (compared for information); with ``inductor``, also
    ``torch.compile``'s (default mode) median and its compile time."""
    try:
        import torch
    except ImportError:
        return {"skipped": "torch not installed"}
    if not torch.cuda.is_available():
        return {"skipped": "torch has no CUDA device"}
    if name.startswith(ZOO_PREFIX):
        return {"skipped": "a light-zoo ONNX model has no PyTorch module"}
    module, _ = build_model(name, full)
    module = module.cuda().eval()
    inputs = [torch.from_numpy(feeds[key]).cuda() for key in sorted(feeds, key=lambda k: int(k[5:]))]

    def call() -> Any:
        with torch.no_grad():
            out = module(*inputs)
        torch.cuda.synchronize()
        return out

    for _ in range(3):
        output = call()
    first = output[0] if isinstance(output, (tuple, list)) else output
    row = {"ms": _median_ms(call, repeat), "output": first.float().cpu().numpy(),
           "device": torch.cuda.get_device_name(0), "capability": "sm_%d%d" % torch.cuda.get_device_capability(0)}
    # PyTorch's default runs convolutions in TF32 (cudnn.allow_tf32); tilecraft's kernels are
    # f32: the eager time with TF32 off too, the like-for-like comparison.
    convolutions_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        call()
        row["ms_f32"] = _median_ms(call, repeat)
    finally:
        torch.backends.cudnn.allow_tf32 = convolutions_tf32
    if inductor:
        row.update(_inductor_in_child(name, full, repeat))
    return row


def _inductor_in_child(name: str, full: bool, repeat: int) -> dict[str, Any]:
    """``torch.compile`` (inductor, default mode) timed in a child process that never imports
    tilecraft (dynamo probes the modules already imported, and tilecraft's lazy attributes
    import MLIR, which the GPU machine does not have)."""
    command = [sys.executable, str(Path(__file__).resolve()), "inductor", name, "--repeat", str(repeat)]
    try:
        done = subprocess.run(command + (["--full"] if full else []), capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired:
        return {"inductor_error": "timed out after 400 s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()][-2:]
        return {"inductor_error": f"exit {done.returncode}: {' ... '.join(t[:200] for t in tail)}"}
    return json.loads(lines[-1])


def inductor(args: argparse.Namespace) -> int:
    """The child of :func:`_inductor_in_child`: prints one JSON line."""
    import torch

    module, inputs = build_model(args.name, args.full)
    module = module.cuda().eval()
    inputs = [x.cuda() for x in inputs]
    compiled = torch.compile(module)

    def call() -> Any:
        with torch.no_grad():
            out = compiled(*inputs)
        torch.cuda.synchronize()
        return out

    started = time.perf_counter()
    call()
    row = {"inductor_compile_s": time.perf_counter() - started}
    for _ in range(3):
        call()
    row["inductor_ms"] = _median_ms(call, args.repeat)
    print(json.dumps(row), flush=True)
    return 0


def _device_memory_checks(package: Any, feeds: dict[str, Any], repeat: int) -> dict[str, Any]:
    """Issue #47's device-memory items on the real driver: the call with device arrays
    (``Package.device_array``: inputs copied device to device) against the host call, its warm
    time, and the bytes the runtime holds (weights, the activation arena) before and after
    ``close``."""
    from tilecraft.runtime import cuda_errors

    row: dict[str, Any] = {}
    device_feeds = {name: package.device_array(value) for name, value in feeds.items()}
    row["device_array_roundtrip"] = np_array_equal_all(device_feeds, feeds)
    # Against a warm host call made right before it, bit for bit (with the test's stand-in driver,
    # which runs no kernel, a first call's outputs differ from a warm one's).
    outputs = package(**feeds)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    got = package(**device_feeds)
    got = got if isinstance(got, tuple) else (got,)
    row["device_array_matches_host_call"] = all(_identical(a, b) for a, b in zip(got, outputs))
    row["device_array_ms"] = _median_ms(lambda: package(**device_feeds), repeat)
    # Device outputs: the same call leaving its results on the device, into arrays it reuses.
    positional = [device_feeds[name] for name in package.input_names]
    out = package.device_call(*positional)
    out = out if isinstance(out, tuple) else (out,)
    row["device_outputs_match_host_call"] = all(_identical(a.to_numpy(), b) for a, b in zip(out, outputs))
    row["device_outputs_ms"] = _median_ms(lambda: package.device_call(*positional, out=list(out)), repeat)
    row["resident_bytes"] = cuda_errors.resident_bytes(package._library)
    row["arena_bytes"] = cuda_errors.arena_bytes(package._library)
    package.close()
    row["released_on_close"] = (cuda_errors.resident_bytes(package._library),
                                cuda_errors.arena_bytes(package._library)) == (0, 0)
    return row


class _Error(ctypes.Structure):
    """tilecraft_error (runtime/c_api/tilecraft_runtime.h)."""

    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class _Tensor(ctypes.Structure):
    """tilecraft_tensor."""

    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.c_int64 * 16)]


class _TensorInfo(ctypes.Structure):
    """tilecraft_tensor_info."""

    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


def _c_api_check(library: ctypes.CDLL, path: Path, package: Any, feeds: dict[str, Any],
                 outputs: tuple[Any, ...]) -> dict[str, Any]:
    """The package through the C API (issue #47's "loadable from the C API"): a run with host
    buffers must equal the Python call bit for bit, and a run with device buffers in and out
    (the package's entry copies each result straight into the caller's buffer) must equal the
    host-buffer run. The device buffers come from the Python package's runtime: every copy of
    tilecraft's CUDA runtime uses device 0's primary context, so its pointers are valid there."""
    import numpy as np
    from tilecraft.runtime.device_array import empty

    library.tilecraft_model_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                             ctypes.POINTER(_Error)]
    library.tilecraft_model_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                            ctypes.POINTER(_Tensor), ctypes.c_size_t, ctypes.POINTER(_Error)]
    library.tilecraft_model_output.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_TensorInfo)]
    library.tilecraft_model_input.argtypes = library.tilecraft_model_output.argtypes
    library.tilecraft_model_close.argtypes = [ctypes.c_void_p]
    model, error = ctypes.c_void_p(), _Error()
    if library.tilecraft_model_open(str(path).encode(), None, ctypes.byref(model), ctypes.byref(error)) != 0:
        return {"error": f"open: {error.message.decode(errors='replace')}"}
    try:
        def tensors(arrays: list[Any], infos: list[_TensorInfo]) -> Any:
            row = (_Tensor * max(len(arrays), 1))()
            for tensor, array, info in zip(row, arrays, infos):
                pointer = array.pointer if hasattr(array, "pointer") else array.ctypes.data
                tensor.data, tensor.size_bytes, tensor.dtype = pointer, array.nbytes, info.dtype
                tensor.rank = len(array.shape)
                tensor.shape[:len(array.shape)] = array.shape
            return row

        def infos(count: int, read: Any) -> list[_TensorInfo]:
            found = [_TensorInfo() for _ in range(count)]
            for index, info in enumerate(found):
                read(model, index, ctypes.byref(info))
            return found

        inputs = [feeds[name] for name in package.input_names]
        input_infos = infos(len(inputs), library.tilecraft_model_input)
        output_infos = infos(len(outputs), library.tilecraft_model_output)

        def run(arrays: list[Any], results: list[Any]) -> str | None:
            status = library.tilecraft_model_run(model, tensors(arrays, input_infos), len(arrays),
                                                 tensors(results, output_infos), len(results), ctypes.byref(error))
            return None if status == 0 else error.message.decode(errors="replace")

        host = [np.empty_like(np.asarray(output)) for output in outputs]
        failure = run(inputs, host) or run(inputs, host)  # the second: weights and arena in place
        if failure:
            return {"error": f"run (host buffers): {failure}"}
        row: dict[str, Any] = {"host_matches_python": all(_identical(a, b) for a, b in zip(host, outputs))}
        device_inputs = [package.device_array(array) for array in inputs]
        device_outputs = [empty(np.shape(output), np.asarray(output).dtype, runtime=package._library)
                          for output in outputs]
        failure = run(device_inputs, device_outputs)
        if failure:
            return {**row, "error": f"run (device buffers): {failure}"}
        row["device_matches_host"] = all(_identical(a.to_numpy(), b) for a, b in zip(device_outputs, host))
        return row
    finally:
        library.tilecraft_model_close(model)


def _identical(got: Any, want: Any) -> bool:
    """The same values, bit for bit, NaN included: the same kernels ran on the same inputs."""
    import numpy as np

    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.tobytes() == want.tobytes()


def np_array_equal_all(device_feeds: dict[str, Any], feeds: dict[str, Any]) -> bool:
    import numpy as np

    return all(np.array_equal(device_feeds[name].to_numpy(), feeds[name]) for name in feeds)


def _torch_dlpack(package: Any, feeds: dict[str, Any], outputs: tuple[Any, ...]) -> dict[str, Any]:
    """DLPack with PyTorch CUDA tensors both ways, where torch has CUDA: a CUDA tensor into a
    call (``from_dlpack``, no copy) and a device array read by ``torch.from_dlpack``."""
    try:
        import torch
    except ImportError:
        return {"skipped": "torch not installed"}
    if not torch.cuda.is_available():
        return {"skipped": "torch has no CUDA device"}
    from tilecraft.runtime.device_array import from_dlpack

    try:
        tensors = {name: torch.from_numpy(value).cuda() for name, value in feeds.items()}
        got = package(**{name: from_dlpack(tensor) for name, tensor in tensors.items()})
        got = got if isinstance(got, tuple) else (got,)
        name, value = next(iter(feeds.items()))
        back = torch.from_dlpack(package.device_array(value))
        on_device = package.device_call(*[from_dlpack(tensors[name]) for name in package.input_names])
        on_device = on_device if isinstance(on_device, tuple) else (on_device,)
        as_torch = [torch.from_dlpack(array) for array in on_device]
        return {"torch_tensors_in_match": all(_matches(a, b)[0] for a, b in zip(got, outputs)),
                "torch_from_dlpack_matches": bool(back.is_cuda and (back.cpu().numpy() == value).all()),
                "device_outputs_as_torch_match": all(t.is_cuda and _matches(t.cpu().numpy(), b)[0]
                                                     for t, b in zip(as_torch, outputs))}
    except Exception as error:  # reported, not fatal
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"}


def run(args: argparse.Namespace) -> int:
    import numpy as np

    package_module = _import_tilecraft()
    folder = Path(args.folder)
    index = json.loads((folder / "index.json").read_text())
    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    started_all = time.perf_counter()
    results: dict[str, Any] = {"arch": index["arch"], "models": {}}
    lines = [f"packages for {index['arch']}; tilecraft: median of {args.repeat} warm calls (numpy in/out, copies "
             "included); torch: eager CUDA on device tensors"]
    failed = 0
    c_runtime = ctypes.CDLL(str(folder / index["c_runtime"])) if index.get("c_runtime") else None
    for name, entry in index["models"].items():
        if "bytes" not in entry:  # failed to package, or left out for size
            continue
        if time.perf_counter() - started_all > args.budget_s:
            lines.append(f"{name:<20} not run: the {args.budget_s:.0f} s budget is spent")
            continue
        row: dict[str, Any] = {}
        try:
            feeds = dict(np.load(folder / name / "inputs.npz"))
            expected = list(np.load(folder / name / "expected.npz").values())
            started = time.perf_counter()
            path = _package_path(folder / name)
            package = package_module.load(path)
            row["load_ms"] = 1e3 * (time.perf_counter() - started)
            started = time.perf_counter()
            outputs = package(**feeds)
            row["first_call_ms"] = 1e3 * (time.perf_counter() - started)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            checks = [_matches(got, want) for got, want in zip(outputs, expected)]
            row["match"] = all(ok for ok, _ in checks) and len(outputs) == len(expected)
            row["max_rel_error"] = max(error for _, error in checks)
            row["ms"] = _median_ms(lambda: package(**feeds), args.repeat)
            row["dlpack"] = _torch_dlpack(package, feeds, outputs)
            if c_runtime is not None:
                row["c_api"] = _c_api_check(c_runtime, path, package, feeds, outputs)
            row.update(_device_memory_checks(package, feeds, args.repeat))
        except Exception as error:  # report and go on: one model must not stop the check
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
        torch_row = _torch_eager(name, feeds, entry.get("full", index["full"]), args.repeat,
                                 inductor=name in args.inductor.split(",")) if "error" not in row else {}
        if "output" in torch_row:
            row["torch_matches_onnxruntime"] = _matches(torch_row.pop("output"), expected[0])[0]
            results.setdefault("device", torch_row.pop("device"))
            results.setdefault("capability", torch_row.pop("capability"))
        row["torch"] = torch_row
        results["models"][name] = row
        if "error" not in row and not (row["device_array_matches_host_call"] and row["device_array_roundtrip"]
                                       and row["device_outputs_match_host_call"] and row["released_on_close"]):
            row["error"] = ("device arrays match the host call: %s, round trip: %s, device outputs match: %s, "
                            "released on close: %s") % (
                row["device_array_matches_host_call"], row["device_array_roundtrip"],
                row["device_outputs_match_host_call"], row["released_on_close"])
        # The C API must give the Python call's numbers where those are right (with a stand-in
        # driver that runs no kernel they are not, and neither are the C API's: reported only).
        c_api = row.get("c_api", {})
        if "error" not in row and row.get("match") and c_api and not (
                c_api.get("host_matches_python") and c_api.get("device_matches_host")):
            row["error"] = f"C API: {c_api}"
        if "error" in row or not row["match"]:
            failed += 1
            lines.append(f"{name:<20} FAILED  {row.get('error') or 'max error %.1e' % row['max_rel_error']}")
        else:
            torch_ms = torch_row.get("ms")
            torch_text = (f"{torch_ms:8.3f} ms  ratio {row['ms'] / torch_ms:5.2f} (TF32 off {torch_row['ms_f32']:8.3f} "
                          f"ms)") if torch_ms else torch_row.get("skipped", "-")
            if "inductor_ms" in torch_row:
                torch_text += (f"  inductor {torch_row['inductor_ms']:8.3f} ms (compiled in "
                               f"{torch_row['inductor_compile_s']:.0f} s)")
            elif "inductor_error" in torch_row:
                torch_text += f"  inductor failed: {torch_row['inductor_error']}"
            device = "device arrays %s %8.3f ms, device outputs %8.3f ms" % (
                "ok" if row["device_array_matches_host_call"] else "MISMATCH", row["device_array_ms"],
                row["device_outputs_ms"])
            lines.append(f"{name:<20} ok  max err {row['max_rel_error']:.1e}  first {row['first_call_ms']:8.2f} ms  "
                         f"warm {row['ms']:8.3f} ms  {device}  arena {row['arena_bytes'] / 1024:.0f} KiB  "
                         f"freed {row['released_on_close']}  torch {torch_text}")
        print(lines[-1], flush=True)
    ran = len(results["models"])
    lines.insert(1, f"device: {results.get('device', '?')} ({results.get('capability', '?')})")
    lines.append(f"{ran - failed} of {ran} ran and matched onnxruntime in {time.perf_counter() - started_all:.0f} s")
    print(lines[-1])
    (out / "report.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


def call(args: argparse.Namespace) -> int:
    """Load one model's package and call it ``--calls`` times: a process for a kernel profiler
    (``ncu --clock-control none --csv ... python3 cuda_device_check.py call FOLDER/NAME``)."""
    import numpy as np

    package_module = _import_tilecraft()
    folder = Path(args.model)
    feeds = dict(np.load(folder / "inputs.npz"))
    with package_module.load(_package_path(folder)) as package:
        for _ in range(args.calls):
            package(**feeds)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="here: build the packages and reference outputs")
    prep.add_argument("--arch", default="sm_90", help="the lent GPU's architecture (H100/H200: sm_90)")
    prep.add_argument("--models", default="all",
                      help="comma-separated public-suite names (default all), the goal models "
                           f"{', '.join(GOAL_MODELS)} (full size, four-level weights, xz), 'zoo' (the onnx "
                           f"wheel's light model zoo) or {ZOO_PREFIX}NAME")
    prep.add_argument("--full", action="store_true", help="full-size models (default: tiny variants)")
    prep.add_argument("--limit-mib", type=float, default=48.0)
    prep.add_argument("--schedule-options", default="",
                      help='tilecraft-gpu-schedule options the packages are built with, e.g. '
                           '"warp-reduce=1" (docs/cuda.md, Knobs and the tuner)')
    prep.add_argument("-o", "--output", required=True)
    go = commands.add_parser("run", help="there: run the packages on the GPU, compare, time")
    go.add_argument("folder")
    go.add_argument("--out", default=os.environ.get("OUT"))
    go.add_argument("--repeat", type=int, default=20)
    go.add_argument("--budget-s", type=float, default=420.0)
    go.add_argument("--inductor", default="", metavar="NAMES",
                    help="comma-separated models also timed through torch.compile (inductor)")
    once = commands.add_parser("call", help="there: call one model's package (for a kernel profiler)")
    once.add_argument("model", help="the model's folder (FOLDER/NAME)")
    once.add_argument("--calls", type=int, default=2)
    child = commands.add_parser("inductor", help="there: time one model through torch.compile (a child process)")
    child.add_argument("name")
    child.add_argument("--full", action="store_true")
    child.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    return {"prepare": prepare, "run": run, "call": call, "inductor": inductor}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
