"""The C target's options: weights as a blob beside model.c (what lets ResNet-50-sized models
build), the package's checksums, OpenMP pragmas on parallel loops (numerics with 2 threads),
and bad option strings as typed errors. Results are compared with the llvm target."""

from __future__ import annotations

import hashlib
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
from tilecraft.errors import ArgumentValueError, TargetError
from tilecraft.targets.c.lowering import OMP_PRAGMA
from tilecraft.targets.c.package import CHECKSUMS_FILE, WEIGHTS_FILE, emit_c

CC = os.environ.get("CC", "cc")
pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason="no host C compiler")

ROOT = Path(tilecraft.__file__).resolve().parent
DIGITS = str(ROOT / "examples" / "digits_cnn.onnx")
DIGITS_SHAPE = {"input": [1, 1, 16, 16]}


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.load(ROOT / "examples" / "digits_test.npz")["images"][:2].astype(np.float32).reshape(2, 1, 1, 16, 16)


@pytest.fixture(scope="module")
def llvm_digits():
    return tilecraft.compile(DIGITS, shape_dict=DIGITS_SHAPE)


def _openmp_available(tmp_path: Path) -> bool:
    probe = tmp_path / "omp.c"
    probe.write_text("#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
    return subprocess.run([CC, "-fopenmp", str(probe), "-o", str(tmp_path / "omp")], capture_output=True).returncode == 0


def test_blob_weights_match_the_llvm_target(images, llvm_digits):
    model = tilecraft.compile(DIGITS, target="c -weights=blob", shape_dict=DIGITS_SHAPE)
    source = model.sources["model.c"]
    assert ".incbin" in source and "static const float tc_model_weight0[" not in source
    blob = model.sources[WEIGHTS_FILE]
    assert isinstance(blob, bytes) and model.weight_bytes <= len(blob) < model.weight_bytes + 64 * 16
    for x in images:
        np.testing.assert_allclose(model.run(x)[0], llvm_digits(x), rtol=1e-4, atol=1e-5)


def test_weights_mode_defaults_by_size():
    small = tilecraft.compile(DIGITS, target="c", shape_dict=DIGITS_SHAPE)  # 73 KB of weights: C arrays
    assert WEIGHTS_FILE not in small.sources and "static const float tc_model_weight0[" in small.sources["model.c"]
    assert str(tilecraft.Target.parse("c -weights=blob")) == "c -weights=blob"
    assert str(tilecraft.Target.parse("c -openmp")) == "c -openmp"


def test_checksums_cover_every_file_and_the_tar_builds(tmp_path, images, llvm_digits):
    """The tar's SHA256SUMS lists every other file (the blob included) in ``sha256sum -c``
    format; the Makefile builds the extracted folder, where the .incbin finds the blob."""
    path = tmp_path / "model.tar"
    tilecraft.compile(DIGITS, target="c -weights=blob", shape_dict=DIGITS_SHAPE, package_path=str(path))
    with tarfile.open(path) as archive:
        names = sorted(archive.getnames())
        archive.extractall(tmp_path / "src", filter="data")
    assert names == sorted(["Makefile", CHECKSUMS_FILE, "main.c", "model.c", "model.h", WEIGHTS_FILE])
    listed = {}
    for line in (tmp_path / "src" / CHECKSUMS_FILE).read_text().splitlines():
        digest, name = line.split("  ")
        listed[name] = digest
    assert set(listed) == set(names) - {CHECKSUMS_FILE}
    for name, digest in listed.items():
        assert hashlib.sha256((tmp_path / "src" / name).read_bytes()).hexdigest() == digest
    tampered = bytearray((tmp_path / "src" / WEIGHTS_FILE).read_bytes())  # one bit flipped in the blob
    tampered[100] ^= 1
    assert hashlib.sha256(bytes(tampered)).hexdigest() != listed[WEIGHTS_FILE]
    if shutil.which("make") is None:
        pytest.skip("no make")
    build = subprocess.run(["make", "-C", str(tmp_path / "src")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    x = images[0].astype("<f4")
    x.tofile(tmp_path / "in.bin")
    run = subprocess.run([str(tmp_path / "src" / "model"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "out.bin", dtype="<f4").reshape(1, 10)
    np.testing.assert_allclose(got, llvm_digits(images[0]), rtol=1e-4, atol=1e-5)


def test_blob_sources_compile_without_warnings_at_o3(tmp_path):
    model = tilecraft.compile(DIGITS, target="c -weights=blob", shape_dict=DIGITS_SHAPE)
    model.write_sources(tmp_path)
    completed = subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O3", "-march=native",
                                "-I", str(tmp_path), "-c", str(tmp_path / "model.c"), "-o", str(tmp_path / "x.o")],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr


def test_o3_build_matches(tmp_path, images, llvm_digits):
    """The floor of issue #46 is stated at ``cc -O3 -march=native``: the sources built that way
    give the llvm target's results."""
    model = tilecraft.compile(DIGITS, target="c", shape_dict=DIGITS_SHAPE)
    model.write_sources(tmp_path)
    subprocess.run([CC, "-std=c99", "-O3", "-march=native", "-I", str(tmp_path), "-o", str(tmp_path / "model"),
                    str(tmp_path / "main.c"), str(tmp_path / "model.c"), "-lm"], check=True)
    x = images[1].astype("<f4")
    x.tofile(tmp_path / "in.bin")
    subprocess.run([str(tmp_path / "model"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True)
    got = np.fromfile(tmp_path / "out.bin", dtype="<f4").reshape(1, 10)
    np.testing.assert_allclose(got, llvm_digits(images[1]), rtol=1e-4, atol=1e-5)


def test_openmp_build_matches_with_two_threads(tmp_path, images, llvm_digits, monkeypatch):
    if not _openmp_available(tmp_path):
        pytest.skip(f"{CC} cannot build with -fopenmp")
    model = tilecraft.compile(DIGITS, target="c -openmp", shape_dict=DIGITS_SHAPE)
    source = model.sources["model.c"]
    assert model.openmp and source.count(OMP_PRAGMA) >= 5  # the convolutions, pools, dense layers
    assert "-fopenmp" in model.sources["Makefile"]
    # each parallel loop calls its body, a function with restrict parameters (GCC's OpenMP
    # outlining would otherwise hide them and the inner loops would not vectorize)
    bodies = re.findall(r"static void (tc_model_nest\d+_body)\(([^)]*)\)", source)
    assert len(bodies) == source.count(OMP_PRAGMA)
    for name, parameters in bodies:
        assert source.count(f"{name}(") == 2, name  # defined, and called by its parallel loop
        arrays = [p for p in parameters.split(", ") if "[" in p]
        assert arrays and all("[restrict " in p for p in arrays), (name, parameters)
    model.write_sources(tmp_path / "src")
    strict = subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O3", "-fopenmp", "-c",
                             str(tmp_path / "src" / "model.c"), "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
    assert strict.returncode == 0, strict.stderr
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    for x in images:
        np.testing.assert_allclose(model.run(x)[0], llvm_digits(x), rtol=1e-4, atol=1e-5)
    plain = tilecraft.compile(DIGITS, target="c", shape_dict=DIGITS_SHAPE)
    assert "#pragma omp" not in plain.sources["model.c"] and not plain.openmp


def test_openmp_skips_a_loop_whose_iterations_share_a_written_element():
    """``y[0] += x[i]`` over ``i``: the iterations all write ``y[0]`` and get no pragma."""
    source = """
    func.func @f(%x: tensor<64xf32>) -> tensor<f32> {
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<f32>
      %i = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
      %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                           iterator_types = ["reduction"]} ins(%x : tensor<64xf32>) outs(%i : tensor<f32>) {
      ^bb0(%a: f32, %b: f32):
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
      } -> tensor<f32>
      return %r : tensor<f32>
    }"""
    model = tilecraft.compile(source, target="c -openmp")
    assert OMP_PRAGMA not in model.sources["model.c"]
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_allclose(model.run(x)[0], x.sum(), rtol=1e-6)


@pytest.mark.parametrize("spec", ["c -weights=text", "c -openmp=4", "c -fopenmp", "c -weights"])
def test_bad_options_are_typed_errors(spec):
    with pytest.raises(TargetError, match=re.escape("-openmp and -weights=auto|array|blob")):
        tilecraft.Target.parse(spec)


def test_bad_weights_mode_in_emit_c():
    with pytest.raises(ArgumentValueError, match="weights must be one of"):
        emit_c(None, None, None, weights="text")  # type: ignore[arg-type]


def test_cli_accepts_the_options(tmp_path):
    out = tmp_path / "m.tar"
    completed = subprocess.run(
        [sys.executable, "-m", "tilecraft.tools.cli", "compile", DIGITS, "--target", "c -weights=blob -openmp",
         "--input-shapes", "input:[1,1,16,16]", "-o", str(out)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    with tarfile.open(out) as archive:
        assert WEIGHTS_FILE in archive.getnames()


def test_innermost_loops_carry_the_gcc_unroll_hint():
    """The -O3 fix (docs/performance.md): every nest's innermost loop, and only it, follows
    TC_MODEL_INNER_LOOP, which is GCC's 'unroll 1' under GCC and empty elsewhere."""
    source = tilecraft.compile(DIGITS, target="c", shape_dict=DIGITS_SHAPE).sources["model.c"]
    assert '#define TC_MODEL_INNER_LOOP _Pragma("GCC unroll 1")' in source
    assert '#pragma GCC optimize("no-loop-unroll-and-jam")' in source
    lines = source.splitlines()
    hinted = [i + 1 for i, line in enumerate(lines) if line.strip() == "TC_MODEL_INNER_LOOP"]
    assert hinted and all(lines[i].lstrip().startswith("for (") for i in hinted)
    for i in hinted:  # the hinted loop has no loop inside it
        indent = len(lines[i]) - len(lines[i].lstrip())
        body = []
        for line in lines[i + 1:]:
            if line.startswith(" " * indent + "}"):
                break
            body.append(line)
        assert not any(line.lstrip().startswith("for (") for line in body)


@pytest.mark.slow
def test_resnet50_builds_as_c_with_blob_weights():
    """ResNet-50 (the onnx wheel's light zoo model, seeded random weights, logits exposed as
    benchmarks/onnx_models.py prepares them): 102 MB of weights, so ``-weights=auto`` writes
    the blob; built with the host cc and compared with onnxruntime. A few minutes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import onnx  # noqa: PLC0415
    import onnx_models  # noqa: PLC0415  (the benchmark's light-model loader)

    ort = pytest.importorskip("onnxruntime")
    model = onnx_models.expose_logits(onnx_models.randomize_weights(
        onnx.load(f"{onnx_models.LIGHT_DIR}/light_resnet50.onnx"))[0])
    feeds = onnx_models.random_inputs(model)
    compiled = tilecraft.compile(model, target="c", shape_dict={k: list(v.shape) for k, v in feeds.items()})
    assert WEIGHTS_FILE in compiled.sources and compiled.weight_bytes > 100_000_000
    assert len(compiled.sources["model.c"]) < 1_000_000  # the weights are not C text
    got = compiled.run(*feeds.values())
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        scale = float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale)
