"""A backend in its own package (examples/toy_accelerator): installed with pip, which compiles
its C kernel library, and found through the ``tilecraft.backends`` entry point by the CLI and
the Python API with no import; its convolutions run in that library, in the JIT and in a
package loaded runtime-only in a fresh process. Also what an entry point that is not a
backend gets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tilecraft
from tilecraft.errors import BackendError

ROOT = Path(tilecraft.__file__).parent
DIGITS = ROOT / "examples" / "digits_cnn.onnx"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example installed (not editable) into a folder of its own, as pip would into a
    venv; the source is copied first so the checkout gets no build output."""
    work = tmp_path_factory.mktemp("toy")
    shutil.copytree(ROOT / "examples" / "toy_accelerator", work / "src")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-build-isolation", "--no-deps", "--target", str(work / "site"), str(work / "src")],
                   check=True, capture_output=True, text=True)
    assert (work / "site" / "toy_accelerator" / "libtoy_kernels.so").is_file()  # built at install
    return work / "site"


def run(code: str, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_installed_backend_runs_digits_through_its_library(installed, tmp_path):
    pytest.importorskip("onnxruntime")
    done = run(f"""
        import numpy as np, onnxruntime, tilecraft
        x = np.random.default_rng(0).standard_normal((1, 1, 16, 16)).astype(np.float32)
        module = tilecraft.compile({str(DIGITS)!r}, shape_dict={{"input": [1, 1, 16, 16]}},
                                   offload=["toy"], package_path="digits_toy.tar")
        convs = module.offloaded["toy"]["linalg.conv_2d_nhwc_hwcf"]
        # the second convolution; the first reads a one-channel image and is a matmul of its
        # windows (ir/conv.py single_channel_as_matmul), which the toy backend does not take
        assert convs == 1, module.offloaded
        assert module.ir("graph").count('tilecraft.offload = "toy:') == convs
        expected = onnxruntime.InferenceSession({str(DIGITS)!r}).run(None, {{"input": x}})[0]
        np.testing.assert_allclose(module(x), expected, rtol=1e-4, atol=1e-5)
        np.save("x.npy", x); np.save("expected.npy", expected)
        print("ok")
        """, installed, tmp_path)
    assert done.returncode == 0 and "offload toy: 1 ops" in done.stderr, done.stderr
    # A deployment: the runtime alone, in a fresh process, the toy library bundled.
    loaded = run("""
        import numpy as np, tilecraft.runtime
        package = tilecraft.runtime.load("digits_toy.tar")
        np.testing.assert_allclose(package(np.load("x.npy")), np.load("expected.npy"), rtol=1e-4, atol=1e-5)
        assert "libtoy_kernels.so" in package.manifest["libraries"]["bundled"], package.manifest["libraries"]
        print("ok")
        """, installed, tmp_path)
    assert loaded.stdout.strip() == "ok", loaded.stderr


def test_the_cli_finds_the_installed_backend_by_name(installed, tmp_path):
    done = run(f"""
        import sys
        from tilecraft.tools.cli import main
        sys.argv = ["tilecraft", "compile", {str(DIGITS)!r}, "--input-shapes", "input:[1,1,16,16]",
                    "--target", "toy, llvm", "-o", "digits.tar"]
        main()
        """, installed, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "offload toy: 1 ops (linalg.conv_2d_nhwc_hwcf 1)" in done.stderr


def _plugin(tmp_path: Path, monkeypatch, target: str, body: str) -> None:
    """A distribution declaring ``broken = <target>`` in tilecraft.backends, on sys.path."""
    (tmp_path / f"{target.split(':')[0]}.py").write_text(body)
    info = tmp_path / "plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[tilecraft.backends]\nbroken = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("target, body, message", [
    ("plugin_value:NOT_A_BACKEND", "NOT_A_BACKEND = 42\n", "is not a tilecraft.Backend"),
    ("plugin_broken:Broken", "raise ImportError('the SDK is not installed')\n", "failed to load: ImportError: the SDK"),
    ("plugin_misnamed:Misnamed", "import tilecraft\nclass Misnamed(tilecraft.Backend):\n"
     "    name = 'other'\n    patterns = ('linalg.matmul',)\n", "names a backend called 'other'"),
])
def test_an_entry_point_that_is_no_backend_is_a_backend_error(tmp_path, monkeypatch, target, body, message):
    _plugin(tmp_path, monkeypatch, target, body)
    with pytest.raises(BackendError, match=message):
        tilecraft.CompileOptions(offload=["broken"])


def test_unknown_backends_list_the_installed_ones(tmp_path, monkeypatch):
    _plugin(tmp_path, monkeypatch, "plugin_listed:X", "X = 1\n")
    with pytest.raises(BackendError, match=r"known backends: (.*, )?blas, (.*, )?broken\b"):
        tilecraft.CompileOptions(offload=["nonexistent"])
