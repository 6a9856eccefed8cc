"""What a remote run costs, and whether the device's timings agree with local ones.

    .venv/bin/python benchmarks/remote.py                 # digits CNN, batch 360
    .venv/bin/python benchmarks/remote.py --batch 1 --rounds 12

A server (``python -m tilecraft.runtime.server``) is started on this machine (loopback), so
the device is this CPU and the two timings must agree. Printed:

- the package's size and its upload time (median of ``--rounds`` uploads; the server
  verifies each one: archive, manifest, SHA-256);
- the round trip of ``session.run``, the fixed cost of a remote run: after an idle moment
  (the server's waiting run process has imported numpy; it loads the package and runs it
  once), and right after another run (that process is still starting);
- per round, the median of ``--repeat`` measurements timed on the server
  (``session.time``) and in this process (``tilecraft.run``), alternating, and the ratio
  of their medians over the rounds (1.0: the server times what a local run times).

Quote ``/proc/loadavg`` (printed) with the figures: on a shared machine wall clock moves.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tilecraft
import tilecraft.remote

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=360)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    with tempfile.TemporaryDirectory() as scratch:
        package = Path(scratch) / "digits.tar"
        tilecraft.compile(tilecraft.load(ROOT / "examples" / "digits_cnn.onnx",
                                         shape_dict={"input": [args.batch, 1, 16, 16]}), package_path=package)
        images = np.load(ROOT / "examples" / "digits_test.npz")["images"]
        inputs = {"input": np.resize(images, (args.batch, 1, 16, 16)).astype(np.float32)}
        key = os.urandom(16).hex()
        server = subprocess.Popen([sys.executable, "-m", "tilecraft.runtime.server", "--host", "127.0.0.1",
                                   "--port", "0", "--key", key], stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline().split("listening on ")[1].split()[0].rsplit(":", 1)[1])
            session = tilecraft.remote.connect("127.0.0.1", port, key=key)
            uploads, ready, back_to_back, remote, local = [], [], [], [], []
            loaded = tilecraft.runtime.load(package)
            for _ in range(args.rounds):
                start = time.perf_counter()
                uploaded = session.upload(package)
                uploads.append(time.perf_counter() - start)
                time.sleep(2.0)  # the server's next run process has imported numpy by now
                for trip in (ready, back_to_back):  # then one right after: it is still starting
                    start = time.perf_counter()
                    session.run(uploaded, inputs)
                    trip.append(time.perf_counter() - start)
                # Each timing after a pause: the server's next run process, started when a run
                # ends, must not import numpy while either side is being timed.
                time.sleep(2.0)
                remote.append(session.time(uploaded, inputs, repeat=args.repeat).timing.median)
                time.sleep(2.0)
                local.append(tilecraft.run(loaded, inputs, repeat=args.repeat).timing.median)
        finally:
            server.terminate()
            server.wait()
        size = package.stat().st_size
    print(f"digits CNN, batch {args.batch}: package {size / 1e6:.2f} MB, {args.rounds} rounds")
    print(f"upload (verified):        median {statistics.median(uploads) * 1e3:8.2f} ms")
    print(f"run round trip, idle:     median {statistics.median(ready) * 1e3:8.2f} ms "
          "(the waiting run process: load, one run)")
    print(f"run round trip, at once:  median {statistics.median(back_to_back) * 1e3:8.2f} ms "
          "(its successor still starting: interpreter, numpy import, load, one run)")
    print(f"timed on the server:      median {statistics.median(remote) * 1e3:8.3f} ms per call")
    print(f"timed in this process:    median {statistics.median(local) * 1e3:8.3f} ms per call")
    print(f"ratio server / local:     {statistics.median(r / l for r, l in zip(remote, local)):.3f}")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
