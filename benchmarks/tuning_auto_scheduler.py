"""The auto-scheduler API on user computes, against the issue's (#44) reference points.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/tuning_auto_scheduler.py \\
        --trials 200 --out bench-auto
    TILECRAFT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        .venv/bin/python benchmarks/tuning_auto_scheduler.py --trials 200 --out bench-auto   # CPU time

- ``matmul_add``: a user's TE compute C = A @ B + bias (1024^3 by default) through
  ``auto_scheduler.register_workload`` -> ``SearchTask`` -> ``tune`` -> ``apply_best``; then
  numpy's ``a @ b + bias``, the untuned default and the tuned function timed in alternating
  rounds in this process (goal: tuned >= 0.9x numpy);
- ``grouped_conv``: a user's grouped 3x3 convolution written in TE with an explicit group
  axis (NHWGC input, KKGCF filters), tuned the same way, and ResNet-50's conv2_x 3x3 layer
  (benchmarks/tuning_gemm_conv.py's payload, default schedule) timed beside it (goal: the
  grouped conv's GFLOPS >= 0.7x the ResNet-50 layer's). Each form of the grouped conv
  (``SearchTask.forms``: its window taps, and the loop over groups of the named convolution)
  is timed with the same records in the same rounds, and which one ``apply_best`` picked.

No thresholds: figures for notes, with the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.errors import TilecraftError
from tilecraft.runtime.timing import default_clock, get_clock, measure
from tilecraft.schedule import te

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tuning_gemm_conv import CONV, CONV_FLOPS  # noqa: E402  ResNet-50's conv2_x 3x3 layer


@auto_scheduler.register_workload
def matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    bias = te.placeholder((M,), name="bias", dtype=dtype)
    k = te.reduce_axis(L, name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
    out = te.compute((N, M), lambda i, j: matmul[i, j] + bias[j], name="out")
    return [A, B, bias, out]


@auto_scheduler.register_workload
def grouped_conv(N, H, W, G, C, F, K, dtype):
    """A 'valid' KxK convolution of an already padded NHWGC input by G groups of F filters of
    C channels each (filters KKGCF), output NHWGF."""
    x = te.placeholder((N, H + K - 1, W + K - 1, G, C), name="x", dtype=dtype)
    w = te.placeholder((K, K, G, C, F), name="w", dtype=dtype)
    rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(K, "ry"), te.reduce_axis(K, "rx")
    return [x, w, te.compute(
        (N, H, W, G, F),
        lambda n, y, xx, g, f: te.sum(x[n, y + ry, xx + rx, g, rc] * w[ry, rx, g, rc, f], axis=[ry, rx, rc]),
        name="grouped_conv")]


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def alternating(functions: dict[str, object], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeat`` rounds round-robin (a pause after each:
    OpenBLAS's threads spin on after a call and slowed whatever ran next), on the clock of
    the thread count (runtime/timing.py: at ``TILECRAFT_NUM_THREADS=1``, with
    ``OPENBLAS_NUM_THREADS=1`` for numpy, the measuring thread's CPU time)."""
    clock = get_clock(default_clock(tilecraft.CompileOptions().target.num_threads))
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeat):
        for name, fn in functions.items():
            samples[name].append(measure(fn, repeat=1, min_repeat_ms=200, clock=clock).per_call[0])
            time.sleep(0.2)
    return samples


def report(samples: dict[str, list[float]], flops: "float | dict[str, float]", reference: str) -> None:
    """A row per function: median time, GFLOPS (``flops``: one count, or one per function)
    and its GFLOPS over ``reference``'s (the median, then per round)."""
    work = flops if isinstance(flops, dict) else {name: flops for name in samples}
    ref = np.median(samples[reference])
    print(f"{'':26} {'median ms':>10} {'GFLOPS':>8} {'vs ' + reference:>12}  per-round GFLOPS ratios")
    for name, values in samples.items():
        median = float(np.median(values))
        scale = work[name] / work[reference]
        ratios = " ".join(f"{scale * r / v:.2f}" for r, v in zip(samples[reference], values))
        print(f"{name:26} {median * 1e3:>10.3f} {work[name] / median / 1e9:>8.1f} {scale * ref / median:>11.2f}x  {ratios}")


def tune(task: auto_scheduler.SearchTask, records: Path, args: argparse.Namespace) -> None:
    if not args.reuse_records:
        records.unlink(missing_ok=True)
        start = time.perf_counter()
        result = task.tune(auto_scheduler.TuningOptions(
            num_measure_trials=args.trials, verbose=int(args.progress), tuner=args.tuner,
            measure_callbacks=[auto_scheduler.RecordToFile(records)]))
        print(f"tuned {task} in {time.perf_counter() - start:.0f} s (load {load()})")
        print(result.summary())
    task.print_best(records)


