"""PyTorch's OpInfo database through tilecraft.torch.compile, held to expected_status.txt.

The slow test runs every float32 op (the first ``run.CI_SAMPLES`` samples with elements of
each), in shards that pytest-xdist spreads over its workers (each with a worker pool of its
own), and fails on any regression, any unexpected pass and any change in the op set. After
a change that fixes ops, record them with::

    .venv/bin/python tests/conformance/torch/run.py --update-expected

The fast tests below pin the harness's classification on a few ops whose status is known.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

pytest.importorskip("expecttest")  # torch's OpInfo database imports it

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opinfo_cases  # noqa: E402
import run  # noqa: E402
from onnx_conformance import shards  # noqa: E402  (run put the ONNX harness on the path)


@pytest.fixture(scope="module")
def database():
    return opinfo_cases.op_database()


def test_family_names():
    assert opinfo_cases.family("nn.functional.conv2d") == "nn.functional"
    assert opinfo_cases.family("linalg.svd") == "linalg"
    assert opinfo_cases.family("add") == "torch"


def test_a_supported_op_passes_every_sample(database):
    record = opinfo_cases.run_op(database["add"], max_samples=2)
    assert record["status"] == "pass", record
    assert record["samples"] == ["pass", "pass"]


def test_a_wrong_result_is_caught(database, monkeypatch):
    """The comparison really compares: a compiled module that answers 1 more is ``wrong``."""
    import tilecraft.torch

    real = tilecraft.torch.compile

    def off_by_one(module, inputs, *args, **kwargs):
        compiled = real(module, inputs, *args, **kwargs)
        return lambda *tensors: compiled(*tensors) + 1

    monkeypatch.setattr(tilecraft.torch, "compile", off_by_one)
    record = opinfo_cases.run_op(database["add"], max_samples=1)
    assert record["status"] == "wrong" and "values differ" in record["message"], record



def test_a_random_op_is_compared_draw_for_draw(database, monkeypatch):
    """Eager and compiled calls start from one seed and OpInfo's own reseeding is off, so a
    random op passes only when it draws what eager draws: a compiled call that draws once
    more first (a shifted stream) is ``wrong``."""
    import torch

    import tilecraft.torch

    assert opinfo_cases.run_op(database["bernoulli"], max_samples=1)["status"] == "pass"
    real = tilecraft.torch.compile

    def shifted(module, inputs, *args, **kwargs):
        compiled = real(module, inputs, *args, **kwargs)
        return lambda *tensors: (torch.rand(1), compiled(*tensors))[1]

    monkeypatch.setattr(tilecraft.torch, "compile", shifted)
    record = opinfo_cases.run_op(database["bernoulli"], max_samples=1)
    assert record["status"] == "wrong" and "values differ" in record["message"], record

def test_the_report_counts_families():
    results = {"add": {"status": "pass", "family": "torch", "message": ""},
               "linalg.svd": {"status": "refused", "family": "linalg",
                              "message": "TorchImportError: 1 unsupported ATen op(s): aten._linalg_svd.default "
                                         "(node '_linalg_svd' at x.py:1)"},
               "nonzero": {"status": "export-refused", "family": "torch", "message": ""}}
    table = run.render(results)
    assert "| **all** | 3 | 1 | 1 | 0 | 0 | 0 | 1 | 0 | 0 | 50.0 % (1/2) |" in table
    assert "`aten._linalg_svd.default`" in table


def test_expected_comparison_flags_both_directions():
    found = run.compare({"a": "pass", "b": "refused", "c": "pass"}, {"a": "refused", "b": "pass", "d": "pass"})
    assert (found.regressions, found.unexpected_passes, found.removed, found.added) == (["a"], ["b"], ["c"], ["d"])
    assert not found.ok


# Shards of the ops (a hash of the op name picks one; onnx_conformance/shards.py), which
# pytest-xdist spreads over its workers: about 170 ops each (a worker start-up loads the
# OpInfo database, about 10 CPU seconds: 4 shards start as many workers as one pool did).
SHARDS = 4
SHARD_IDS = shards.hashed_shard_ids("ops", SHARDS)


def op_shard(name: str) -> str:
    return shards.shard_id(name, "ops", SHARDS)


@pytest.mark.slow
@pytest.mark.conformance
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("shard", SHARD_IDS)
def test_opinfo_matches_expected_statuses(shard):
    names = [name for name in opinfo_cases.cases("float32") if op_shard(name) == shard]
    results = run.run(names, "float32", run.CI_SAMPLES, shards.pool_jobs(), verbose=False)
    print("\n" + run.render(results))
    # This shard's share of the file: an op it lists that no longer exists shows as removed.
    expected = {name: status for name, status in run.read_expected().items() if op_shard(name) == shard}
    found = run.compare(expected, {name: record["status"] for name, record in results.items()})
    if not found.ok:
        offending = sorted(found.regressions + found.unexpected_passes + found.added + found.removed)
        pattern = "^(" + "|".join(re.escape(name) for name in offending) + ")$"
        pytest.fail(f"OpInfo statuses (shard {shard}) differ from {os.path.relpath(run.EXPECTED_PATH)}:\n"
                    + run.format_comparison(found, expected, results)
                    + "\n\nIf the new statuses are right, record them (this reruns those ops): "
                    f".venv/bin/python tests/conformance/torch/run.py -k '{pattern}' --update-expected",
                    pytrace=False)
