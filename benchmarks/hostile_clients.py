"""The remote server under hostile clients (issue 48): does a legitimate run still answer
fast, does the thread count stay fixed, does memory stay flat over many requests?

    .venv/bin/python benchmarks/hostile_clients.py                          # 500 hostile, 10,000 requests
    .venv/bin/python benchmarks/hostile_clients.py --hostile 200 --requests 2000 --tls

A server (``python -m tilecraft.runtime.server``) is started on this machine (loopback).
Printed: the server's threads and resident memory (RSS) before, under ``--hostile``
connections (half idle, half sending their request head one byte a second, each reopened
when the server drops it at its header deadline), the seconds of a legitimate
``session.upload`` + ``session.run`` under that load (``--runs`` of them: median and max),
and RSS after every 1,000 of ``--requests`` signed ``GET /info`` requests (each on its own
connection, as the client makes them). Quote ``/proc/loadavg`` (printed) with the figures.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "remote"))

import tilecraft  # noqa: E402
import tilecraft.remote  # noqa: E402
from hostile import HostileClients, process_status  # noqa: E402

KEY = "benchmark-key-0123456789"
MATMUL = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%c : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
"""


def start_server(arguments: list[str]) -> tuple[subprocess.Popen, int]:
    environment = {**os.environ, "TILECRAFT_RPC_KEY": KEY}
    process = subprocess.Popen([sys.executable, "-m", "tilecraft.runtime.server", "--host", "127.0.0.1",
                                "--port", "0", *arguments], stdout=subprocess.PIPE, text=True, env=environment)
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise SystemExit(f"the server did not start: {line}")
    return process, int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hostile", type=int, default=500, help="hostile connections (default 500)")
    parser.add_argument("--requests", type=int, default=10_000, help="signed /info requests (default 10,000)")
    parser.add_argument("--runs", type=int, default=5, help="legitimate runs under the load (default 5)")
    parser.add_argument("--tls", action="store_true", help="serve over TLS (a self-signed certificate, openssl)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        package = folder / "mm.tar"
        tilecraft.compile(MATMUL, package_path=package)
        server_arguments, connect = [], {}
        if args.tls:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", str(folder / "tls.key"), "-out", str(folder / "tls.pem")],
                           check=True, capture_output=True)
            server_arguments = ["--tls-cert", str(folder / "tls.pem"), "--tls-key", str(folder / "tls.key")]
            connect = {"tls_ca": folder / "tls.pem"}
        process, port = start_server(server_arguments)
        rng = np.random.default_rng(0)
        inputs = {"arg0": rng.random((64, 64), dtype=np.float32), "arg1": rng.random((64, 64), dtype=np.float32)}
        try:
            def legitimate() -> float:
                start = time.perf_counter()
                session = tilecraft.remote.connect("127.0.0.1", port, key=KEY, **connect)
                session.run(session.upload(package), inputs)
                return time.perf_counter() - start

            legitimate()
            print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
            print(f"idle server: {process_status(process.pid)}")
            with HostileClients("127.0.0.1", port, idle=args.hostile // 2, slow=args.hostile - args.hostile // 2) as hostile:
                time.sleep(3.0)
                status = process_status(process.pid)
                seconds = [legitimate() for _ in range(args.runs)]
                print(f"under {args.hostile} hostile connections ({hostile.open_count()} open): {status}; "
                      f"upload + run: median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s")
            session = tilecraft.remote.connect("127.0.0.1", port, key=KEY, **connect)
            start = time.perf_counter()
            for index in range(1, args.requests + 1):
                session._info = None  # a fresh signed request each time
                session.info()
                if index % 1000 == 0 or index == args.requests:
                    print(f"after {index} requests ({time.perf_counter() - start:.1f} s): {process_status(process.pid)}")
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
