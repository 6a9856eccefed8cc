"""PyTorch programs compiled for CUDA, called with device memory, on a machine without a GPU.

The CPU build of PyTorch here makes no CUDA tensors, so the torch entry's CUDA path
(compiler/torch_module.py ``CompiledTorchModule``, what ``tilecraft.torch.compile`` and the
``torch.compile`` backend return) is driven with other DLPack producers of CUDA memory:
tilecraft's ``DeviceArray`` and a foreign wrapper of one (what a CuPy array looks like), over
the recording driver's "device memory" (tests/cuda/recording_driver.c). The program is
reshapes only, so no kernel runs and the recording driver computes it whole: values exact.
Where PyTorch has CUDA, the same checks run with torch CUDA tensors (and the outputs are
torch CUDA tensors through DLPack).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft
from tilecraft.errors import ArgumentValueError
from tilecraft.runtime import device_array as device_arrays
from tilecraft.runtime.device_array import DeviceArray, device_array
from tilecraft.runtime.libraries import cuda_driver_available

from test_device_array import recorder, recording_driver  # noqa: F401  (fixtures)


class Reshapes(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.reshape(4, 6), w.flatten(1)


class Foreign:
    """A DLPack producer that is neither a torch tensor nor a DeviceArray (as a CuPy array)."""

    def __init__(self, array: DeviceArray) -> None:
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None):
        return self.array.__dlpack__(stream=stream)


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    return (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 3,
            np.arange(30, dtype=np.float32).reshape(5, 2, 3) * 0.5)


@pytest.fixture(scope="module")
def compiled():
    x, w = _inputs()
    return tilecraft.torch.compile(Reshapes().eval(), (torch.from_numpy(x), torch.from_numpy(w)),
                                   target="cuda -arch=sm_90")


@pytest.fixture
def module(compiled, recorder, monkeypatch):
    """The compiled program on the recording driver (its JIT and the device arrays share it)."""
    from tilecraft.targets.cuda import module as cuda_module

    monkeypatch.setattr(cuda_module, "cuda_runtime_library", device_arrays.cuda_runtime_library)
    yield compiled
    compiled.compiled.close()


def test_device_producers_in_device_arrays_out(module, recorder):
    x, w = _inputs()
    dx, dw = device_array(x), Foreign(device_array(w))
    module(torch.from_numpy(x), torch.from_numpy(w))  # the arena
    recorder.reset()
    y, z = module(dx, dw)
    # This PyTorch has no CUDA: the results are the device arrays themselves (DLPack producers).
    assert isinstance(y, DeviceArray) and isinstance(z, DeviceArray)
    assert (recorder["h2d"], recorder["d2h"]) == (0, 0)
    assert np.array_equal(y.to_numpy(), x.reshape(4, 6)) and np.array_equal(z.to_numpy(), w.reshape(5, 6))


def test_cpu_tensors_in_cpu_tensors_out(module, recorder):
    x, w = _inputs()
    y, z = module(torch.from_numpy(x), torch.from_numpy(w))
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    assert torch.equal(y, torch.from_numpy(x).reshape(4, 6)) and torch.equal(z, torch.from_numpy(w).flatten(1))


def test_mixed_devices_are_refused_by_name(module, recorder):
    x, w = _inputs()
    recorder.reset()
    with pytest.raises(ArgumentValueError, match="argument 0 \\('x'\\) is on cuda but argument 1 \\('w'\\) is on cpu"):
        module(device_array(x), torch.from_numpy(w))
    with pytest.raises(ArgumentValueError, match="argument 1 \\('w'\\) is on cuda but argument 0 \\('x'\\) is on cpu"):
        module(torch.from_numpy(x), Foreign(device_array(w)))
    assert recorder["launch"] == 0 and recorder["d2d"] == 0  # refused before the call


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and cuda_driver_available()), reason="needs PyTorch with CUDA")
def test_torch_cuda_tensors_in_and_out(compiled):
    """On a CUDA machine: CUDA tensors in, torch CUDA tensors out (DLPack, no host copy)."""
    x, w = (torch.from_numpy(a).cuda() for a in _inputs())
    y, z = compiled(x, w)
    assert y.device == x.device and z.device == x.device
    assert torch.equal(y, x.reshape(4, 6)) and torch.equal(z, w.flatten(1))
    with pytest.raises(ArgumentValueError, match="same device"):
        compiled(x, w.cpu())
