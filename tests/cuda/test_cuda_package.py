"""CUDA packages (``tilecraft compile --target cuda -o m.tar``) on a machine without a GPU.

What runs here: the package builds; its ``model.so`` needs no CUDA, LLVM or MLIR library;
every ``mgpu*`` function the lowered host code calls is defined by tilecraft's runtime
(runtime/cuda_runtime.c); loading, calling and the C API refuse with a typed error where no
driver is. The call sequence (weights uploaded once, one copy per input and output per
call, everything freed by the end of a call or by ``close``) is checked against a
**recording stand-in for the CUDA driver** (tests/cuda/recording_driver.c, loaded through
``TILECRAFT_CUDA_DRIVER``): it runs no kernel, so these tests check no numbers; the GPU check
(benchmarks/cuda_device_check.py) does that where a GPU is lent.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import tilecraft
from tilecraft.compiler.package import _run, externalize_weights
from tilecraft.errors import CudaError, DeviceUnavailableError, PackageError, TilecraftError
from tilecraft.runtime import package as packages
from tilecraft.runtime.libraries import CUDA_RUNTIME_SOURCE, mlir_package_dir
from tilecraft.runtime.native import build_shared_library

from cuda_testing import DEMO_CNN, reshapes_model

HERE = Path(__file__).resolve().parent
RUNTIME_API = HERE.parents[1] / "runtime" / "c_api"
SHAPES = {"input": [1, 1, 16, 16]}
DEVICE_ERROR = 12  # TILECRAFT_ERROR_DEVICE (runtime/c_api/tilecraft_runtime.h)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo CNN compiled for sm_90 once: (the JIT module, its package path)."""
    path = tmp_path_factory.mktemp("cuda-package") / "digits.tar"
    module = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES, package_path=path)
    return module, path


@pytest.fixture(scope="module")
def recording_driver() -> Path:
    return build_shared_library("librecording_cuda.so", [HERE / "recording_driver.c"],
                                what="the recording CUDA driver (tests)")


class Recorder:
    """The recording driver's counters (the same library the runtime dlopen'ed)."""

    def __init__(self, path: Path) -> None:
        self.library = ctypes.CDLL(str(path))
        self.library.recording_counter.restype = ctypes.c_int64
        self.library.recording_counter.argtypes = [ctypes.c_char_p]

    def __getitem__(self, name: str) -> int:
        value = self.library.recording_counter(name.encode())
        assert value >= 0, name
        return value

    def reset(self) -> None:
        self.library.recording_reset()

    def fail_next(self, function: str) -> None:
        self.library.recording_fail(function.encode())


@pytest.fixture
def recorder(recording_driver, monkeypatch) -> Recorder:
    monkeypatch.setenv("TILECRAFT_CUDA_DRIVER", str(recording_driver))
    recorder = Recorder(recording_driver)
    recorder.reset()
    return recorder


def _unpack(path: Path, directory: Path) -> Path:
    with tarfile.open(path) as archive:
        archive.extractall(directory, filter="data")
    return directory


def test_package_needs_no_cuda_library_to_link_or_load(demo, tmp_path):
    _, path = demo
    folder = _unpack(path, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["target"] == "cuda -arch=sm_90"
    assert manifest["device"] == {"kind": "cuda", "arch": "sm_90", "driver": "libcuda.so.1",
                                  "output_arguments": True}
    assert manifest["weights"]["tensors"] > 0 and "device" in manifest["weights"]["stored"]
    assert manifest["required_cpu_flags"] == []  # host code for a generic CPU of the machine
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs readelf")
    dynamic = subprocess.run([readelf, "-d", str(folder / "model.so")], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert needed, dynamic
    assert not [name for name in needed if re.match(r"lib(cuda|cudart|LLVM|mlir)", name)], needed


def _host_llvm_ir(module, directory: Path) -> str:
    """The host code's LLVM IR as the package writer translates it (mlir-translate embeds
    the kernels and adds the module-load calls)."""
    host, _, _, _ = externalize_weights(module.llvm_module, directory)
    with open(directory / "host.mlirbc", "wb") as stream:
        host.operation.write_bytecode(stream)
    _run([str(mlir_package_dir() / "bin" / "mlir-translate"), "--mlir-to-llvmir", str(directory / "host.mlirbc"),
          "-o", str(directory / "host.ll")], "translating the host code")
    return (directory / "host.ll").read_text()


def _runtime_definitions(directory: Path) -> set[str]:
    obj = directory / "cuda_runtime.o"
    subprocess.run(["cc", "-c", "-O1", "-fPIC", str(CUDA_RUNTIME_SOURCE), "-o", str(obj)], check=True)
    symbols = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True, text=True,
                             check=True).stdout
    return {line.split()[-1] for line in symbols.splitlines() if line.strip()}


@pytest.mark.skipif(not shutil.which("nm") or not shutil.which("cc"), reason="needs cc and nm")
@pytest.mark.parametrize("kernels", ["cubin", "ptx"])
def test_runtime_defines_every_mgpu_function_the_host_code_calls(kernels, tmp_path, monkeypatch):
    """Fails when MLIR's lowering starts to call an mgpu* function our runtime lacks (the
    package would then fail to link with -z defs). PTX kernels load through mgpuModuleLoadJIT."""
    if kernels == "ptx":
        monkeypatch.setenv("TILECRAFT_PTXAS", str(tmp_path / "no-ptxas"))
    elif not tilecraft.targets.cuda.find_ptxas():
        pytest.skip("needs ptxas for cubin kernels")
    module = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES)
    text = _host_llvm_ir(module, tmp_path)
    called = set(re.findall(r"^declare [^@]*@(mgpu\w+|tilecraft_cuda\w+)\(", text, re.MULTILINE))
    assert {"mgpuLaunchKernel", "mgpuMemcpy", "tilecraft_cuda_resident"} <= called
    assert ("mgpuModuleLoadJIT" if kernels == "ptx" else "mgpuModuleLoad") in called
    missing = called - _runtime_definitions(tmp_path)
    assert not missing, f"runtime/cuda_runtime.c lacks {sorted(missing)}"


