"""Marks for tests whose reference depends on the host's instruction set."""

from __future__ import annotations

import platform

import pytest

from tilecraft.runtime.host import host_cpu_flags

# onnxruntime documents that its u8 x s8 kernels on x86 without VNNI (vpmaddubsw) may
# saturate their 16-bit pair sums: its int8 results then differ from the exact ones tilecraft
# computes (seen: QGemm 34 steps off on an AVX2 host), so it is no reference there.
ONNXRUNTIME_U8S8_EXACT = pytest.mark.skipif(
    platform.machine() in ("x86_64", "AMD64") and not {"avx512_vnni", "avx_vnni"} & host_cpu_flags(),
    reason="onnxruntime's u8 x s8 kernels saturate on x86 hosts without VNNI (documented): no exact reference",
)
