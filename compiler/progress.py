"""A compile's progress on a terminal: the stage running, how many of the stages are done,
the kernels the schedule made and the seconds so far, on one line rewritten in place.

Why: a large model compiles for tens of seconds, and until now printed nothing until the
end; ``tune`` shows a progress line the same way (tuning/tune.py). Why only at stage
boundaries and not from a timer thread: the passes and LLVM run inside MLIR with the
interpreter lock held, so a thread could not print during a stage anyway. The line appears
only once the compile has run :data:`SHOW_AFTER_S` seconds (a quick compile stays
silent), only when the stream is a terminal and the compile's ``verbose`` option is on;
it is ended with a newline when the compile finishes.
"""

from __future__ import annotations

import sys
import time
from typing import Sequence, TextIO

# Seconds a compile runs silently before its progress line appears.
SHOW_AFTER_S = 2.0


class CompileProgress:
    """The progress line of one compile over ``steps`` (stage names, then ``"jit"``)."""

    def __init__(self, name: str, steps: Sequence[str], *, enabled: bool, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled and callable(isatty) and bool(isatty())
        self.name = name
        self.steps = list(steps)
        self.done = 0
        self.kernels: int | None = None
        self.started = time.perf_counter()
        self.shown = False
        self._width = 0

    def _line(self, running: str) -> str:
        kernels = f", {self.kernels} kernels" if self.kernels is not None else ""
        return (f"[tilecraft] compiling {self.name}: {running} ({self.done}/{len(self.steps)} steps done"
                f"{kernels}) | {time.perf_counter() - self.started:.1f} s")

    def _show(self, text: str) -> None:
        pad = " " * max(0, self._width - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._width = len(text)
        self.shown = True

    def step_done(self, step: str, *, kernels: int | None = None) -> None:
        """``step`` has finished; shows the next one as running once the compile is slow."""
        self.done = min(self.done + 1, len(self.steps))
        if kernels is not None:
            self.kernels = kernels
        if not self.enabled:
            return
        if not self.shown and time.perf_counter() - self.started < SHOW_AFTER_S:
            return
        following = self.steps[self.done] if self.done < len(self.steps) else "finishing"
        self._show(self._line(following))

    def finish(self, *, failed: bool = False) -> None:
        """Ends the line (only when one was shown), as done or as failed."""
        if self.enabled and self.shown:
            if not failed:
                self.done = len(self.steps)
            self._show(self._line("failed" if failed else "done"))
            self.stream.write("\n")
            self.stream.flush()