def test_weights_are_uploaded_once_not_copied_per_call(demo):
    """The host code calls the runtime for each weight and frees none of them per call."""
    module, _ = demo
    host = module.ir("host")
    uploads = host.count("llvm.call @tilecraft_cuda_resident(")
    assert uploads >= 4  # two convolutions' and two matmuls' weights (biases too)
    for line in host.splitlines():
        if "llvm.call @mgpuMemcpy(" in line:  # what is left: the input in, the output out
            assert "addressof" not in line
    assert host.count("llvm.call @mgpuMemcpy(") == 2


def test_loading_without_a_driver_raises_a_typed_error(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CUDA_DRIVER", str(tmp_path / "libcuda.so.1"))  # not there
    _, path = demo
    with pytest.raises(DeviceUnavailableError, match="no CUDA driver") as raised:
        packages.load(path)
    assert isinstance(raised.value, TilecraftError)


class Error(ctypes.Structure):
    """tilecraft_error (runtime/c_api/tilecraft_runtime.h)."""

    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class Tensor(ctypes.Structure):
    """tilecraft_tensor (runtime/c_api/tilecraft_runtime.h)."""

    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.c_int64 * 16)]


def _tensor(array) -> Tensor:
    tensor = Tensor(array.ctypes.data, array.nbytes, 1, array.ndim)  # 1: TILECRAFT_FLOAT32
    tensor.shape[:array.ndim] = array.shape
    return tensor


