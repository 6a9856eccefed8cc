"""Packages for the triples users type: Android, 32-bit ARM hard-float Linux, RISC-V 64 Linux.

Each package is built with the cross toolchain of the ``cross`` extra (``zig cc``; skipped
with the reason where it is missing) and its ``model.so`` read back: ELF machine, class and
ABI flags, the ARM architecture tags (ARMv7-A, VFPv3-D16, NEON only when asked for), the
libraries it needs (bionic's ``libc.so`` on Android, never glibc's) and the manifest's
machine, which the loader on the device compares with ``platform.machine()``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

import tilecraft
from tilecraft.compiler import cross_toolchain
from tilecraft.compiler.package import c_compiler
from tilecraft.compiler.elf import (EF_ARM_ABI_FLOAT_HARD, EF_RISCV_FLOAT_ABI, EF_RISCV_RVC, EM_ARM, EM_RISCV,
                                    read_elf, zig_available)
from tilecraft.errors import PackageTargetError, TargetError, ToolchainError
from tilecraft.pipelines.target import Target
from tilecraft.runtime import package as fmt
from tilecraft.runtime.libraries import llvm_tool

EM_AARCH64 = 183

MODEL = textwrap.dedent("""
    func.func @mm(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {
      %zero = arith.constant 0.0 : f32
      %init = tensor.empty() : tensor<16x8xf32>
      %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<16x8xf32>) -> tensor<16x8xf32>
      %c = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x8xf32>)
                         outs(%filled : tensor<16x8xf32>) -> tensor<16x8xf32>
      %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                           iterator_types = ["parallel", "parallel"]}
          ins(%c : tensor<16x8xf32>) outs(%init : tensor<16x8xf32>) {
        ^bb0(%x: f32, %out: f32):
          %y = math.exp %x : f32
          linalg.yield %y : f32
      } -> tensor<16x8xf32>
      return %e : tensor<16x8xf32>
    }
