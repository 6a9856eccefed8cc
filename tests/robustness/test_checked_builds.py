"""Checked builds (issue 48): ``tilecraft.compile(..., checked=True)`` / ``--checked`` add
MLIR's run-time verification of memref ops and tilecraft's of vector accesses; a violation
is a ``RuntimeVerificationError`` naming the op and its location, raised in the JIT and in
packages, never an abort or an access out of bounds. Correct programs compute the same
values checked or not. The fuzz suite under checked builds is in the slow tier."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import mlir_text
import tilecraft
from pinned_targets import AVX2
from tilecraft.errors import OptionError, RuntimeCheckError, RuntimeVerificationError
from tilecraft.tools.cli import run_cli

N = 4096
# A deliberately broken kernel: each output element reads input[i + offset], and nothing
# bounds the offset. The vectorizer reads 32 elements at a time and marks the reads in bounds.
SHIFTED_READ = f"""
func.func @main(%t: tensor<{N}xf32>, %offset: index) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}}
      outs(%e : tensor<{N}xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = arith.addi %i, %offset : index
    %v = tensor.extract %t[%j] : tensor<{N}xf32>
    linalg.yield %v : f32
  }} -> tensor<{N}xf32>
  return %r : tensor<{N}xf32>
}}
"""
# A scalar load at an index the caller passes (memref.load after bufferization: upstream's
# generate-runtime-verification checks it).
SCALAR_READ = """
func.func @main(%t: tensor<8xf32>, %i: index) -> tensor<2xf32> {
  %v = tensor.extract %t[%i] : tensor<8xf32>
  %r = tensor.from_elements %v, %v : tensor<2xf32>
  return %r : tensor<2xf32>
}
"""


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    path = tmp_path_factory.mktemp("checked") / "shifted.tar"
    # AVX2 pinned: the checked read below is AVX2's 4 x 8-lane tile (AVX-512's is 64 lanes)
    return (tilecraft.compile(SHIFTED_READ, checked=True, package_path=path, target=AVX2),
            tilecraft.runtime.load(path))


def test_a_broken_kernel_is_caught_in_the_jit_and_the_package(shifted):
    x = np.arange(N, dtype=np.float32)
    for module in shifted:
        np.testing.assert_array_equal(module(x, np.int64(0)), x)
        with pytest.raises(RuntimeVerificationError,
                           match=r"run-time verification failed: out-of-bounds access \(a vector of \[32\] "
                                 r"elements\) in `%\d+ = vector.transfer_read .*memref<4096xf32>, vector<32xf32>` "
                                 r'at loc\("-":9:10\)'):
            module(x, np.int64(10))
        np.testing.assert_array_equal(module(x[::-1].copy(), np.int64(0)), x[::-1])  # still usable


def test_a_scalar_load_out_of_bounds_names_the_memref_load():
    module = tilecraft.compile(SCALAR_READ, checked=True)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(module(x, np.int64(3)), [3.0, 3.0])
    for index in (8, -1, 1 << 40):
        with pytest.raises(RuntimeVerificationError, match=r"out-of-bounds access in `%0 = memref.load %arg0\[%arg1\] "
                                                           r': memref<8xf32>` at loc\("-":3:8\)'):
            module(x, np.int64(index))
    assert issubclass(RuntimeVerificationError, RuntimeCheckError)


@pytest.mark.parametrize("source, shapes", [
    (mlir_text.matmul(96, 80, 64), None),
    (mlir_text.dynamic_matmul(), [(33, 17), (17, 29)]),
    (mlir_text.softmax(48, 200), None),
    (mlir_text.conv_nchw(1, 8, 20, 20, 16, 3, 3, stride=2, pad=1), None),
    (mlir_text.pooling_nchw("max", 1, 4, 17, 17, 3), None),
], ids=["matmul", "dynamic_matmul", "softmax", "conv", "maxpool"])
def test_correct_programs_compute_the_same_values_checked(source, shapes, rng):
    plain, checked = tilecraft.compile(source), tilecraft.compile(source, checked=True)
    shapes = shapes or [spec.shape for spec in plain.signature.arguments]
    arguments = [rng.random(shape).astype(np.float32) for shape in shapes]
    np.testing.assert_array_equal(checked(*arguments), plain(*arguments))
    assert "tilecraft_check_failed" in checked.ir("llvm")


def test_the_option_is_checked_and_read_from_the_environment(monkeypatch):
    with pytest.raises(OptionError, match="checked must be True or False, got 'yes'"):
        tilecraft.CompileOptions(checked="yes")
    monkeypatch.setenv("TILECRAFT_CHECKED", "1")
    assert tilecraft.CompileOptions().checked is True
    monkeypatch.setenv("TILECRAFT_CHECKED", "0")
    assert tilecraft.CompileOptions().checked is False


def test_the_command_line_compiles_a_checked_package(tmp_path, capsys):
    source = tmp_path / "shifted.mlir"
    source.write_text(SHIFTED_READ)
    package = tmp_path / "shifted.tar"
    assert run_cli(["compile", str(source), "--checked", "-o", str(package)]) == 0
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, arg0=np.zeros(N, np.float32), arg1=np.int64(100))
    capsys.readouterr()
    assert run_cli(["run", str(package), "--inputs", str(inputs)]) == 1
    assert "tilecraft: error: run-time verification failed: out-of-bounds access" in capsys.readouterr().err


# ---- the proof: the fuzz suite and the ONNX conformance subset under checked builds (slow) ----

FUZZ_SEED = 1
FUZZ_CASES = 1000
# Node tests of the ops whose kernels index with computed offsets: gathers, slices, pads,
# windows (convolutions, pooling), resizes, concatenations, reductions.
CONFORMANCE_SUBSET = (r"^test_(gather|slice|pad|conv|maxpool|averagepool|resize|concat|split|"
                      r"reduce_sum|softmax|matmul|transpose|tile|expand)")


@pytest.mark.slow
def test_the_fuzz_suite_under_checked_builds_has_no_violation(monkeypatch):
    pytest.importorskip("onnxruntime")
    import fuzz  # tests/robustness is on sys.path (pytest's rootdir-relative import)

    monkeypatch.setenv("TILECRAFT_CHECKED", "1")  # every compile of the fuzz workers is checked
    results = fuzz.run_suite(FUZZ_SEED, FUZZ_CASES, jobs=2)
    bad = [f"case {r['id']} ({r['category']}, seed {r['seed']}): {r['outcome']}: {r.get('detail', '')}"
           for r in results if r["outcome"] in fuzz.FAILING or "RuntimeVerificationError" in r.get("detail", "")]
    assert not bad, "\n".join(bad) + "\n" + fuzz.summary_table(results)
    assert len(results) == FUZZ_CASES


@pytest.mark.slow
@pytest.mark.conformance
def test_the_conformance_subset_under_checked_builds_matches_the_expected_statuses():
    pytest.importorskip("onnx")
    harness = Path(__file__).resolve().parents[1] / "conformance" / "onnx"
    sys.path.insert(0, str(harness))
    from onnx_conformance import expected as expectations
    from onnx_conformance.runner import run_cases, worker_env
    from onnx_conformance.suite import discover

    cases = discover(["node"], CONFORMANCE_SUBSET)
    assert len(cases) > 100
    results = run_cases(cases, env={**worker_env(), "TILECRAFT_CHECKED": "1"})
    expected = expectations.read_expected()
    differ = {name: (expected.get(name), record["status"], str(record.get("message", ""))[:300])
              for name, record in results.items() if record["status"] != expected.get(name)}
    violations = {name: record.get("message") for name, record in results.items()
                  if "verification failed" in str(record.get("message", ""))}
    assert not differ and not violations, (differ, violations)
