"""``tilecraft-opt``: an ``mlir-opt``-style driver mixing upstream and tilecraft passes.

    tilecraft-opt in.mlir --canonicalize --tilecraft-schedule="vector-bits=256" -o out.mlir
    tilecraft-opt in.mlir --pass-pipeline='builtin.module(tilecraft-lower-cpu)'
    tilecraft-opt tests.mlir --split-input-file --verify-diagnostics --tilecraft-schedule

Exit status: 0 on success, 1 when the input cannot be read (missing, not UTF-8 text), does not
parse or verify, is nested too deeply, a pass fails, the output cannot be written, an
expected diagnostic is missing or an unexpected one appears, and 2 for bad command lines.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from typing import Sequence, TextIO

from mlir import ir

from ..dialects import graph
from ..errors import CompileError, ModelImportError, PipelineError, ResourceLimitError
from ..frontend.loader import check_mlir_text
from ..pipelines.passes import registered_passes, registered_pipelines
from ..pipelines.pipeline import run_pass_elements, split_pipeline_elements, validate_pass_elements
from .upstream_passes import upstream_pass_summaries

SPLIT_MARKER = "// -----"
_EXPECTED = re.compile(
    r"expected-(error|warning|note|remark)\s*(@(?:above|below|[+-]\d+))?\s*\{\{(.*?)\}\}"
)
_LOCATION_LINE = re.compile(r'loc\("[^"]*":(\d+):(\d+)\)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilecraft-opt",
        description="Run upstream MLIR passes and tilecraft passes over MLIR files.",
        epilog="Pass flags: --<pass-name> or --<pass-name>='opt=value opt2=value', in order. "
        "Use --list-passes for every pass and pipeline.",
        add_help=False,
    )
    parser.add_argument("input", nargs="?", default="-", help="input file ('-' or absent: stdin)")
    parser.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    parser.add_argument("--pass-pipeline", help="a textual pipeline: 'builtin.module(p1,p2{opt=v})'")
    parser.add_argument("--split-input-file", action="store_true",
                        help=f"process each chunk between '{SPLIT_MARKER}' lines separately")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against expected-error/warning/note/remark comments")
    parser.add_argument("--mlir-print-ir-after-all", action="store_true",
                        help="print the IR after every pass to stderr")
    parser.add_argument("--mlir-print-op-generic", action="store_true",
                        help="print operations in generic form")
    parser.add_argument("--list-passes", action="store_true", help="list the available passes")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and the passes")
    return parser


def passes_help() -> str:
    lines = ["", "tilecraft passes:"]
    for name, tc_pass in sorted(registered_passes().items()):
        lines.append(f"  --{name:<40} {tc_pass.summary}")
        lines.extend(f"      {option}=<value>  {text}" for option, text in tc_pass.options.items())
    lines.append("")
    lines.append("tilecraft pipelines:")
    for name, pipeline in sorted(registered_pipelines().items()):
        lines.append(f"  --{name:<40} {pipeline.summary}")
        lines.extend(f"      {option}=<value>  {text}" for option, text in pipeline.options.items())
    upstream = upstream_pass_summaries()
    lines.append("")
    lines.append(f"upstream MLIR passes ({len(upstream)}; options as in mlir-opt --help):")
    lines.extend(f"  --{name:<40} {summary[:90]}" for name, summary in upstream)
    return "\n".join(lines)


def pass_flags_to_elements(flags: Sequence[str]) -> list[str]:
    """``["--canonicalize", "--foo=a=1 b=2"]`` -> ``["canonicalize", "foo{a=1 b=2}"]``."""
    elements = []
    for flag in flags:
        if not flag.startswith("--") or len(flag) == 2:
            raise PipelineError(f"unexpected argument {flag!r} (pass flags look like --pass-name)")
        name, sep, options = flag[2:].partition("=")
        options = options.strip().strip("'\"")
        elements.append(f"{name}{{{options}}}" if sep and options else name)
    return elements


@dataclass
class Diagnostic:
    severity: str
    line: int | None
    message: str
    column: int | None = None

    def render(self, file_name: str, line_offset: int = 0) -> str:
        """``file:line:col: error: message``, with lines counted in the whole input file."""
        if self.line is None:
            return f"{file_name}: {self.severity}: {self.message}"
        column = f"{self.column}:" if self.column is not None else ""
        return f"{file_name}:{self.line + line_offset}:{column} {self.severity}: {self.message}"


def _position(location: ir.Location) -> tuple[int | None, int | None]:
    match = _LOCATION_LINE.search(str(location))
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def _severity(diagnostic: object) -> str:
    return str(diagnostic.severity).rsplit(".", 1)[-1].lower()


def _collect(diagnostic: object, into: list[Diagnostic]) -> None:
    line, column = _position(diagnostic.location)
    into.append(Diagnostic(_severity(diagnostic), line, diagnostic.message, column))
    for note in diagnostic.notes:
        line, column = _position(note.location)
        into.append(Diagnostic("note", line, note.message, column))


def expected_diagnostics(source: str) -> list[Diagnostic]:
    """The ``expected-<severity> @<where> {{text}}`` annotations of ``source``."""
    expected = []
    for number, line in enumerate(source.splitlines(), start=1):
        for match in _EXPECTED.finditer(line):
            severity, where, text = match.groups()
            target = number
            if where == "@above":
                target = number - 1
            elif where == "@below":
                target = number + 1
            elif where:
                target = number + int(where[1:])
            expected.append(Diagnostic(severity, target, text))
    return expected


def check_diagnostics(
    source: str, produced: list[Diagnostic], file_name: str, line_offset: int = 0
) -> list[str]:
    """Mismatches between the annotations of ``source`` and ``produced``, as messages."""
    problems = []
    remaining = list(produced)
    for want in expected_diagnostics(source):
        match = next(
            (d for d in remaining
             if d.severity == want.severity and d.line == want.line and want.message in d.message),
            None,
        )
        if match is None:
            problems.append(
                f"{file_name}:{want.line + line_offset}: error: expected {want.severity} "
                f"\"{want.message}\" was not produced"
            )
        else:
            remaining.remove(match)
    for extra in remaining:
        if extra.severity in ("error", "warning"):
            problems.append(f"{extra.render(file_name, line_offset)} (unexpected)")
    return problems


def process_chunk(
    source: str, elements: list[str], options: argparse.Namespace
) -> tuple[str | None, list[Diagnostic], str | None]:
    """Parse and transform one chunk. Returns (output IR or None, diagnostics, failure)."""
    context = ir.Context()
    graph.load(context)  # files dumped after the graph stage hold graph.fusion_group ops
    diagnostics: list[Diagnostic] = []

    def handler(diagnostic: object) -> bool:
        _collect(diagnostic, diagnostics)
        return True

    context.attach_diagnostic_handler(handler)
    with context:
        try:
            check_mlir_text(source)
            module = ir.Module.parse(source)
            if elements:
                run_pass_elements(module, elements, print_ir_after_all=options.mlir_print_ir_after_all)
        except ir.MLIRError as error:
            for diagnostic in error.error_diagnostics:
                _collect(diagnostic, diagnostics)
            return None, diagnostics, str(error).splitlines()[0]
        except (ResourceLimitError, ModelImportError) as error:
            diagnostics.append(Diagnostic("error", None, str(error)))
            return None, diagnostics, str(error)
        except CompileError as error:
            cause = error.__cause__
            if isinstance(cause, ir.MLIRError):
                for diagnostic in cause.error_diagnostics:
                    _collect(diagnostic, diagnostics)
            else:  # a tilecraft pass raised: its message is the diagnostic
                diagnostics.append(Diagnostic("error", None, str(error)))
            return None, diagnostics, str(error)
        text = module.operation.get_asm(print_generic_op_form=options.mlir_print_op_generic)
    return text, diagnostics, None


def run(argv: Sequence[str], stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout,
        stderr: TextIO = sys.stderr) -> int:
    parser = build_parser()
    options, pass_flags = parser.parse_known_args(argv)
    if options.help or options.list_passes:
        if options.help:
            parser.print_help(stdout)
        print(passes_help(), file=stdout)
        return 0
    try:
        if options.pass_pipeline and pass_flags:
            raise PipelineError("use either --pass-pipeline or individual pass flags, not both")
        elements = (
            split_pipeline_elements(options.pass_pipeline)
            if options.pass_pipeline
            else pass_flags_to_elements(pass_flags)
        )
        validate_pass_elements(elements)
    except PipelineError as error:
        print(f"tilecraft-opt: error: {error}", file=stderr)
        return 2
    name = "<stdin>" if options.input == "-" else options.input
    try:
        if options.input == "-":
            source = stdin.read()
        else:
            with open(options.input, encoding="utf-8") as handle:
                source = handle.read()
        source.encode("utf-8")  # stdin decoded with surrogateescape holds what UTF-8 cannot
    except OSError as error:
        print(f"tilecraft-opt: error: cannot read {name}: {error.strerror}", file=stderr)
        return 1
    except UnicodeError as error:
        print(f"tilecraft-opt: error: {name} is not UTF-8 text (position {error.start}); MLIR "
              "bytecode and binary files are not read", file=stderr)
        return 1
    if options.output != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(options.output))):
        print(f"tilecraft-opt: error: cannot write {options.output}: its folder does not exist",
              file=stderr)
        return 1
    chunks = source.split(f"\n{SPLIT_MARKER}\n") if options.split_input_file else [source]
    outputs, failed, line_offset = [], False, 0
    for chunk in chunks:
        try:
            text, diagnostics, failure = process_chunk(chunk, elements, options)
        except PipelineError as error:
            print(f"tilecraft-opt: error: {error}", file=stderr)
            return 2
        if options.verify_diagnostics:
            problems = check_diagnostics(chunk, diagnostics, name, line_offset)
            for problem in problems:
                print(problem, file=stderr)
            failed |= bool(problems)
        else:
            for diagnostic in diagnostics:
                print(diagnostic.render(name, line_offset), file=stderr)
            if failure is not None:
                if not diagnostics:
                    print(f"{name}: error: {failure}", file=stderr)
                failed = True
        line_offset += chunk.count("\n") + 2
        if text is not None:
            outputs.append(text)
    rendered = f"\n{SPLIT_MARKER}\n".join(outputs)
    if options.output == "-":
        stdout.write(rendered)
    else:
        try:
            with open(options.output, "w") as handle:
                handle.write(rendered)
        except OSError as error:
            print(f"tilecraft-opt: error: cannot write {options.output}: {error.strerror}", file=stderr)
            return 1
    return 1 if failed else 0


def main() -> None:
    try:
        sys.exit(run(sys.argv[1:]))
    except BrokenPipeError:  # `tilecraft-opt --help | head`
        sys.exit(0)


if __name__ == "__main__":
    main()
