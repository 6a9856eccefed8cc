"""Shared by the extern tests (tests/offload) and the model builder's (tests/builder): a C
extern in destination-passing style, the fixture that builds it, and the fixture that forgets
the names a test registered."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import tilecraft

C_SOURCE = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
/* out = 2 * x + y, in destination-passing style on memref descriptors */
void scale_add(M2 *x, M2 *y, M2 *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      out->aligned[out->offset + i * out->strides[0] + j * out->strides[1]] =
          2.0f * x->aligned[x->offset + i * x->strides[0] + j * x->strides[1]] +
          y->aligned[y->offset + i * y->strides[0] + j * y->strides[1]];
}
"""


@pytest.fixture
def externs():
    """Names registered by a test, forgotten after it."""
    names: list[str] = []
    yield names
    for name in names:
        tilecraft.extern.unregister(name)


@pytest.fixture(scope="module")
def c_library(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("extern")
    (directory / "scale_add.c").write_text(C_SOURCE)
    library = directory / "libscaleadd.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(directory / "scale_add.c"), "-o", str(library)],
                   check=True)
    return library
