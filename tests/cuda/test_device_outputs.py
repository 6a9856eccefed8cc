"""Device outputs: ``device_call`` leaves a CUDA call's results on the device, on a machine
without a GPU.

The host code takes each result's destination as a trailing argument (targets/cuda/memory.py
``OUTPUT_ARGUMENTS``): ``device_call`` passes device arrays (the caller's ``out=`` or fresh
ones), a plain call null ones (host results, as before). The recording driver
(tests/cuda/recording_driver.c) counts copies by direction, so these tests check that a
device call copies nothing to the host; its "device memory" is host memory and the reshapes
model launches no kernel, so that model's device outputs are checked for their values too.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import tarfile

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import ArgumentTypeError, ArgumentValueError, PackageError
from tilecraft.runtime import device_array as device_arrays
from tilecraft.runtime import package as packages
from tilecraft.runtime.device_array import DeviceArray, device_array, empty

from cuda_testing import DEMO_CNN, reshapes_model
from test_cuda_package import HERE, RUNTIME_API, SHAPES
from test_device_array import recorder, recording_driver  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def reshapes(tmp_path_factory):
    """The reshapes model's CUDA package and its JIT module (module docstring)."""
    folder = tmp_path_factory.mktemp("device-outputs")
    source = reshapes_model(folder / "reshapes.onnx")
    compiled = tilecraft.compile(str(source), target="cuda -arch=sm_90", package_path=folder / "reshapes.tar")
    return folder / "reshapes.tar", compiled


@pytest.fixture(scope="module")
def demo_package(tmp_path_factory):
    path = tmp_path_factory.mktemp("device-outputs-demo") / "digits.tar"
    tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES, package_path=path)
    return path


def _inputs(call: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + call
    w = np.arange(30, dtype=np.float32).reshape(5, 2, 3) * (call + 1)
    return x, w


def _plain_call_copies(package, recorder) -> int:
    """The device-to-device copies of a plain call of the reshapes package (bufferization
    copies each reshaped input into the result's buffer: 2); checks its host copies."""
    package(*_inputs(0))  # the arena
    recorder.reset()
    package(*_inputs(0))
    assert (recorder["h2d"], recorder["d2h"], recorder["alloc"]) == (2, 2, 0)
    return recorder["d2d"]


def test_device_call_copies_nothing_to_the_host(recorder, reshapes):
    """Numpy in, device arrays out: each input copied in once, each output copied device to
    device into a fresh array (where a plain call copies it to the host), nothing back to the
    host; the values are the plain call's."""
    path, _ = reshapes
    with packages.load(path) as package:
        inside = _plain_call_copies(package, recorder)
        for call in range(2):
            x, w = _inputs(call)
            recorder.reset()
            y, z = package.device_call(x, w)
            assert isinstance(y, DeviceArray) and (y.shape, z.shape) == ((4, 6), (5, 6))
            assert (recorder["h2d"], recorder["d2d"], recorder["d2h"]) == (2, inside + 2, 0)
            assert recorder["alloc"] == 2  # the two fresh outputs; nothing else
            assert np.array_equal(y.to_numpy(), x.reshape(4, 6)) and np.array_equal(z.to_numpy(), w.reshape(5, 6))
        host = package(x, w)  # the plain call still returns numpy, through the same entry
        assert np.array_equal(host[0], x.reshape(4, 6)) and np.array_equal(host[1], w.reshape(5, 6))


def test_device_in_device_out_with_preallocated_outputs(recorder, reshapes):
    """Device arrays in and ``out=`` given: no host copy either way and no allocation per
    call; the results land in the caller's arrays (the same memory, call after call)."""
    path, _ = reshapes
    with packages.load(path) as package:
        out = [package.device_array(np.zeros((4, 6), np.float32)), package.device_array(np.zeros((5, 6), np.float32))]
        inside = _plain_call_copies(package, recorder)
        for call in range(3):
            x, w = _inputs(call)
            dx, dw = package.device_array(x), package.device_array(w)
            recorder.reset()
            y, z = package.device_call(dx, w=dw, out=out)
            assert (y, z) == tuple(out)  # the caller's arrays, not copies
            # in: 2, out: 2, and the plain call's own
            assert (recorder["h2d"], recorder["d2h"], recorder["d2d"], recorder["alloc"]) == (0, 0, inside + 4, 0)
            assert np.array_equal(out[0].to_numpy(), x.reshape(4, 6))
            assert np.array_equal(out[1].to_numpy(), w.reshape(5, 6))


def test_bad_outputs_are_typed_errors_before_any_copy(recorder, reshapes):
    path, _ = reshapes
    x, w = _inputs(0)
    with packages.load(path) as package:
        y, z = empty((4, 6), np.float32, runtime=package._library), empty((5, 6), np.float32, runtime=package._library)
        dx = package.device_array(x)
        aliased = DeviceArray(dx.pointer, (4, 6), np.float32)  # the input's memory, seen as 4x6
        overlapping = DeviceArray(y.pointer + 4, (5, 6), np.float32)
        cases = [
            ([z, y], ArgumentValueError, "expected shape \\(4, 6\\)"),
            ([y.__class__(y.pointer, (4, 6), np.float64), z], ArgumentTypeError, "dtype float32"),
            ([y], ArgumentTypeError, "1 array\\(s\\); @main has 2 output"),
            ([y, np.zeros((5, 6), np.float32)], ArgumentTypeError, "DeviceArray"),
            ("device", ArgumentTypeError, "got str"),
            ([DeviceArray(y.pointer, (4, 6), np.float32, device=1), z], ArgumentValueError, "cuda:1"),
            ([aliased, z], ArgumentValueError, "overlaps an input"),
            ([y, overlapping], ArgumentValueError, "'y' and 'z' overlap"),
        ]
        recorder.reset()
        for out, error, message in cases:
            with pytest.raises(error, match=message):
                package.device_call(dx, w, out=out)
        assert (recorder["h2d"], recorder["d2h"], recorder["d2d"], recorder["launch"]) == (0, 0, 0, 0)


def test_demo_cnn_device_call(recorder, demo_package, rand):
    """A model with kernels: the logits stay on the device (no copy to the host)."""
    x = rand((1, 1, 16, 16))
    with packages.load(demo_package) as package:
        package(x)  # the weights and the arena
        out = empty((1, 10), np.float32, runtime=package._library)
        dx = package.device_array(x)
        recorder.reset()
        assert package.device_call(dx, out=out) is out
        assert (recorder["h2d"], recorder["d2h"], recorder["d2d"], recorder["alloc"]) == (0, 0, 2, 0)
        assert recorder["launch"] > 0


def test_jit_module_device_call(recorder, monkeypatch, reshapes):
    """The in-process module too, with values (the same entry convention as packages)."""
    from tilecraft.targets.cuda import module as cuda_module

    monkeypatch.setattr(cuda_module, "cuda_runtime_library", device_arrays.cuda_runtime_library)
    _, compiled = reshapes
    x, w = _inputs(2)
    compiled(x, w)
    dx = device_array(x)
    recorder.reset()
    y, z = compiled.device_call(dx, w)
    assert (recorder["h2d"], recorder["d2h"]) == (1, 0)  # only w goes in from the host
    assert np.array_equal(y.to_numpy(), x.reshape(4, 6)) and np.array_equal(z.to_numpy(), w.reshape(5, 6))
    with pytest.raises(ArgumentValueError, match="expected shape"):
        compiled.device_call(x, w, out=[z, y])
    compiled.close()
    del y, z
    gc.collect()


def test_cpu_packages_have_no_device_call(tmp_path, rand):
    path = tmp_path / "cpu.tar"
    tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=SHAPES, package_path=path)
    with pytest.raises(PackageError, match="CPU package"):
        packages.load(path).device_call(rand((1, 1, 16, 16)))


