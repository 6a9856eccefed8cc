"""Every ``raise`` in the package is a TilecraftError subclass, or a builtin on purpose.

The error policy (docs/architecture.md, "Errors"): what a user, their model or their input
can reach raises a typed ``TilecraftError`` subclass from errors.py that names the problem;
a bug in tilecraft raises ``InternalError``. A builtin exception is right only where the
language or a documented contract asks for it; those cases are recognised below, or listed in
``ALLOWED`` with the reason. A new ``raise ValueError(...)`` fails this test: pick the typed
error (several derive from the builtin too, so callers catching ``ValueError`` keep working).
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_FOLDERS = ("tests", "benchmarks", "examples", "build", ".venv")

# Dunder methods whose builtin exceptions the language's protocols require.
PROTOCOL_RAISES = {
    "__getattr__": {"AttributeError"},
    "__getattribute__": {"AttributeError"},
    "__delattr__": {"AttributeError"},
    "__next__": {"StopIteration"},
    "__getitem__": {"KeyError", "IndexError", "TypeError"},
    "__setattr__": {"AttributeError"},
    "__hash__": {"TypeError"},
    "__reduce__": {"TypeError"},
    "__setstate__": {"TypeError"},
    "__bool__": {"TypeError", "ValueError"},
    "__array__": {"TypeError"},
    "__dlpack__": {"BufferError"},  # the DLPack protocol's refusal (runtime/device_array.py)
}

# (file, function, exception): why the builtin is right there. Keep this list short.
ALLOWED = {
    # Record.from_json's documented parse contract: read() catches these and counts the line
    # as corrupt (it reports how many, with the first problem).
    ("schedule/records.py", "Record.from_json", "ValueError"),
    # The compile cache's contract: an OSError while storing or loading an entry means "not
    # cached"; store() and lookup() catch it, report the reason and compile (or keep) as usual.
    ("compiler/cache.py", "_link", "OSError"),
    ("pipelines/jit/engine.py", "LibraryFunction.__init__", "OSError"),
    # The server's SIGTERM handler: leave serve_forever() the way Ctrl-C does.
    ("runtime/server.py", "_interrupt", "KeyboardInterrupt"),
}


def _builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else None


def _caught_names(handler: ast.ExceptHandler) -> set[str]:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {k.id for k in kinds if isinstance(k, ast.Name)}


def _catches(handler: ast.ExceptHandler, name: str) -> bool:
    """Whether ``handler`` catches the builtin ``name`` (by itself or a base class)."""
    if handler.type is None:
        return True
    raised = getattr(builtins, name)
    return any(_builtin_exception(c) and issubclass(raised, getattr(builtins, c))
               for c in _caught_names(handler))


class _RaiseFinder(ast.NodeVisitor):
    """Collects ``(line, function, name)`` for builtin raises no rule explains."""

    def __init__(self) -> None:
        self.scopes: list[str] = []
        self.trys: list[list[ast.ExceptHandler]] = []
        self.found: list[tuple[int, str, str]] = []

    def _scope(self, node: ast.AST) -> None:
        self.scopes.append(node.name)  # type: ignore[attr-defined]
        outer, self.trys = self.trys, []  # a try outside a function does not catch its raises
        self.generic_visit(node)
        self.trys = outer
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Try(self, node: ast.Try) -> None:
        self.trys.append(node.handlers)
        for statement in node.body:
            self.visit(statement)
        self.trys.pop()
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try

    def visit_Raise(self, node: ast.Raise) -> None:
        name = _raised_name(node)
        if name is None or not _builtin_exception(name):
            return
        function = self.scopes[-1] if self.scopes else ""
        if name == "NotImplementedError" and not isinstance(node.exc, ast.Call):
            return  # a bare `raise NotImplementedError`: an abstract method's body
        if name in PROTOCOL_RAISES.get(function, ()):
            return
        if any(_catches(h, name) for handlers in self.trys for h in handlers):
            return  # raised to leave a try block whose handler turns it into a typed error
        self.found.append((node.lineno, ".".join(self.scopes), name))


def _package_files() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py"))
            if not p.relative_to(ROOT).parts[0] in SKIPPED_FOLDERS]


def builtin_raises() -> list[tuple[str, int, str, str]]:
    """``(file, line, function, exception)`` of every builtin raise no rule explains."""
    found = []
    for path in _package_files():
        finder = _RaiseFinder()
        finder.visit(ast.parse(path.read_text(), filename=str(path)))
        relative = path.relative_to(ROOT).as_posix()
        found += [(relative, line, function, name) for line, function, name in finder.found]
    return found


def test_every_raise_is_typed_or_allowed():
    unexplained = [f"{file}:{line} {function}: raise {name}"
                   for file, line, function, name in builtin_raises()
                   if (file, function, name) not in ALLOWED]
    assert not unexplained, (
        "builtin raises in the package; raise a TilecraftError subclass (errors.py), "
        "InternalError for a bug, or add the site to ALLOWED with the reason:\n"
        + "\n".join(unexplained))


def test_allow_list_has_no_stale_entries():
    present = {(file, function, name) for file, _, function, name in builtin_raises()}
    assert ALLOWED <= present, f"ALLOWED names sites that no longer raise: {sorted(ALLOWED - present)}"


def test_the_finder_sees_what_it_must():
    """The rules themselves: a plain raise is found; the explained forms are not."""
    source = '''
def plain():
    raise ValueError("bad")
def abstract(self):
    raise NotImplementedError
def caught():
    try:
        raise KeyError("k")
    except LookupError:
        pass
def not_caught():
    try:
        pass
    except KeyError:
        raise KeyError("again")
class C:
    def __getattr__(self, name):
        raise AttributeError(name)
'''
    finder = _RaiseFinder()
    finder.visit(ast.parse(source))
    assert [(f, n) for _, f, n in finder.found] == [("plain", "ValueError"), ("not_caught", "KeyError")]
