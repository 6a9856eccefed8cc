"""The target registry: which plugin compiles for a target kind (``llvm``, ``cuda``, ``c``, ...).

Why a registry: a target used to be spread over a dozen files that each branched on
``target.is_cuda`` / ``target.is_c``; adding one meant editing all of them. Now everything a
target decides lives behind one :class:`TargetPlugin` in its own folder (``tilecraft/targets/
<name>/``), and the front door (``tilecraft.compile``), the CLI, the TE ``build`` and the
session options ask :func:`target_plugin` instead of branching. Adding a target is one folder
and one line in :data:`BUILTIN_TARGETS` (or one :func:`register_target` call from outside the
package), as IREE's ``compiler/plugins/target/*`` and tinygrad's ``runtime/ops_*.py`` do.

Why by module name: the plugins sit above the front door in the layer contract (they use its
package writer and loader, docs/architecture.md), while the options and the JIT that consult
them sit below it. The registry therefore names the built-in plugins by string and imports
them on first use, as ``pipelines/passes.py``'s ``DEFINITION_MODULES`` does for passes.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import PackageError, TargetError, TuningError

if TYPE_CHECKING:
    from mlir import ir

    from ..runtime.signature import EntrySignature

# "Target", "CompileOptions", "CompiledModule" and "Pipeline" in the annotations below are
# pipelines/target.py's, options.py's, compiled_module.py's and pipeline.py's classes, named
# and not imported: those modules consult this registry (pipeline.py through passes.py), and
# an import back (even for type checking) would be an import cycle (tests/test_layers.py).

# kind -> the module whose import registers that kind's plugin (tilecraft/targets/<name>/).
BUILTIN_TARGETS: dict[str, str] = {
    "llvm": "tilecraft.targets.cpu",
    "cuda": "tilecraft.targets.cuda",
    "c": "tilecraft.targets.c",
}

_PLUGINS: dict[str, "TargetPlugin"] = {}


class TargetPlugin(ABC):
    """Everything one target kind decides, asked by name through :func:`target_plugin`.

    Attributes:
      name: the kind that starts its target strings (``"cuda"`` in ``"cuda -arch=sm_80"``).
      usage: how its target strings look, for the unknown-kind message (``"'cuda -arch=sm_XX'"``).
      runs_in_process: ``True``: ``tilecraft.compile`` lowers the model with
        :meth:`pipeline` and JIT-compiles it into a callable module (:meth:`jit`);
        ``False``: the target produces an artifact of its own (:meth:`build`, e.g. C sources).
      specializes_shapes: whether a model with dynamic input dims gets shape-specialized
        compiles (compiler/specialized.py): the CPU's register tiles need static extents.
      writes_packages: whether ``package_path`` (a deployable ``model.tar``) is possible.
      precisions: the ``precision=`` values it compiles (``"f32"``; the CPU's reduced
        ``"bf16"``/``"int8"`` builds, compiler/precision.py, compare against an f32 build run here).
      tunable: whether ``tilecraft.tune`` and the auto-scheduler search its schedules
        (:meth:`check_tunable` says why not; :meth:`schedule_space` gives the space).
      tensor_device: the PyTorch device type (``torch.device.type``) whose tensors its
        compiled calls take without a host copy: ``"cpu"``, or ``"cuda"`` for a GPU target,
        whose modules accept CUDA tensors over DLPack (compiler/torch_module.py).
    """

    name: str
    usage: str
    runs_in_process: bool = True
    specializes_shapes: bool = False
    writes_packages: bool = False
    tunable: bool = False
    precisions: tuple[str, ...] = ("f32",)
    tensor_device: str = "cpu"

    @abstractmethod
    def parse(self, spec: str, options: Sequence[str]) -> "Target":
        """The :class:`Target` of ``spec``, whose words after the kind are ``options``;
        :class:`TargetError` naming a bad option."""

    def spec(self, target: "Target") -> str:
        """The target string :meth:`parse` reads back into ``target`` (its ``str``)."""
        return target.kind

    def can_run_here(self, target: "Target") -> bool:
        """Whether code for ``target`` can run on this machine."""
        return False

    def check_options(self, options: "CompileOptions") -> None:
        """Raise a :class:`TilecraftError` subclass for compile options this target cannot
        honour (packages, offload backends, ...); called by ``CompileOptions`` itself.
        By default: a package (``package_path``) only where :attr:`writes_packages`."""
        if options.package_path is not None and self.runs_in_process and not self.writes_packages:
            raise PackageError(f"target {options.target} writes no deployable packages; compile it without "
                               "package_path (or for 'llvm' to package)")

    @abstractmethod
    def pipeline(self, options: "CompileOptions") -> "Pipeline":
        """The default lowering pipeline for ``options`` (its target, opt_level, ...)."""

    def jit(self, module: "ir.Module", signature: "EntrySignature", pipeline: "Pipeline",
            target: "Target", **settings: Any) -> "CompiledModule":
        """The callable module of a module :meth:`pipeline` lowered; ``settings`` are
        :class:`CompiledModule`'s keywords (``opt_level``, ``stage_ir``, ``source``)."""
        raise TargetError(f"target {target} does not run in this process; compile it to its artifact")

    def build(self, source: Any, options: "CompileOptions", source_name: str | None) -> Any:
        """The artifact of a target that does not run in process (:attr:`runs_in_process`
        ``False``): ``tilecraft.compile``'s result for it."""
        raise TargetError(f"target {self.name!r} is compiled in process; it has no artifact of its own")

    def scheduled_pipeline(self, target: "Target") -> "Pipeline":
        """The pipeline for IR scheduled by hand (the TE ``build``: schedule/te/builder.py)."""
        raise TargetError(f"target {target} does not build hand-written schedules (tilecraft.build); "
                          "use 'llvm' or 'cuda'")

    def check_schedule(self, schedule: Any) -> None:
        """Raise a :class:`TilecraftError` subclass for a TE schedule (``tilecraft.Schedule``)
        this target cannot build, naming the blocks or loops at fault."""

    def package_runtime(self, target: "Target") -> tuple[tuple[Path, ...], dict[str, Any]]:
        """What a package for ``target`` adds (:attr:`writes_packages`): C sources linked into
        its ``model.so`` beside the CPU runtime, and manifest fields. None by default; CUDA
        adds its ``mgpu*`` runtime and a ``device`` entry (targets/cuda/plugin.py)."""
        return (), {}

    def is_package_output(self, output: str) -> bool:
        """Whether ``tilecraft compile -o output`` writes a package (else :meth:`write_output`
        writes the target's own files there); every output, where :attr:`writes_packages`."""
        return self.writes_packages

    def check_output(self, output: str) -> None:
        """Raise a :class:`TilecraftError` subclass, before compiling, for a CLI ``-o`` path
        :meth:`write_output` cannot write."""

    def write_output(self, compiled: Any, output: str) -> str:
        """What ``tilecraft compile -o output`` writes besides a package (:attr:`writes_packages`),
        e.g. CUDA's kernel files; returns the line the CLI prints."""
        return f"-> {output}"

    def check_tunable(self, target: "Target") -> None:
        """Raise a :class:`TilecraftError` subclass, before any work, when ``tilecraft.tune``
        cannot search ``target``'s schedules here (by default: unless :attr:`tunable`)."""
        if not self.tunable:
            raise TuningError(f"target {target} has no tunable schedules; tune an 'llvm' target")

    def schedule_space(self, task: Any, target: "Target") -> Any:
        """The hand-written search space (``schedule.space.SearchSpace``) of a tuning task's
        op on ``target``: the knobs its default schedule exposes, default point first."""
        raise TuningError(f"target {target} has no schedule space")

    def report_sizes(self, artifact: Any) -> list[str]:
        """One line per cross-built object of an artifact (CLI ``--report-sizes``)."""
        raise TargetError(f"target {self.name!r} has no object sizes to report; --report-sizes is for --target c")


