"""Where a package's two-thread CPU time goes, thread by thread (issue #43).

    TILECRAFT_NUM_THREADS=2 .venv/bin/tilecraft compile /tmp/m.onnx -o /tmp/m.tar
    .venv/bin/python benchmarks/thread_profile.py /tmp/m.tar --calls 500

Runs the package ``--calls`` times in a child process under ``perf record -e cpu-clock``
(no hardware counters are needed; on these VMs there are none), maps each sample of
``model.so`` onto its function with ``nm`` and prints, for the two busiest threads, the CPU
microseconds per call in kernels (``parallel_compute_fn*``, the ``async_dispatch_fn*`` and
``async_execute_fn*`` that inline them, and the entry function, which holds the kernels too
small to split), waiting (the runtime's spin and queue scans) and the rest of the runtime.
Then, for the worker's waiting samples, what the calling thread was doing within
``--window-us``: computing, off its core (no sample: another process had it), or elsewhere
(Python between calls, the kernel).

Why sampled CPU time and not wall time: on a shared machine a two-thread call's wall time
measures how often both threads got a core; CPU samples by thread and kind say what each
thread did with the time it got (docs/performance.md, "The second core").
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

_CALLER = """
import sys, numpy as np
from tilecraft.runtime.package import load_module
module = load_module(sys.argv[1])
x = np.random.default_rng(0).standard_normal([int(d) for d in sys.argv[3].split(",")]).astype(np.float32)
for _ in range(5):
    module(x)
for _ in range(int(sys.argv[2])):
    module(x)
"""

WAITING = {"spin_until", "worker", "next_task", "queue_nonempty", "ready_or_work", "wait_ready", "try_pop", "take"}
KERNELS = ("parallel_compute_fn", "async_dispatch_fn", "async_execute_fn", "__tilecraft_kernel")


def functions(library: str) -> tuple[list[int], list[str]]:
    """Start addresses (sorted) and names of the library's functions."""
    starts, names = [], []
    for line in subprocess.run(["nm", "-n", library], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            starts.append(int(parts[0], 16))
            names.append(parts[2])
    return starts, names


def kind_of(name: str, entry: str) -> str:
    if name in WAITING:
        return "wait"
    if name.startswith(KERNELS) or name == entry:
        return "kernels"
    return "runtime"


def samples(data: str, library: str, entry: str) -> dict[str, list[tuple[float, str]]]:
    """Thread id -> (time, kind) of each sample; kind: kernels, wait, runtime or other."""
    starts, names = functions(library)
    script = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "tid,time,ip,dso"],
                            capture_output=True, text=True, check=True).stdout
    load_bias = None
    by_thread: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    for line in script.splitlines():
        if "PERF_RECORD_MMAP2" in line and "model.so" in line and "r-xp" in line:
            mapping = line.split("[", 1)[1]
            start = int(mapping.split("(")[0], 16)
            offset = int(mapping.split("@ ")[1].split()[0], 16)
            load_bias = start - offset
            continue
        parts = line.split()
        if "PERF_RECORD" in line or len(parts) < 4:
            continue
        tid, when, ip, dso = parts[0], float(parts[1].rstrip(":")), int(parts[2], 16), parts[3]
        if "model.so" in dso and load_bias is not None:
            index = bisect.bisect_right(starts, ip - load_bias) - 1
            kind = kind_of(names[index], entry) if index >= 0 else "runtime"
        else:
            kind = "other"
        by_thread[tid].append((when, kind))
    return by_thread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--shape", default="1,3,224,224", help="the input's shape (default 1,3,224,224)")
    parser.add_argument("--frequency", type=int, default=10000, help="samples per second per thread")
    parser.add_argument("--window-us", type=float, default=100.0,
                        help="how near a caller sample must be to count as the caller's state")
    args = parser.parse_args(argv)
    if not shutil.which("perf") or not shutil.which("nm"):
        raise SystemExit("needs perf and nm on the PATH")
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(args.package) as archive:
            archive.extract("model.so", folder)
            manifest = archive.extractfile("manifest.json")
            entry = __import__("json").load(manifest)["entry"] if manifest else "main"
        data = os.path.join(folder, "perf.data")
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.frequency), "-o", data,
                        sys.executable, "-c", _CALLER, args.package, str(args.calls), args.shape], check=True,
                       stdout=subprocess.DEVNULL)
        by_thread = samples(data, os.path.join(folder, "model.so"), entry)
    busiest = sorted(by_thread, key=lambda tid: -sum(kind != "other" for _, kind in by_thread[tid]))[:2]
    us_per_sample = 1e6 / args.frequency / (args.calls + 5)
    print(f"{args.package}: CPU microseconds per call ({args.calls + 5} calls, perf cpu-clock at {args.frequency} Hz)")
    print(f"{'thread':<16} {'kernels':>8} {'wait':>8} {'runtime':>8} {'other':>8}")
    for label, tid in zip(("caller", "worker"), busiest):
        counts = collections.Counter(kind for _, kind in by_thread[tid])
        print(f"{label + ' ' + tid:<16} " + " ".join(f"{counts[k] * us_per_sample:8.0f}"
                                                    for k in ("kernels", "wait", "runtime", "other")))
    if len(busiest) < 2:
        return
    caller, worker = (by_thread[tid] for tid in busiest)
    times = [when for when, _ in caller]
    window = args.window_us * 1e-6
    states: collections.Counter[str] = collections.Counter()
    for when, kind in worker:
        if kind != "wait":
            continue
        near = {k for _, k in caller[bisect.bisect_left(times, when - window):bisect.bisect_right(times, when + window)]}
        states["off its core" if not near else "computing" if "kernels" in near else "elsewhere"] += 1
    total = sum(states.values()) or 1
    print("while the worker waited, the caller was: " +
          ", ".join(f"{state} {count / total:.0%}" for state, count in states.most_common()))


if __name__ == "__main__":
    main()
