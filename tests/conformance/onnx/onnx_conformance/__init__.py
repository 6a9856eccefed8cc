"""ONNX's own backend test cases run through tilecraft, in a pool of worker processes.

    suite.py     which cases exist (node cases, model folders) and how to load one
    worker.py    runs one case in a worker process and classifies the outcome
    pool.py      the worker-process pool: per-case timeout, crash isolation, restarts
    expected.py  the checked-in expected statuses and the comparison CI makes with them
    report.py    pass rates per group, failing op types, docs/onnx-conformance.md
    shards.py    the split into shards that pytest-xdist spreads (test_conformance.py)

The command line is ``tests/conformance/onnx/run.py``; see its ``--help``.
"""
