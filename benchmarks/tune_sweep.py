"""`tilecraft tune` as users run it: a matrix of models and flags, each run as a shell
command, and what came out (exit code, seconds, the summary's verdict, the error line).

    .venv/bin/python benchmarks/tune_sweep.py                          # every case
    .venv/bin/python benchmarks/tune_sweep.py --cases flags,records    # some groups
    .venv/bin/python benchmarks/tune_sweep.py --models unet,lstm --trials 12
    .venv/bin/python benchmarks/tune_sweep.py --list

Groups of cases:
- ``models``: per model (the held-out models of benchmarks/public_suite.py and a few others,
  exported with benchmarks/thread_balance.py), ``tune --trials N`` with the random and the
  XGBoost tuner, then ``compile --tuning-records`` and ``bench --tuning-records``;
- ``frontends``: a TorchScript (.pt) and a torch.export (.pt2) model;
- ``flags``: on the digits CNN, ``--precision bf16/int8``, ``--input-shapes``, ``--tasks
  list``, ``--tasks 0,3-5``, ``--time-budget``, ``--prior-records`` of another model,
  ``--target "llvm -mcpu=..."`` for another CPU;
- ``records``: a records file truncated, corrupt, of another model; an unwritable ``-o``;
- ``resume``: Ctrl-C (SIGINT to the process group, as a terminal sends it) once records are
  on disk, then the same command again: the configs measured twice are counted; two tune
  processes appending to one records file at once.

Each case is judged by what a user sees: a Python traceback, a nonzero exit where none was
expected (or the reverse), a speedup printed without its interval. No thresholds: the
matrix goes into docs/performance.md ("tilecraft tune on what users bring").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DIGITS = ROOT / "examples" / "digits_cnn.onnx"
DIGITS_SHAPES = "input:[4,1,16,16]"
# The held-out models of the public suite, then a few others of its families.
MODELS = ("unet", "yolo", "wav2vec_frontend", "lstm", "diffusion_resblocks", "mlp_mixer",
          "gpt2", "llama", "swin", "odd_extents", "speech_encoder")
# A CPU that is not this one: records keyed by it, no roofline, measured here.
OTHER_CPU = "llvm -mcpu=skylake-avx512"


@dataclass
class Outcome:
    case: str
    command: str
    code: int | None  # None: killed at the case's timeout
    seconds: float
    stdout: str = ""
    stderr: str = ""
    notes: list[str] = field(default_factory=list)

    def verdict(self) -> str:
        """One line: what went wrong, or the summary's end-to-end verdict."""
        problems = []
        if "Traceback" in self.stderr or "Traceback" in self.stdout:
            problems.append("TRACEBACK")
        if self.code is None:
            problems.append("TIMEOUT")
        # A ratio must come with its interval (results.py, significance.py).
        for line in self.stdout.splitlines():
            if re.search(r"\d\.\d\dx", line) and "interval" not in line:
                problems.append(f"ratio without interval: {line.strip()[:80]}")
        error = next((l for l in reversed(self.stderr.splitlines()) if l.startswith("tilecraft: error")), "")
        said = next((l for l in self.stdout.splitlines() if l.startswith("end to end:")), "")
        said = said or next((l for l in self.stdout.splitlines() if l.startswith("ratio tilecraft")), "")
        said = said or next((l for l in self.stdout.splitlines() if l.startswith("compiled ")), "")
        parts = problems + self.notes + [error or said]
        return "; ".join(p for p in parts if p)[:230]


def tilecraft(case: str, argv: list[str], timeout: float, cwd: Path) -> Outcome:
    """Run ``tilecraft ARGV`` as a user would (a child process, this checkout on the path)."""
    command = [PYTHON, "-m", "tilecraft.tools.cli", *argv]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=_environment())
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, out, err = None, _text(expired.stdout), _text(expired.stderr)
    return Outcome(case, "tilecraft " + " ".join(argv), code, time.monotonic() - start, out, err)


