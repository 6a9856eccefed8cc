"""Run PyTorch's operator database (OpInfo) through ``tilecraft.torch.compile``.

    .venv/bin/python tests/conformance/torch/run.py                    # float32, 2 samples per op
    .venv/bin/python tests/conformance/torch/run.py --samples all      # every sample
    .venv/bin/python tests/conformance/torch/run.py -k '^(add|sum)$'   # some ops (re.search)
    .venv/bin/python tests/conformance/torch/run.py --check            # compare with expected_status.txt
    .venv/bin/python tests/conformance/torch/run.py --update-expected  # rewrite expected_status.txt
    .venv/bin/python tests/conformance/torch/run.py --from-results build/torch-opinfo/results.json --report

Every OpInfo entry that supports the dtype on CPU is one case (``op.variant``); opinfo_cases.py
says how a sample is run and classified. Cases run in the ONNX suite's worker pool
(tests/conformance/onnx/onnx_conformance/pool.py): a segfault or a hang costs one case, not
the run. ``--report`` prints the table by family: ops that pass on every sample tried, over
the ops ``torch.export`` accepts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from typing import Any, Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_HARNESS = os.path.join(os.path.dirname(HERE), "onnx")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
for _path in (HERE, ONNX_HARNESS):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import opinfo_cases  # noqa: E402
from onnx_conformance import expected as expectations  # noqa: E402

EXPECTED_PATH = os.path.join(HERE, "expected_status.txt")
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "build", "torch-opinfo", "results.json")
# The CI run: the first two samples with elements of each op (the whole database at every
# sample takes hours on 2 cores; two keep the suite's share of `make test` near 6 minutes).
CI_SAMPLES = 2
CASE_TIMEOUT = 300.0
HEADER = """\
# Expected status of each PyTorch OpInfo op (float32, CPU, first {samples} samples with elements)
# through tilecraft.torch.compile, one "op status" per line. CI (test_opinfo.py) fails on any
# regression (pass -> other), any unexpected pass (other -> pass) and any change in the op set.
# Regenerate with:  .venv/bin/python tests/conformance/torch/run.py --update-expected
# Statuses: {statuses}.
"""


def read_expected(path: str = EXPECTED_PATH) -> dict[str, str]:
    return expectations.read_expected(path, opinfo_cases.STATUSES)


def write_expected(statuses: Mapping[str, str], path: str = EXPECTED_PATH) -> None:
    expectations.write_expected(statuses, path,
                                HEADER.format(samples=CI_SAMPLES, statuses=", ".join(opinfo_cases.STATUSES)))


# One comparison rule for both conformance suites (onnx_conformance/expected.py): regressions,
# unexpected passes and a changed op set fail; a move between two failure kinds is reported.
compare = expectations.compare
format_comparison = expectations.format_comparison


# --- running ---------------------------------------------------------------------------------

def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def serve() -> None:
    """Worker mode: load the database once, answer ``(op, dtype, samples)`` tasks."""
    import faulthandler

    from onnx_conformance.protocol import serve as serve_tasks

    faulthandler.enable()
    database = opinfo_cases.op_database()
    import tilecraft.torch  # noqa: F401  (imported before READY: start-up is not a case's time)

    serve_tasks(lambda task: opinfo_cases.run_op(database[task[0]], task[1], task[2]))


def run(names: list[str], dtype: str, samples: int | None, jobs: int, verbose: bool) -> dict[str, Any]:
    from onnx_conformance.pool import Task, WorkerPool

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, ONNX_HARNESS, env.get("PYTHONPATH")) if p)
    pool = WorkerPool([sys.executable, os.path.abspath(__file__), "--worker"], jobs=jobs, env=env)
    tasks = [Task(name, CASE_TIMEOUT, lambda name=name: (name, dtype, samples)) for name in names]
    results: dict[str, Any] = {}
    start = time.monotonic()
    for outcome in pool.run(tasks):
        name = outcome.task.key
        if outcome.failure is not None:  # timeout or a dead worker (segfault): both are ours
            record = {"status": "timeout" if outcome.failure == "timeout" else "crash",
                      "message": outcome.message[:opinfo_cases.MESSAGE_LIMIT], "samples": [],
                      "seconds": round(outcome.seconds, 2)}
        else:
            record = outcome.reply
        record["family"] = opinfo_cases.family(name)
        results[name] = record
        if verbose or record["status"] in ("crash", "timeout", "wrong"):
            print(f"[{len(results):>4}/{len(names)}] {time.monotonic() - start:6.0f}s {record['status']:<14} "
                  f"{name} ({record['seconds']:.1f}s) {record['message'][:150]}", flush=True)
    return {name: results[name] for name in names}


# --- the report --------------------------------------------------------------------------------

COLUMNS = ("pass", "refused", "wrong", "crash", "timeout", "export-refused", "random", "no-samples")


def _missing_ops(message: str) -> list[str]:
    listing = message.split("unsupported ATen op(s):", 1)
    return sorted(set(re.findall(r"\b(aten\.[\w.]+) \(node", listing[1]))) if len(listing) == 2 else []


def render(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The table by family (markdown) and the refusals by reason."""
    by_family: dict[str, Counter] = defaultdict(Counter)
    for record in results.values():
        by_family[record["family"]][record["status"]] += 1
    total: Counter = sum(by_family.values(), Counter())
    rows = ["| family | ops | " + " | ".join(COLUMNS) + " | pass rate |",
            "|---" * (len(COLUMNS) + 3) + "|"]

    def row(label: str, counts: Counter) -> str:
        judged = sum(counts[s] for s in opinfo_cases.JUDGED)
        rate = f"{100 * counts['pass'] / judged:.1f} % ({counts['pass']}/{judged})" if judged else "-"
        return (f"| {label} | {sum(counts.values())} | " + " | ".join(str(counts[c]) for c in COLUMNS)
                + f" | {rate} |")

    for name in sorted(by_family, key=lambda f: -sum(by_family[f].values())):
        rows.append(row(name, by_family[name]))
    rows.append(row("torch.* and nn.functional.*", by_family["torch"] + by_family["nn.functional"]))
    rows.append(row("**all**", total))
    reasons: Counter = Counter()
    for record in results.values():
        if record["status"] == "refused":
            missing = _missing_ops(record["message"])
            handler = re.search(r"node '[^']*' \(([\w.]+)\) at \S+: (.*)", record["message"])
            reason = f"{handler[1]}: {handler[2]}" if handler else record["message"].split(": ", 1)[-1]
            for op in missing or [reason[:110]]:
                reasons[op] += 1
    lines = rows + ["", "Refusals by reason (ops; an op may lack several ATen ops):", ""]
    lines += [f"- {count:>3} `{reason}`" for reason, count in reasons.most_common()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-k", "--filter", metavar="REGEX", help="only ops whose case name matches (re.search)")
    parser.add_argument("--dtype", default="float32", choices=opinfo_cases.DTYPES)
    parser.add_argument("--samples", default=str(CI_SAMPLES), help="samples per op: a number or 'all'")
    parser.add_argument("--jobs", "-j", type=int, default=default_jobs())
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="results JSON (default %(default)s)")
    parser.add_argument("--from-results", metavar="JSON", help="reuse a results JSON instead of running")
    parser.add_argument("--check", action="store_true", help="exit 1 if the run differs from expected_status.txt")
    parser.add_argument("--update-expected", action="store_true", help="rewrite expected_status.txt")
    parser.add_argument("--report", action="store_true", help="print the table by family")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per op")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        serve()
        return 0
    if args.from_results:
        with open(args.from_results) as stream:
            results = json.load(stream)
    else:
        names = opinfo_cases.cases(args.dtype)
        if args.filter:
            names = [n for n in names if re.search(args.filter, n)]
        samples = None if args.samples == "all" else int(args.samples)
        print(f"{len(names)} ops ({args.dtype}, {args.samples} samples each), {args.jobs} worker(s)", flush=True)
        start = time.monotonic()
        results = run(names, args.dtype, samples, args.jobs, args.verbose)
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as stream:
            json.dump(results, stream, indent=1, sort_keys=True)
        print(f"\n{len(results)} ops in {time.monotonic() - start:.0f} s; results in {args.output}")
    if args.report or not (args.check or args.update_expected):
        print("\n" + render(results))
    status = 0
    actual = {name: record["status"] for name, record in results.items()}
    if args.check:
        expected = {n: s for n, s in read_expected().items() if n in actual or not args.filter}
        comparison = compare(expected, actual)
        print("\n" + (format_comparison(comparison, expected, results) or f"expected statuses: OK ({len(actual)} ops)"))
        status = 0 if comparison.ok else 1
    if args.update_expected:
        merged = (read_expected() if os.path.exists(EXPECTED_PATH) and args.filter else {}) | actual
        write_expected(merged)
        print(f"\nwrote {EXPECTED_PATH} ({len(merged)} ops)")
    return status


if __name__ == "__main__":
    sys.exit(main())
