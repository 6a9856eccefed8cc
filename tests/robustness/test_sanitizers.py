"""The native runtime under AddressSanitizer and UndefinedBehaviorSanitizer (issue 48): the C
sources linked into every package (runtime/async_runtime.c: the parallel loops' thread pool;
runtime/c_runner_utils.c; runtime/runtime_checks.c: the check reports; runtime/profile_timer.c)
built with ``-fsanitize=address,undefined`` (``TILECRAFT_SANITIZE``), then exercised through
the package runtime in a process with the sanitizer runtime preloaded: parallel runs from
several threads, the profiling variant, failing checks; and the C target's emitted code and
driver built with the sanitizers. 0 reports. Slow tier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mlir_text
import tilecraft
from tilecraft.errors import ToolchainError

from test_checked_builds import SHIFTED_READ

pytestmark = pytest.mark.slow

DRIVER = r"""
import ctypes, sys, threading
import numpy as np
import tilecraft.runtime
from tilecraft.errors import RuntimeVerificationError

ctypes.CDLL(None).__asan_init  # the sanitizer runtime is in this process
matmul, shifted = (tilecraft.runtime.load(path) for path in sys.argv[1:3])
rng = np.random.default_rng(0)
a, b = rng.random((256, 256), dtype=np.float32), rng.random((256, 256), dtype=np.float32)
expected = a @ b
errors = []

def calls():
    try:
        for _ in range(20):
            np.testing.assert_allclose(matmul(a, b), expected, rtol=2e-4)
    except Exception as error:
        errors.append(error)

