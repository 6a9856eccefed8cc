"""How close a model runs to the machine's float32 FMA peak, tilecraft's and onnxruntime's
side by side, and what a target latency would need.

    .venv/bin/python benchmarks/roofline.py
    .venv/bin/python benchmarks/roofline.py --models resnet50,bert --target-vs-ort 0.85
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/roofline.py --machine --rounds 5

``--machine``: the roofline alone, measured afresh ``--rounds`` times (median and range): the
FMA peak and the bandwidth (read + written, runtime/bandwidth.c) of working sets that fit the
L2, the L3 and neither, for the target's thread count and cache sizes; with them, the
arithmetic intensity (flops per byte) below which a kernel whose bytes live at each level is
bound by that level's bandwidth, not by the FMA peak (the ridge points). These are the
figures ``tune``'s headroom and benchmarks/tuning_headroom.py judge tasks against
(runtime/peak.py's ``roofline``, cached per machine).

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


def machine_roofline(rounds: int) -> int:
    """The FMA peak and the three bandwidths, each measured ``rounds`` times afresh."""
    import tilecraft
    from tilecraft.runtime import peak

    target = tilecraft.Target.parse("llvm")
    threads, caches = target.num_threads, target.caches
    l2 = threads * caches.l2
    l3 = max(caches.l3, l2)
    sets = {"L2": l2 // 2, "L3": l3 // 2, "memory": peak.MEMORY_SET * l3}
    samples: dict[str, list[float]] = {"peak": [], **{name: [] for name in sets}}
    for _ in range(rounds):
        measured = peak.measure_fma_peak(threads)
        if measured is None:
            raise SystemExit("no C compiler (cc, or $CC) on PATH: the probes need one")
        samples["peak"].append(measured)
        for name, size in sets.items():
            samples[name].append(peak.measure_bandwidth(threads, size) or 0.0)
    fma = statistics.median(samples["peak"])
    print(f"{threads} thread(s), caches L2 {caches.l2 >> 10} KiB per core, L3 {caches.l3 >> 20} MiB; "
          f"load average {os.getloadavg()[0]:.1f}; median (min-max) of {rounds} rounds")
    print(f"  FMA peak          {fma:7.0f} GFLOPS ({min(samples['peak']):.0f}-{max(samples['peak']):.0f})")
    for name, size in sets.items():
        gbs = statistics.median(samples[name])
        print(f"  {name:<6} {size / 2**20:8.2f} MiB {gbs:7.0f} GB/s   ({min(samples[name]):.0f}-{max(samples[name]):.0f}); "
              f"bandwidth-bound below {fma / gbs:5.1f} flops/byte")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--target-vs-ort", type=float, default=0.85,
                        help="a latency target as a fraction of onnxruntime's (issue 18: 0.85)")
    parser.add_argument("--machine", action="store_true", help="print the machine's roofline only")
    args = parser.parse_args(argv)
    if args.machine:
        return machine_roofline(args.rounds)
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
