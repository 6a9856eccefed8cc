"""ONNX's conformance suite through tilecraft, held to tests/conformance/onnx/expected_status.txt.

Every case (about 2,000; see run.py) runs in one of the shards below (onnx_conformance/shards.py:
a hash of the case name picks the shard; each light zoo model, minutes long, is a shard of its
own), so pytest-xdist spreads the suite over its workers; each shard's cases run in a worker
pool of their own (one worker under xdist) and the shard fails on any regression or unexpected
pass among them. ``test_onnx_conformance_case_set_matches_expected`` fails on any change in the
set of cases, without running one. After a change that fixes cases, record them with::

    .venv/bin/python tests/conformance/onnx/run.py --update-expected

Deselect with ``-m 'not conformance'`` (or ``-m 'not slow'``).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

pytest.importorskip("onnx")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import expected as expectations  # noqa: E402
from onnx_conformance import report, shards  # noqa: E402
from onnx_conformance.runner import DEFAULT_OUTPUT, print_progress, run_cases, save_results  # noqa: E402
from onnx_conformance.suite import GROUPS, Case, discover, light_cases  # noqa: E402

# Hashed shards of the short cases: 148-182 each (a minute or two of CPU), under the pool's
# 200 tasks per worker, so a shard starts one worker (about 2 CPU s: imports and the first
# compile); fewer, larger shards would start two.
HASHED_SHARDS = 12
PREFIX = "cases"

# The light shards first: the longest work units start first under xdist.
LIGHT_NAMES = [case.name for case in light_cases()]
SHARD_IDS = LIGHT_NAMES + shards.hashed_shard_ids(PREFIX, HASHED_SHARDS)


def name_shard(name: str) -> str:
    """The shard id that runs the case ``name`` (a light zoo model: its own)."""
    return shards.shard_id(name, PREFIX, HASHED_SHARDS, own_shard=name in LIGHT_NAMES)


def case_shard(case: Case) -> str:
    return name_shard(case.name)


_DISCOVERED: dict[bool, list[Case]] = {}


def _cases(light: bool) -> list[Case]:
    """The light zoo models, or every other case: discovered once per process, and only the
    kind a shard needs (collecting the node cases takes about 10 CPU seconds; a worker that
    runs only light shards never pays it)."""
    if light not in _DISCOVERED:
        _DISCOVERED[light] = discover(["light"] if light else [g for g in GROUPS if g != "light"])
    return _DISCOVERED[light]


def _update_command(names: list[str]) -> str:
    pattern = "^(" + "|".join(re.escape(name) for name in sorted(names)) + ")$"
    return f".venv/bin/python tests/conformance/onnx/run.py -k '{pattern}' --update-expected"


@pytest.mark.slow
@pytest.mark.conformance
@pytest.mark.timeout(2 * 3600)  # the suite bounds each case itself; this is the whole shard
@pytest.mark.parametrize("shard", SHARD_IDS)
def test_onnx_conformance_matches_expected_statuses(shard):
    cases = shards.select(_cases(light=shard in LIGHT_NAMES), case_shard, shard)
    assert cases, f"shard {shard} has no case"
    results = run_cases(cases, jobs=shards.pool_jobs(), progress=print_progress(verbose=False))
    output = os.path.join(os.path.dirname(DEFAULT_OUTPUT), f"results-{shard}.json")
    print(f"\nresults: {save_results(results, output)}\n" + report.render_text(results))
    expected = expectations.read_expected()
    # This shard's share of the file (a case it lists that no longer exists shows as removed).
    comparison = expectations.compare({n: s for n, s in expected.items() if name_shard(n) == shard},
                                      {name: r["status"] for name, r in results.items()})
    if not comparison.ok:
        offending = comparison.regressions + comparison.unexpected_passes + comparison.added + comparison.removed
        pytest.fail(
            f"ONNX conformance (shard {shard}) differs from {os.path.relpath(expectations.EXPECTED_PATH)}:\n"
            + expectations.format_comparison(comparison, expected, results)
            + "\n\nIf the new statuses are right, record them (this reruns those cases): "
            + _update_command(offending),
            pytrace=False,
        )


@pytest.mark.conformance
def test_onnx_conformance_case_set_matches_expected():
    """The cases ONNX ships are the ones the expected file lists, and every one of them
    falls in a shard collected above (so every case runs and is checked exactly once)."""
    cases = _cases(light=True) + _cases(light=False)
    assert not shards.missing_shards([case_shard(case) for case in cases], SHARD_IDS)
    expected = set(expectations.read_expected())
    found = {case.name for case in cases}
    lines = ([f"  new case (not in the file): {n}" for n in sorted(found - expected)]
             + [f"  removed case (in the file, not in onnx): {n}" for n in sorted(expected - found)])
    if lines:
        pytest.fail(
            f"ONNX's conformance cases differ from {os.path.relpath(expectations.EXPECTED_PATH)}:\n"
            + "\n".join(lines)
            + "\n\nRun them and record their statuses: .venv/bin/python tests/conformance/onnx/run.py "
            "--update-expected",
            pytrace=False,
        )
