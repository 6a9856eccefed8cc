"""The default schedule of convolutions and pooling (the named ops linalg decomposes to
1-D forms): register tiles of output pixels x channel vectors, input-channel steps, thread
tasks by rows or channels, and the band tiles of sequential fusion groups.

Why a module of its own: convolutions have their own register-tile model (filter vectors x
broadcast pixels) and task split (filter-heavy layers by channels); plan.py only
dispatches to it.
"""

from __future__ import annotations

import math

from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import CacheHierarchy
from .op_schedule import (DECOMPOSABLE, OpSchedule, balanced_chunk, busiest_chunk, busy_share, largest_divisor,
                          thread_chunk, vector_tile)

# Output-channel vectors in the register tile of a convolution with output channels, at
# most: 2 for every such convolution, 4 for a filter-heavy 1x1 (filter_heavy), as far as the
# register file holds them (conv_register_tile).
_CONV_VECTORS, _HEAVY_CONV_VECTORS = 2, 4
# Output pixels (along the row) in a convolution's register tile, at most, where its
# channels allow tiles of several vectors, and in a depthwise one (whose wider tiles would
# lose the window row per step, ``depthwise_window_fits``); a tile of the only vector the
# channels allow takes up to half the register file where this bound leaves a partial last
# tile (``one_vector_row_tile``).
_CONV_REGISTER_PIXELS = 8
# Input channels per step of a convolution's reduction, at most. 4, not 8: once the tuner
# measured kernels with their weights cold, as a model whose weights outgrow the last-level
# cache runs them (docs/tuning.md, "What is timed"), its validated bests on ResNet-50 took a
# step of 4 (or 1) in most conv tasks; whole ResNet-50 then ran faster than with step 8,
# MobileNetV2 unchanged (docs/performance.md).
_CONV_INPUT_STEP = 4


# The pace of a register tile in ``tile_row_cycles``' model: FMAs issue on two ports, loads
# (filter vectors, broadcast pixels) on two, and an accumulator takes its next FMA no sooner
# than a latency later. 5 cycles, not the FMA's 4: an accumulator's FMA also waits for its
# broadcast, and with 4 the model ranked 8 x 1-vector tiles 1.13x slower than 6 x 2-vector
# ones where they measured 1.23x (docs/performance.md, "Dilated convolutions").
_FMA_PORTS, _LOAD_PORTS, _ACCUMULATOR_LATENCY = 2, 2, 5