@pytest.fixture(scope="module")
def c_runtime(tmp_path_factory) -> ctypes.CDLL:
    if not shutil.which("make"):
        pytest.skip("needs make")
    build = tmp_path_factory.mktemp("c-runtime")
    made = subprocess.run(["make", "-C", str(RUNTIME_API), f"BUILD={build}"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return ctypes.CDLL(str(build / "libtilecraft_runtime.so"))


def test_c_api_refuses_a_cuda_package_without_a_driver(demo, c_runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CUDA_DRIVER", str(tmp_path / "libcuda.so.1"))
    model, error = ctypes.c_void_p(), Error()
    status = c_runtime.tilecraft_model_open(str(demo[1]).encode(), None, ctypes.byref(model), ctypes.byref(error))
    assert status == DEVICE_ERROR and model.value is None
    assert b"no CUDA driver" in error.message
    c_runtime.tilecraft_status_name.restype = ctypes.c_char_p
    assert c_runtime.tilecraft_status_name(DEVICE_ERROR) == b"device"


def test_c_api_call_sequence_with_the_recording_driver(demo, c_runtime, recorder, rand):
    """The C API runs a CUDA package like a CPU one: weights uploaded at the first run only,
    freed by tilecraft_model_close; a failed driver call is TILECRAFT_ERROR_DEVICE."""
    model, error = ctypes.c_void_p(), Error()
    assert c_runtime.tilecraft_model_open(str(demo[1]).encode(), None, ctypes.byref(model),
                                          ctypes.byref(error)) == 0, error.message
    x, y = rand((1, 1, 16, 16)), np.empty((1, 10), np.float32)
    inputs, outputs = _tensor(x), _tensor(y)

    def run() -> int:
        return c_runtime.tilecraft_model_run(model, ctypes.byref(inputs), ctypes.c_size_t(1), ctypes.byref(outputs),
                                             ctypes.c_size_t(1), ctypes.byref(error))

    assert run() == 0, error.message
    weights = recorder["live"] - 1  # and the activation arena
    assert weights >= 4 and recorder["h2d"] == weights + 1
    recorder.reset()
    assert run() == 0 and (recorder["h2d"], recorder["d2h"], recorder["alloc"]) == (1, 1, 0)
    recorder.fail_next("cuLaunchKernel")
    assert run() == DEVICE_ERROR and b"cuLaunchKernel" in error.message
    c_runtime.tilecraft_model_close(model)
    assert recorder["live"] == 0


def test_call_sequence_with_the_recording_driver(demo, recorder, rand):
    """Weights: uploaded at the first call, kept across calls, freed by close. Per call: one
    copy in per input, one out per output, every other device buffer freed."""
    _, path = demo
    package = packages.load(path)
    kernels = recorder["module_load"]
    assert kernels >= 7  # the kernels were loaded when model.so was opened
    x = rand((1, 1, 16, 16))
    package(x)
    held = recorder["live"]  # the weights and one activation arena
    first = (recorder["h2d"], recorder["h2d_bytes"])
    assert held >= 5 and first[0] == held  # each weight and the input
    launches = recorder["launch"]
    assert launches >= kernels
    for _ in range(2):
        recorder.reset()
        package(x)
        assert (recorder["h2d"], recorder["h2d_bytes"], recorder["d2h"]) == (1, x.nbytes, 1)
        assert recorder["launch"] == launches
        assert (recorder["alloc"], recorder["free"], recorder["live"]) == (0, 0, held)
        assert recorder["stream_create"] == recorder["stream_destroy"]
    assert first[1] > x.nbytes
    package.close()
    assert recorder["live"] == 0
    package.close()  # twice: nothing left to free
    recorder.reset()
    with packages.load(path) as again:  # a fresh load (own runtime state) uploads anew
        again(x)
        assert recorder["h2d"] == first[0]
    assert recorder["live"] == 0


def test_a_failed_driver_call_raises_and_the_next_call_runs(demo, recorder, rand):
    _, path = demo
    package = packages.load(path)
    x = rand((1, 1, 16, 16))
    recorder.fail_next("cuLaunchKernel")
    with pytest.raises(CudaError, match="cuLaunchKernel failed with CUresult 2 .CUDA_ERROR_OUT_OF_MEMORY"):
        package(x)
    assert package(x).shape == (1, 10)  # the error was taken; the runtime goes on
    package.close()  # the next call allocates its arena and uploads its weights again
    recorder.fail_next("cuMemAlloc")
    with pytest.raises(CudaError, match="cuMemAlloc"):
        package(x)
    assert package(x).shape == (1, 10)
    package.close()
    assert recorder["live"] == 0  # frees ran despite the failure


def test_cli_writes_a_cuda_package_or_kernel_files(tmp_path):
    from tilecraft.tools.cli import run_cli

    common = ["compile", str(DEMO_CNN), "--target", "cuda -arch=sm_90", "--input-shapes", "input:[1,1,16,16]"]
    assert run_cli([*common, "-o", str(tmp_path / "m.tar")]) == 0
    manifest = json.loads(tarfile.open(tmp_path / "m.tar").extractfile("manifest.json").read())
    assert manifest["device"]["arch"] == "sm_90"
    assert run_cli([*common, "-o", str(tmp_path / "kernels")]) == 0
    assert list((tmp_path / "kernels").glob("*.ptx"))


def test_profiled_cuda_packages_are_refused(tmp_path):
    with pytest.raises(PackageError, match="asynchronously"):
        tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES,
                          package_path=tmp_path / "m.tar", profile=True)


def test_shared_library_package_carries_the_runtime_too(tmp_path, monkeypatch):
    path = tmp_path / "digits.so"
    tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES, package_path=path)
    monkeypatch.setenv("TILECRAFT_CUDA_DRIVER", str(tmp_path / "libcuda.so.1"))
    with pytest.raises(DeviceUnavailableError, match="no CUDA driver"):
        packages.load(path)



@pytest.fixture
def jit_runtime(recorder, monkeypatch) -> None:
    """JIT modules on tilecraft's CUDA runtime built here (it loads the recording driver)."""
    from tilecraft.targets.cuda import module as cuda_module

    runtime = build_shared_library("libtilecraft_cuda_runtime.so", [CUDA_RUNTIME_SOURCE], ["-pthread"],
                                   what="tilecraft's CUDA runtime")
    monkeypatch.setattr(cuda_module, "cuda_runtime_library", lambda: str(runtime))


def test_jit_module_runs_on_the_same_runtime(recorder, jit_runtime, rand):
    """The in-process module's JIT links runtime/cuda_runtime.c too (not MLIR's wrappers):
    with the recording driver, its weights are uploaded at the first call only."""
    compiled = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES)
    x = rand((1, 1, 16, 16))
    compiled(x)
    assert recorder["module_load"] >= 7
    uploaded = recorder["h2d"]
    recorder.reset()
    compiled(x)
    assert recorder["h2d"] == 1 and uploaded > 1 and recorder["d2h"] == 1
    assert recorder["alloc"] == recorder["free"] == 0


