"""``make test`` runs the fuzz suite (fuzz.py) at a fixed seed: no crash, hang, wrong success
or untyped exception may appear. A longer run: ``python tests/robustness/fuzz.py --cases 2000
--seed N`` (docs/robustness.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import fuzz  # noqa: E402  (tests/robustness is on sys.path: pytest's rootdir-relative import)

SEED = 0
CASES = 420


def test_fixed_seed_fuzz_run_has_no_failing_outcome():
    results = fuzz.run_suite(SEED, CASES, jobs=2)
    failing = [f"case {r['id']} ({r['category']}, seed {r['seed']}): {r['outcome']}: {r.get('detail', '')}"
               for r in results if r["outcome"] in fuzz.FAILING]
    assert not failing, "\n".join(failing) + "\n" + fuzz.summary_table(results)
    assert len(results) == CASES and {r["category"] for r in results} == set(fuzz.CATEGORIES)
