"""Builds the toy accelerator's kernel library when the package is installed.

The library is a plain shared object loaded with ctypes (no Python C API), so it is not a
setuptools ``Extension``: ``build_py`` compiles ``kernels.c`` with the C compiler setuptools
would use for extensions and puts ``libtoy_kernels.so`` beside the package's modules (a
tilecraft package bundles extern libraries under their ``lib<name>.so`` file name).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools._distutils.ccompiler import new_compiler
from setuptools._distutils.sysconfig import customize_compiler


class BuildKernels(build_py):
    def run(self) -> None:
        super().run()
        package = Path(self.build_lib) / "toy_accelerator"
        compiler = new_compiler()
        customize_compiler(compiler)
        objects = compiler.compile([str(Path("toy_accelerator") / "kernels.c")],
                                   output_dir=self.get_finalized_command("build").build_temp,
                                   extra_postargs=["-O2", "-fPIC", "-std=c99"])
        compiler.link_shared_lib(objects, "toy_kernels", output_dir=str(package))


setup(cmdclass={"build_py": BuildKernels})
