"""Cross-compiled packages: `-mtriple=aarch64-linux-gnu` gives an AArch64 shared library.

The library is linked by the cross toolchain compiler/package.py finds (``zig cc`` from
the ``cross`` extra, or Debian's aarch64-linux-gnu-gcc); without one the test is skipped
with the reason. The ELF header proves what was built, and loading it on this machine must
fail clearly. Where Debian's ``qemu-user`` and ``libc6-arm64-cross`` are installed, the slow
tier also runs a parallel matmul package under qemu-aarch64 through a small C harness
(aarch64/run_matmul.c) that calls the library the way runtime/package.py does.
"""

from __future__ import annotations

import json
import platform
import shutil
import struct
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest
from package_archives import MATMUL

import tilecraft
from tilecraft.errors import PackageTargetError, ToolchainError
from tilecraft.compiler.package import c_compiler
from tilecraft.runtime import package as fmt

EM_AARCH64 = 183
ET_DYN = 3
AARCH64 = "llvm -mtriple=aarch64-linux-gnu"

MODEL = textwrap.dedent("""
    func.func @scale(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<64x32xf32> {
      %init = tensor.empty() : tensor<64x32xf32>
      %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                             affine_map<(i, j) -> (i, j)>],
                           iterator_types = ["parallel", "parallel"]}
          ins(%x, %y : tensor<64x32xf32>, tensor<64x32xf32>) outs(%init : tensor<64x32xf32>) {
        ^bb0(%a: f32, %b: f32, %out: f32):
          %m = arith.mulf %a, %b : f32
          linalg.yield %m : f32
      } -> tensor<64x32xf32>
      return %r : tensor<64x32xf32>
    }
""")


@pytest.fixture(scope="module")
def aarch64_package(tmp_path_factory):
    try:
        c_compiler(tilecraft.Target.parse(AARCH64))
    except ToolchainError as error:
        pytest.skip(f"no AArch64 cross toolchain: {error}")
    path = tmp_path_factory.mktemp("cross") / "scale-aarch64.tar"
    tilecraft.compile(MODEL, target=AARCH64, package_path=path)
    return path


def test_aarch64_package_holds_an_aarch64_shared_library(aarch64_package):
    with tarfile.open(aarch64_package) as archive:
        library = archive.extractfile(fmt.LIBRARY).read()
        manifest = json.load(archive.extractfile(fmt.MANIFEST))
    assert library[:4] == b"\x7fELF"
    assert library[4] == 2 and library[5] == 1  # ELFCLASS64, little-endian
    e_type, e_machine = struct.unpack_from("<HH", library, 16)
    assert e_type == ET_DYN
    assert e_machine == EM_AARCH64
    assert manifest["machine"] == "aarch64" and manifest["target"] == AARCH64
    assert manifest["required_cpu_flags"] == []


@pytest.mark.skipif(platform.machine() in ("aarch64", "arm64"), reason="this machine is AArch64")
def test_aarch64_package_is_refused_on_this_machine(aarch64_package):
    with pytest.raises(PackageTargetError, match=r"built for target 'llvm -mtriple=aarch64-linux-gnu' \(aarch64\)"):
        tilecraft.runtime.load(aarch64_package)


SYSROOT = Path("/usr/aarch64-linux-gnu")


@pytest.mark.slow
def test_aarch64_package_runs_under_qemu(tmp_path):
    qemu = shutil.which("qemu-aarch64")
    if qemu is None or not (SYSROOT / "lib" / "libc.so.6").exists():
        pytest.skip("needs Debian's qemu-user and libc6-arm64-cross")
    try:
        compiler = c_compiler(tilecraft.Target.parse(AARCH64))
    except ToolchainError as error:
        pytest.skip(f"no AArch64 cross toolchain: {error}")
    package = tmp_path / "mm.tar"
    # Two threads planned: the matmul runs on the package's async runtime.
    tilecraft.compile(MATMUL, target=tilecraft.Target(mtriple="aarch64-linux-gnu", num_threads=2),
                      package_path=package)
    with tarfile.open(package) as archive:
        (tmp_path / "model.so").write_bytes(archive.extractfile(fmt.LIBRARY).read())
    harness = tmp_path / "run_matmul"
    source = Path(__file__).with_name("aarch64") / "run_matmul.c"
    subprocess.run([*compiler, "-O2", "-o", str(harness), str(source), "-ldl", "-lm"],
                   check=True, capture_output=True, timeout=300)
    completed = subprocess.run([qemu, "-L", str(SYSROOT), str(harness), str(tmp_path / "model.so")],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.startswith("OK ")
