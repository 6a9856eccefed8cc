"""How close a model runs to the machine's float32 FMA peak, tilecraft's and onnxruntime's
side by side, and what a target latency would need.

    .venv/bin/python benchmarks/roofline.py
    .venv/bin/python benchmarks/roofline.py --models resnet50,bert --target-vs-ort 0.85

The peak: ``tilecraft.runtime.peak`` (the probe the tuner weighs tasks with: independent
vector FMAs on every thread, built for this host, each thread's rate from its own CPU time),
measured afresh between the models' rounds here, not read from its cache. The models are
benchmarks/end_to_end.py's, their flops that file's ``node_flops`` (2 per multiply-add of
the Conv/Gemm/MatMul nodes: the direct algorithm's count). Each round times each runner's
best of ``--calls`` calls (onnxruntime with its default settings); the medians over
``--rounds`` rounds are printed.

Why: docs/tuning.md states the tuning targets of issue 18 against onnxruntime. When
onnxruntime runs a model at 90 % of the FMA peak, 0.85x its latency needs more than the
peak with the direct algorithm: no schedule reaches it, only fewer flops (Winograd) can.
This prints that arithmetic from one run instead of asserting it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import end_to_end  # noqa: E402


def best_call(run, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--target-vs-ort", type=float, default=0.85,
                        help="a latency target as a fraction of onnxruntime's (issue 18: 0.85)")
    args = parser.parse_args(argv)
    import onnxruntime as ort

    import tilecraft
    from tilecraft.runtime.peak import measure_fma_peak

    threads = tilecraft.Target.parse("llvm").num_threads
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        case = end_to_end.CASES[name](args)
        flops = sum(count for _, count in end_to_end.node_flops(case.model).values())
        compiled = tilecraft.compile(case.model, keep_ir=False)
        session = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
        inputs = list(case.feeds.values())
        runners = {"tilecraft": lambda: compiled(*inputs), "onnxruntime": lambda: session.run(None, case.feeds)}
        for run in runners.values():
            run()
        samples: dict[str, list[float]] = {"peak": [], **{k: [] for k in runners}}
        for _ in range(args.rounds):
            measured = measure_fma_peak(threads)
            if measured is None:
                raise SystemExit("no C compiler (cc, or $CC) on PATH: the peak probe needs one")
            samples["peak"].append(measured)
            for key, run in runners.items():
                samples[key].append(best_call(run, args.calls))
        peak = statistics.median(samples["peak"])
        print(f"{case.name}: {flops / 1e9:.2f} GFLOP (direct algorithm); FMA peak on {threads} "
              f"thread(s): {peak:.0f} GFLOPS (median of {args.rounds} rounds)")
        for key in runners:
            seconds = statistics.median(samples[key])
            rate = flops / seconds / 1e9
            print(f"  {key:<12} {seconds * 1e3:8.2f} ms  {rate:6.0f} GFLOPS  {rate / peak:5.0%} of the peak")
        target = args.target_vs_ort * statistics.median(samples["onnxruntime"])
        rate = flops / target / 1e9
        print(f"  {args.target_vs_ort}x onnxruntime = {target * 1e3:.2f} ms needs {rate:.0f} GFLOPS, "
              f"{rate / peak:.0%} of the peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
