"""What a checked build costs (``checked=True``, docs/robustness.md "Checked builds").

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/checked_builds.py

Each kernel is compiled twice (unchecked, checked); both must compute the same values. The
two builds are timed in alternating rounds (``--rounds``, 5 calls each) in this process, by
CPU time (``time.process_time``: with one thread it holds on a shared machine, where wall
clock does not). Printed: the medians, their ratio, and ``/proc/loadavg`` before and after.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import tilecraft

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import mlir_text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds (default 21)")
    args = parser.parse_args()
    cases = {"matmul 256": mlir_text.matmul(256, 256, 256),
             "softmax 512x1024": mlir_text.softmax(512, 1024),
             "conv 1x64x56x56": mlir_text.conv_nchw(1, 64, 56, 56, 64, 3, 3, pad=1)}
    rng = np.random.default_rng(0)
    print("load average:", open("/proc/loadavg").read().split()[:3])
    for name, source in cases.items():
        modules = {checked: tilecraft.compile(source, checked=checked) for checked in (False, True)}
        arguments = [rng.random(spec.shape).astype(spec.dtype) for spec in modules[False].signature.arguments]
        np.testing.assert_array_equal(modules[True](*arguments), modules[False](*arguments))
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for checked in (False, True):
                start = time.process_time()
                for _ in range(5):
                    modules[checked](*arguments)
                times[checked].append((time.process_time() - start) / 5)
        plain, checked = np.median(times[False]), np.median(times[True])
        print(f"{name}: unchecked {plain * 1e3:.3f} ms, checked {checked * 1e3:.3f} ms, ratio {checked / plain:.2f}")
    print("load average:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