""")

needs_zig = pytest.mark.skipif(not zig_available(), reason="needs the ziglang wheel (pip install -e '.[cross]')")


def _build(tmp_path_factory, spec: str) -> tuple[bytes, dict, str]:
    """(model.so, manifest, ``llvm-readelf -d -A`` of model.so) of a package built for ``spec``."""
    folder = tmp_path_factory.mktemp("cross")
    path = folder / "mm.tar"
    # Two threads planned: the parallel loops run on the package's async runtime (pthreads).
    tilecraft.compile(MODEL, target=dataclasses.replace(Target.parse(spec), num_threads=2), package_path=path)
    with tarfile.open(path) as archive:
        library = archive.extractfile(fmt.LIBRARY).read()
        manifest = json.load(archive.extractfile(fmt.MANIFEST))
    (folder / "model.so").write_bytes(library)
    readelf = subprocess.run([llvm_tool("llvm-readelf"), "-d", "-A", str(folder / "model.so")],
                             capture_output=True, text=True, check=True)
    return library, manifest, readelf.stdout


def _arm_attributes(readelf: str) -> dict[str, str]:
    """ARM build attributes from llvm-readelf -A: ``{"CPU_arch": "ARM v7", "FP_arch": ...}``."""
    return dict(re.findall(r"TagName: (\w+)\s+Description: ([^\n]+)", readelf))


@pytest.fixture(scope="module", params=["armv7l-linux-gnueabihf", "arm-linux-gnueabihf"])
def armhf_package(request, tmp_path_factory):
    return _build(tmp_path_factory, f"llvm -mtriple={request.param}")


@needs_zig
def test_armv7_hard_float_package(armhf_package, tmp_path):
    library, manifest, attributes = armhf_package
    path = tmp_path / "model.so"
    path.write_bytes(library)
    elf = read_elf(path)
    assert (elf.machine, elf.elf_class) == (EM_ARM, 32)
    assert elf.flags & EF_ARM_ABI_FLOAT_HARD and elf.flags >> 24 == 5  # hard float, EABI version 5
    tags = _arm_attributes(attributes)
    assert tags["CPU_arch"] == "ARM v7" and tags["CPU_arch_profile"] == "Application"
    assert tags["FP_arch"] == "VFPv3-D16" and tags["ABI_VFP_args"] == "AAPCS VFP"
    assert "Advanced_SIMD_arch" not in tags  # Debian armhf: NEON is not assumed
    assert "ld-linux-armhf.so.3" in attributes
    # 32-bit: MLIR's malloc(i64)/aligned_alloc(i64, i64) go through runtime/alloc_i64.c.
    assert b"tilecraft_aligned_alloc_i64" in library or b"aligned_alloc" not in library
    # The Raspberry Pi's uname -m, whatever spelling of the triple was typed.
    assert manifest["machine"] == "armv7l" and manifest["triple"] == "armv7a-unknown-linux-gnueabihf"


@needs_zig
@pytest.mark.slow
def test_armv7_neon_is_added_by_mattr(tmp_path_factory):
    _, _, attributes = _build(tmp_path_factory, "llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon")
    tags = _arm_attributes(attributes)
    assert tags["Advanced_SIMD_arch"] == "NEONv1" and tags["ABI_VFP_args"] == "AAPCS VFP"


@pytest.fixture(scope="module")
def android_package(tmp_path_factory):
    return _build(tmp_path_factory, "llvm -mtriple=aarch64-linux-android")


@needs_zig
def test_android_package_links_bionic_not_glibc(android_package, tmp_path):
    library, manifest, dynamic = android_package
    path = tmp_path / "model.so"
    path.write_bytes(library)
    elf = read_elf(path)
    assert (elf.machine, elf.elf_class) == (EM_AARCH64, 64)
    assert "Shared library: [libc.so]" in dynamic  # bionic's name (libm.so too where libm is called)
    assert "libc.so.6" not in dynamic and b"GLIBC_" not in library and b"ld-linux" not in library
    undefined = subprocess.run([llvm_tool("llvm-nm"), "-D", "--undefined-only", str(path)],
                               capture_output=True, text=True, check=True).stdout.split()
    names = {word for word in undefined if word != "U"}
    assert names and names <= set(cross_toolchain.BIONIC_LIBC_FUNCTIONS + cross_toolchain.BIONIC_LIBC_DATA
                                   + cross_toolchain.BIONIC_LIBM_FUNCTIONS)
    assert {"pthread_create", "clock_gettime", "stderr"} <= names  # the worker pool's
    assert manifest["machine"] == "aarch64" and manifest["triple"] == "aarch64-unknown-linux-android29"
    with pytest.raises(PackageTargetError, match="aarch64"):
        tilecraft.runtime.load(_package_file(tmp_path, library, manifest))


def _package_file(folder, library: bytes, manifest: dict):
    """The package again as a tar (the fixture keeps only its parts)."""
    path = folder / "again.tar"
    (folder / fmt.MANIFEST).write_text(json.dumps(manifest))
    with tarfile.open(path, "w") as archive:
        archive.add(folder / fmt.MANIFEST, arcname=fmt.MANIFEST)
        archive.add(folder / "model.so", arcname=fmt.LIBRARY)
    return path


@pytest.fixture(scope="module")
def riscv64_package(tmp_path_factory):
    return _build(tmp_path_factory, "llvm -mtriple=riscv64-unknown-linux-gnu -mcpu=generic-rv64 -mabi=lp64d "
                                    "-mattr=+64bit,+m,+a,+f,+d,+c")


@needs_zig
def test_riscv64_lp64d_package(riscv64_package, tmp_path):
    library, manifest, dynamic = riscv64_package
    path = tmp_path / "model.so"
    path.write_bytes(library)
    elf = read_elf(path)
    assert (elf.machine, elf.elf_class) == (EM_RISCV, 64)
    assert elf.flags & EF_RISCV_FLOAT_ABI == 0x4 and elf.flags & EF_RISCV_RVC  # lp64d, compressed
    assert elf.architecture == "riscv64 rvc double-float"
    assert "ld-linux-riscv64-lp64d.so.1" in dynamic
    assert manifest["machine"] == "riscv64" and "-mabi=lp64d" in manifest["target"]


# ---- target strings (no toolchain needed) ---------------------------------------------------

@pytest.mark.parametrize("triple", ["armv7l-linux-gnueabihf", "armv7a-linux-gnueabihf", "arm-linux-gnueabihf",
                                    "armv7l-unknown-linux-gnueabihf"])
def test_armhf_spellings_name_one_platform(triple):
    info = Target.parse(f"llvm -mtriple={triple}").triple_info
    assert info.llvm_triple == "armv7a-unknown-linux-gnueabihf" and info.machine == "armv7l"
    assert cross_toolchain.expected_elf(Target.parse(f"llvm -mtriple={triple}"))[:2] == (EM_ARM, 32)


def test_mabi_and_android_levels():
    riscv = Target.parse("llvm -mtriple=riscv64-linux-gnu -mabi=lp64")
    assert riscv.triple_info.mabi == "lp64" and str(riscv).endswith("-mabi=lp64")
    assert cross_toolchain.expected_elf(riscv)[3] == EF_RISCV_RVC  # soft-float ABI, compressed
    assert Target.parse("llvm -mtriple=riscv64-linux-gnu").triple_info.mabi == "lp64d"
    assert Target.parse("llvm -mtriple=aarch64-linux-android33").triple_info.android_api == 33
    assert Target.parse("llvm -mtriple=aarch64-linux-android").vector_bits == 128  # not this host's AVX


@pytest.mark.parametrize("spec, message", [
    ("llvm -mabi=lp64d", "needs a -mtriple"),
    ("llvm -mtriple=aarch64-linux-gnu -mabi=lp64d", "applies to RISC-V"),
    ("llvm -mtriple=riscv64-linux-gnu -mabi=ilp32d", "unknown RISC-V 64 ABI"),
    ("llvm -mtriple=aarch64-linux-android24", "Android API 24 is too old"),
    ("llvm -mtriple=aarch64-linux-androidQ", "ends in android or android<API level>"),
    ("llvm -mtriple=armv7a-linux-androideabi", "built for aarch64"),
    ("llvm -mtriple=riscv32-unknown-linux-gnu", "riscv64 Linux"),
])
def test_bad_cross_targets_are_named(spec, message):
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)


def test_elf_check_names_a_wrong_architecture(tmp_path):
    """A library for another machine than the target's is a ToolchainError, not a package."""
    path = tmp_path / "host.so"
    path.write_bytes(open(os.path.realpath("/bin/true" if os.path.exists("/bin/true") else "/bin/sh"), "rb").read())
    with pytest.raises(ToolchainError, match="not for llvm -mtriple=armv7l-linux-gnueabihf"):
        cross_toolchain.check_elf(path, Target.parse("llvm -mtriple=armv7l-linux-gnueabihf"))


