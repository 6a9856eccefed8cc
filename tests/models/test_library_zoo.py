"""benchmarks/library_zoo.py's models (Hugging Face transformers' own architectures) at tiny
configs: each exports with the TorchScript exporter, and tilecraft.compile's result matches
onnxruntime on the export (rtol/atol 1e-3 of the output's largest magnitude, the benchmark's
check). Skipped where the ``zoo`` extra (transformers) is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

import tilecraft  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import library_zoo  # noqa: E402

# Embedding gathers and depthwise convolutions keep scalar loops under the default schedule,
# which warns; tests/conftest.py turns warnings into errors.
SCALAR_FALLBACK = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")
# One text, one vision and one audio model run by default; the rest are slow (an export and
# a compile each, 15-60 s on the shared 2 cores).
FAST = {"bert", "resnet", "wav2vec2"}


def test_the_zoo_covers_the_brief():
    assert len(library_zoo.MODELS) >= 20
    assert {m.family for m in library_zoo.MODELS.values()} == {"text", "vision", "audio"}


@pytest.mark.parametrize("name", sorted(library_zoo.MODELS))
def test_tiny_model_is_alive(name):
    """Another input moves the output by more than the checks' tolerance: a net whose
    activations vanish (EfficientNet's own init drew BatchNorm scales of ~0.02: output 1e-34)
    answers every input alike, and every comparison passes."""
    module, inputs = library_zoo.build(name, tiny=True)
    generator = torch.Generator().manual_seed(1)
    other = tuple(torch.randn(x.shape, generator=generator) if x.is_floating_point()
                  else torch.randint(3, int(x.max()) + 1, x.shape, generator=generator) for x in inputs)
    with torch.no_grad():
        expected, moved = module(*inputs), module(*other)
    scale = float(expected.abs().max())
    assert np.isfinite(scale) and scale > 1e-3, f"output scale {scale:.1e}"
    assert float((moved - expected).abs().max()) > 1e-2 * scale


@SCALAR_FALLBACK
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow)
                                  for n in sorted(library_zoo.MODELS)])
def test_tiny_model_matches_onnxruntime(name):
    module, inputs = library_zoo.build(name, tiny=True)
    proto = onnx.load_from_string(library_zoo.export_onnx(module, inputs))
    feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    got = tilecraft.compile(proto, keep_ir=False, verbose=False)(*feeds.values())
    scale = float(np.abs(expected).max())
    assert scale > 0 and np.isfinite(expected).all()
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-3, atol=1e-3 * scale)
