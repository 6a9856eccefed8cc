"""CUDA compilation without a GPU: targets, PTX structure, ptxas, CPU replay of the schedules,
errors. Execution on a GPU is in test_cuda_run.py (marked ``gpu``)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper
from cuda_testing import (
    DEMO_CNN, check_ptxas, conv_model, cpu_replay, f32, matmul_mlir, onnx_model, ptx_counts,
    softmax_model, softmax_reference, vector_add,
)

import tilecraft
from tilecraft.errors import DeviceUnavailableError, GpuScheduleError, PackageError, TargetError
from tilecraft.targets.cuda import cuda_pipeline, find_ptxas
from tilecraft.targets.cuda.lowering import ptxas_architectures
from tilecraft.pipelines.target import Target
from tilecraft.targets.cuda.archs import CUDA_ARCHS, ptx_version
from tilecraft.runtime.libraries import cuda_driver_available

ARCHS = ["sm_80", "sm_90"]


def test_cuda_targets_parse():
    assert str(Target.parse("cuda -arch=sm_90")) == "cuda -arch=sm_90"
    assert Target.parse("cuda").arch == "sm_80"
    assert ptx_version(Target.parse("cuda -arch=sm_90")) == "ptx78"
    assert Target.parse("cuda -arch=sm_80").kind == "cuda" and Target.parse("llvm").kind == "llvm"


@pytest.mark.parametrize("spec, message", [
    ("cuda -arch=sm_13", "unknown CUDA architecture 'sm_13'"),
    ("cuda -arch=compute_80", "unknown CUDA architecture"),
    ("cuda -mcpu=sm_80", "expected -arch=sm_XX"),
    ("opencl", "unknown target kind 'opencl'"),
])
def test_bad_cuda_targets(spec, message):
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_tvm_tutorial(arch, tmp_path):
    # TVM's tutorial: split C's loop by 64, bind the outer loop to blockIdx.x and the inner
    # one to threadIdx.x. Here: 64 threads per block, one element per thread.
    pipeline = cuda_pipeline(f"cuda -arch={arch}", schedule_options="max-threads=64 vector=1")
    module = tilecraft.compile(vector_add(1024), target=f"cuda -arch={arch}", pipeline=pipeline)
    ptx = module.ptx()
    assert f".target {arch}" in ptx
    assert ".maxntid 64, 1, 1" in ptx
    counts = ptx_counts(ptx)
    assert counts["%ctaid.x"] >= 1 and counts["%tid.x"] >= 1
    assert counts["ld.global.f32"] + counts["ld.global.b32"] == 2
    assert "add.rn.f32" in ptx
    assert "gpu.launch_func" in module.ir("host") or "mgpuLaunchKernel" in module.ir("host")
    check_ptxas(module, arch, tmp_path)


def test_vector_add_default_schedule_vectorizes_global_loads(tmp_path):
    module = tilecraft.compile(vector_add(1 << 16), target="cuda -arch=sm_80")
    counts = ptx_counts(module.ptx())
    # 4 floats per thread, 16-byte aligned provably (offsets are multiples of 4 elements).
    assert counts["ld.global.v4.b32"] == 2 and counts["st.global.v4.b32"] == 1
    assert ".maxntid 256, 1, 1" in module.ptx()
    check_ptxas(module, "sm_80", tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_shared_memory(arch, tmp_path, rand):
    # The 64 x 64 block tile (fill-blocks=1: not shrunk to fill the GPU, see below).
    pipeline = cuda_pipeline(f"cuda -arch={arch}", schedule_options="fill-blocks=1")
    module = tilecraft.compile(matmul_mlir(256, 192, 128), target=f"cuda -arch={arch}", pipeline=pipeline)
    ptx = module.ptx()
    counts = ptx_counts(ptx)
    # Operand tiles staged in shared memory by all threads, barriers around the reads,
    # 4x4 register accumulators updated by FMAs.
    assert counts[".shared"] >= 2
    assert counts["st.shared.v4.b32"] >= 1 and counts["ld.shared.v4.b32"] >= 1
    assert counts["bar.sync"] >= 2
    assert counts["fma.rn.f32"] >= 64
    assert ".maxntid 16, 16, 1" in ptx
    check_ptxas(module, arch, tmp_path)
    a, b = rand((256, 128)), rand((128, 192))
    np.testing.assert_allclose(cpu_replay(module, matmul_mlir(256, 192, 128))(a, b), a @ b,
                               rtol=1e-5, atol=1e-4)


def test_a_small_matmul_shrinks_its_tiles_to_fill_the_gpu(tmp_path, rand):
    """256 x 192 in 64 x 64 tiles is 12 blocks on a 132-multiprocessor GPU: the tiles halve
    (down to 32 x 32) until the grid has fill-blocks (264) or they cannot shrink further."""
    module = tilecraft.compile(matmul_mlir(256, 192, 128), target="cuda -arch=sm_90", keep_ir=True)
    launch = next(line for line in module.ir("outline").splitlines() if "gpu.launch_func" in line)
    assert "blocks in (%c6, %c8, %c1)" in launch and "threads in (%c8, %c8, %c1)" in launch, launch
    check_ptxas(module, "sm_90", tmp_path)
    a, b = rand((256, 128)), rand((128, 192))
    np.testing.assert_allclose(cpu_replay(module, matmul_mlir(256, 192, 128))(a, b), a @ b, rtol=1e-5, atol=1e-4)


def test_matmul_without_shared_memory(tmp_path, rand):
    pipeline = cuda_pipeline("cuda -arch=sm_80", schedule_options="shared=0 unroll=2 fill-blocks=1")
    module = tilecraft.compile(matmul_mlir(128, 64, 96), target="cuda -arch=sm_80",
                               pipeline=pipeline)
    counts = ptx_counts(module.ptx())
    assert counts["ld.shared.v4.b32"] == 0 and counts[".shared"] == 0
    assert counts["fma.rn.f32"] >= 16
    check_ptxas(module, "sm_80", tmp_path)
    a, b = rand((128, 96)), rand((96, 64))
    np.testing.assert_allclose(cpu_replay(module, matmul_mlir(128, 64, 96))(a, b), a @ b,
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_softmax_block_per_row(arch, tmp_path, rand):
    model = softmax_model(64, 1000)
    module = tilecraft.compile(model, target=f"cuda -arch={arch}")
    ptx = module.ptx()
    counts = ptx_counts(ptx)
    # The max and the sum each: one block per row, 125 threads reducing 8 elements each
    # into shared memory, combined after a barrier.
    assert ".maxntid 125, 1, 1" in ptx
    assert counts[".shared"] >= 2 and counts["bar.sync"] >= 2
    assert counts["ld.shared.f32"] + counts["ld.shared.b32"] >= 2
    check_ptxas(module, arch, tmp_path)
    x = rand((64, 1000)) * 10
    np.testing.assert_allclose(cpu_replay(module, model)(x), softmax_reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_conv2d(arch, tmp_path, rng, rand):
    model = conv_model(rng)
    module = tilecraft.compile(model, target=f"cuda -arch={arch}")
    counts = ptx_counts(module.ptx())
    assert counts[".entry"] >= 2  # the padded input, the convolution (+ bias)
    assert counts["fma.rn.f32"] >= 1
    check_ptxas(module, arch, tmp_path)
    x = rand((1, 8, 32, 32))
    expected = tilecraft.compile(model, target="llvm")(x)
    np.testing.assert_allclose(cpu_replay(module, model)(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opt_level", [2, 3])
def test_padded_convolutions_in_a_row_stay_on_the_device(opt_level, tmp_path, rng, rand):
    """Two padded 3x3 convolutions of one shape (a ResNet basic block): their pads' zero-filled
    destinations are identical, and a CSE that merged them made one-shot bufferization copy a
    strided interior on the host ('memref.copy of a strided buffer ... stays on the host')."""
    def weights(name, shape):
        values = (rng.random(shape) - 0.5).astype(np.float32)
        return helper.make_tensor(name, TensorProto.FLOAT, values.shape, values.ravel())

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["y"])]
    model = onnx_model(nodes, [f32("x", [1, 8, 16, 16])], [f32("y", [1, 8, 16, 16])],
                       [weights("w1", (8, 8, 3, 3)), weights("b1", (8,)), weights("w2", (8, 8, 3, 3)),
                        weights("b2", (8,))])
    module = tilecraft.compile(model, target="cuda -arch=sm_90", opt_level=opt_level)
    check_ptxas(module, "sm_90", tmp_path)
    assert "memref.copy" not in module.ir("host")
    x = rand((1, 8, 16, 16))
    expected = tilecraft.compile(model, target="llvm")(x)
    np.testing.assert_allclose(cpu_replay(module, model)(x), expected, rtol=1e-4, atol=1e-5)


def test_recurrent_time_loop_keeps_its_bookkeeping_on_the_host(tmp_path, rng, rand):
    """An LSTM's time loop yields a fresh state buffer each step: bufferization (with
    ``allow-return-allocs-from-loops``) frees the loop's buffers through ownership flags and
    pointer arrays that host code fills with memref.store and a private helper reads. Those
    arrays stay in host memory; every buffer a kernel touches, the loop's included, is a
    device buffer freed with gpu.dealloc (it was 'Yield operand #0 is not equivalent', then
    'memref.store ... stays on the host')."""
    hidden, inputs, steps = 8, 5, 6

    def weights(name, shape):
        values = ((rng.random(shape) - 0.5) * 0.8).astype(np.float32)
        return helper.make_tensor(name, TensorProto.FLOAT, values.shape, values.ravel())

    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "h"], hidden_size=hidden)]
    model = onnx_model(nodes, [f32("x", [steps, 1, inputs])],
                       [f32("y", [steps, 1, 1, hidden]), f32("h", [1, 1, hidden])],
                       [weights("W", (1, 4 * hidden, inputs)), weights("R", (1, 4 * hidden, hidden)),
                        weights("B", (1, 8 * hidden))])
    module = tilecraft.compile(model, target="cuda -arch=sm_90")
    check_ptxas(module, "sm_90", tmp_path)
    mapped = module.ir("map")
    assert "call @dealloc_helper" in mapped and "gpu.dealloc" in mapped
    assert re.search(r"= memref\.alloc\(\) : memref<\d+xi1>", mapped)  # ownership flags, in host memory
    assert not re.search(r"gpu\.alloc\s*\(\) : memref<\d+xi1>", mapped)
    x = rand((steps, 1, inputs))
    expected = tilecraft.compile(model, target="llvm")(x)
    for got, want in zip(cpu_replay(module, model)(x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("channels,filters,kernel,groups,size,pad", [(240, 240, 1, 3, 28, 0), (96, 256, 5, 2, 27, 2)])
def test_grouped_convolution_bands_run_as_host_loops(channels, filters, kernel, groups, size, pad, tmp_path, rng, rand):
    """A grouped convolution of many channels comes from the frontend as a forall over bands
    of output rows (ir/conv.py), around each group's mapped kernels: that forall becomes host
    loops (tilecraft-gpu-serial-foralls) launching them; it was 'could not find a unique
    topLevel scf.forall' (the light zoo's AlexNet and ShuffleNet)."""
    weight = (rng.random((filters, channels // groups, kernel, kernel)) - 0.5).astype(np.float32)
    out = size + 2 * pad - kernel + 1
    model = onnx_model([helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[pad] * 4)],
                       [f32("x", [1, channels, size, size])], [f32("y", [1, filters, out, out])],
                       [helper.make_tensor("w", TensorProto.FLOAT, weight.shape, weight.ravel())])
    module = tilecraft.compile(model, target="cuda -arch=sm_90")
    check_ptxas(module, "sm_90", tmp_path)
    mapped = module.ir("map")
    assert "scf.forall" not in mapped.split("gpu.launch")[0]  # no forall left on the host
    assert re.search(r"scf\.for [^\n]*\n(.*\n)*?\s*gpu\.launch", mapped)
    x = rand((1, channels, size, size))
    expected = tilecraft.compile(model, target="llvm")(x)
    np.testing.assert_allclose(cpu_replay(module, model)(x), expected, rtol=1e-4, atol=1e-4)


def test_host_store_into_a_device_buffer_is_still_refused():
    """The host-only exception covers bookkeeping buffers no kernel reaches, not a buffer a
    kernel writes that host code then stores into."""
    src = """
    func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1.0 : f32
      %empty = tensor.empty() : tensor<64xf32>
      %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                           iterator_types = ["parallel"]} ins(%x : tensor<64xf32>) outs(%empty : tensor<64xf32>) {
        ^bb0(%in: f32, %out: f32):
          %s = arith.addf %in, %one : f32
          linalg.yield %s : f32
      } -> tensor<64xf32>
      %z = tensor.insert %one into %y[%c0] : tensor<64xf32>
      return %z : tensor<64xf32>
    }
    """
    with pytest.raises(GpuScheduleError, match="stays on the host"):
        tilecraft.compile(src, target="cuda -arch=sm_80")


@pytest.mark.parametrize("arch", ARCHS)
def test_demo_cnn_whole_model(arch, tmp_path, rand):
    shapes = {"input": [1, 1, 16, 16]}
    module = tilecraft.compile(str(DEMO_CNN), target=f"cuda -arch={arch}", shape_dict=shapes)
    counts = ptx_counts(module.ptx())
    # conv, relu, maxpool (x2), gemm, relu, gemm: every op runs in a kernel.
    assert counts[".entry"] >= 7
    assert counts["bar.sync"] >= 1 and counts["fma.rn.f32"] >= 1
    check_ptxas(module, arch, tmp_path)
    x = rand((1, 1, 16, 16))
    expected = tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=shapes)(x)
    replay = cpu_replay(module, str(DEMO_CNN), shapes)
    np.testing.assert_allclose(replay(x), expected, rtol=1e-4, atol=1e-5)


def test_stages_and_ir():
    module = tilecraft.compile(vector_add(256), target="cuda -arch=sm_80")
    assert module.pipeline.stage_names == [
        "input", "simplify", "schedule", "bufferize", "map", "loops", "outline", "kernel",
        "host", "binary", "assemble"]
    assert "#gpu.thread<x>" in module.ir("schedule")
    assert "gpu.launch" in module.ir("map") and "gpu.memcpy" in module.ir("map")
    assert "gpu.module" in module.ir("outline")


def test_dynamic_shapes_are_rejected():
    with pytest.raises(GpuScheduleError, match="dynamic shapes"):
        tilecraft.compile(str(DEMO_CNN), target="cuda -arch=sm_80")


def test_packages_take_no_profiling_variant(tmp_path):
    # CUDA packages themselves: tests/cuda/test_cuda_package.py.
    with pytest.raises(PackageError, match="asynchronously"):
        tilecraft.compile(vector_add(64), target="cuda", package_path=tmp_path / "m.tar", profile=True)


@pytest.mark.skipif(cuda_driver_available(), reason="this machine has a CUDA driver")
def test_calling_without_a_driver_raises(rand):
    module = tilecraft.compile(vector_add(64), target="cuda -arch=sm_80")
    assert module.ptx()  # compiling needed no GPU
    with pytest.raises(DeviceUnavailableError, match="libcuda.so.1"):
        module(rand((64,)), rand((64,)))
    assert issubclass(DeviceUnavailableError, TargetError)


def test_op_without_parallel_loops_is_rejected():
    # A reduction to a scalar has no parallel loop to spread over blocks: a typed error that
    # names the op, never host code touching device memory.
    src = """
    func.func @total(%x: tensor<1024xf32>) -> tensor<f32> {
      %zero = arith.constant 0.0 : f32
      %empty = tensor.empty() : tensor<f32>
      %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<f32>) -> tensor<f32>
      %r = linalg.reduce ins(%x : tensor<1024xf32>) outs(%init : tensor<f32>) dimensions = [0]
        (%in: f32, %acc: f32) {
          %s = arith.addf %in, %acc : f32
          linalg.yield %s : f32
        }
      return %r : tensor<f32>
    }
    """
    with pytest.raises(GpuScheduleError, match="linalg.fill: a 0-d op") as error:
        tilecraft.compile(src, target="cuda -arch=sm_80")
    assert error.value.stage == "schedule"


@pytest.mark.parametrize("arch", list(CUDA_ARCHS))
def test_every_architecture(arch, tmp_path):
    # PTX for each listed architecture (LLVM's NVPTX accepts its PTX version); a cubin where
    # the installed ptxas can target it, else PTX kept with a warning (CUDA 13: no sm_70/72).
    ptxas = find_ptxas()
    unsupported = ptxas is not None and arch not in ptxas_architectures(ptxas)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = tilecraft.compile(vector_add(256), target=f"cuda -arch={arch}")
    assert f".target {arch}" in module.ptx()
    if unsupported:
        assert not module.cubin()
        assert any(f"cannot target {arch}" in str(w.message) for w in caught)
    elif ptxas is not None:
        check_ptxas(module, arch, tmp_path)


def test_layer_norm_block_per_row(rng, rand, tmp_path):
    scale, bias = (rng.random(768).astype(np.float32) for _ in range(2))
    model = onnx_model(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
        [f32("x", [32, 768])], [f32("y", [32, 768])],
        [helper.make_tensor("s", TensorProto.FLOAT, [768], scale),
         helper.make_tensor("b", TensorProto.FLOAT, [768], bias)])
    module = tilecraft.compile(model, target="cuda -arch=sm_80")
    ptx = module.ptx()
    # The mean and the variance: one block per row, 128 threads splitting its 768 elements.
    assert ptx.count(".maxntid 128, 1, 1") == 2
    assert ptx_counts(ptx)[".shared"] == 2
    check_ptxas(module, "sm_80", tmp_path)
    x = rand((32, 768))
    expected = tilecraft.compile(model, target="llvm")(x)
    np.testing.assert_allclose(cpu_replay(module, model)(x), expected, rtol=1e-5, atol=1e-5)


def test_batch_matmul_maps_batch_to_z(rand, tmp_path):
    src = """
    func.func @bmm(%a: tensor<8x64x32xf32>, %b: tensor<8x32x128xf32>) -> tensor<8x64x128xf32> {
      %zero = arith.constant 0.0 : f32
      %empty = tensor.empty() : tensor<8x64x128xf32>
      %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
      %r = linalg.batch_matmul ins(%a, %b : tensor<8x64x32xf32>, tensor<8x32x128xf32>)
                               outs(%c : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
      return %r : tensor<8x64x128xf32>
    }
    """
    module = tilecraft.compile(src, target="cuda -arch=sm_80")
    assert "#gpu.block<z>, #gpu.block<y>, #gpu.block<x>" in module.ir("schedule")
    counts = ptx_counts(module.ptx())
    assert counts["%ctaid.z"] == 1 and counts["ld.shared.v4.b32"] >= 1
    check_ptxas(module, "sm_80", tmp_path)
    a, b = rand((8, 64, 32)), rand((8, 32, 128))
    np.testing.assert_allclose(cpu_replay(module, src)(a, b), a @ b, rtol=1e-5, atol=1e-5)
