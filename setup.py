"""Package discovery for a repository whose root *is* the ``tilecraft`` package.

``[tool.setuptools.packages.find]`` cannot express this layout: it names packages relative
to ``where`` (``frontend``, ``pipelines``, ... as top-level packages), and pointing ``where``
at the parent folder only works when the checkout happens to be named ``tilecraft``. So the
package list is computed here: every folder with an ``__init__.py`` under the root becomes
``tilecraft.<folder>``, except the checkout's own tooling (tests, benchmarks, virtual
environments, build output). A new subpackage is picked up without editing anything; the
data files each package ships are globs in pyproject.toml's ``[tool.setuptools.package-data]``.
Everything else about the project (metadata, dependencies, entry points) is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Folders of the checkout that are not part of the installed package.
NOT_SHIPPED = ["tests", "benchmarks", "examples", "docs", "build", "dist", "venv"]


def tilecraft_packages() -> list[str]:
    exclude = [pattern for name in NOT_SHIPPED for pattern in (name, f"{name}.*")]
    # Hidden folders (.venv, .git, .ci, ...) and *.egg-info are never packages.
    exclude += [".*", "*.egg-info", "*.egg-info.*"]
    found = find_packages(where=str(Path(__file__).resolve().parent), exclude=exclude)
    return ["tilecraft"] + [f"tilecraft.{name}" for name in found]


class BuildPy(build_py):
    """Leaves this file out of the package: in the root it would be ``tilecraft.setup``."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        if package == "tilecraft":
            modules = [entry for entry in modules if entry[1] != "setup"]
        return modules


# setuptools' build backend runs this file as __main__; in the checkout (an editable install)
# it is also the module tilecraft.setup, which must do nothing when imported.
if __name__ == "__main__":
    setup(
        packages=tilecraft_packages(),
        package_dir={"tilecraft": "."},
        cmdclass={"build_py": BuildPy},
    )
