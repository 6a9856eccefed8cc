"""TorchScript through tilecraft: traced and scripted modules (tilecraft.torch.compile), saved
.pt archives (tilecraft.compile / load with shape_dict), and the control flow it refuses."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilecraft  # noqa: E402
import tilecraft.torch  # noqa: E402
from tilecraft.errors import TorchImportError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, image: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.conv(image)))
        for _ in range(2):  # a loop of constant trip count: unrolled
            y = y + bias
        return torch.softmax(self.head(y.mean((2, 3))), dim=-1)


class DataBranch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x - 1


@pytest.fixture(scope="module")
def model() -> ConvNet:
    torch.manual_seed(0)
    net = ConvNet().eval()
    with torch.no_grad():
        net.norm.running_mean.uniform_(-1, 1)
        net.norm.running_var.uniform_(0.5, 2)
    return net


@pytest.fixture(scope="module")
def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, 3, 10, 10, generator=generator), torch.randn(1, 8, 1, 1, generator=generator)


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("how", ["trace", "script"])
def test_traced_and_scripted_modules_match_eager(model, inputs, how):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = torch.jit.trace(model, inputs) if how == "trace" else torch.jit.script(model)
    compiled = tilecraft.torch.compile(module, inputs)
    assert [spec.name for spec in compiled.signature.arguments] == ["image", "bias"]
    assert compiled.signature.arguments[0].shape == (2, 3, 10, 10)  # static, as traced
    _close(compiled(*inputs), model(*inputs))


def test_saved_archive_compiles_with_shapes_named_by_forward(model, inputs, tmp_path):
    path = tmp_path / "net.pt"
    torch.jit.save(torch.jit.script(model), str(path))
    shapes = {"image": (2, 3, 10, 10), "bias": (1, 8, 1, 1)}
    loaded = tilecraft.load(path, shape_dict=shapes)
    assert [t.name for t in loaded.inputs] == ["image", "bias"]
    assert loaded.torch_program is not None  # the anchor of `tilecraft bench --vs torch`
    compiled = tilecraft.compile(str(path), shape_dict=shapes)
    _close(compiled(*(x.numpy() for x in inputs)), model(*inputs))


def test_saved_archive_needs_every_input_shape(model, inputs, tmp_path):
    path = tmp_path / "net.pt"
    torch.jit.save(torch.jit.trace(model, inputs), str(path))
    with pytest.raises(TorchImportError, match=r"forward\(image, bias\).*missing \['bias'\]"):
        tilecraft.compile(str(path), shape_dict={"image": (2, 3, 10, 10)})
    with pytest.raises(TorchImportError, match="static shapes"):
        tilecraft.load(path, shape_dict={"image": (None, 3, 10, 10), "bias": (1, 8, 1, 1)})


def test_control_flow_on_tensor_data_is_named(tmp_path):
    scripted = torch.jit.script(DataBranch().eval())
    with pytest.raises(TorchImportError, match=r"prim::If at .*test_torchscript.py:\d+") as error:
        tilecraft.torch.compile(scripted, (torch.ones(4),))
    assert error.value.problems and error.value.problems[0][1] == "prim::If"
    path = tmp_path / "branch.pt"
    torch.jit.save(scripted, str(path))
    with pytest.raises(TorchImportError, match="branches or loops on tensor data"):
        tilecraft.compile(str(path), shape_dict={"x": (4,)})


def test_training_mode_and_dynamic_shapes_are_refused(inputs):
    with pytest.raises(TorchImportError, match="training mode"):
        tilecraft.torch.compile(torch.jit.script(ConvNet()), inputs)
    with pytest.raises(TorchImportError, match="dynamic_shapes"):
        tilecraft.torch.compile(torch.jit.script(ConvNet().eval()), inputs, dynamic_shapes={"image": {0: None}})
