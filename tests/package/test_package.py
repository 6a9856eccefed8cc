"""Deployable packages: written by tilecraft.compile(package_path=...), loaded by
tilecraft.runtime.load with numpy + ctypes only, and rejected clearly when they are bad."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from package_archives import read_members, write_members

import tilecraft  # noqa: E402
from tilecraft.errors import ArgumentTypeError, ArgumentValueError, PackageError, PackageTargetError  # noqa: E402
from tilecraft.runtime import package as fmt  # noqa: E402

WEIGHTS = np.random.default_rng(7).standard_normal((64, 48)).astype(np.float32)
BIAS = np.linspace(-1, 1, 48, dtype=np.float32)


def dense_model() -> "onnx.ModelProto":
    """x[N, 64] -> (relu(x @ W + b) [N, 48], sum over the features [N]): weights, a dynamic
    batch, two named outputs."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="dense"),
        helper.make_node("Add", ["xw", "b"], ["pre"], name="bias"),
        helper.make_node("Relu", ["pre"], ["activation"], name="relu"),
        helper.make_node("ReduceSum", ["activation", "axes"], ["total"], name="total", keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("activation", TensorProto.FLOAT, ["N", 48]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, ["N"])],
        [numpy_helper.from_array(WEIGHTS, "W"), numpy_helper.from_array(BIAS, "b"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    activation = np.maximum(x @ WEIGHTS + BIAS, 0)
    return activation, activation.sum(axis=1)


@pytest.fixture(scope="module")
def package_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("package") / "dense.tar"
    tilecraft.compile(tilecraft.load(dense_model()), package_path=path, profile=True)
    return path


@pytest.fixture(scope="module")
def package(package_path):
    return tilecraft.runtime.load(package_path)


def test_package_layout_and_manifest(package_path):
    with tarfile.open(package_path) as archive:
        assert sorted(archive.getnames()) == sorted([fmt.MANIFEST, fmt.LIBRARY, fmt.PROFILE_LIBRARY])
        manifest = json.load(archive.extractfile(fmt.MANIFEST))
    assert manifest["format"] == fmt.FORMAT_NAME and manifest["format_version"] == fmt.FORMAT_VERSION
    assert manifest["tilecraft_version"] == tilecraft.__version__
    assert [i["name"] for i in manifest["inputs"]] == ["x"]
    assert manifest["inputs"][0]["shape"] == [None, 64] and manifest["inputs"][0]["dtype"] == "float32"
    assert [o["name"] for o in manifest["outputs"]] == ["activation", "total"]
    assert manifest["outputs"][1]["shape"] == [None]
    assert manifest["target"] == "llvm" and manifest["machine"] == fmt.normalized_machine(os.uname().machine)
    assert len(manifest["sha256"][fmt.LIBRARY]) == 64
    # W (64x48 f32) is a dense_resource weight: assembled from its bytes, not printed as IR
    assert manifest["weights"]["tensors"] >= 1 and manifest["weights"]["bytes"] >= WEIGHTS.nbytes


def test_compiling_an_onnx_path_names_the_outputs_after_the_graph(tmp_path, rand):
    onnx.save(dense_model(), str(tmp_path / "dense.onnx"))
    tilecraft.compile(str(tmp_path / "dense.onnx"), shape_dict={"x": [2, 64]}, package_path=tmp_path / "p.tar")
    package = tilecraft.runtime.load(tmp_path / "p.tar")
    assert package.output_names == ["activation", "total"]
    x = rand((2, 64))
    np.testing.assert_allclose(package(x)[0], reference(x)[0], rtol=1e-5, atol=1e-5)


def test_package_runs_and_matches_numpy(package, rand):
    for batch in (1, 5, 33):
        x = rand((batch, 64))
        activation, total = package(x)
        expected_activation, expected_total = reference(x)
        np.testing.assert_allclose(activation, expected_activation, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, expected_total, rtol=1e-4, atol=1e-4)
    assert package.input_names == ["x"] and package.output_names == ["activation", "total"]


def test_package_checks_arguments_like_a_compiled_module(package, rand):
    with pytest.raises(ArgumentTypeError, match="expected dtype float32"):
        package(rand((2, 64), np.float64))
    with pytest.raises(ArgumentValueError, match="dimension 1 is 63, must be 64"):
        package(rand((2, 63)))
    with pytest.raises(ArgumentValueError, match="missing argument"):
        package()


def test_package_matches_the_jit(package, rand):
    x = rand((16, 64))
    jit = tilecraft.compile(dense_model())
    for ours, theirs in zip(package(x), jit(x)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_parallel_loops_run_on_the_packaged_async_runtime(tmp_path, rand):
    """A matmul the schedule splits across threads, called many times: the C async
    runtime (runtime/async_runtime.c) must complete every task and free its objects."""
    text = textwrap.dedent("""
        func.func @mm(%a: tensor<96x128xf32>, %b: tensor<128x80xf32>) -> tensor<96x80xf32> {
          %zero = arith.constant 0.0 : f32
          %init = tensor.empty() : tensor<96x80xf32>
          %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<96x80xf32>) -> tensor<96x80xf32>
          %c = linalg.matmul ins(%a, %b : tensor<96x128xf32>, tensor<128x80xf32>) outs(%filled : tensor<96x80xf32>) -> tensor<96x80xf32>
          return %c : tensor<96x80xf32>
        }
    """)
    path = tmp_path / "mm.tar"
    tilecraft.compile(text, target=tilecraft.Target(num_threads=2), package_path=path)
    package = tilecraft.runtime.load(path)
    assert package.manifest["planned_threads"] == 2
    a, b = rand((96, 128)), rand((128, 80))
    for _ in range(50):
        np.testing.assert_allclose(package(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_profile_reports_each_kernel(package, rand):
    x = rand((4, 64))
    outputs, kernels = package.profile(x)
    names = [k.name for k in kernels]
    assert any(name.startswith("dense(MatMul)") for name in names), names
    assert all(k.calls == 1 and k.seconds >= 0 for k in kernels)
    np.testing.assert_allclose(outputs[0], reference(x)[0], rtol=1e-5, atol=1e-5)


def test_run_driver_returns_named_outputs_and_timing(package_path, rand):
    x = rand((3, 64))
    result = tilecraft.run(package_path, {"x": x}, repeat=3, number=2, profile=True)
    np.testing.assert_allclose(result.outputs["activation"], reference(x)[0], rtol=1e-5, atol=1e-5)
    assert len(result.timing.per_call) == 3
    assert "Execution time summary" in result.format_times()
    assert "dense(MatMul)" in result.format_profile()


# ---- runtime-only loading ---------------------------------------------------------------

RUNTIME_ONLY = textwrap.dedent("""
    import importlib.abc, sys

    class NoMLIR(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir.") or name == "onnx" or name.startswith("onnx."):
                raise ImportError(f"{name} is blocked in this runtime-only test")
            return None

    sys.meta_path.insert(0, NoMLIR())
    import numpy as np
    import tilecraft.runtime

    package = tilecraft.runtime.load(sys.argv[1])
    x = np.load(sys.argv[2])["x"]
    activation, total = package(x)
    np.savez(sys.argv[3], activation=activation, total=total)
    assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
    try:
        import mlir  # noqa: F401
    except ImportError:
        print("mlir import blocked")
""")


def test_package_loads_and_runs_without_mlir(package_path, tmp_path, rand):
    x = rand((7, 64))
    np.savez(tmp_path / "in.npz", x=x)
    script = tmp_path / "runtime_only.py"
    script.write_text(RUNTIME_ONLY)
    completed = subprocess.run(
        [sys.executable, str(script), str(package_path), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "mlir import blocked" in completed.stdout
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["activation"], reference(x)[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["total"], reference(x)[1], rtol=1e-4, atol=1e-4)


# ---- bad packages -----------------------------------------------------------------------

def _with_manifest(package_path: Path, tmp_path: Path, **changes) -> Path:
    members = read_members(package_path)
    manifest = json.loads(members[fmt.MANIFEST])
    manifest.update(changes)
    members[fmt.MANIFEST] = json.dumps(manifest).encode()
    return write_members(tmp_path / "edited.tar", members)


def test_missing_file(tmp_path):
    with pytest.raises(PackageError, match="no such package file"):
        tilecraft.runtime.load(tmp_path / "absent.tar")


def test_not_a_package(tmp_path):
    path = tmp_path / "random.tar"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(PackageError, match="not a tilecraft package"):
        tilecraft.runtime.load(path)


def test_truncated_package(package_path, tmp_path):
    data = package_path.read_bytes()
    path = tmp_path / "truncated.tar"
    for cut in (len(data) // 3, len(data) // 2, 2 * len(data) // 3):
        path.write_bytes(data[:cut])
        with pytest.raises(PackageError, match="truncated|corrupted|could not read"):
            tilecraft.runtime.load(path)


def test_archive_missing_a_member_the_manifest_lists(package_path, tmp_path):
    """A cut at a member boundary reads as a valid tar: the manifest's hash table says what
    must be there (the profiling library here)."""
    members = read_members(package_path)
    assert fmt.PROFILE_LIBRARY in members
    del members[fmt.PROFILE_LIBRARY]
    with pytest.raises(PackageError, match="truncated or incomplete.*profile.so"):
        tilecraft.runtime.load(write_members(tmp_path / "incomplete.tar", members))


def test_corrupted_library(package_path, tmp_path):
    members = read_members(package_path)
    library = bytearray(members[fmt.LIBRARY])
    library[len(library) // 2] ^= 0xFF
    members[fmt.LIBRARY] = bytes(library)
    with pytest.raises(PackageError, match="model.so is corrupted"):
        tilecraft.runtime.load(write_members(tmp_path / "corrupt.tar", members))


def test_archive_without_manifest(package_path, tmp_path):
    members = read_members(package_path)
    del members[fmt.MANIFEST]
    with pytest.raises(PackageError, match="no manifest.json"):
        tilecraft.runtime.load(write_members(tmp_path / "nomanifest.tar", members))


def test_incompatible_format_version(package_path, tmp_path):
    path = _with_manifest(package_path, tmp_path, format_version=fmt.FORMAT_VERSION + 1, tilecraft_version="9.0.0")
    with pytest.raises(PackageError, match=r"package format 2 \(written by tilecraft 9.0.0\)"):
        tilecraft.runtime.load(path)


def test_package_for_another_architecture(package_path, tmp_path):
    other = "aarch64" if fmt.normalized_machine(os.uname().machine) != "aarch64" else "x86_64"
    path = _with_manifest(package_path, tmp_path, machine=other, target=f"llvm -mtriple={other}-linux-gnu")
    with pytest.raises(PackageTargetError, match=f"built for target 'llvm -mtriple={other}-linux-gnu'"):
        tilecraft.runtime.load(path)


def test_package_for_missing_cpu_features(package_path, tmp_path):
    path = _with_manifest(package_path, tmp_path, required_cpu_flags=["avx512f", "not_a_real_cpu_feature"])
    with pytest.raises(PackageTargetError, match="not_a_real_cpu_feature, which this CPU lacks"):
        tilecraft.runtime.load(path)


def test_library_exports_the_entry_and_keeps_its_runtime_private(package_path, tmp_path):
    """The C runtime linked into the package is hidden, so neither the package nor a JIT in
    the same process binds to the other's async runtime."""
    from tilecraft.runtime.libraries import llvm_tool

    members = read_members(package_path)
    (tmp_path / fmt.LIBRARY).write_bytes(members[fmt.LIBRARY])
    listing = subprocess.run([llvm_tool("llvm-nm"), "--dynamic", "--defined-only", str(tmp_path / fmt.LIBRARY)],
                             capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in listing.splitlines() if line.strip()}
    assert json.loads(members[fmt.MANIFEST])["symbol"] in exported
    assert not {s for s in exported if s.startswith("mlirAsyncRuntime") or s == "memrefCopy"}


def test_scalar_arguments_travel_by_value(tmp_path, rand):
    text = textwrap.dedent("""
        func.func @axpb(%x: tensor<16xf32>, %a: f32, %b: f64) -> tensor<16xf32> {
          %init = tensor.empty() : tensor<16xf32>
          %bf = arith.truncf %b : f64 to f32
          %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                               iterator_types = ["parallel"]}
              ins(%x : tensor<16xf32>) outs(%init : tensor<16xf32>) {
            ^bb0(%v: f32, %out: f32):
              %m = arith.mulf %v, %a : f32
              %s = arith.addf %m, %bf : f32
              linalg.yield %s : f32
          } -> tensor<16xf32>
          return %r : tensor<16xf32>
        }
    """)
    tilecraft.compile(text, package_path=tmp_path / "axpb.tar")
    package = tilecraft.runtime.load(tmp_path / "axpb.tar")
    x = rand((16,))
    np.testing.assert_allclose(package(x, 2.5, -1.25), x * 2.5 - 1.25, rtol=1e-6)
    with pytest.raises(ArgumentTypeError, match="expected a scalar float32"):
        package(x, "2", 1.0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_parallel_package_runs_in_a_forked_child(tmp_path, rand):
    """A worker process forked after the package ran (as a tuner's or a server's workers
    are) starts its own threads: its first parallel loop must not wait forever."""
    text = textwrap.dedent("""
        func.func @mm(%a: tensor<96x128xf32>, %b: tensor<128x80xf32>) -> tensor<96x80xf32> {
          %zero = arith.constant 0.0 : f32
          %init = tensor.empty() : tensor<96x80xf32>
          %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<96x80xf32>) -> tensor<96x80xf32>
          %c = linalg.matmul ins(%a, %b : tensor<96x128xf32>, tensor<128x80xf32>) outs(%filled : tensor<96x80xf32>) -> tensor<96x80xf32>
          return %c : tensor<96x80xf32>
        }
    """)
    tilecraft.compile(text, target=tilecraft.Target(num_threads=2), package_path=tmp_path / "mm.tar")
    a, b = rand((96, 128)), rand((128, 80))
    np.savez(tmp_path / "io.npz", a=a, b=b, expected=a @ b)
    # In a fresh interpreter: forking pytest itself would also fork the threads of whatever
    # earlier tests loaded (torch's OpenMP pool, OpenBLAS), whose locks the child could
    # inherit held — a hang that says nothing about the package's runtime.
    script = textwrap.dedent("""
        import os, sys
        import numpy as np
        import tilecraft.runtime
        data = np.load(sys.argv[2])
        package = tilecraft.runtime.load(sys.argv[1])
        assert np.allclose(package(data["a"], data["b"]), data["expected"], rtol=1e-4, atol=1e-4)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its first parallel loops must start their own threads
            try:
                ok = all(np.allclose(package(data["a"], data["b"]), data["expected"], rtol=1e-4, atol=1e-4)
                         for _ in range(5))
                os.write(write_end, b"ok" if ok else b"wrong")
            finally:
                os._exit(0)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        print(os.read(read_end, 16).decode(), status)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "mm.tar"), str(tmp_path / "io.npz")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "0"]


def test_kernel_names_from_fused_locations():
    """Elementwise fusion merges ONNX nodes into one op with a fused location (BERT's GELU,
    made of Mul/Erf/Add nodes): its kernel is named after the first node, not ``kernelN``."""
    from mlir import ir

    from tilecraft.pipelines.profiling import kernel_name

    with ir.Context():
        module = ir.Module.parse("""
          func.func @f(%a: f32) -> f32 {
            %0 = arith.addf %a, %a : f32 loc(fused["/0/Mul_2(Mul)"("model.onnx":0:0), "/0/Mul_1(Mul)"("model.onnx":0:0)])
            %1 = arith.mulf %0, %0 : f32 loc("n7(Relu)")
            %2 = arith.subf %1, %1 : f32
            return %2 : f32
          }""")
        ops = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]
        assert kernel_name(ops[0], 0) == "/0/Mul_2(Mul)"
        assert kernel_name(ops[1], 1) == "n7(Relu)"
        assert kernel_name(ops[2], 2) == "arith.subf (line 5)"  # MLIR text: its line
