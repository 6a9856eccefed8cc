"""Run ONNX's own backend test cases through tilecraft and classify each one.

    .venv/bin/python tests/conformance/onnx/run.py                      # everything, results JSON
    .venv/bin/python tests/conformance/onnx/run.py --group node -k '^test_(relu|add)'
    .venv/bin/python tests/conformance/onnx/run.py --check              # compare with expected_status.txt
    .venv/bin/python tests/conformance/onnx/run.py --update-expected    # rewrite expected_status.txt
    .venv/bin/python tests/conformance/onnx/run.py --report             # rates, docs/onnx-conformance.md
    .venv/bin/python tests/conformance/onnx/run.py --from-results build/onnx-conformance/results.json --report
    .venv/bin/python tests/conformance/onnx/run.py --from-results build/onnx-conformance/results-*.json --report

Groups: node (onnx.backend.test.case.node.collect_testcases), pytorch-converted,
pytorch-operator, simple (model folders in onnx/backend/test/data) and light (the nine zoo
models of data/light, fed the inputs ONNX's runner generates). Each case is compiled with
tilecraft.compile, called with its inputs in graph-input order, and every output is compared
(dtype, shape, values with the case's rtol/atol; NaN equals NaN; integers exactly).

Statuses: pass, wrong-result, import-error (tilecraft.ModelImportError), compile-error (any
other exception from compile), runtime-error (the call raised), timeout (no result within the
group's limit; retried once alone first), crash (the worker process died: segfault, abort).
Cases run in a pool of worker processes (--jobs, one per core by default); a worker that
crashes or hangs is replaced and the run goes on.

--update-expected, --check and --report on a subset (--group / -k) touch only that subset;
--report writes docs/onnx-conformance.md only for a full run. Under pytest the suite runs in
shards (test_conformance.py), each writing build/onnx-conformance/results-<shard>.json;
``--from-results`` takes several files and merges them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import expected as expectations  # noqa: E402
from onnx_conformance import report  # noqa: E402
from onnx_conformance.runner import DEFAULT_OUTPUT, default_jobs, print_progress, run_cases, save_results  # noqa: E402
from onnx_conformance.suite import DEFAULT_TIMEOUTS, GROUPS, discover  # noqa: E402


def _timeouts(values: list[str]) -> dict[str, float]:
    """``--timeout 90`` (every group) and/or ``--timeout light=900`` (one group)."""
    limits: dict[str, float] = {}
    for value in values:
        group, _, seconds = value.rpartition("=")
        if group and group not in GROUPS:
            raise SystemExit(f"--timeout: unknown group {group!r}; groups: {', '.join(GROUPS)}")
        for name in [group] if group else GROUPS:
            limits[name] = float(seconds)
    return limits


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="append", choices=GROUPS, help="run only this group (repeatable)")
    parser.add_argument("-k", "--filter", metavar="REGEX", help="run only cases whose name matches (re.search)")
    parser.add_argument("--jobs", "-j", type=int, default=default_jobs(), help="worker processes (default: cores)")
    parser.add_argument("--timeout", action="append", default=[], metavar="[GROUP=]SECONDS",
                        help="per-case limit; defaults: " + ", ".join(f"{g}={s:g}" for g, s in DEFAULT_TIMEOUTS.items()))
    parser.add_argument("--retries", type=int, default=1, help="extra attempts for a timed-out case (default 1)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="results JSON (default %(default)s)")
    parser.add_argument("--from-results", metavar="JSON", nargs="+",
                        help="reuse results JSON files (merged) instead of running")
    parser.add_argument("--update-expected", action="store_true", help="rewrite expected_status.txt")
    parser.add_argument("--check", action="store_true", help="fail (exit 1) if the run differs from expected_status.txt")
    parser.add_argument("--report", action="store_true", help="print pass rates; write docs/onnx-conformance.md")
    parser.add_argument("--list", action="store_true", help="list the selected cases and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="progress every 5 %% instead of every case")
    return parser.parse_args(argv)


def selected_names(names, groups: list[str], pattern: str | None) -> set[str]:
    """Which of ``names`` (from the expected file) a ``--group``/``-k`` selection covers.
    Group membership of a name the run did not discover is unknown: only a run over every
    group claims it (so a full run notices removed cases)."""
    regex = re.compile(pattern) if pattern else None
    return {n for n in names if set(groups) == set(GROUPS) and (regex is None or regex.search(n))}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    groups = args.group or list(GROUPS)
    full = set(groups) == set(GROUPS) and not args.filter

    if args.from_results:
        results = {}
        for path in args.from_results:
            with open(path) as stream:
                results.update(json.load(stream))
        regex = re.compile(args.filter) if args.filter else None
        results = {n: r for n, r in results.items()
                   if r["group"] in groups and (regex is None or regex.search(n))}
        print(f"{len(results)} case results from {', '.join(args.from_results)}")
    else:
        start = time.monotonic()
        cases = discover(groups, args.filter)
        if args.list:
            for case in cases:
                print(f"{case.group:<18} {case.name}  [{' '.join(case.op_types)}]")
            return 0
        print(f"{len(cases)} cases ({', '.join(groups)}), {args.jobs} worker(s)", flush=True)
        results = run_cases(cases, jobs=args.jobs, timeouts=_timeouts(args.timeout), retries=args.retries,
                            progress=print_progress(verbose=not args.quiet))
        elapsed = time.monotonic() - start
        save_results(results, args.output)
        print(f"\n{len(results)} cases in {elapsed:.0f} s; results in {args.output}")

    print("\n" + report.render_text(results))
    status = 0
    if args.check or args.update_expected:
        expected = expectations.read_expected() if os.path.exists(expectations.EXPECTED_PATH) else {}
        covered = set(results) | selected_names(expected, groups, args.filter)
        actual = {name: record["status"] for name, record in results.items()}
        if args.check:
            comparison = expectations.compare({n: s for n, s in expected.items() if n in covered}, actual)
            if comparison.ok:
                print(f"\nexpected statuses: OK ({len(actual)} cases)")
            else:
                status = 1
            diff = expectations.format_comparison(comparison, expected, results)
            if diff:
                print("\n" + diff)
        if args.update_expected:
            merged = {n: s for n, s in expected.items() if n not in covered} | actual
            expectations.write_expected(merged)
            print(f"\nwrote {expectations.EXPECTED_PATH} ({len(merged)} cases)")
    if args.report:
        if full:
            import onnx

            path = report.write_markdown(results, onnx_version=onnx.__version__)
            print(f"\nwrote {path}")
        else:
            print("\n(docs/onnx-conformance.md is written for a full run only)")
    return status


if __name__ == "__main__":
    sys.exit(main())
