"""One front door: every source kind through one loader, one options object, the public
``tilecraft.torch`` module, and ``Model.save`` refusing names it could not read back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import ArgumentTypeError, ModelImportError

DIGITS = Path(tilecraft.__file__).resolve().parent / "examples" / "digits_cnn.onnx"
ADD = """
func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.fixture(scope="module")
def torch_program(tmp_path_factory):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    program = torch.export.export(module, (torch.randn(2, 8),))
    path = tmp_path_factory.mktemp("torch") / "mlp.pt2"
    torch.export.save(program, str(path))
    return module, program, path


def test_compile_takes_a_pt2_file_and_an_exported_program(torch_program):
    torch = pytest.importorskip("torch")
    module, program, path = torch_program
    x = torch.randn(2, 8)
    expected = module(x).detach().numpy()
    for source in (path, str(path), program):
        np.testing.assert_allclose(tilecraft.compile(source)(x.numpy()), expected, rtol=1e-5, atol=1e-6)
    assert tilecraft.load(path).torch_program is not None


def test_import_tilecraft_torch_in_a_fresh_interpreter(tmp_path):
    code = ("import tilecraft.torch, torch\n"
            "assert callable(tilecraft.torch.compile) and callable(tilecraft.torch.tilecraft_backend)\n"
            "assert 'site-packages' in torch.__file__, torch.__file__  # PyTorch, not a shadow\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(tilecraft.__file__).parent, timeout=300)


def test_options_object_and_keywords_compile_alike(rand):
    options = tilecraft.CompileOptions(opt_level=1, keep_ir=False)
    a, b = rand((4,)), rand((4,))
    for module in (tilecraft.compile(ADD, options), tilecraft.compile(ADD, opt_level=1, keep_ir=False)):
        np.testing.assert_allclose(module(a, b), a + b)
        assert module.stages == []
    with pytest.raises(TypeError, match="unknown compile option.*'opt_levle'"):
        tilecraft.compile(ADD, opt_levle=2)
    with pytest.raises(ValueError, match="opt_level"):
        tilecraft.CompileOptions(opt_level=7)


def test_unsupported_source_kinds_are_typed_errors(tmp_path):
    with pytest.raises(ArgumentTypeError, match="got int"):
        tilecraft.compile(42)
    with pytest.raises(ArgumentTypeError, match="got int"):
        tilecraft.load(42)
    with pytest.raises(ModelImportError, match="no such file"):
        tilecraft.compile(tmp_path / "absent.pt2")


def test_save_refuses_a_suffix_it_could_not_read_back(tmp_path):
    pytest.importorskip("onnx")
    model = tilecraft.load(DIGITS)
    with pytest.raises(ModelImportError, match=r"\*\.onnx"):
        model.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert tilecraft.load(model.save(tmp_path / "m.onnx")).operators == model.operators
    text = tilecraft.load(ADD)
    with pytest.raises(ModelImportError, match=r"\*\.mlir"):
        text.save(tmp_path / "add.onnx")
    assert tilecraft.load(text.save(tmp_path / "add.mlir")).inputs == text.inputs
