"""``tilecraft.run``: run a package once or timed, the Python twin of ``tilecraft run``
(tvmc's ``run``). Needs numpy and the runtime only, like the packages it runs.

    result = tilecraft.run("resnet50.tar", {"data": x}, repeat=10)
    print(result.outputs["output"].argmax(), result.format_times())
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import ArgumentValueError
from .package import KernelTime, Package
from .package import load as load_package
from .timing import Timing, measure


@dataclass
class RunResult:
    """What :func:`run` returns: outputs by name, and timings when asked for."""

    outputs: dict[str, np.ndarray]
    timing: Timing | None = None
    kernels: list[KernelTime] | None = None

    def save(self, path: "str | os.PathLike[str]") -> None:
        """Write the outputs to an ``.npz`` file, one array per output name."""
        np.savez(path, **self.outputs)

    def format_times(self) -> str:
        """The ``Execution time summary`` table ``tvmc run --print-time`` prints."""
        if self.timing is None:
            return "no timing: run with repeat >= 1 and print_time"
        t = self.timing
        header = f"{'mean (ms)':>12} {'median (ms)':>12} {'max (ms)':>12} {'min (ms)':>12} {'std (ms)':>12}"
        values = " ".join(f"{v * 1e3:12.4f}" for v in (t.mean, t.median, t.max, t.min, t.std))
        return f"Execution time summary:\n{header}\n{values}"

    def format_profile(self) -> str:
        """Per-kernel time of the profiled call, largest first, with its share of the total."""
        if not self.kernels:
            return "no kernel profile"
        total = sum(k.seconds for k in self.kernels) or 1.0
        width = max(len(k.name) for k in self.kernels)
        lines = [f"{'kernel':<{width}} {'time (ms)':>10} {'share':>7}"]
        for kernel in sorted(self.kernels, key=lambda k: k.seconds, reverse=True):
            lines.append(f"{kernel.name:<{width}} {kernel.seconds * 1e3:10.4f} {kernel.seconds / total:7.1%}")
        lines.append(f"{'total (kernels)':<{width}} {total * 1e3:10.4f}")
        return "\n".join(lines)


def random_inputs(package: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every argument of a :class:`Package` or ``CompiledModule`` (uniform
    [0, 1) floats, small integers), as tvmc does without ``--inputs``; a dynamic dimension
    needs real inputs."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for spec in package.signature.arguments:
        shape = () if spec.shape is None else spec.shape
        if any(d is None for d in shape):
            raise ArgumentValueError(
                f"input {spec.name!r} has a dynamic shape {spec.mlir_style}: pass inputs"
            )
        if spec.is_string:  # words from a small vocabulary, repeated as text is
            inputs[spec.name] = np.array([f"w{i}" for i in rng.integers(0, 8, size=shape).flat],
                                         dtype=object).reshape(shape)
        elif spec.dtype.kind == "f":
            inputs[spec.name] = rng.random(shape).astype(spec.dtype)
        elif spec.dtype.kind == "b":
            inputs[spec.name] = rng.random(shape) < 0.5
        else:
            inputs[spec.name] = rng.integers(0, 8, size=shape).astype(spec.dtype)
    return inputs


def load_inputs(path: "str | os.PathLike[str]") -> dict[str, np.ndarray]:
    """Arrays of an ``.npz`` file by name; :class:`ArgumentValueError` when unreadable."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise ArgumentValueError(f"{path}: no such inputs file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:  # truncated or not a zip
        raise ArgumentValueError(f"{path}: not a readable .npz file ({error})") from None


def run(
    package: "str | os.PathLike[str] | Package",
    inputs: "Mapping[str, np.ndarray] | str | os.PathLike[str] | None" = None,
    *,
    repeat: int = 0,
    number: int = 1,
    min_repeat_ms: float = 0.0,
    profile: bool = False,
    trust: "str | os.PathLike[str] | bytes | None" = None,
) -> RunResult:
    """Run a package once (and time it ``repeat`` times x ``number`` calls when ``repeat``).

    ``inputs``: arrays by input name, an ``.npz`` path, or ``None`` for seeded random inputs.
    ``min_repeat_ms``: raise ``number`` until one measurement lasts this long (the tuner's
    remote runner asks for it).
    ``profile``: also run the package's profiling variant once and report per-kernel time.
    ``trust``: a key file: run the package only if signed with it (see
    :func:`tilecraft.runtime.load`); for a path only, a loaded :class:`Package` was checked
    when loaded.
    """
    if not isinstance(package, Package):
        package = load_package(package, trust=trust)
    if inputs is None:
        inputs = random_inputs(package)
    elif not isinstance(inputs, Mapping):
        inputs = load_inputs(inputs)
    unknown = sorted(set(inputs) - set(package.input_names))
    if unknown:
        raise ArgumentValueError(
            f"inputs {unknown} are not inputs of the package; inputs: {package.input_names}"
        )
    results = package(**inputs)
    results = results if isinstance(results, tuple) else (results,)
    outputs = dict(zip(package.output_names, results))
    timing = (measure(lambda: package(**inputs), number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
              if repeat > 0 else None)
    kernels = package.profile(**inputs)[1] if profile else None
    return RunResult(outputs, timing, kernels)
