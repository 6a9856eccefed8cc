"""Package archives taken apart and put back together, for tests that tamper with them, and
the small matmul the package tests build (shared by the Python loader's, the C runtime's and
the cross targets' tests)."""

from __future__ import annotations

import io
import tarfile
import textwrap
from pathlib import Path

MATMUL = textwrap.dedent("""
    func.func @mm(%a: tensor<96x128xf32>, %b: tensor<128x80xf32>) -> tensor<96x80xf32> {
      %zero = arith.constant 0.0 : f32
      %init = tensor.empty() : tensor<96x80xf32>
      %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<96x80xf32>) -> tensor<96x80xf32>
      %c = linalg.matmul ins(%a, %b : tensor<96x128xf32>, tensor<128x80xf32>)
                         outs(%filled : tensor<96x80xf32>) -> tensor<96x80xf32>
      return %c : tensor<96x80xf32>
    }
""")


def read_members(path: Path) -> dict[str, bytes]:
    """Every member of the tar at ``path``, name -> bytes, in archive order."""
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}


def write_members(path: Path, members: dict[str, bytes]) -> Path:
    """A plain tar at ``path`` holding ``members`` in their order; returns ``path``."""
    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path
