"""Tuning benchmark: f32 GEMM 1024^3 vs numpy and a ResNet-50 3x3 conv vs PyTorch, default
schedule vs tuned, and the XGBoost tuner's curve against random search, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/tuning_gemm_conv.py \\
        --trials 200 --out bench-tuning

For each workload the tuners (``--tuners``, default ``random,xgb``) get N = ``--trials``
measurements each, interleaved batch by batch in one worker
(``tilecraft.tuning.tune.compare_tuners``) so load drift hits them alike; then the reference
(numpy / PyTorch), the default schedule and each tuner's best records are compiled and timed
in this process, round-robin. It prints how many trials the XGBoost tuner needed to reach
the best GFLOPS random search found in N trials (the issue's target: at most N/3), and
writes ``report.png`` (best-so-far vs trials per tuner). No thresholds: the figures are for
notes. Quote the load average with them: on a shared machine every number, numpy's
included, moves with the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft.runtime.timing import measure
from tilecraft.tuning import best_records, load_records
from tilecraft.tuning.report import best_so_far, plot_report
from tilecraft.tuning.tune import compare_tuners

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm import GEMM  # noqa: E402  the same payload as `make bench`

# ResNet-50 conv2_x 3x3 layer: 1x56x56x64 input, zero padding 1, 64 filters, stride 1, in
# NHWC with HWCF filters: the layout tilecraft runs ResNet-50 in after its layout pass, the
# filters transposed once at compile time. Written in NCHW with the filters as an argument,
# the layer would also time three layout transposes per call that a real model does not run.
CONV = """
func.func @conv(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x56x56x64xf32> to tensor<1x58x58x64xf32>
  %empty = tensor.empty() : tensor<1x56x56x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%padded, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>)
       outs(%init : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  return %y : tensor<1x56x56x64xf32>
}
"""
CONV_FLOPS = 2 * 64 * 56 * 56 * 64 * 9


def interleaved_seconds(functions: dict[str, object], repeat: int) -> dict[str, float]:
    """Median seconds per call of each function, measured round-robin (``repeat`` rounds) so
    that load drift on a shared machine affects them all alike."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeat):
        for name, fn in functions.items():
            samples[name].append(measure(fn, repeat=1, min_repeat_ms=200).per_call[0])
    return {name: float(np.median(values)) for name, values in samples.items()}


def trials_to_reach(curve: list[float], level: float) -> int | None:
    """1-based trial at which ``curve`` first reaches ``level``; ``None`` if never."""
    return next((i + 1 for i, value in enumerate(curve) if value >= level), None)