def run_matmul(args: argparse.Namespace, out: Path) -> None:
    n = args.size
    print(f"\n== matmul_add {n}^3 ==", flush=True)
    task = auto_scheduler.SearchTask(func=matmul_add, args=(n, n, n, "float32"), target="llvm")
    records = out / "matmul_add.json"
    tune(task, records, args)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    bias = rng.standard_normal(n, dtype=np.float32)
    tuned = task.apply_best(records)
    default = tilecraft.compile(task.compute_dag, keep_ir=False)
    expected = a @ b + bias
    for name, fn in (("tuned", tuned), ("default", default)):
        np.testing.assert_allclose(fn(a, b, bias), expected, rtol=1e-3, atol=1e-2, err_msg=name)
    samples = alternating({"numpy a @ b + bias": lambda: a @ b + bias, "tilecraft default": lambda: default(a, b, bias),
                           "tilecraft tuned": lambda: tuned(a, b, bias)}, args.repeat)
    report(samples, 2.0 * n**3, "numpy a @ b + bias")
    print(f"load average after: {load()}")


def run_grouped_conv(args: argparse.Namespace, out: Path) -> None:
    shape = (1, 28, 28, 8, 16, 16, 3)  # N, H, W, G, C, F, K: 128 channels in 8 groups
    n, h, w, g, c, f, k = shape
    print(f"\n== grouped_conv {shape} (N, H, W, G, C, F, K) ==", flush=True)
    try:
        task = auto_scheduler.SearchTask(func=grouped_conv, args=(*shape, "float32"), target="llvm")
    except TilecraftError as error:
        print(f"not tunable: {error}")
        return
    records = out / "grouped_conv.json"
    tune(task, records, args)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, h + k - 1, w + k - 1, g, c), dtype=np.float32)
    wt = rng.standard_normal((k, k, g, c, f), dtype=np.float32)
    tuned = task.apply_best(records)  # the form best_form timed fastest
    expected = sum(np.einsum("nhwgc,gcf->nhwgf", x[:, i:i + h, j:j + w], wt[i, j])
                   for i in range(k) for j in range(k))
    np.testing.assert_allclose(tuned(x, wt), expected, rtol=1e-3, atol=1e-2)
    print(f"forms: {', '.join(task.forms)}; apply_best chose {task.best_form(records)!r}"
          + "".join(f"; refused: {why}" for why in task.refusals))
    # Every form with its tuned records, side by side: the A/B of the window-inside form
    # (schedule/te/window_conv.py) against the taps (schedule/te/window_taps.py).
    by_form = {name: task.apply_best(records, form=name) for name in task.forms}
    for name, fn in by_form.items():
        np.testing.assert_allclose(fn(x, wt), expected, rtol=1e-3, atol=1e-2, err_msg=name)
    resnet = tilecraft.compile(CONV, keep_ir=False)
    rx = rng.standard_normal((1, 56, 56, 64), dtype=np.float32)
    rw = rng.standard_normal((3, 3, 64, 64), dtype=np.float32)
    functions = {"resnet50 conv2_x 3x3": lambda: resnet(rx, rw)}
    functions.update({f"grouped conv {name}": (lambda fn=fn: fn(x, wt)) for name, fn in by_form.items()})
    samples = alternating(functions, args.repeat)
    flops = 2.0 * n * h * w * g * f * c * k * k
    report(samples, {name: CONV_FLOPS if name.startswith("resnet") else flops for name in samples},
           "resnet50 conv2_x 3x3")
    conv_gflops = CONV_FLOPS / np.median(samples["resnet50 conv2_x 3x3"]) / 1e9
    for name in by_form:
        mine = flops / np.median(samples[f"grouped conv {name}"]) / 1e9
        print(f"resnet50 conv2_x 3x3 (default schedule): {conv_gflops:.1f} GFLOPS; grouped conv tuned, "
              f"{name} form: {mine:.1f} GFLOPS = {mine / conv_gflops:.2f}x (goal >= 0.7x); load {load()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--size", type=int, default=1024, help="matmul_add's N = L = M")
    parser.add_argument("--tuner", default="xgb")
    parser.add_argument("--repeat", type=int, default=9, help="alternating timing rounds")
    parser.add_argument("--only", choices=("matmul_add", "grouped_conv"))
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--reuse-records", action="store_true", help="time the records in --out, no tuning")
    parser.add_argument("--out", default="bench-auto")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{args.trials} trials per compute ({args.tuner}); load average {load()}")
    if args.only in (None, "matmul_add"):
        run_matmul(args, out)
    if args.only in (None, "grouped_conv"):
        run_grouped_conv(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