# ---- running them: qemu-user with Debian's cross C libraries ---------------------------------

@needs_zig
@pytest.mark.slow
@pytest.mark.parametrize("spec, qemu, sysroot", [
    ("llvm -mtriple=armv7l-linux-gnueabihf", "qemu-arm", "/usr/arm-linux-gnueabihf"),
    ("llvm -mtriple=riscv64-linux-gnu -mabi=lp64d", "qemu-riscv64", "/usr/riscv64-linux-gnu"),
])
def test_package_runs_under_qemu(spec, qemu, sysroot, tmp_path):
    """The parallel matmul package computes the right result on the emulated CPU, called the
    way runtime/package.py calls it (the C harness of test_cross.py's AArch64 run)."""
    from package_archives import MATMUL

    emulator = shutil.which(qemu)
    if emulator is None or not (Path(sysroot) / "lib" / "libc.so.6").exists():
        pytest.skip(f"needs Debian's qemu-user and the {Path(sysroot).name} C library (libc6-*-cross)")
    target = dataclasses.replace(Target.parse(spec), num_threads=2)
    package = tmp_path / "mm.tar"
    tilecraft.compile(MATMUL, target=target, package_path=package)
    with tarfile.open(package) as archive:
        (tmp_path / "model.so").write_bytes(archive.extractfile(fmt.LIBRARY).read())
    harness = tmp_path / "run_matmul"
    source = Path(__file__).with_name("aarch64") / "run_matmul.c"
    subprocess.run([*c_compiler(target), "-O2", "-o", str(harness), str(source), "-ldl", "-lm"],
                   check=True, capture_output=True, timeout=300)
    completed = subprocess.run([emulator, "-L", sysroot, str(harness), str(tmp_path / "model.so")],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.startswith("OK ")
