"""Two-vector convolution tiles over an odd count of filter vectors, the last channel tile
peeled (the default, schedule/conv_plan.py ``paired_vector_tile``), against the former
one-vector tiles; builds alternating in blocks in one process, process CPU time,
onnxruntime in the same blocks. One thread unless ``TILECRAFT_NUM_THREADS`` says otherwise
(onnxruntime then takes as many, without spinning).

    .venv/bin/python benchmarks/paired_vector_tiles.py                   # single convolutions
    .venv/bin/python benchmarks/paired_vector_tiles.py --convs "" --models inception,efficientnet

The "one" build patches ``conv_plan.paired_vector_tile`` to ``None`` in this process (the
former plan: one-vector tiles, channel tasks for filter-heavy layers), no other change.
Every build skips the compile cache and is checked against onnxruntime first. Printed per
case: the median CPU ms per call of each build and onnxruntime, and the median of the
per-block ratios paired/one with their range. No thresholds: the figures go into
docs/performance.md ("Round 28").
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tilecraft.schedule import conv_plan  # noqa: E402
from one_vector_tiles import alternating_blocks, run_cases  # noqa: E402
from rule_builds import builds_under_rules, checked_calls  # noqa: E402

DEFAULT = conv_plan.paired_vector_tile
RULES = {"one": lambda *arguments: None, "paired": DEFAULT}


def _rules(rule) -> None:
    conv_plan.paired_vector_tile = rule


def session(model, threads: int):
    """An onnxruntime CPU session of ``model`` on ``threads`` threads that do not spin
    between calls (a spinning pool would take the CPU time measured here)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run(name: str, model, feeds: dict, blocks: int) -> str:
    builds = builds_under_rules(model, RULES, _rules, DEFAULT)
    calls_of = checked_calls(builds, session(model, int(os.environ["TILECRAFT_NUM_THREADS"])), feeds)
    return alternating_blocks(name, calls_of, blocks, "paired", "one")


def main(argv: list[str] | None = None) -> int:
    return run_cases(argv, __doc__, "14x96x208x3s1,14x512x112x1s1,28x96x208x3s1,28x32x48x3s1,"
                                    "55x24x144x1s1silu,14x80x112x1s1silu,27x40x240x1s1silu", run)


if __name__ == "__main__":
    sys.exit(main())
