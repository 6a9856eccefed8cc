"""Targets as plugins (pipelines/target_registry.py, targets/<name>/): a target registered from
outside the package compiles through ``tilecraft.compile`` and the CLI, and each built-in
target is named only by its own folder and the registry."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import PackageError, TargetError
from tilecraft.compiler.options import CompileOptions
from tilecraft.pipelines.pipeline import Pipeline
from tilecraft.pipelines.target import Target
from tilecraft.pipelines.target_registry import (BUILTIN_TARGETS, TargetPlugin, register_target, target_names,
                                                 target_plugin)
from tilecraft.runtime.package import load as load_package
from tilecraft.targets.cpu import CpuTarget
from tilecraft.tools.cli import run_cli

ROOT = Path(__file__).resolve().parent.parent

MATMUL_RELU = """
func.func @main(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x4xf32>) -> tensor<8x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%acc : tensor<8x4xf32>) -> tensor<8x4xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<8x4xf32>) outs(%init : tensor<8x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  return %out : tensor<8x4xf32>
}
"""


class ToyCpuTarget(CpuTarget):
    """A CPU variant under its own name: the default CPU pipeline at opt_level 0 (no graph
    stage), whatever the options ask. Adding it took this class and one register_target."""

    name = "toycpu"
    usage = "'toycpu [-mcpu=...]'"
    pipelines_built = 0

    def pipeline(self, options: CompileOptions) -> Pipeline:
        type(self).pipelines_built += 1
        return super().pipeline(CompileOptions.of(options, opt_level=0))


@pytest.fixture(scope="module")
def toy() -> ToyCpuTarget:
    return tilecraft.register_target(ToyCpuTarget())  # the public route, from outside the package


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((8, 16), dtype=np.float32), rng.standard_normal((16, 4), dtype=np.float32)


def test_a_registered_toy_target_compiles_through_the_front_door(toy):
    a, b = _inputs()
    before = ToyCpuTarget.pipelines_built
    compiled = tilecraft.compile(MATMUL_RELU, target="toycpu -mcpu=haswell", cache=False, verbose=False)
    assert ToyCpuTarget.pipelines_built == before + 1
    assert compiled.target.kind == "toycpu"
    assert str(compiled.target) == "toycpu -mcpu=haswell"  # the plugin writes what it parses
    assert Target.parse(str(compiled.target)) == compiled.target
    assert "graph" not in compiled.stages  # opt_level 0, as the toy decides
    np.testing.assert_allclose(compiled(a, b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def test_a_registered_toy_target_compiles_through_the_cli(toy, tmp_path, capsys):
    model = tmp_path / "matmul_relu.mlir"
    model.write_text(MATMUL_RELU)
    package = tmp_path / "model.tar"
    assert run_cli(["compile", str(model), "--target", "toycpu", "--no-cache", "-o", str(package)]) == 0
    assert "for 'toycpu'" in capsys.readouterr().out
    a, b = _inputs()
    np.testing.assert_allclose(load_package(package)(a, b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def test_the_registry_lists_and_refuses(toy):
    assert target_names()[:3] == ["llvm", "cuda", "c"] and "toycpu" in target_names()
    with pytest.raises(TargetError, match=r"unknown target kind 'opencl'.*'toycpu \[-mcpu=...\]'"):
        Target.parse("opencl")
    with pytest.raises(TargetError, match="takes a TargetPlugin"):
        register_target(object())  # type: ignore[arg-type]
    with pytest.raises(TargetError, match="one word"):
        register_target(type("Bad", (ToyCpuTarget,), {"name": "two words"})())


class _NoPackages(TargetPlugin):
    """A target that runs in process but writes no packages: the registry's default check."""

    name = "nopackages"
    usage = "'nopackages'"

    def parse(self, spec: str, options: Sequence[str]) -> Target:
        return Target(kind=self.name)

    def pipeline(self, options: CompileOptions) -> Pipeline:
        raise AssertionError("not reached: the options are refused first")


def test_a_target_without_packages_refuses_package_path(tmp_path):
    register_target(_NoPackages())
    with pytest.raises(PackageError, match="writes no deployable packages"):
        CompileOptions(target="nopackages", package_path=tmp_path / "m.tar")
    with pytest.raises(TargetError, match="does not build hand-written schedules"):
        target_plugin("nopackages").scheduled_pipeline(Target.parse("nopackages"))


# ---- which files name a target -----------------------------------------------------------

# Files outside a target's folder that still name it, each with its reason. The list is
# exact: a new branch on a target kind anywhere else fails the test, and so does a stale entry.
NAMED_OUTSIDE_THE_FOLDER: dict[str, dict[str, str]] = {
    "llvm": {
        # The compile cache stores the CPU JIT's object code (a library of host code).
        "compiler/cache.py": "caches CPU JIT object code only",
    },
    "cuda": {
        # A return annotation names the GPU space among the tuner's space generators.
        "tuning/space_generators.py": "annotates SpaceGenerator.generate with GpuScheduleSpace",
    },
    "c": {
        "__init__.py": "the public name tilecraft.CModel",
    },
}
_SHIPPED = ("tests", "benchmarks", "examples", "docs", "build", "dist")


def _package_files() -> list[Path]:
    return [path for path in ROOT.rglob("*.py")
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
            and path.relative_to(ROOT).parts[0] not in _SHIPPED and "egg-info" not in str(path)]


def _module_name(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an import names (relative imports resolved from ``path``)."""
    if node.level == 0:
        return node.module or ""
    package = ["tilecraft", *path.relative_to(ROOT).parent.parts]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _kinds_named(path: Path, folders: dict[str, str]) -> set[str]:
    """The target kinds a module names: imports of (or strings naming) a target's package,
    ``is_cuda``/``is_c``, and comparisons of a ``.kind`` with a kind."""
    named: set[str] = set()
    by_folder = {folder: kind for kind, folder in folders.items()}
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _module_name(path, node)
            modules = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            modules = [node.value.lstrip(".").removeprefix("tilecraft.")]
            modules = [f"tilecraft.{m}" for m in modules]
        elif isinstance(node, ast.Attribute) and node.attr in ("is_cuda", "is_c"):
            named.add("cuda" if node.attr == "is_cuda" else "c")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides):
                named |= {s.value for s in sides if isinstance(s, ast.Constant) and s.value in folders}
        for module in modules:
            match = re.match(r"tilecraft\.targets\.(\w+)", module)
            if match and match.group(1) in by_folder:
                named.add(by_folder[match.group(1)])
    return named


def test_a_target_is_named_only_by_its_folder_and_the_registry():
    folders = {kind: module.removeprefix("tilecraft.targets.") for kind, module in BUILTIN_TARGETS.items()}
    found: dict[str, set[str]] = {kind: set() for kind in folders}
    for path in _package_files():
        relative = path.relative_to(ROOT).as_posix()
        for kind in _kinds_named(path, folders):
            if not relative.startswith(f"targets/{folders[kind]}/"):
                found[kind].add(relative)
    expected = {kind: {"pipelines/target_registry.py", *NAMED_OUTSIDE_THE_FOLDER.get(kind, {})}
                for kind in folders}
    assert found == expected


def test_every_built_in_target_has_its_folder_and_plugin():
    for kind, module in BUILTIN_TARGETS.items():
        folder = ROOT / "targets" / module.removeprefix("tilecraft.targets.")
        assert (folder / "__init__.py").is_file() and (folder / "plugin.py").is_file()
        assert target_plugin(kind).name == kind
