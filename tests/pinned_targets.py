"""Targets that tests pin so they check the same schedule on any host.

A test that compiles for ``"llvm"`` (the host) gets the host's vector width, register file and
cache sizes, so a check of a register tile (``vector<6x16xf32>``), a vector width or a
kernel form holds only on the kind of machine it was written on. Tests that check such
forms compile for one of these instead; the code still runs here, since every x86-64 host
the tests run on executes AVX2 code, and the AVX-512 forms are checked only in IR or where
the host has AVX-512 (``needs_avx512_host``).

``AVX2`` is the AMD EPYC (Zen 3) the project's earlier figures and tests were made on: 16
ymm registers, 32 KiB L1d, 512 KiB L2, 32 MiB L3 (pipelines/target.py's table).
``AVX512`` is a Zen 5: 32 zmm registers, AVX-512 BF16 and VNNI, 48 KiB L1d, 1 MiB L2.
"""

import pytest

from tilecraft.pipelines.target import Target

AVX2 = "llvm -mcpu=znver3"
AVX512 = "llvm -mcpu=znver5"

HOST_HAS_AVX512 = Target.parse("llvm").vector_bits >= 512

# For tests that run code compiled for ``AVX512``: an AVX2-only host cannot execute it.
needs_avx512_host = pytest.mark.skipif(not HOST_HAS_AVX512, reason="runs AVX-512 code; this host has no AVX-512")