def _text(data: "bytes | str | None") -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _environment() -> dict[str, str]:
    """This checkout first on the path (the folder above it holds the ``tilecraft`` package)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _interrupted(case: str, argv: list[str], records: Path, lines: int, timeout: float, cwd: Path) -> Outcome:
    """``tilecraft ARGV`` sent SIGINT, as a terminal's Ctrl-C sends it to the foreground
    process group, once ``records`` holds ``lines`` lines. SIGINT is restored to its default
    in the child first: a shell's background job starts with it ignored."""
    restore = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    command = [PYTHON, "-c", restore, PYTHON, "-m", "tilecraft.tools.cli", *argv]
    start = time.monotonic()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_environment(), start_new_session=True)
    while child.poll() is None and time.monotonic() - start < timeout:
        if records.is_file() and len(records.read_text().splitlines()) >= lines:
            os.killpg(child.pid, signal.SIGINT)
            break
        time.sleep(0.5)
    try:
        out, err = child.communicate(timeout=max(timeout - (time.monotonic() - start), 30))
        code: int | None = child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        code = None
    outcome = Outcome(case, "tilecraft " + " ".join(argv) + "  (SIGINT)", code, time.monotonic() - start, out, err)
    time.sleep(2.0)  # the workers' exit; a zombie is reaped by init, not left behind
    table = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True).stdout.split("\n")
    left = [row for row in table if row.split() and row.split()[0] == str(child.pid) and "Z" not in row.split()[1]]
    if left:
        outcome.notes.append(f"{len(left)} process(es) left in its group")
    if "the same command resumes" not in err:
        outcome.notes.append("no resume hint")
    return outcome


def measured_twice(records: Path) -> int:
    """Search configs (not defaults, validation or in-model re-measurements) measured more
    than once for one task: what a resumed run must not do."""
    seen: collections.Counter = collections.Counter()
    for line in records.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("tuner") not in ("default", "final", "in_model"):
            seen[(record["task"]["key"], json.dumps(record["config"], sort_keys=True))] += 1
    return sum(1 for count in seen.values() if count > 1)


# ---- the groups of cases ------------------------------------------------------------------

def export_model(name: str, work: Path) -> Path:
    path = work / f"{name}.onnx"
    if not path.is_file():
        subprocess.run([PYTHON, str(ROOT / "benchmarks" / "thread_balance.py"), "export", name, "-o", str(path)],
                       check=True, capture_output=True, env=_environment())
    return path


def models_cases(args: argparse.Namespace, work: Path) -> Iterator[Outcome]:
    """Per model: tune with each tuner, then compile and bench with the first tuner's records
    (each row printed as it ends: a model's rows take minutes)."""
    for name in args.models.split(","):
        try:
            model = export_model(name, work)
        except subprocess.CalledProcessError as error:
            yield Outcome(f"{name}: export", "thread_balance.py export", error.returncode, 0.0,
                          notes=[_text(error.stderr).strip().splitlines()[-1][:120]])
            continue
        for tuner in args.tuners.split(","):
            records = work / f"{name}-{tuner}.jsonl"
            records.unlink(missing_ok=True)
            yield tilecraft(f"{name}: tune {tuner}", ["tune", str(model), "-o", str(records),
                            "--trials", str(args.trials), "--tuner", tuner], args.timeout, work)
        records = work / f"{name}-{args.tuners.split(',')[0]}.jsonl"
        if records.is_file():
            yield tilecraft(f"{name}: compile", ["compile", str(model), "--tuning-records", str(records),
                            "-o", str(work / f"{name}.tar")], args.timeout, work)
            yield tilecraft(f"{name}: bench", ["bench", str(model), "--tuning-records", str(records),
                            "--repeat", "5"], args.timeout, work)


