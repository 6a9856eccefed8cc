"""A package's manifest is checked against the call contract compiled into its library, and
archive members that are links, escape the folder or are not the package's are refused
(issue 17, class 5)."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import PackageError
from tilecraft.runtime.package import CONTRACT_SYMBOL, load

MATMUL_MLIR = """
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    path = tmp_path_factory.mktemp("package") / "matmul.tar"
    tilecraft.compile(MATMUL_MLIR, package_path=path)
    return path


def members(path) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}


def write(path, files: dict[str, bytes], extra: list[tarfile.TarInfo] = ()) -> None:
    with tarfile.open(path, "w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for info in extra:
            archive.addfile(info)


def test_an_intact_package_loads_and_runs(package):
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(load(package)(a, a), a @ a)


@pytest.mark.parametrize("edit", [
    lambda m: m["inputs"][0].update(shape=[8, 8]),
    lambda m: m["inputs"][1].update(dtype="float64", element_type="f64"),
    lambda m: m["outputs"].append(dict(m["outputs"][0], name="extra")),
    lambda m: m.update(equal_dims=[{"members": [[0, 0], [1, 1]], "size": None}]),
    lambda m: m.pop("runtime_checks"),  # failures the code reports would go unread
    lambda m: m.update(runtime_checks=["index\tall is well ({value})"]),
])
def test_an_edited_contract_in_the_manifest_is_refused(package, tmp_path, edit):
    files = members(package)
    manifest = json.loads(files["manifest.json"])
    edit(manifest)
    files["manifest.json"] = json.dumps(manifest).encode()
    edited = tmp_path / "edited.tar"
    write(edited, files)
    with pytest.raises(PackageError, match=f"does not match the call contract compiled into model.so"):
        load(edited)


def test_the_library_exports_the_contract_symbol(package):
    assert CONTRACT_SYMBOL.encode() in members(package)["model.so"]


@pytest.mark.parametrize("name, kind", [
    ("model.so", tarfile.SYMTYPE), ("../escape.so", tarfile.REGTYPE), ("/tmp/absolute.so", tarfile.REGTYPE),
    ("extra.bin", tarfile.REGTYPE), ("profile.so", tarfile.LNKTYPE),
])
def test_links_and_foreign_members_are_refused(package, tmp_path, name, kind):
    files = members(package)
    files.pop(name, None)
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = "/etc/passwd" if kind != tarfile.REGTYPE else ""
    bad = tmp_path / "bad.tar"
    write(bad, files, [info])
    with pytest.raises(PackageError, match="unexpected archive member"):
        load(bad)


def test_manifest_fields_of_the_wrong_kind_are_refused(package, tmp_path):
    files = members(package)
    manifest = json.loads(files["manifest.json"])
    manifest["sha256"] = None
    files["manifest.json"] = json.dumps(manifest).encode()
    bad = tmp_path / "bad.tar"
    write(bad, files)
    with pytest.raises(PackageError, match="field 'sha256' must be a dict"):
        load(bad)


def test_an_oversized_member_is_refused_before_extraction(package, monkeypatch):
    import tilecraft.runtime.package as package_module

    size = len(members(package)["model.so"])
    monkeypatch.setattr(package_module, "MAX_MEMBER_BYTES", size - 1)
    with pytest.raises(PackageError, match=f"archive member 'model.so' is {size} bytes, above the limit of {size - 1}"):
        load(package)