def run_workload(name: str, source: str, flops: float, arrays: list[np.ndarray], reference,
                 reference_name: str, args: argparse.Namespace, out: Path) -> dict[str, list[float]]:
    """Tune (unless ``--reuse-records``), then time reference, default and tuned modules."""
    print(f"\n== {name} ==", flush=True)
    tuners = args.tuners.split(",")
    records = {tuner: out / f"{name}-{tuner}.jsonl" for tuner in tuners}
    if not args.reuse_records:
        for path in records.values():
            if path.exists():
                path.unlink()
        # The heaviest task (the GEMM, or the conv with its pad); any others are listed.
        task, *others = tilecraft.extract_tasks(source)
        if others:
            print(f"tuning {task.name}; not tuned: {', '.join(t.name for t in others)}")
        start = time.perf_counter()
        compare_tuners(task, records, trials=args.trials, timeout=args.timeout,
                       batch_size=args.batch)
        print(f"tuning: {time.perf_counter() - start:.0f} s for {len(tuners)} x {args.trials} "
              f"trials (interleaved batches of {args.batch})")
    expected = reference()
    modules = {"tilecraft default": tilecraft.compile(source, keep_ir=False)}
    for tuner in tuners:
        modules[f"tilecraft tuned ({tuner})"] = tilecraft.compile(
            source, keep_ir=False, tuning_records=records[tuner])
    # The reference first, on its own, then a pause: OpenBLAS's and PyTorch's thread pools
    # keep spinning for a while after a call and slowed whatever ran next on the 2 cores.
    seconds = interleaved_seconds({reference_name: reference}, args.repeat)
    time.sleep(2.0)
    seconds.update(interleaved_seconds(
        {label: (lambda m=m: m(*arrays)) for label, m in modules.items()}, args.repeat))
    print(f"{'':32} {'ms':>9} {'GFLOPS':>8} {'vs ' + reference_name:>10}  check")
    for label, value in seconds.items():
        check = ""
        if label in modules:
            check = "ok" if np.allclose(modules[label](*arrays), expected, rtol=1e-3, atol=1e-2) else "MISMATCH"
        print(f"{label:32} {value * 1e3:>9.3f} {flops / value / 1e9:>8.1f} "
              f"{seconds[reference_name] / value:>9.2f}x  {check}")
    # Search curves: the trials only, not the validation phase's re-measurements.
    curves = {tuner: best_so_far([r for r in load_records(path) if r.tuner != "final"])
              for tuner, path in records.items()}
    for tuner, path in records.items():
        lines = load_records(path)
        final = {tuple(sorted(r.config.items())): r for r in lines if r.tuner == "final" and r.ok}
        best = best_records(lines)[lines[0].key]
        default = final.get(tuple(sorted(lines[0].config.items())), lines[0])
        print(f"{tuner}: {sum(r.tuner not in ('final',) for r in lines)} trials, best in the "
              f"search {curves[tuner][-1]:.1f} GFLOPS; validated best {best.gflops:.1f} vs default "
              f"{default.gflops:.1f} (worker, side by side); config {best.config}")
    if "xgb" in curves and "random" in curves and curves["random"]:
        level = curves["random"][-1]
        n = len(curves["random"])
        exact = trials_to_reach(curves["xgb"], level)
        near = trials_to_reach(curves["xgb"], 0.95 * level)
        print(f"random's best in N={n} trials: {level:.1f} GFLOPS; xgb reaches it after "
              f"{exact if exact else 'never (> ' + str(len(curves['xgb'])) + ')'} trials, 95% of it "
              f"after {near if near else 'never'} (target: <= N/3 = {n // 3})")
    return curves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200, help="N: trials per tuner and workload")
    parser.add_argument("--tuners", default="random,xgb")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per candidate")
    parser.add_argument("--batch", type=int, default=8, help="candidates per tuner step")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default="bench-tuning", help="folder for records and report.png")
    parser.add_argument("--only", choices=("gemm", "conv"), help="run one workload")
    parser.add_argument("--reuse-records", action="store_true",
                        help="skip tuning: time the modules compiled with the records in --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy runs slower than it can")
    target = tilecraft.Target.parse("llvm")
    print(f"target llvm ({target.vector_bits}-bit vectors, {target.num_threads} threads), "
          f"N={args.trials} trials per tuner, load average {open('/proc/loadavg').read().split()[:3]}")
    rng = np.random.default_rng(0)
    if args.only in (None, "gemm"):
        n = 1024
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        run_workload("gemm1024", GEMM.format(m=n, n=n, k=n), 2.0 * n**3, [a, b], lambda: a @ b,
                     "numpy", args, out)
    if args.only in (None, "conv"):
        import torch

        x = rng.standard_normal((1, 56, 56, 64), dtype=np.float32)
        w = rng.standard_normal((3, 3, 64, 64), dtype=np.float32)
        # PyTorch in its own layout (NCHW, OIHW filters); its result compared in NHWC.
        tx = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        tw = torch.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))

        def torch_conv():
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, padding=1).numpy().transpose(0, 2, 3, 1)

        run_workload("resnet50_conv3x3", CONV, CONV_FLOPS, [x, w], torch_conv, "torch", args, out)
    records = [r for path in sorted(out.glob("*.jsonl")) for r in load_records(path)]
    plot_report(records, out / "report.png")
    print(f"\nreport: {out / 'report.png'}; load average now {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