def register_target(plugin: TargetPlugin) -> TargetPlugin:
    """Make ``plugin`` the compiler of target strings starting with ``plugin.name``; a plugin
    registered again under the same name replaces the old one. Returns ``plugin``."""
    if not isinstance(plugin, TargetPlugin):
        raise TargetError(f"register_target takes a TargetPlugin, got {type(plugin).__name__}")
    name = getattr(plugin, "name", None)
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise TargetError(f"a target plugin's name must be one word such as 'llvm', got {name!r}")
    _PLUGINS[name] = plugin
    return plugin


def target_plugin(name: str) -> TargetPlugin:
    """The plugin of target kind ``name``; :class:`TargetError` listing the known kinds."""
    if name not in _PLUGINS and name in BUILTIN_TARGETS:
        importlib.import_module(BUILTIN_TARGETS[name])  # its import registers it
    plugin = _PLUGINS.get(name)
    if plugin is None:
        known = ", ".join(target_plugin(kind).usage for kind in target_names())
        raise TargetError(f"unknown target kind {name!r}; supported: {known}")
    return plugin


def target_names() -> list[str]:
    """The target kinds known now: the built-in ones, then those registered from outside."""
    return [*BUILTIN_TARGETS, *(name for name in _PLUGINS if name not in BUILTIN_TARGETS)]
