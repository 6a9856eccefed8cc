"""Register-blocked micro-kernels of non-depthwise convolutions (NHWC input, HWCF filter).

The default schedule (``plan.py``) tiles a convolution down to a *register tile*: ``pixels``
output columns of one row by ``channel_vectors`` vectors of output channels. After
``decompose`` (to ``conv_1d_nwc_wcf``) and ``vectorize`` the tile is one ``vector.contract``
per input-channel step, which LLVM lowers to the outer-product form: per input channel, one
broadcast of each input pixel and one load of each filter vector, then ``pixels x
channel_vectors`` FMAs into accumulators. ``@cleanup`` (script.py) hoists the accumulators'
read and write out of the (kh, kw, input channel) reduction loops, so they stay in vector
registers over the whole reduction and are stored once.

What this module decides is the tile's shape, from the register file:

- accumulators + filter vectors + one broadcast must fit the vector registers (32 zmm on
  AVX-512): ``pixels * vectors + vectors + 1 <= registers``. The tile the filter-heavy plan
  used before (4 channel vectors by 7 pixels: 28 + 4 + 1 = 33) spilled: ``llc -mcpu=znver5``
  emitted 159 spills and reloads and 25 register moves per hot loop of a 7x7 1x1 layer
  (ResNet-50's 1x1 layers of the 14x14 and 7x7 stages ran at 28-53 GFLOPS in the model
  where the others ran near 100);
- as many accumulators as fit, at least 8 where the image allows (an FMA's latency times
  the FMA ports: fewer leave the FMA units waiting on their own results): two vectors by up
  to 14 pixels (28 accumulators) where the output channels are a multiple of two vectors;
- the input-channel step (the contraction's unrolled length) at 4 when the tile has more
  than 16 accumulators: LLVM schedules all of a step's filter loads first, and 2 x 14 with
  a step of 8 spilled 12 times per loop where a step of 4 spills none.

``tests/lit/schedule/conv-micro-kernel.mlir`` checks the vector shapes and loop structure;
docs/performance.md has the assembly check (no spill in the hot loop) and the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

# The widest pixel run of one register tile: 2 x 14 accumulators leave 3 of 32 registers.
MAX_PIXELS = 14
# Channel vectors tried, most first: more vectors share each input broadcast, fewer leave
# room for more pixels (each sharing the filter vectors).
_CHANNEL_VECTORS = (2, 1)
# Above this many accumulators the input-channel step drops from 8 to 4 (see above).
_WIDE_TILE_ACCUMULATORS = 16


def vector_registers(vector_bits: int) -> int:
    """Vector registers of the target's widest vectors: 32 with AVX-512 (zmm0-31), 16 with
    AVX2 / SSE and the 128-bit NEON subset this planner assumes otherwise."""
    return 32 if vector_bits >= 512 else 16


@dataclass(frozen=True)
class ConvMicroKernel:
    """The register tile of one convolution: ``pixels`` output columns by ``channels``
    output channels (``channels // lanes`` vectors), reduced ``ic_step`` input channels at a
    time."""

    pixels: int
    channels: int
    ic_step: int
    lanes: int

    @property
    def accumulators(self) -> int:
        return self.pixels * max(self.channels // self.lanes, 1)

    @property
    def registers(self) -> int:
        """Vector registers live in the hot loop: accumulators, filter vectors, a broadcast."""
        return self.accumulators + max(self.channels // self.lanes, 1) + 1


def _largest_divisor(n: int, limit: int) -> int:
    for candidate in range(min(n, limit), 0, -1):
        if n % candidate == 0:
            return candidate
    return 1


def conv_micro_kernel(out_width: int, out_channels: int, in_channels: int, *, lanes: int,
                      vector_bits: int) -> ConvMicroKernel | None:
    """The register tile for a convolution with these output width / channel extents, or
    ``None`` when the output channels are not a whole number of vectors (the caller keeps
    its generic tile: narrower vectors, as for MobileNetV2's small channel counts)."""
    if lanes <= 1 or out_channels % lanes:
        return None
    registers = vector_registers(vector_bits)
    best: ConvMicroKernel | None = None
    for vectors in _CHANNEL_VECTORS:
        if out_channels % (vectors * lanes):
            continue
        room = (registers - 1 - vectors) // vectors  # pixels whose accumulators still fit
        pixels = _largest_divisor(out_width, min(room, MAX_PIXELS))
        candidate = ConvMicroKernel(pixels, vectors * lanes, 0, lanes)
        if best is None or candidate.accumulators > best.accumulators:
            best = candidate
    assert best is not None  # vectors = 1 always divides
    step_limit = 4 if best.accumulators > _WIDE_TILE_ACCUMULATORS else 8
    return ConvMicroKernel(best.pixels, best.channels, _largest_divisor(in_channels, step_limit),
                           lanes)
