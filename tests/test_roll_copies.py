"""torch.roll over several dims, as shifted-window attention uses it (Swin v1/v2, CSWin: the
map rolled before the window partition and rolled back after the reverse), against
onnxruntime on the same ONNX export and against PyTorch through tilecraft.torch.

Each roll over one dim is a Slice + Concat pair; ``tilecraft-slice-concat-parts``
(pipelines/tensor/concat_slices.py) reads the second roll's slices from the first roll's
parts, so a roll over k dims is one concat of concats of the source's blocks (one copy, not
k). The shifts here are odd and unequal, positive and negative, over two and three dims, so
the blocks are of every size; the last case is Swin's block: roll, a 5 x 5 window partition
(the 3-row boundary of the roll cutting a window), an elementwise op, the reverse, the
inverse roll and a residual add."""

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

import tilecraft  # noqa: E402
import tilecraft.torch  # noqa: E402
from pinned_targets import AVX2, AVX512, needs_avx512_host  # noqa: E402


class Roll(torch.nn.Module):
    def __init__(self, shifts: tuple[int, ...], dims: tuple[int, ...]):
        super().__init__()
        self.shifts, self.dims = shifts, dims

    def forward(self, x):
        return torch.roll(x * 2.0, self.shifts, self.dims) + 1.0


class ShiftedWindows(torch.nn.Module):
    """Roll, partition into w x w windows, a per-window op, reverse, roll back, residual."""

    def __init__(self, window: int, shift: int, channels: int):
        super().__init__()
        self.window, self.shift = window, shift
        self.norm = torch.nn.LayerNorm(channels)
        self.proj = torch.nn.Linear(channels, channels)

    def forward(self, x):
        b, h, w, c = x.shape
        ws = self.window
        y = self.norm(x)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        y = y.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        y = self.proj(y).softmax(1)
        y = y.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        return x + (torch.roll(y, (self.shift, self.shift), (1, 2)) if self.shift else y)


def _export(module: torch.nn.Module, x: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module.eval(), (x,), buffer, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], do_constant_folding=True)
    return buffer.getvalue()


def _first(result) -> np.ndarray:
    return np.asarray(result[0] if isinstance(result, (tuple, list)) else result)


CASES = [
    pytest.param(Roll((3, -2), (1, 2)), (1, 7, 9, 5), id="two-dims"),
    pytest.param(Roll((-1, 4, 2), (1, 2, 3)), (2, 5, 6, 7), id="three-dims"),
    pytest.param(Roll((5,), (2,)), (1, 4, 11, 3), id="one-dim"),
    pytest.param(ShiftedWindows(5, 2, 12), (1, 15, 15, 12), id="window-5-shift-2"),
    pytest.param(ShiftedWindows(7, 3, 16), (1, 14, 14, 16), id="window-7-shift-3"),
    pytest.param(ShiftedWindows(5, 0, 12), (1, 15, 10, 12), id="window-5-unshifted"),
]


@pytest.mark.parametrize("target", [AVX2, pytest.param(AVX512, marks=needs_avx512_host)], ids=["avx2", "avx512"])
@pytest.mark.parametrize("module, shape", CASES)
def test_rolls_match_onnxruntime(module, shape, target):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    model = _export(module, x)
    expected = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()})[0]
    compiled = tilecraft.compile(onnx.load_from_string(model), target=target, cache=False)
    got = _first(compiled(x=x.numpy()))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * float(np.abs(expected).max()))


def test_a_two_dim_roll_is_one_concat_of_blocks():
    """The IR fact: after simplification no concat is sliced (every concat's slices were read
    from its parts), so the two rolls' four blocks are built into one result."""
    x = torch.randn(1, 7, 9, 5)
    compiled = tilecraft.compile(onnx.load_from_string(_export(Roll((3, -2), (1, 2)), x)),
                                 cache=False, keep_ir=True)
    simplified = compiled.ir("simplify")
    assert simplified.count("tensor.concat") == 3          # two concats of two blocks, one of those
    concat_results = [line.split("=")[0].strip() for line in simplified.splitlines() if "tensor.concat" in line]
    assert not any(f"tensor.extract_slice {name}[" in simplified for name in concat_results)


def test_torch_route_rolls_match_eager():
    torch.manual_seed(1)
    module, x = ShiftedWindows(5, 2, 12).eval(), torch.randn(1, 15, 15, 12)
    with torch.no_grad():
        expected = module(x).numpy()
    compiled = tilecraft.torch.compile(module, (x,))
    np.testing.assert_allclose(_first(compiled(x)), expected, rtol=1e-5, atol=1e-5 * float(np.abs(expected).max()))


def test_window_reverse_is_the_residual_adds_read():
    """An unshifted block's window reverse ([1, nh, nw, ws, ws, C] -> [1, nh, ws, nw, ws, C])
    is read by the residual add through a permuted map (tilecraft-transposes-as-reads,
    pipelines/tensor/transpose_reads.py): no transpose of that permutation is left after
    simplification, while the partition's (read by the Linear, not elementwise) stays."""
    x = torch.randn(1, 15, 10, 12)
    compiled = tilecraft.compile(onnx.load_from_string(_export(ShiftedWindows(5, 0, 12), x)),
                                 cache=False, keep_ir=True)
    simplified = compiled.ir("simplify")
    transposes = [line for line in simplified.splitlines() if "linalg.transpose" in line]
    assert not any("tensor<1x3x2x5x5x12xf32>) outs" in line and "tensor<1x3x5x2x5x12xf32>)" in line
                   for line in transposes), transposes
