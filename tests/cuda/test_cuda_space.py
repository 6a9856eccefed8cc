"""The GPU schedule space: knobs per op kind, validity, configs as pass options that compile."""

from __future__ import annotations

import pytest
from cuda_testing import matmul_mlir, ptx_counts
from mlir import ir

import tilecraft
from tilecraft.errors import DeviceUnavailableError, KnobError
from tilecraft.targets.cuda import cuda_pipeline
from tilecraft.targets.cuda.space import GpuScheduleSpace, require_cuda_device
from tilecraft.targets.cuda.schedule import operand_maps_of
from tilecraft.pipelines.loop_nest import analyze_loop_nests
from tilecraft.runtime.libraries import cuda_driver_available


def matmul_space() -> GpuScheduleSpace:
    module = ir.Module.parse(matmul_mlir(256, 192, 128), ir.Context())
    analyzed = analyze_loop_nests(module.operation)
    index = [op.name for op, _ in analyzed].index("linalg.matmul")
    return GpuScheduleSpace(analyzed[index][1], operand_maps_of(module.operation)[index])


def test_matmul_knobs_and_default():
    space = matmul_space()
    assert space.kind == "contraction"
    assert [k.name for k in space.knobs] == [
        "block_m", "block_n", "thread_m", "thread_n", "shared", "k_step", "unroll"]
    default = space.default()
    assert default == {"block_m": 64, "block_n": 64, "thread_m": 4, "thread_n": 4, "shared": 1,
                       "k_step": 16, "unroll": 4}
    assert space.is_valid(default)
    assert space.pass_options(default) == ("block-m=64 block-n=64 thread-m=4 thread-n=4 "
                                           "shared=1 k-step=16 unroll=4 fill-blocks=1")
    assert "tile_using_forall" in space.script(default)


def test_invalid_configs():
    space = matmul_space()
    too_many_threads = dict(space.default(), block_m=128, block_n=128, thread_m=1, thread_n=1)
    assert not space.is_valid(too_many_threads)  # 16384 threads per block
    with pytest.raises(KnobError, match="block_m=3"):
        space.validate(dict(space.default(), block_m=3))
    with pytest.raises(KnobError, match="knobs"):
        space.validate({"block_m": 64})
    valid = [space.point(i) for i in range(space.size) if space.is_valid(space.point(i))]
    assert space.default() in valid and len(valid) < space.size


@pytest.mark.parametrize("config", [
    {"block_m": 32, "block_n": 64, "thread_m": 2, "thread_n": 4, "shared": 1, "k_step": 32,
     "unroll": 8},
    {"block_m": 64, "block_n": 32, "thread_m": 4, "thread_n": 2, "shared": 0, "k_step": 16,
     "unroll": 2},
])
def test_configs_compile(config):
    space = matmul_space()
    assert space.is_valid(config)
    pipeline = cuda_pipeline("cuda -arch=sm_80", schedule_options=space.pass_options(config))
    module = tilecraft.compile(matmul_mlir(256, 192, 128), target="cuda -arch=sm_80",
                               pipeline=pipeline)
    counts = ptx_counts(module.ptx())
    assert (counts[".shared"] > 0) == bool(config["shared"])
    threads = (config["block_m"] // config["thread_m"], config["block_n"] // config["thread_n"])
    assert f".maxntid {threads[1]}, {threads[0]}, 1" in module.ptx()


@pytest.mark.skipif(cuda_driver_available(), reason="this machine has a CUDA driver")
def test_measuring_needs_a_gpu():
    with pytest.raises(DeviceUnavailableError, match="tuning for a CUDA target"):
        require_cuda_device()
