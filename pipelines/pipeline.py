"""Pipelines as data: an ordered list of named stages, each a list of pass-pipeline elements.

A stage's elements are exactly what one writes inside ``builtin.module(...)``: upstream
passes (``canonicalize``, ``func.func(cse)``, ``one-shot-bufferize{...}``) and registered
tilecraft passes (``tilecraft-schedule{vector-bits=512}``). So a pipeline can be printed
(``str(pipeline)``), edited (:meth:`Pipeline.replace`, :meth:`Pipeline.without`), turned into
one ``--pass-pipeline`` string for ``tilecraft-opt``, and replayed from any stage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from mlir import ir, passmanager

from ..errors import CompileError, PipelineError
from .passes import TilecraftPass, lookup_pass, lookup_pipeline


@dataclass(frozen=True)
class Stage:
    """One named step of a pipeline: pass elements run by a single pass manager."""

    name: str
    passes: tuple[str, ...]
    summary: str = ""


def split_pipeline_elements(text: str) -> list[str]:
    """Split ``"a, b{x=1 y=2}, func.func(c, d)"`` at top-level commas.

    ``builtin.module(...)`` around the whole text is removed, so a full
    ``--pass-pipeline`` string and a bare element list give the same result.
    """
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    elements, depth, current = [], 0, []
    for char in text:
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced brackets in pass pipeline {text!r}")
        if char == "," and depth == 0:
            elements.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise PipelineError(f"unbalanced brackets in pass pipeline {text!r}")
    elements.append("".join(current).strip())
    return [e for e in elements if e]


def expand_named_pipelines(elements: Sequence[str]) -> list[str]:
    """Replace each named tilecraft pipeline (``tilecraft-lower-cpu{...}``) by its elements."""
    expanded: list[str] = []
    for element in elements:
        name, option_text = _element_name_and_options(element)
        pipeline = lookup_pipeline(name)
        if pipeline is None:
            expanded.append(element)
        else:
            expanded.extend(expand_named_pipelines(pipeline.expand(pipeline.parse_options(option_text))))
    return expanded


def _element_name_and_options(element: str) -> tuple[str, str]:
    # An op-anchored nested pipeline, ``func.func(pass{opt=v})``, is passed to MLIR whole:
    # its braces belong to the inner pass, not to this element (splitting at the first
    # ``{`` rejected valid elements as "malformed").
    paren, brace_at = element.find("("), element.find("{")
    if paren != -1 and (brace_at == -1 or paren < brace_at):
        return element.strip(), ""
    name, brace, rest = element.partition("{")
    if brace and not rest.endswith("}"):
        raise PipelineError(f"malformed pass options in {element!r}")
    return name.strip(), rest[:-1] if brace else ""


def with_pass_options(element: str, options: str) -> str:
    """Pass element ``element`` (``pass`` or ``pass{a=1}``) with ``options`` (``b=2 c=3``)
    appended to its options. Why one helper: the passes that take what a tuning run found
    as options (``tilecraft-schedule``'s records, the kernel passes' configs) each spliced
    the braces by hand."""
    name, options_now = _element_name_and_options(element)
    return f"{name}{{{options_now + ' ' if options_now else ''}{options}}}"


def _python_pass_callback(
    tc_pass: TilecraftPass, options: dict[str, str], errors: list[BaseException]
) -> Callable[[ir.Operation, object], None]:
    def run(op: ir.Operation, pass_: object) -> None:
        try:
            tc_pass.run(op, options)
        except Exception as error:  # reported through the pass manager, re-raised below
            errors.append(error)
            pass_.signal_pass_failure()

    return run


def build_pass_manager(
    context: ir.Context,
    elements: Sequence[str],
    *,
    errors: list[BaseException] | None = None,
    print_ir_after_all: bool = False,
) -> passmanager.PassManager:
    """A pass manager running ``elements`` (upstream or tilecraft) in order.

    Exceptions raised by tilecraft passes are appended to ``errors``. Raises
    :class:`PipelineError` for an unknown pass or a bad option, before anything runs.
    """
    errors = errors if errors is not None else []
    with context:
        pm = passmanager.PassManager("builtin.module")
        if print_ir_after_all:
            pm.enable_ir_printing(print_after_all=True, large_elements_limit=16)
        for element in expand_named_pipelines(elements):
            name, option_text = _element_name_and_options(element)
            tc_pass = lookup_pass(name)
            if tc_pass is not None:
                if tc_pass.prepare is not None:
                    tc_pass.prepare(context)
                pm.add(
                    _python_pass_callback(tc_pass, tc_pass.parse_options(option_text), errors),
                    name=tc_pass.argument,
                    argument=tc_pass.argument,
                    description=tc_pass.summary,
                )
                continue
            try:
                pm.add(element)
            except ValueError as error:
                raise PipelineError(f"bad pass element {element!r}: {error}") from None
    return pm


def validate_pass_elements(elements: Sequence[str]) -> None:
    """Raise :class:`PipelineError` if any element names an unknown pass or option."""
    build_pass_manager(ir.Context(), elements)


def run_pass_elements(
    module: ir.Module, elements: Sequence[str], *, print_ir_after_all: bool = False
) -> None:
    """Run pass elements (upstream or tilecraft) in order on ``module`` with one pass manager.

    Raises :class:`PipelineError` for an unknown pass or bad option and
    :class:`CompileError` (carrying MLIR's diagnostics) when a pass fails.
    """
    errors: list[BaseException] = []
    pm = build_pass_manager(
        module.context, elements, errors=errors, print_ir_after_all=print_ir_after_all
    )
    try:
        with module.context:
            pm.run(module.operation)
    except ir.MLIRError as error:
        if errors:
            raise CompileError(f"{type(errors[0]).__name__}: {errors[0]}") from errors[0]
        raise CompileError(str(error)) from error
    if errors:
        raise CompileError(f"{type(errors[0]).__name__}: {errors[0]}") from errors[0]


@dataclass(frozen=True)
class Pipeline:
    """An ordered tuple of :class:`Stage` s. Immutable: editing returns a new pipeline."""

    stages: tuple[Stage, ...]

    @property
    def stage_names(self) -> list[str]:
        return [stage.name for stage in self.stages]

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise PipelineError(f"no stage {name!r}; stages: {', '.join(self.stage_names)}")

    def replace(self, name: str, passes: Iterable[str]) -> "Pipeline":
        """A copy with stage ``name`` running ``passes`` instead."""
        self.stage(name)
        return Pipeline(
            tuple(
                replace(s, passes=tuple(passes)) if s.name == name else s for s in self.stages
            )
        )

    def without(self, name: str) -> "Pipeline":
        """A copy with stage ``name`` removed."""
        self.stage(name)
        return Pipeline(tuple(s for s in self.stages if s.name != name))

    def starting_at(self, name: str) -> "Pipeline":
        """The stages from ``name`` on: replays a pipeline on IR dumped before that stage."""
        index = self.stage_names.index(self.stage(name).name)
        return Pipeline(self.stages[index:])

    def pass_elements(self) -> list[str]:
        return [element for stage in self.stages for element in stage.passes]

    def to_pass_pipeline(self) -> str:
        """One ``builtin.module(...)`` string, accepted by ``tilecraft-opt --pass-pipeline``."""
        return "builtin.module(" + ",".join(self.pass_elements()) + ")"

    def run(
        self,
        module: ir.Module,
        *,
        after_stage: Callable[[Stage, ir.Module], None] | None = None,
    ) -> None:
        """Run every stage on ``module`` in place; ``after_stage`` sees the IR after each."""
        for stage in self.stages:
            try:
                run_pass_elements(module, stage.passes)
            except CompileError as error:
                typed = error.__cause__
                if isinstance(typed, CompileError):  # a typed error a tilecraft pass raised
                    raise type(typed)(str(typed), stage=stage.name) from typed
                raise CompileError(str(error), stage=stage.name) from error.__cause__
            if after_stage is not None:
                after_stage(stage, module)

    def __str__(self) -> str:
        lines = []
        for stage in self.stages:
            lines.append(f"{stage.name}:  # {stage.summary}" if stage.summary else f"{stage.name}:")
            lines.extend(f"  {element}" for element in stage.passes)
        return "\n".join(lines)