threads = [threading.Thread(target=calls) for _ in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
assert not errors, errors
outputs, kernels = matmul.profile(a, b)
assert kernels and all(k.calls >= 1 for k in kernels), kernels
x = np.arange(4096, dtype=np.float32)
for offset in (0, 10, 0, 4000):
    try:
        shifted(x, np.int64(offset))
        assert offset == 0
    except RuntimeVerificationError:
        assert offset != 0
print("sanitized runs done")
"""


def sanitizer_runtime() -> str:
    found = subprocess.run([os.environ.get("CC", "cc"), "-print-file-name=libasan.so"],
                           capture_output=True, text=True).stdout.strip()
    if not found or not Path(found).is_file():
        pytest.skip("the C compiler has no AddressSanitizer runtime (libasan.so)")
    return found


def test_the_c_runtime_runs_clean_under_asan_and_ubsan(tmp_path, monkeypatch):
    libasan = sanitizer_runtime()
    monkeypatch.setenv("TILECRAFT_SANITIZE", "address,undefined")
    matmul, shifted = tmp_path / "matmul.tar", tmp_path / "shifted.tar"
    tilecraft.compile(mlir_text.matmul(256, 256, 256), package_path=matmul, profile=True)
    tilecraft.compile(SHIFTED_READ, package_path=shifted, checked=True)
    monkeypatch.delenv("TILECRAFT_SANITIZE")
    environment = {**os.environ, "LD_PRELOAD": libasan,
                   "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1",
                   "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
                   "TILECRAFT_NUM_THREADS": "4"}
    done = subprocess.run([sys.executable, "-c", DRIVER, str(matmul), str(shifted)],
                          capture_output=True, text=True, timeout=600, env=environment)
    reports = [line for line in done.stderr.splitlines()
               if "AddressSanitizer" in line or "runtime error:" in line or "UndefinedBehaviorSanitizer" in line]
    assert done.returncode == 0 and "sanitized runs done" in done.stdout and not reports, done.stderr[-3000:]
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(_library(matmul, tmp_path))],
                             capture_output=True, text=True).stdout
    assert "__asan_report" in symbols and "__ubsan_handle" in symbols  # the runtime was instrumented


RUNTIME = Path(tilecraft.__file__).parent / "runtime" / "async_runtime.c"


@pytest.mark.parametrize("driver", ["async_runtime_driver.c", "parallel_for_driver.c"])
@pytest.mark.parametrize("threads, spin_us", [("2", "100"), ("4", "100"), ("3", "0")])
def test_the_parallel_runtime_runs_clean_under_tsan(tmp_path, threads, spin_us, driver):
    """The pool's deques, the sleeping workers' wake-ups and the tokens' lock-free state reads
    (runtime/async_runtime.c) under ThreadSanitizer, driven as async-parallel-for's code drives
    them (async_runtime_driver.c) and as the flat parallel-for's code does (parallel_for_driver.c:
    published jobs, hazard slots, call begin/end, fork) by three threads at once, with nested
    loops; with TILECRAFT_SPIN_US=0 (and the call spin off) every idle worker sleeps, so the
    wake-up path runs on every loop."""
    compiler = os.environ.get("CC", "cc")
    found = subprocess.run([compiler, "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
    if not found or not Path(found).is_file():
        pytest.skip("the C compiler has no ThreadSanitizer runtime (libtsan.so)")
    binary = tmp_path / "driver"
    subprocess.run([compiler, "-fsanitize=thread", "-g", "-O1", "-pthread", "-Wno-tsan",
                    str(Path(__file__).with_name(driver)), str(RUNTIME), "-o", str(binary)],
                   check=True, capture_output=True, text=True)
    environment = {**os.environ, "TILECRAFT_NUM_THREADS": threads, "TILECRAFT_SPIN_US": spin_us,
                   "TILECRAFT_CALL_SPIN_US": spin_us, "TSAN_OPTIONS": "halt_on_error=1"}
    done = subprocess.run([str(binary), "3"], capture_output=True, text=True, timeout=600, env=environment)
    assert done.returncode == 0 and "ok: 3 callers" in done.stdout, done.stderr[-3000:]
    assert "ThreadSanitizer" not in done.stderr, done.stderr[-3000:]


def _library(package: Path, folder: Path) -> Path:
    import tarfile

    with tarfile.open(package) as archive:
        archive.extract("model.so", folder / "extracted", filter="data")
    return folder / "extracted" / "model.so"


def test_an_unknown_sanitizer_is_a_toolchain_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_SANITIZE", "address,bogus")
    with pytest.raises(ToolchainError, match=r"TILECRAFT_SANITIZE='address,bogus': unknown sanitizer\(s\) \['bogus'\]"):
        tilecraft.compile(mlir_text.matmul(4, 4, 4), package_path=tmp_path / "mm.tar")


def test_the_c_targets_code_and_driver_run_clean_under_asan_and_ubsan(tmp_path):
    """Target c (docs/c-target.md): model.c and main.c built by their own Makefile with the
    sanitizers added to its flags; a correct input, then a short one (the driver's error
    path)."""
    import shutil
    import tarfile

    import numpy as np

    sanitizer_runtime()
    if shutil.which("make") is None:
        pytest.skip("no make")
    digits = Path(__file__).resolve().parents[2] / "examples" / "digits_cnn.onnx"
    source = tmp_path / "model_c.tar"
    model = tilecraft.load(str(digits), shape_dict={"input": [1, 1, 16, 16]})
    tilecraft.compile(model, target="c", package_path=source)
    with tarfile.open(source) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    flags = "-std=c99 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
    build = subprocess.run(["make", "-C", str(tmp_path / "src"), f"CFLAGS={flags}"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    x = np.load(digits.parent / "digits_test.npz")["images"][:1].astype("<f4").reshape(1, 1, 16, 16)
    x.tofile(tmp_path / "in.bin")
    environment = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
                   "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    driver = str(tmp_path / "src" / "model")
    run = subprocess.run([driver, str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, env=environment, timeout=300)
    assert run.returncode == 0 and "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
    expected = tilecraft.compile(model)(x)
    np.testing.assert_allclose(np.fromfile(tmp_path / "out.bin", dtype="<f4").reshape(1, 10), expected,
                               rtol=1e-4, atol=1e-4)
    (tmp_path / "short.bin").write_bytes(x.tobytes()[:100])
    refused = subprocess.run([driver, str(tmp_path / "short.bin"), str(tmp_path / "out2.bin")],
                             capture_output=True, text=True, env=environment, timeout=300)
    assert refused.returncode != 0 and "Sanitizer" not in refused.stderr and "runtime error" not in refused.stderr, \
        refused.stderr
