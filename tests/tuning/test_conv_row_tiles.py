"""The convolution space's column tiles on rows of odd widths (issue #44 goal 2).

A row of 25 or 13 output pixels has no divisor among the usual register tiles (4, 7, 8, 14,
...): the space offered only 1 and the default's peeled 8. The whole row (25 or 13 columns x
one vector of output channels) ran 1.25-1.37x faster than the default alone on the Zen 5
(docs/tuning.md, "Headroom on the public suite"); the space now holds every divisor of the
row up to 32, and peeled tiles where the default already peels. These tests check the
tiles exist, stay out of rows that already had their tiles, build, and compute what the
default computes. No timings.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlir_text
import tilecraft
from pinned_targets import AVX2, AVX512
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import extract_tasks, space_for

RNG = np.random.default_rng(11)


def _conv_task(size: int, channels: int, filters: int, target: str):
    (task,) = extract_tasks(mlir_text.conv_nhwc(1, size + 2, size + 2, channels, 3, 3, filters), target)
    return task, space_for(task, target)


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("row, expected", [(25, {5, 25}), (13, {13})])
def test_an_odd_row_gets_its_own_divisors_and_peeled_tiles(target, row, expected):
    task, space = _conv_task(row, 37, 32, target)
    tiles = set(dict((k.name, k.values) for k in space.knobs)["reg_ow"])
    default = space.default()["reg_ow"]
    assert expected <= tiles and default in tiles and all(t <= 32 for t in tiles)
    peeled = {t for t in tiles if row % t}
    if row % default:  # the default peels this row (the Zen 5's 8): other peeled tiles too
        assert {4, 8, 12} <= peeled
    else:  # (the Zen 3's 5 for 25 columns) every tile divides the row
        assert not peeled
    for reg_ow in tiles:
        config = {**space.default(), "reg_ow": reg_ow}
        assert space.is_valid(config), config
        assert (task.ranges[2] % reg_ow != 0) == bool(space.plan(config).peeled_loops)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_rows_that_divide_keep_their_tiles(target):
    """A 56- or 28-pixel row already had its register-sized divisors: no new divisor, and no
    peeled tile unless the default peels too (the Zen 3's default of 6 columns for 56), so
    the space, and the search, stays about as large as it was."""
    for row, before in ((56, (1, 2, 4, 7, 8, 14, 28)), (28, (1, 2, 4, 7, 14, 28))):
        _, space = _conv_task(row, 16, 32, target)
        tiles = dict((k.name, k.values) for k in space.knobs)["reg_ow"]
        default = space.default()["reg_ow"]
        new = set(tiles) - set(before) - {default}
        assert all(row % t for t in new), (row, tiles)
        assert not new or row % default, (row, tiles)
    _, space = _conv_task(56, 16, 32, AVX512)
    assert space.default()["reg_ow"] == 8 and dict((k.name, k.values) for k in space.knobs)["reg_ow"] == \
        (1, 2, 4, 7, 8, 14, 28)


@pytest.mark.parametrize("row, reg_ow", [(25, 25), (13, 13), (13, 12)])
def test_a_row_tile_builds_and_matches_the_default(tmp_path, row, reg_ow):
    """The tile applied through a record in a real build (AVX2: runs on every x86-64 host;
    its default is 5 columns for both rows, so 13 and 25 are new, 12 a peeled one):
    the schedule differs from the default's and the output is the same."""
    source = mlir_text.conv_nhwc(1, row + 2, row + 2, 37, 3, 3, 16)
    (task,) = extract_tasks(source, AVX2)
    space = space_for(task, AVX2)
    assert reg_ow in dict((k.name, k.values) for k in space.knobs)["reg_ow"]
    config = {**space.default(), "reg_oc": 8, "reg_ow": reg_ow}
    assert config != space.default() and space.is_valid(config)
    records = tmp_path / "rows.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(AVX2)))
    baseline = tilecraft.compile(source, target=AVX2)
    tuned = tilecraft.compile(source, target=AVX2, tuning_records=records)
    assert tuned.ir("schedule") != baseline.ir("schedule"), "the record was not applied"
    x = RNG.standard_normal((1, row + 2, row + 2, 37)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 37, 16)).astype(np.float32)
    np.testing.assert_allclose(tuned(x, w), baseline(x, w), rtol=1e-4, atol=1e-4)