def test_the_device_entry_is_part_of_the_call_contract(recorder, reshapes, tmp_path):
    """The manifest's ``device`` entry says how the entry is called (output arguments): an
    edited one is refused like edited inputs, not used to call the code wrongly."""
    path, _ = reshapes
    with tarfile.open(path) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path, filter="data")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["device"]["output_arguments"] is True
    manifest["device"]["output_arguments"] = False
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    edited = tmp_path / "edited.tar"
    with tarfile.open(edited, "w") as archive:
        for name in names:
            archive.add(tmp_path / name, arcname=name)
    with pytest.raises(PackageError, match="call contract"):
        packages.load(edited)


def test_c_program_runs_a_cuda_package_with_host_and_device_buffers(recording_driver, reshapes, tmp_path):
    """A compiled C program (tests/cuda/c_api_device.c) runs the reshapes package through the
    C API with the recording driver: host buffers get each result copied straight from the
    device (no host copy in between), device buffers nothing through the host; values exact;
    a failed driver call is TILECRAFT_ERROR_DEVICE. In a subprocess: a crash fails the test."""
    if not (shutil.which("make") and shutil.which("cc")):
        pytest.skip("needs make and a C compiler")
    build = tmp_path / "build"
    made = subprocess.run(["make", "-C", str(RUNTIME_API), f"BUILD={build}"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    program = tmp_path / "c_api_device"
    compiled = subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{RUNTIME_API}",
                               str(HERE / "c_api_device.c"), str(build / "libtilecraft_runtime.so"), "-ldl",
                               f"-Wl,-rpath,{build}", "-o", str(program)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    path, _ = reshapes
    environment = {**os.environ, "TILECRAFT_CUDA_DRIVER": str(recording_driver)}
    run = subprocess.run([str(program), str(path), str(recording_driver)], capture_output=True, text=True,
                         timeout=120, env=environment)
    assert run.returncode == 0 and run.stdout.rstrip().endswith("PASSED"), run.stdout + run.stderr
    assert "FAILED" not in run.stdout
