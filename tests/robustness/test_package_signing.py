"""Signed packages (issue 48): ``tilecraft compile --sign`` / ``sign_package`` and
``load(..., trust=)`` / ``run --trust``. A one-byte change anywhere in a signed package (any
member, the manifest, a tar header, padding, the signature, the end blocks) is refused
before any of its code is loaded."""

from __future__ import annotations

import ctypes
import tarfile

import numpy as np
import pytest

import tilecraft
import tilecraft.runtime.package as package_module
from tilecraft.errors import PackageError, PackageSignatureError
from tilecraft.runtime.package_signing import SIGNATURE, generate_key, read_key, sign_package
from tilecraft.tools.cli import run_cli

import mlir_text


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    return generate_key(folder / "package.key"), generate_key(folder / "other.key")


@pytest.fixture(scope="module")
def signed(tmp_path_factory, keys):
    """An unsigned and a signed copy of a matmul package (with the profiling variant, so
    that three members are signed)."""
    folder = tmp_path_factory.mktemp("signed")
    unsigned = folder / "unsigned.tar"
    tilecraft.compile(mlir_text.matmul(8, 8, 8), package_path=unsigned, profile=True)
    signed = folder / "signed.tar"
    signed.write_bytes(unsigned.read_bytes())
    sign_package(signed, keys[0])
    return unsigned, signed


@pytest.fixture
def no_native_code(monkeypatch):
    """Fail the test if anything dlopens while it runs (a refused package must not load)."""
    def forbidden(*args, **kwargs):
        raise AssertionError(f"native code loaded: {args[:1]}")
    monkeypatch.setattr(package_module.ctypes, "CDLL", forbidden)


def test_keygen_writes_a_private_hex_key_and_never_overwrites(tmp_path, keys):
    assert len(read_key(keys[0])) == 32 and keys[0].stat().st_mode & 0o077 == 0
    with pytest.raises(PackageSignatureError, match="not overwriting"):
        generate_key(keys[0])
    (tmp_path / "short.key").write_text("abcd\n")
    with pytest.raises(PackageSignatureError, match="has 2 bytes; a key needs at least 16"):
        read_key(tmp_path / "short.key")
    with pytest.raises(PackageSignatureError, match="cannot read the key file"):
        read_key(tmp_path / "missing.key")


def test_a_signed_package_loads_and_runs_under_its_key(signed, keys, rng):
    unsigned, path = signed
    a, b = rng.random((8, 8)).astype(np.float32), rng.random((8, 8)).astype(np.float32)
    package = tilecraft.runtime.load(path, trust=keys[0])
    np.testing.assert_allclose(package(a, b), a @ b, rtol=1e-5)
    assert tilecraft.runtime.load(path).has_profile  # without trust= a signature is ignored
    result = tilecraft.run(path, {"arg0": a, "arg1": b}, trust=keys[0])
    np.testing.assert_allclose(result.outputs["result0"], a @ b, rtol=1e-5)
    with tarfile.open(path) as archive:
        assert archive.getnames()[-1] == SIGNATURE


def test_unsigned_and_other_key_packages_are_refused(signed, keys, no_native_code):
    unsigned, path = signed
    with pytest.raises(PackageSignatureError, match="not signed, and a trusted key was given"):
        tilecraft.runtime.load(unsigned, trust=keys[0])
    with pytest.raises(PackageSignatureError, match="signed with another key"):
        tilecraft.runtime.load(path, trust=keys[1])


def _flipped(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1:]


def test_one_flipped_byte_in_any_member_or_the_manifest_is_refused(signed, keys, tmp_path, no_native_code):
    _, path = signed
    data = path.read_bytes()
    with tarfile.open(path) as archive:
        members = archive.getmembers()
    assert {m.name for m in members} == {"manifest.json", "model.so", "profile.so", SIGNATURE}
    for member in members:
        for offset in (member.offset_data, member.offset_data + member.size // 2,
                       member.offset_data + member.size - 1):
            tampered = tmp_path / f"{member.name}-{offset}.tar"
            tampered.write_bytes(_flipped(data, offset))
            with pytest.raises(PackageSignatureError, match="refusing the package"):
                tilecraft.runtime.load(tampered, trust=keys[0])


def test_one_flipped_byte_anywhere_is_refused(signed, keys, tmp_path, no_native_code):
    _, path = signed
    data = path.read_bytes()
    with tarfile.open(path) as archive:
        members = archive.getmembers()
    offsets = []
    for member in members:
        end = member.offset_data + member.size
        offsets += [member.offset, member.offset + 100, member.offset + 257]  # name, mode, magic
        if end % tarfile.BLOCKSIZE:
            offsets.append(end)  # padding after the member's data
    offsets += [len(data) - 1, len(data) - 700]  # the end-of-archive blocks
    offsets += range(0, len(data), 127)  # and a byte every 127 anywhere (a prime: all phases of a block)
    for offset in offsets:
        tampered = tmp_path / f"at-{offset}.tar"
        tampered.write_bytes(_flipped(data, offset))
        with pytest.raises(PackageError):
            tilecraft.runtime.load(tampered, trust=keys[0])


def test_a_member_added_after_signing_is_refused(signed, keys, tmp_path, no_native_code):
    _, path = signed
    added = tmp_path / "added.tar"
    added.write_bytes(path.read_bytes())
    with tarfile.open(added, "a") as archive:
        archive.add(keys[1], arcname="libextra.so")
    with pytest.raises(PackageSignatureError, match="not the archive's last member"):
        tilecraft.runtime.load(added, trust=keys[0])


def test_the_command_line_signs_and_trusts(tmp_path, keys, capsys):
    source = tmp_path / "mm.mlir"
    source.write_text(mlir_text.matmul(4, 4, 4))
    key = tmp_path / "cli.key"
    assert run_cli(["keygen", str(key)]) == 0
    package = tmp_path / "mm.tar"
    assert run_cli(["compile", str(source), "-o", str(package), "--sign", str(key)]) == 0
    assert run_cli(["run", str(package), "--trust", str(key)]) == 0
    capsys.readouterr()
    assert run_cli(["run", str(package), "--trust", str(keys[1])]) == 1
    assert "signed with another key" in capsys.readouterr().err
