"""How close a model runs to the machine's float32 FMA peak, tilecraft's and onnxruntime's
side by side, and what a target latency would need.

    .venv/bin/python benchmarks/roofline.py
    .venv/bin/python benchmarks/roofline.py --models resnet50,bert --target-vs-ort 0.85

The peak: a loop of independent 512-bit (else 256-bit) FMAs, 24 accumulators per thread,
one thread per core, compiled here with the host C compiler (``cc``) and run in its own
process between the models' rounds; the best of five runs. The models are
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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import end_to_end  # noqa: E402

PEAK_SOURCE = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#else
typedef __m256 vec;
#define LANES 8
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
#endif
#define ACCUMULATORS 12
static long iterations = 40000000;
static void *spin(void *out) {
  vec acc[ACCUMULATORS], b = SET(1.0000001f), c = SET(1e-7f);
  for (int i = 0; i < ACCUMULATORS; i++) acc[i] = SET((float)i);
  for (long n = 0; n < iterations; n++) {
    /* unrolled, so the accumulators stay in registers */
#pragma GCC unroll 12
    for (int i = 0; i < ACCUMULATORS; i++) acc[i] = FMA(acc[i], b, c);
  }
  float *sink = out;
  for (int i = 0; i < ACCUMULATORS; i++) *sink += ((float *)&acc[i])[0];
  return NULL;
}
int main(int argc, char **argv) {
  int threads = atoi(argv[1]);
  pthread_t t[256]; float sink[256] = {0};
  double best = 0;
  for (int run = 0; run < 5; run++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, spin, &sink[i]);
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double seconds = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
    double gflops = threads * (double)iterations * ACCUMULATORS * LANES * 2 / seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("%.1f\n", best);
  return 0;
}
"""


def build_peak_probe(directory: str) -> str:
    """The FMA loop compiled for this machine (``-march=native``); its path."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise SystemExit("no C compiler (cc, gcc or clang) on PATH: the peak probe needs one")
    source, binary = os.path.join(directory, "peak.c"), os.path.join(directory, "peak")
    with open(source, "w") as handle:
        handle.write(PEAK_SOURCE)
    subprocess.run([compiler, "-O3", "-march=native", source, "-o", binary, "-lpthread"], check=True)
    return binary


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

    threads = tilecraft.Target.parse("llvm").num_threads
    with tempfile.TemporaryDirectory() as scratch:
        probe = build_peak_probe(scratch)
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
                samples["peak"].append(float(subprocess.run([probe, str(threads)], capture_output=True,
                                                            text=True, check=True).stdout))
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