def test_jit_module_close_frees_its_device_memory_only(recorder, jit_runtime, rand):
    """A JIT module's close frees its own weights and arena (the JIT's modules share one
    runtime: another module's stay); a later call uploads them again; a module collected
    without close frees them then."""
    gc.collect()  # earlier tests' modules free theirs
    first = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES)
    second = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES,
                               opt_level=2)  # not the compile cache's first module
    x = rand((1, 1, 16, 16))
    before = recorder["live"]  # earlier tests' JIT modules keep theirs until the process ends
    first(x)
    held = recorder["live"] - before
    assert held >= 5  # 8 weights and one arena
    second(x)
    assert recorder["live"] == before + 2 * held
    recorder.reset()
    first.close()
    assert recorder["free"] == held and recorder["live"] == before + held
    first.close()  # nothing left to free
    assert recorder["free"] == held
    recorder.reset()
    with second:
        second(x)
        assert recorder["alloc"] == 0  # its weights and arena stayed
    assert recorder["live"] == before
    recorder.reset()
    first(x)  # uploads and allocates anew
    assert recorder["alloc"] == held and recorder["h2d"] == held
    first.close()
    assert recorder["live"] == before
    first(x)
    del first
    gc.collect()
    assert recorder["live"] == before


def test_device_check_script_runs_end_to_end(recording_driver, tmp_path):
    """benchmarks/cuda_device_check.py: prepare here, then run (with the recording driver,
    which computes nothing: the run completes and reports the mismatch, exit status 1)."""
    script = HERE.parents[1] / "benchmarks" / "cuda_device_check.py"
    environment = {**os.environ, "TILECRAFT_CUDA_DRIVER": str(recording_driver)}
    prepared = subprocess.run([sys.executable, str(script), "prepare", "--models", "gpt2", "-o", str(tmp_path / "c")],
                              capture_output=True, text=True, env=environment)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    assert {p.name for p in (tmp_path / "c" / "gpt2").iterdir()} == {"model.tar", "inputs.npz", "expected.npz"}
    assert [p.name for p in (tmp_path / "c" / "c_runtime").iterdir()] == ["libtilecraft_runtime.so"]
    ran = subprocess.run([sys.executable, str(script), "run", str(tmp_path / "c"), "--out", str(tmp_path / "out"),
                          "--repeat", "2"], capture_output=True, text=True, env=environment)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    row = report["models"]["gpt2"]
    assert "error" not in row and row["match"] is False and row["first_call_ms"] > 0
    # the device-memory items: device arrays in (their round trip is exact even here), the
    # runtime's weights and arena held, then freed by close
    assert row["device_array_roundtrip"] and row["device_array_matches_host_call"] and row["device_array_ms"] > 0
    assert row["device_outputs_match_host_call"] and row["device_outputs_ms"] > 0  # device_call, out= reused
    assert row["resident_bytes"] > 0 and row["arena_bytes"] > 0 and row["released_on_close"]
    assert row["dlpack"] == {"skipped": "torch has no CUDA device"}
    # the C API ran the package with host and device buffers (the values equal the Python call's
    # only where kernels run: reported here, required on a GPU)
    assert row["c_api"]["device_matches_host"] is True and "host_matches_python" in row["c_api"], row["c_api"]


def test_kernel_free_outputs_are_right_through_the_arena(recorder, tmp_path):
    """A model of reshapes only runs no kernel, so the recording driver computes it whole: the
    inputs' device copies and the outputs' copies back go through the arena's views, and the
    outputs are the inputs reshaped, call after call, with nothing allocated after the first."""
    reshapes_model(tmp_path / "reshapes.onnx")
    compiled = tilecraft.compile(str(tmp_path / "reshapes.onnx"), target="cuda -arch=sm_90",
                                 package_path=tmp_path / "reshapes.tar")
    assert "memref.view" in compiled.ir("map") and "gpu.alloc" not in compiled.ir("map")
    with packages.load(tmp_path / "reshapes.tar") as package:
        for call in range(3):
            recorder.reset()
            x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + call
            w = np.arange(30, dtype=np.float32).reshape(5, 2, 3) * (call + 1)
            y, z = package(x, w)
            assert np.array_equal(y, x.reshape(4, 6)) and np.array_equal(z, w.reshape(5, 6))
            assert recorder["alloc"] == (1 if call == 0 else 0)  # the arena, once
    assert recorder["live"] == 0