def row_tiles(width: int, pixels: int) -> list[int]:
    """The pixel tiles of a row of ``width``: whole tiles of ``pixels``, then the partial last
    one that the script peels (``OpSchedule.peeled_loops``)."""
    return [pixels] * (width // pixels) + ([width % pixels] if width % pixels else [])


def tile_row_cycles(width: int, pixels: int, vectors: int, depthwise: bool = False) -> float:
    """Cycles per reduction step (one input channel of one tap) of a row of ``width`` output
    pixels by one vector of channels, tiled ``pixels`` x ``vectors``: each tile's FMAs, its
    loads (a convolution: its filter vectors and a broadcast per pixel; a depthwise one: an
    input vector per pixel and vector, and its filter vectors) or its accumulators' latency,
    whichever binds. Why a model and not the largest tile: a tile of fewer than ten
    accumulators waits on their latency (7 x 1), one vector loads a broadcast per FMA (8 x 1:
    load-bound), and the partial last tile of a row costs a whole tile's latency (65 pixels
    as 6-pixel tiles end with a 5-pixel one, as 8-pixel tiles with a 1-pixel one)."""
    total = 0.0
    for tile in row_tiles(width, pixels):
        fmas = tile * vectors
        loads = tile * vectors + vectors if depthwise else tile + vectors
        total += max(fmas / _FMA_PORTS, loads / _LOAD_PORTS, _ACCUMULATOR_LATENCY)
    return total / vectors


def register_row_tile(width: int, vectors: int, registers: int, depthwise: bool = False,
                      max_pixels: int = _CONV_REGISTER_PIXELS) -> int:
    """The pixels of a register tile of ``vectors`` channel vectors along a row of ``width``:
    at most what the register file holds beside one reduction step's filter vectors and a
    broadcast (``pixels * vectors + vectors + 1``), and at most ``max_pixels``; the fastest
    in ``tile_row_cycles``' model, whole tiles (a divisor) where one is as fast, then the
    most accumulators. The count need not divide the row: the last tile is then peeled
    (``plan_convolution`` sets ``peeled_loops``)."""
    cap = min(max_pixels, width, max((registers - 1 - vectors) // vectors, 1))
    return min(range(1, cap + 1),
               key=lambda p: (tile_row_cycles(width, p, vectors, depthwise), width % p != 0, -p))


def one_vector_row_tile(width: int, registers: int) -> int:
    """The pixels of a convolution's register tile where its output channels allow one
    vector only (80 or 144 filters: 5 or 9 vectors of 16, whose two-vector tiles would not
    divide them; 24: one 8-lane vector), on a row that the ``_CONV_REGISTER_PIXELS`` bound
    leaves with a partial last tile (13, 25, 27, 55 pixels): up to half the register file as
    accumulators (16 pixels on AVX-512's 32 registers; 8 on AVX2's 16, as before), ranked
    by ``register_row_tile``'s model. A row that such a tile divides (7, 14, 28, 56) keeps it.

    Why wider than 8 pixels on such rows: one vector covers the FMA latency only from about
    ten accumulators (``_ACCUMULATOR_LATENCY`` x ``_FMA_PORTS``), so an 8-pixel tile waits on
    them, and the row ends in a short peeled tile that costs a whole tile's latency (25
    pixels: 8 + 8 + 8 + 1). On the Zen 5, odd_extents' 3x3 layers on rows of 25 and 13
    pixels (80 and 144 filters) took 16 + 9 and 13 pixels and ran 1.20-1.25x faster alone
    (the whole model 1.10x), as the tuner had found (docs/tuning.md, "What the spaces lacked").

    Why not on rows that divide, nor the whole register file: the model ranks 14 pixels
    above 7 + 7 on 14 or 28 rows, and single layers agreed (1.04-1.16x), but in a fusion
    group with SiLU on the accumulators (EfficientNet's 56x56 1x1 layers, 144 filters) a
    14-pixel tile ran 1.2x slower: the epilogue's temporaries no longer fit beside the
    accumulators, which the model does not see; 19 and 28 pixels ran 1.13-1.18x slower in
    MobileNetV2's with ReLU6 (docs/performance.md, "Odd rows"). Where a two-vector tile
    exists the 8-pixel bound stays too (``conv_register_tile``): it halves the loads per
    FMA; 13 x 1 and 27 x 1 measured 4-5 % slower than 8 x 2 and 7 x 2."""
    pixels = register_row_tile(width, 1, registers)
    if width % pixels == 0:
        return pixels
    return register_row_tile(width, 1, registers, max_pixels=registers // 2)


def conv_register_tile(width: int, out_channels: int, in_channels: int | None, lanes: int,
                       registers: int, heavy_pointwise: bool) -> tuple[int, int, int | None]:
    """(pixels, output channels, input-channel step) of a convolution's register tile.

    The tile's FMAs each take a filter vector and a broadcast input pixel: per input channel
    it loads ``vectors`` filter vectors and broadcasts ``pixels`` inputs for ``pixels x
    vectors`` FMAs. With one vector (7 pixels x 16 channels) that is 8 loads per 7 FMAs: the
    two load ports, not the two FMA units, set the pace (the hot loop checked in assembly:
    64 loads per 56 FMAs), and 7 accumulators do not cover 2 units x 4 cycles of FMA latency.
    Two vectors halve the loads per FMA and hold 12-16 accumulators. The tile must fit the
    register file with the filter vectors of one reduction step (LLVM loads a step's filter
    vectors ahead of its FMAs) and the broadcast: a 7 x 4-vector tile (28 accumulators) spilled
    159 times per hot loop; the input-channel step shrinks (to 1) first, then the pixels.

    The pixels come from the register file, not from the row's divisors
    (``register_row_tile``): on AVX2's 16 registers a row of 32 took 8 pixels x 1 vector
    (the largest divisor up to 8 leaves no room for a second vector) where 6 x 2 measured
    1.23x faster per flop, and rows of 65 or 13 pixels have no divisor near the register
    file at all (5 and 1). Each vector count's best pixel count is ranked by the model;
    a tile that does not divide the row has its last tile peeled.
    """
    step = largest_divisor(in_channels, _CONV_INPUT_STEP) if in_channels else None
    # Powers of two: 3-vector (48-channel) tiles of MobileNetV2's 576-channel 1x1 layers ran
    # slower than 1-vector ones (docs/performance.md, MobileNetV2).
    candidates = [v for v in (4, 2, 1) if v <= (_HEAVY_CONV_VECTORS if heavy_pointwise else _CONV_VECTORS)
                  and out_channels % (v * lanes) == 0 and v + v + 1 <= registers]
    if candidates:
        only_one = candidates == [1]  # one vector of filters, or an odd count (5, 9): no two-vector tile
        tiles = [(one_vector_row_tile(width, registers) if only_one else register_row_tile(width, v, registers), v)
                 for v in candidates]
        # Ties: whole tiles, then the most pixels, then the most vectors: where the row's
        # divisor was as fast, the former tile stays (AVX-512's 8 x 2 vectors for a
        # filter-heavy 1x1 layer on 8-pixel rows, not 4 x 4; 5 x 4 on 5-pixel rows).
        pixels, vectors = min(tiles, key=lambda t: (tile_row_cycles(width, t[0], t[1]), width % t[0] != 0,
                                                    -t[0], -t[1]))
        if step is not None and pixels * vectors + step * vectors + 1 > registers:
            # A step that does not fit drops to 1, not to 2: a 5-pixel x 2-vector tile's step
            # of 2 reads its inputs as vector<5x2>, and such tiles ran at 44 GFLOPS against 70
            # with a step of 1 (AVX2, docs/performance.md "Convolution register tiles on AVX2").
            step = 1
        return pixels, vectors * lanes, step
    # No whole vector of channels: narrower vectors (24 channels: 8-lane ones, not 12-lane
    # ones, whose odd width LLVM lowers to masked or split operations), as many pixels as
    # for one vector where the tile is one register (a power of two lanes); a 12-lane tile
    # may take two, so it keeps the narrower bound.
    part = min(lanes, out_channels & -out_channels)
    channels = vector_tile(out_channels, part, lanes // part)
    one_register = channels & (channels - 1) == 0
    pixels = one_vector_row_tile(width, registers) if one_register else register_row_tile(width, 1, registers)
    if step is not None and pixels + step + 1 > registers:
        step = 1
    return pixels, channels, step


# Multiply-adds per output (filter taps x input channels) a convolution needs for
# ``paired_vector_tile``: below, the tile's epilogue weighs more than its reduction, and
# EfficientNet's 1x1 expansions (24 -> 144, 40 -> 240, batch norm and SiLU on the
# accumulators) ran 1.26-1.33x slower in the model on two-vector tiles, where its 1x1
# projections (240 -> 80, 480 -> 112) ran 0.84-0.88x (docs/performance.md, round 28).
_PAIRED_MIN_REDUCTION = 128


def paired_vector_tile(width: int, out_channels: int, lanes: int, registers: int,
                       reduction: int = _PAIRED_MIN_REDUCTION) -> int | None:
    """The pixels of a two-vector register tile for a convolution whose filters make an odd
    number of vectors, 3 or more (112, 208 filters: 7 and 13 vectors of 16 on AVX-512; 24: 3
    of 8 on AVX2), whose last channel tile, one vector, is peeled (``plan_convolution`` sets
    ``peeled_loops``); ``None`` where one-vector tiles stay: an even count (two-vector tiles
    divide it), a row the two-vector tile's pixels do not divide (a fusion group peels one
    loop, conv_kernels.py), where ``tile_row_cycles``' model does not rank the pairs faster,
    or where the reduction per output (``reduction``: filter taps x input channels) is
    shorter than ``_PAIRED_MIN_REDUCTION``.

    Why: ``conv_register_tile`` takes only channel tiles that divide the filters, so an odd
    count took one-vector tiles, one broadcast load per FMA and too few accumulators to
    cover the FMA latency (7 x 1 on a 14-pixel row: 5 cycles per 7 FMAs in the model, where
    7 x 2 takes 7 per 14). Inception's 96 -> 208 3x3 layer at 14 x 14 and 512 -> 112 1x1
    one ran 1.12-1.14x onnxruntime's CPU time on such tiles (docs/performance.md, round 28).
    The padding to an even count (pipelines/graph/padded_extents.py) stops at 1/32 of the
    filters and at results written into a concat, as Inception's branches are."""
    vectors, rest = divmod(out_channels, lanes)
    if rest or vectors < 3 or vectors % 2 == 0 or reduction < _PAIRED_MIN_REDUCTION:
        return None
    pixels = register_row_tile(width, 2, registers)
    if width % pixels:
        return None
    single = one_vector_row_tile(width, registers)
    paired = (vectors - 1) * tile_row_cycles(width, pixels, 2) + tile_row_cycles(width, pixels, 1)
    return pixels if paired < vectors * tile_row_cycles(width, single, 1) else None


def conv_channel_dim(nest: LoopNest) -> int | None:
    """The channel loop of a depthwise convolution or a pooling op, when it indexes the
    output's contiguous (last) dim as in NHWC; ``None`` otherwise and for convolutions with
    output channels. (linalg counts a pooling op's channels as a batch dim.)"""
    batch, _image, out_channel, _filter, _in_channel, depth = nest.convolution
    last = nest.output_dims[-1] if nest.output_dims else None
    if out_channel or last is None or (last not in depth and last not in batch):
        return None
    return last


def depthwise_channel_dim(nest: LoopNest) -> int | None:
    """The channel loop of an NHWC depthwise convolution (``conv_channel_dim``), ``None`` for
    other ops, pooling included."""
    if nest.op_name != "linalg.depthwise_conv_2d_nhwc_hwc":
        return None
    return conv_channel_dim(nest)


# The stride a depthwise window's register budget allows for (``depthwise_window_fits``): the
# planner sees loops, not strides; MobileNet/EfficientNet's depthwise layers take 1 or 2.
_DEPTHWISE_WINDOW_STRIDE = 2


def depthwise_window_fits(pixels: int, taps: int, registers: int) -> bool:
    """Whether a depthwise register tile of ``pixels`` (one channel vector) can take a row's
    whole window of ``taps`` (kw) in one reduction step: its accumulators, the input vectors
    the window spans at stride 2 (``(pixels - 1) * 2 + taps``) and the ``taps`` filter
    vectors fit the register file.

    Why: a step of one tap loads an input vector per pixel for one FMA each (an 8 x 3x3
    tile: 72 FMAs, 72 input loads, 9 filter loads), so the tile runs on its loads. With the
    kw loop inside the step, linalg's depthwise vectorization reads the row once
    (``vector<10x16xf32>`` at stride 1, ``vector<17x16xf32>`` at 2) and takes each tap's
    pixels as a slice of it: 30 input loads per 72 FMAs at stride 1, the reuse along W of
    MLAS's depthwise kernel. On AVX-512 (32 registers) 8 pixels of a 3x3 or 5x5 window fit;
    on AVX2 (16) none does and the step stays one tap (LLVM folds each load into its FMA
    instead of spilling a window it cannot hold). A dilated window spans more inputs than
    this counts; LLVM then folds the loads it cannot keep, as before."""
    window = (pixels - 1) * _DEPTHWISE_WINDOW_STRIDE + taps
    return pixels + window + taps <= registers


def depthwise_window_dim(nest: LoopNest, register_tiles: list[int] | tuple[int, ...], registers: int) -> int | None:
    """The kw loop of an NHWC depthwise convolution whose register tile (``register_tiles``'
    pixels) can take the whole window row in each reduction step (``depthwise_window_fits``;
    its reduction tile is then 0, untiled); ``None`` otherwise. Shared by the default plan and
    the tuner's space (schedule/space.py ``ConvSpace``), so the default is a point of it."""
    if depthwise_channel_dim(nest) is None:
        return None
    _batch, image, _out_channel, filter_loop, _in_channel, _depth = nest.convolution
    if not image or not filter_loop or not register_tiles[image[-1]]:
        return None
    kw = filter_loop[-1]
    return kw if depthwise_window_fits(register_tiles[image[-1]], nest.ranges[kw], registers) else None


def _rows_split(nest: LoopNest, batch: tuple[int, ...], image: tuple[int, ...], threads: int) -> bool:
    """Whether ``plan_convolution``'s tasks can split images or equal bands of rows, so that
    no task needs to split the output channels."""
    images = math.prod(nest.ranges[d] for d in batch)
    return images % threads == 0 or (bool(image) and balanced_chunk(nest.ranges[image[0]], threads) is not None)


def _pooling_rows(nest: LoopNest) -> bool:
    """Whether an op's tasks take bands of output rows even where its rows split neither in 2
    nor in 4 and a channel split would keep the threads as busy: pooling ops (NHWC).

    Why: a pooling op does one compare or add per input element loaded, so it runs at the
    speed its input streams in, and a task over a slice of the channels reads one 64-byte
    line of every input pixel, a stride of the whole pixel apart (512 bytes at 128 channels),
    where a band of rows reads its rows' pixels whole, contiguous. SqueezeNet's three 3x3/2
    max pools (55, 27 and 13 output rows) took 8-16 channel tasks and ran at 2.4-2.6x
    onnxruntime's time on two threads, hardly faster than on one; as bands of rows
    (``busiest_chunk``: 11 x 5, 9 x 3, 13 x 1) 1.4-1.9x, their sum 0.24 -> 0.15 ms
    (docs/performance.md, "Round 29: pooling at two threads"). Depthwise convolutions,
    which also load an input vector per multiply-add, were not measured and keep the rule
    of ``plan_convolution``."""
    return nest.op_name.startswith("linalg.pooling")


def plan_convolution(nest: LoopNest, tag: int, lanes: int, threads: int, registers: int) -> OpSchedule:
    batch, image, out_channel, filter_loop, in_channel, depth = nest.convolution
    channel = conv_channel_dim(nest)
    batch = tuple(d for d in batch if d != channel)
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    interchange = None
    input_step = None
    if out_channel:
        oc = out_channel[-1]
        heavy = filter_heavy(nest)
        if image and nest.output_dims and nest.output_dims[-1] == oc:
            # NHWC: the vectors run along the output channels (an NCHW conv, below
            # opt_level 3, keeps one vector's worth of channels).
            pointwise = all(nest.ranges[d] == 1 for d in filter_loop)
            pixels, register[oc], input_step = conv_register_tile(
                nest.ranges[image[-1]], nest.ranges[oc], nest.ranges[in_channel[-1]] if in_channel else None,
                lanes, registers, heavy and pointwise)
            per_output = math.prod(nest.ranges[d] for d in (*filter_loop, *in_channel))
            paired = paired_vector_tile(nest.ranges[image[-1]], nest.ranges[oc], lanes, registers, per_output)
            if paired is not None and register[oc] == lanes and _rows_split(nest, batch, image, threads):
                # Tasks then split images or rows: channel tasks must divide the filters
                # in whole register tiles, which a peeled channel tile does not.
                pixels, register[oc] = paired, 2 * lanes
                if input_step is not None and pixels * 2 + input_step * 2 + 1 > registers:
                    input_step = 1
            register[image[-1]] = pixels
        else:
            register[oc] = largest_divisor(nest.ranges[oc], lanes)
        if heavy:
            interchange = channels_outer(nest)
    elif channel is not None:
        # Depthwise/pooling in NHWC: every output pixel of the register tile reuses the
        # filter vector, so the tile is one vector of the contiguous channels by several
        # pixels, accumulated in registers over the (kh, kw) window. Tiled by 1 (pooling:
        # also split into one task per channel) the channel loop ran scalar.
        # As for matmul columns, whole vectors, narrower ones where the channels have no
        # multiple of the lanes (24 channels: 8-lane vectors, not 12-lane ones).
        part = min(lanes, nest.ranges[channel] & -nest.ranges[channel])
        register[channel] = vector_tile(nest.ranges[channel], part, lanes // part)
    if image and register[image[-1]] == 1:
        if channel is not None and nest.op_name == "linalg.depthwise_conv_2d_nhwc_hwc":
            # Every pixel of a depthwise tile loads its own input vector: at most 8 pixels
            # per filter vector are latency-bound, so the fewest tiles win (65 pixels: 8 x 8
            # and a peeled 1, not 13 x 5).
            register[image[-1]] = register_row_tile(nest.ranges[image[-1]], 1, registers, depthwise=True)
        else:
            register[image[-1]] = largest_divisor(nest.ranges[image[-1]], _CONV_REGISTER_PIXELS)
    if len(image) == 1 and image and nest.ranges[image[0]] % register[image[0]]:
        # Tasks may split a lone image dim: its tiles divide it, so task shapes stay static.
        register[image[0]] = largest_divisor(nest.ranges[image[0]], _CONV_REGISTER_PIXELS)
    for d in nest.reduction_dims:
        reduction[d] = 1
    if in_channel:
        reduction[in_channel[-1]] = input_step or largest_divisor(nest.ranges[in_channel[-1]], _CONV_INPUT_STEP)
    window = depthwise_window_dim(nest, register, registers)
    if window is not None:
        reduction[window] = 0
    thread = [0] * n_loops
    for d in batch:
        thread[d] = 1
    images = 1
    for d in batch:
        images *= nest.ranges[d]
    rows = balanced_chunk(nest.ranges[image[0]], threads) if image else None
    if images % threads == 0:
        pass  # one task per image already keeps every thread busy
    elif out_channel and filter_heavy(nest) and nest.ranges[out_channel[-1]] % register[out_channel[-1]] == 0:
        # Tasks split by output channels each read the whole input and their slice of the
        # filter; tasks split by rows each read their band of the input and the whole
        # filter. Where the filter outweighs the image (ResNet-50's 28x28 3x3 layers and
        # everything at 14x14: 2 tasks of 7 rows each streamed up to 2.4 MB of filter),
        # channels. Whole models moved within the noise, ResNet-50's strided 1x1 layers
        # closer to numpy's GEMM rate in its profile (docs/performance.md, round 6).
        d = out_channel[-1]
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    elif rows is not None:
        # Tasks split the output image by rows: each reads its band of the input plus a
        # halo, and the whole filter, which is the lighter of the two here.
        thread[image[0]] = rows
    elif out_channel or channel is not None:
        # Rows that do not split evenly (7x7 layers, global pooling): split the channels,
        # unless their tasks leave a thread idler than equal bands of rows would, or the op
        # is a pooling one (``_pooling_rows``).
        d = out_channel[-1] if out_channel else channel
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
        band = busiest_chunk(nest.ranges[image[0]], threads) if len(image) > 1 else None
        if band is not None and (_pooling_rows(nest) or busy_share(nest.ranges[image[0]] // band, threads)
                                 > busy_share(nest.ranges[d] // thread[d], threads)):
            # SqueezeNet's 1x1 squeeze to 16 channels at 55x55 was one task (one 16-channel
            # register tile): 11 bands of 5 rows on 2 threads; 48 channels (3 tasks of 16)
            # on 13 rows: 13 one-row bands.
            thread[d] = 0
            thread[image[0]] = band
    elif image:
        d = image[0]
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    # A pixel tile that does not divide its row (``register_row_tile``): the last tile is
    # peeled off (script.py ``peel_partial_tiles``; in a fusion group, conv_kernels.py).
    peeled = (image[-1],) if image and nest.ranges[image[-1]] % register[image[-1]] else ()
    if out_channel and nest.ranges[out_channel[-1]] % register[out_channel[-1]]:
        # A two-vector tile over an odd count of channel vectors (``paired_vector_tile``;
        # its pixels divide the row, so this is the one peeled loop).
        peeled = (out_channel[-1],)
    return OpSchedule(tag, thread_tiles=tuple(thread), register_tiles=tuple(register),
                      register_interchange=interchange, reduction_tiles=tuple(reduction),
                      decompose=True, vectorize=True, peeled_loops=peeled)


# Bytes of a convolution's output a sequential group tile holds (``sequential_tiles``): the
# tile's intermediates (the anchor's result before its epilogue) stay in L2.
_SEQUENTIAL_TILE_L2_FRACTION = 4


def sequential_tiles(nest: LoopNest, caches: CacheHierarchy = CacheHierarchy(),
                     register_tiles: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """Tiles of a sequential loop that computes a fusion group anchored on this convolution
    or pooling op when it has no thread level (``GroupSchedule.sequential``): one image at a
    time and bands of output rows whose output slice takes at most a quarter of L2, so the
    anchor's result is consumed by its epilogue (batch norm, ReLU6, residual add) while it
    is in cache instead of written whole and read back by one loop nest per op. A
    filter-heavy convolution (``filter_heavy``) gets bands of output channels instead, whole
    multiples of its register tile's (``register_tiles``): a band of rows streamed its whole
    filter once per band (ResNet-50's 7x7 512 -> 2048 layer ran far behind onnxruntime on
    one thread), while in a band of channels the register tiles keep the channels
    outermost (``channels_outer``) and read each filter slice once. ``None`` for other ops
    (a matmul or a reduction keeps one loop nest per op there)."""
    if not nest.convolution or nest.op_name not in DECOMPOSABLE or not nest.static:
        return None
    batch, image, out_channel, *_ = nest.convolution
    channel = conv_channel_dim(nest)
    if not image:
        return None
    tiles = [0] * len(nest.ranges)
    for d in batch:
        if d != channel and nest.ranges[d] > 1:
            tiles[d] = 1
    element_bytes = max(nest.element_bits // 8, 1)
    if out_channel and filter_heavy(nest):
        oc = out_channel[-1]
        image_bytes = element_bytes * math.prod(nest.ranges[d] for d in image)
        width = register_tiles[oc] if register_tiles and register_tiles[oc] else 1
        channels = max(caches.l2 // (_SEQUENTIAL_TILE_L2_FRACTION * image_bytes), width)
        # A register tile that does not divide the channels (``paired_vector_tile``: its
        # last tile peeled) has no band of whole tiles: one band of all of them.
        tiles[oc] = (largest_divisor(nest.ranges[oc], channels, multiple_of=width)
                     if nest.ranges[oc] % width == 0 else nest.ranges[oc])
    else:
        row_bytes = element_bytes
        for d in nest.output_dims:
            if d is not None and d != image[0] and (d not in batch or d == channel):
                row_bytes *= nest.ranges[d]
        rows = max(caches.l2 // (_SEQUENTIAL_TILE_L2_FRACTION * row_bytes), 1)
        tiles[image[0]] = largest_divisor(nest.ranges[image[0]], rows)
    if all(tile in (0, extent) for tile, extent in zip(tiles, nest.ranges)):
        return None  # one band would hold the whole output (group.py then takes one band)
    return tuple(tiles)


def filter_heavy(nest: LoopNest) -> bool:
    """Whether a convolution's filter outweighs its output image: more filter taps times
    output channels than output pixels (ResNet's 14x14 and 7x7 layers). Such a layer streamed
    its whole filter (up to 9 MB at 7x7x512) from memory once per output row; with the output channels outermost (``channels_outer``) each filter slice stays
    in cache across all rows. A 1x1 (pointwise) one may take up to 4 channel vectors per
    register tile where the register file holds them (``conv_register_tile``; at 7 pixels it
    does not, and 4 vectors by 8 pixels, 32 accumulators, spilled and ran slower than one)."""
    _batch, image, out_channel, filter_loop, _in_channel, _depth = nest.convolution
    taps, pixels = 1, 1
    for d in (*filter_loop, *out_channel):
        taps *= nest.ranges[d]
    for d in image:
        pixels *= nest.ranges[d]
    return bool(out_channel and image) and taps > pixels


def channels_outer(nest: LoopNest) -> tuple[int, ...]:
    """Loop interchange putting a convolution's output-channel loop before its batch and
    image loops (register tiling level): see ``filter_heavy``."""
    batch, image, out_channel, *_ = nest.convolution
    order = [d for d in range(len(nest.ranges)) if d != out_channel[-1]]
    order.insert(min((*batch, *image)), out_channel[-1])
    return tuple(order)