def frontends_cases(args: argparse.Namespace, work: Path) -> list[Outcome]:
    import torch

    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.fc = torch.nn.Linear(16 * 8 * 8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    torch.manual_seed(0)
    module, example = Small().eval(), torch.randn(2, 3, 8, 8)
    torch.jit.save(torch.jit.trace(module, example), str(work / "small.pt"))
    torch.export.save(torch.export.export(module, (example,)), str(work / "small.pt2"))
    rows = []
    for suffix, extra in ((".pt", ["--input-shapes", "x:[2,3,8,8]"]), (".pt2", [])):
        model, records = work / f"small{suffix}", work / f"small{suffix}.jsonl"
        records.unlink(missing_ok=True)
        rows.append(tilecraft(f"torch {suffix}: tune", ["tune", str(model), *extra, "-o", str(records),
                              "--trials", str(args.trials), "--tuner", "random"], args.timeout, work))
        rows.append(tilecraft(f"torch {suffix}: compile", ["compile", str(model), *extra, "--tuning-records",
                              str(records), "-o", str(work / f"small{suffix}.tar")], args.timeout, work))
    return rows


def flags_cases(args: argparse.Namespace, work: Path) -> list[Outcome]:
    digits = ["tune", str(DIGITS), "--input-shapes", DIGITS_SHAPES]
    trials = ["--trials", str(args.trials)]
    other = work / "other.jsonl"
    if not other.is_file():  # another model's records: an MLP's
        tilecraft("(prior)", ["tune", str(export_model("mlp_mixer", work)), "-o", str(other), "--trials", "4",
                              "--no-end-to-end"], args.timeout, work)
    cases: list[tuple[str, list[str]]] = [
        ("digits: no --input-shapes", ["tune", str(DIGITS), "-o", "x.jsonl"]),
        ("digits: --tasks list", [*digits, "--tasks", "list"]),
        ("digits: --tasks 0,3-5", [*digits, "-o", "tasks.jsonl", "--tasks", "0,3-5", *trials]),
        ("digits: --input-shapes batch 1", ["tune", str(DIGITS), "--input-shapes", "input:[1,1,16,16]",
                                            "-o", "b1.jsonl", *trials, "--tuner", "xgb"]),
        ("digits: --time-budget 60s", [*digits, "-o", "budget.jsonl", "--trials", "1000", "--time-budget", "60s"]),
        ("digits: --precision bf16", [*digits, "-o", "bf16.jsonl", "--precision", "bf16", *trials]),
        ("digits: --precision int8", [*digits, "-o", "int8.jsonl", "--precision", "int8", *trials]),
        ("digits: --prior-records of another model", [*digits, "-o", "prior.jsonl", "--prior-records", str(other),
                                                      *trials]),
        ("digits: --target another CPU", [*digits, "-o", "cpu.jsonl", "--target", OTHER_CPU, *trials]),
        ("digits: --offload blas --tasks list", [*digits, "--offload", "blas", "--tasks", "list"]),
    ]
    for name in ("tasks", "b1", "budget", "bf16", "int8", "prior", "cpu"):
        (work / f"{name}.jsonl").unlink(missing_ok=True)
    rows = [tilecraft(case, argv, args.timeout, work) for case, argv in cases]
    rows.append(tilecraft("digits: compile with int8 records", ["compile", str(DIGITS), "--input-shapes",
                          DIGITS_SHAPES, "--precision", "int8", "--tuning-records", "int8.jsonl", "-o", "int8.tar"],
                          args.timeout, work))
    return rows


def records_cases(args: argparse.Namespace, work: Path) -> list[Outcome]:
    digits = ["tune", str(DIGITS), "--input-shapes", DIGITS_SHAPES, "--trials", str(args.trials), "--no-end-to-end"]
    base = work / "base.jsonl"
    if not base.is_file():
        tilecraft("(base)", [*digits, "-o", str(base)], args.timeout, work)
    text = base.read_text() if base.is_file() else ""
    (work / "truncated.jsonl").write_text(text[: len(text) // 2])
    (work / "corrupt.jsonl").write_text(text.replace('"status": "ok"', '"status": 7', 3) + "{not json\n\x00\x01\n")
    other = work / "other.jsonl"
    (work / "foreign.jsonl").write_text(other.read_text() if other.is_file() else "")
    rows = []
    for name in ("truncated", "corrupt", "foreign"):
        records = work / f"{name}.jsonl"
        rows.append(tilecraft(f"records {name}: tune -o", [*digits, "-o", str(records)], args.timeout, work))
        rows[-1].notes.append(f"{measured_twice(records)} config(s) measured twice")
        rows.append(tilecraft(f"records {name}: compile", ["compile", str(DIGITS), "--input-shapes", DIGITS_SHAPES,
                              "--tuning-records", str(records), "-o", f"{name}.tar"], args.timeout, work))
    rows.append(tilecraft("records: -o a directory", [*digits, "-o", str(work)], args.timeout, work))
    rows.append(tilecraft("records: -o under a file", [*digits, "-o", str(base / "r.jsonl")], args.timeout, work))
    rows.append(tilecraft("records: -o under /proc", [*digits, "-o", "/proc/none/r.jsonl"], args.timeout, work))
    rows.append(tilecraft("compile: records missing", ["compile", str(DIGITS), "--input-shapes", DIGITS_SHAPES,
                          "--tuning-records", "missing.jsonl", "-o", "m.tar"], args.timeout, work))
    return rows


def resume_cases(args: argparse.Namespace, work: Path) -> list[Outcome]:
    records = work / "resume.jsonl"
    records.unlink(missing_ok=True)
    argv = ["tune", str(DIGITS), "--input-shapes", DIGITS_SHAPES, "-o", str(records),
            "--trials", str(max(args.trials, 24)), "--tuner", "xgb"]
    rows = [_interrupted("resume: Ctrl-C", argv, records, 12, args.timeout, work)]
    rows.append(tilecraft("resume: same command again", argv, args.timeout, work))
    rows[-1].notes.append(f"{measured_twice(records)} config(s) measured twice")
    shared = work / "shared.jsonl"
    shared.unlink(missing_ok=True)
    both = ["tune", str(DIGITS), "--input-shapes", DIGITS_SHAPES, "-o", str(shared), "--trials", str(args.trials),
            "--tuner", "random", "--no-end-to-end"]
    start = time.monotonic()
    children = [subprocess.Popen([PYTHON, "-m", "tilecraft.tools.cli", *both, "--seed", str(seed)], cwd=work,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment())
                for seed in (1, 2)]
    for index, child in enumerate(children):
        out, err = child.communicate(timeout=args.timeout)
        rows.append(Outcome(f"two writers: process {index + 1}", " ".join(both), child.returncode,
                            time.monotonic() - start, out, err))
    lines = shared.read_text().splitlines() if shared.is_file() else []
    bad = sum(1 for line in lines if not line.startswith("{") or not line.endswith("}"))
    rows[-1].notes.append(f"{len(lines)} lines, {bad} torn")
    return rows


GROUPS: dict[str, Callable[[argparse.Namespace, Path], Iterable[Outcome]]] = {
    "flags": flags_cases, "records": records_cases, "resume": resume_cases,
    "frontends": frontends_cases, "models": models_cases,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(GROUPS), help=f"groups among {', '.join(GROUPS)}")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tuners", default="random,xgb")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per command")
    parser.add_argument("--work", default="/tmp/tune_sweep", help="folder for models and records")
    parser.add_argument("--list", action="store_true", help="print the groups and models, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        print("groups:", ", ".join(GROUPS))
        print("models:", ", ".join(MODELS))
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'case':<44} {'exit':>4} {'s':>6}  outcome")
    for group in args.cases.split(","):
        for row in GROUPS[group](args, work):
            code = "kill" if row.code is None else str(row.code)
            print(f"{row.case[:44]:<44} {code:>4} {row.seconds:6.0f}  {row.verdict()}", flush=True)
            with (work / "sweep.log").open("a") as log:  # the whole output, for a closer look
                log.write(f"==== {row.case}\n$ {row.command}\n--- exit {code}\n{row.stdout}\n--- stderr\n"
                          f"{row.stderr[-6000:]}\n")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
