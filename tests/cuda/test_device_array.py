"""Device arrays (runtime/device_array.py) and DLPack interchange, on a machine without a GPU.

The recording stand-in for the driver (tests/cuda/recording_driver.c) gives "device memory"
from malloc and counts copies by direction, so these tests check what a call with device
arrays copies (device to device, nothing through the host) and what the DLPack exchange
accepts and refuses. It runs no kernel: the outputs' values are checked on a GPU
(benchmarks/cuda_device_check.py).
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import ArgumentTypeError, ArgumentValueError
from tilecraft.runtime import device_array as device_arrays
from tilecraft.runtime import package as packages
from tilecraft.runtime.device_array import (DLDataType, DLDevice, DLManagedTensor, DLTensor, DeviceArray,
                                            device_array, from_dlpack)
from tilecraft.runtime.libraries import CUDA_RUNTIME_SOURCE
from tilecraft.runtime.native import build_shared_library

from cuda_testing import DEMO_CNN
from test_cuda_package import Recorder, SHAPES


@pytest.fixture(scope="module")
def recording_driver():
    from pathlib import Path

    return build_shared_library("librecording_cuda.so", [Path(__file__).with_name("recording_driver.c")],
                                what="the recording CUDA driver (tests)")


@pytest.fixture
def recorder(recording_driver, monkeypatch) -> Recorder:
    """The recording driver behind both the package's runtime and the device arrays' one."""
    monkeypatch.setenv("TILECRAFT_CUDA_DRIVER", str(recording_driver))
    runtime = build_shared_library("libtilecraft_cuda_runtime.so", [CUDA_RUNTIME_SOURCE], ["-pthread"],
                                   what="tilecraft's CUDA runtime")
    monkeypatch.setattr(device_arrays, "cuda_runtime_library", lambda: str(runtime))
    recorder = Recorder(recording_driver)
    recorder.reset()
    return recorder


@pytest.fixture(scope="module")
def demo_package(tmp_path_factory):
    path = tmp_path_factory.mktemp("device-array") / "digits.tar"
    tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES, package_path=path)
    return path


def test_upload_and_copy_back(recorder, rand):
    x = rand((2, 3, 4))
    array = device_array(x)
    assert (array.shape, array.dtype, array.nbytes) == ((2, 3, 4), np.float32, x.nbytes)
    assert (recorder["alloc"], recorder["h2d"], recorder["d2h"]) == (1, 1, 0)
    assert np.array_equal(array.to_numpy(), x) and recorder["d2h"] == 1
    assert repr(array) == "DeviceArray(shape=(2, 3, 4), dtype=float32, device='cuda:0')"
    del array
    gc.collect()
    assert recorder["free"] == 1  # collected: its device memory freed


def test_dlpack_both_ways_shares_memory(recorder, rand):
    x = rand((4, 5))
    producer = device_array(x)
    assert producer.__dlpack_device__() == (2, 0)  # kDLCUDA, device 0
    consumer = from_dlpack(producer)
    assert consumer.pointer == producer.pointer and consumer.shape == (4, 5) and consumer.dtype == np.float32
    assert recorder["alloc"] == 1 and recorder["d2d"] == 0  # no copy
    del producer
    gc.collect()
    assert recorder["free"] == 0  # the consumer keeps the producer's memory alive
    assert np.array_equal(consumer.to_numpy(), x)
    del consumer
    gc.collect()
    assert recorder["free"] == 1


class Producer:
    """A test-only DLPack producer: any device, dtype, shape and strides (elements)."""

    def __init__(self, device=(2, 0), shape=(2, 3), strides=None, dtype=(2, 32, 1), data=0x1000):
        self.device, self.deleted = device, 0
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self._managed = DLManagedTensor()
        self._managed.dl_tensor = DLTensor(data, DLDevice(*device), len(shape), DLDataType(*dtype), self._shape,
                                           self._strides, 0)

        @device_arrays._DELETER
        def deleter(address: int) -> None:
            self.deleted += 1

        self._deleter = deleter
        self._managed.deleter = deleter

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None):
        return device_arrays._capsule_new(ctypes.addressof(self._managed), b"dltensor",
                                          ctypes.cast(None, device_arrays._CAPSULE_DESTRUCTOR))


def test_from_dlpack_takes_contiguous_cuda_tensors_and_calls_the_deleter():
    producer = Producer(shape=(2, 3), strides=(3, 1), dtype=(0, 64, 1))  # int64, explicit C strides
    array = from_dlpack(producer)
    assert (array.shape, array.dtype, array.pointer) == ((2, 3), np.int64, 0x1000)
    assert from_dlpack(Producer(shape=(4, 1), strides=(1, 7))).shape == (4, 1)  # a unit dim's stride is free
    del array
    gc.collect()
    assert producer.deleted == 1


@pytest.mark.parametrize("producer, error, message", [
    (Producer(device=(1, 0)), ArgumentValueError, "on the CPU"),
    (Producer(device=(2, 1)), ArgumentValueError, "cuda:1"),
    (Producer(shape=(2, 3), strides=(1, 2)), ArgumentValueError, "not C-contiguous"),
    (Producer(dtype=(5, 64, 1)), ArgumentTypeError, "no numpy equivalent"),  # complex
    (Producer(dtype=(2, 32, 4)), ArgumentTypeError, "no numpy equivalent"),  # 4 lanes
    (np.zeros(3), ArgumentValueError, "on the CPU"),  # numpy speaks DLPack too
    ([1.0, 2.0], ArgumentTypeError, "__dlpack__"),
])
def test_from_dlpack_refuses_with_typed_errors(producer, error, message):
    with pytest.raises(error, match=message):
        from_dlpack(producer)


def test_package_takes_device_arrays_without_host_copies(recorder, demo_package, rand):
    """A device array's argument is copied device to device into the call's arena: nothing
    in from the host; the output comes back as numpy (one copy out)."""
    x = rand((1, 1, 16, 16))
    with packages.load(demo_package) as package:
        package(x)  # the weights and the arena
        dx = package.device_array(x)  # through the package's own runtime
        assert np.array_equal(dx.to_numpy(), x)
        recorder.reset()
        for _ in range(2):
            y = package(dx)
            assert isinstance(y, np.ndarray) and y.shape == (1, 10)
        assert (recorder["h2d"], recorder["d2d"], recorder["d2h"], recorder["alloc"]) == (0, 2, 2, 0)
        assert recorder["h2d"] == 0
        recorder.reset()
        package(input=dx)  # by name too
        assert (recorder["h2d"], recorder["d2d"]) == (0, 1)


def test_bad_device_arrays_are_typed_errors(recorder, demo_package, rand):
    with packages.load(demo_package) as package:
        with pytest.raises(ArgumentTypeError, match="dtype"):
            package(device_array(rand((1, 1, 16, 16)).astype(np.float64)))
        with pytest.raises(ArgumentValueError, match="shape"):
            package(device_array(rand((1, 1, 16, 8))))
        other = DeviceArray(device_array(rand((1, 1, 16, 16))).pointer, (1, 1, 16, 16), np.float32, device=1)
        with pytest.raises(ArgumentValueError, match="cuda:1"):
            package(other)


def test_a_cpu_module_refuses_device_arrays(recorder, rand):
    module = tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=SHAPES)
    with pytest.raises(ArgumentTypeError, match="DeviceArray"):
        module(device_array(rand((1, 1, 16, 16))))


def test_a_cpu_package_has_no_device_arrays(tmp_path, rand):
    from tilecraft.errors import PackageError

    path = tmp_path / "cpu.tar"
    tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=SHAPES, package_path=path)
    with pytest.raises(PackageError, match="CPU package"):
        packages.load(path).device_array(rand((1, 1, 16, 16)))


def test_jit_module_takes_device_arrays(recorder, monkeypatch, rand):
    """The in-process module too: its input copied device to device, then ``close``."""
    from tilecraft.targets.cuda import module as cuda_module

    monkeypatch.setattr(cuda_module, "cuda_runtime_library", device_arrays.cuda_runtime_library)
    compiled = tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_90", shape_dict=SHAPES, opt_level=1)
    x = rand((1, 1, 16, 16))
    compiled(x)
    dx = device_array(x)
    recorder.reset()
    assert compiled(dx).shape == (1, 10)
    assert (recorder["h2d"], recorder["d2d"], recorder["d2h"], recorder["alloc"]) == (0, 1, 1, 0)
    with pytest.raises(ArgumentValueError, match="shape"):
        compiled(device_array(rand((1, 1, 8, 16))))
    compiled.close()
