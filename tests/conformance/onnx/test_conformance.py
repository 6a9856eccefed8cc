"""ONNX's conformance suite through tilecraft, held to tests/conformance/onnx/expected_status.txt.

Runs every case (about 2,000; see run.py) in a pool of worker processes and fails on any
regression, any unexpected pass and any change in the set of cases. After a change that
fixes cases, record them with::

    .venv/bin/python tests/conformance/onnx/run.py --update-expected

Deselect with ``-m 'not conformance'`` (or ``-m 'not slow'``).
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("onnx")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import expected as expectations  # noqa: E402
from onnx_conformance import report  # noqa: E402
from onnx_conformance.runner import print_progress, run_cases, save_results  # noqa: E402
from onnx_conformance.suite import discover  # noqa: E402


@pytest.mark.slow
@pytest.mark.conformance
@pytest.mark.timeout(4 * 3600)  # the suite bounds each case itself; this is the whole run
def test_onnx_conformance_matches_expected_statuses():
    results = run_cases(discover(), progress=print_progress(verbose=False))
    print(f"\nresults: {save_results(results)}\n" + report.render_text(results))
    expected = expectations.read_expected()
    comparison = expectations.compare(expected, {name: r["status"] for name, r in results.items()})
    if not comparison.ok:
        pytest.fail(
            f"ONNX conformance differs from {os.path.relpath(expectations.EXPECTED_PATH)}:\n"
            + expectations.format_comparison(comparison, expected, results)
            + "\n\nIf the new statuses are right, regenerate the file from this run: "
            ".venv/bin/python tests/conformance/onnx/run.py --from-results build/onnx-conformance/results.json "
            "--update-expected",
            pytrace=False,
        )
