"""benchmarks/public_suite.py's model definitions: each builds (tiny), calibrates its
BatchNorm statistics, exports to ONNX, and onnxruntime agrees with PyTorch on the export.
The suite itself is a benchmark (no timed assertions); this keeps its definitions working."""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import public_suite  # noqa: E402


def test_the_suite_covers_the_issue_list():
    assert len(public_suite.ARCHITECTURES) >= 20
    assert set(public_suite.QUICK) <= set(public_suite.ARCHITECTURES)
    assert all(a.summary for a in public_suite.ARCHITECTURES.values())


@pytest.mark.slow  # a TorchScript export each: ~3 minutes for all on the shared 2 cores
@pytest.mark.parametrize("name", sorted(public_suite.ARCHITECTURES))
def test_definition_builds_and_exports(name):
    module, inputs = public_suite.build(name, tiny=True)
    assert not module.training
    batch_norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert all(int(m.num_batches_tracked) > 0 for m in batch_norms)  # calibrated
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    onnx.checker.check_model(model)
    feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = module(*inputs).numpy()
    got = session.run(None, feeds)[0]
    scale = float(np.abs(expected).max())
    assert scale > 0 and np.isfinite(expected).all()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * scale)
    # Alive: another input moves the output by more than the checks' tolerance. A net whose
    # activations vanish answers every input with its classifier's bias, which every
    # comparison passes (the suite's MobileNetV2 did, with weakly calibrated BatchNorm).
    generator = torch.Generator().manual_seed(1)
    other = tuple(torch.randn(x.shape, generator=generator) if x.is_floating_point()
                  else torch.randint(0, int(x.max()) + 1, x.shape, generator=generator) for x in inputs)
    with torch.no_grad():
        moved = float(np.abs(module(*other).numpy() - expected).max())
    assert moved > 1e-2 * scale, f"the output moved by {moved / scale:.1e} of its scale with another input"


def test_the_table_reports_ratios_and_failures():
    rows = [{"model": "a", "tilecraft_ms": 2.0, "onnxruntime_ms": 1.0, "pytorch_ms": 4.0, "tilecraft.torch_ms": 2.0,
             "compile_s": 3.0, "cached_s": 0.1, "compile_rss_mb": 100, "ok": True, "error": 0.0,
             "torch_failed": "aten.as_strided is not supported"},
            {"model": "b", "crashed": "over 900 s"}]
    text = public_suite.table(rows)
    assert "| a |" in text and "2.00" in text and "torch: aten.as_strided" in text and "crashed: over 900 s" in text
    assert "geometric mean tilecraft / onnxruntime: 2.00 over 1 models" in text


def test_held_out_models_are_marked_and_summed_apart():
    assert {"unet", "yolo", "wav2vec_frontend", "lstm", "diffusion_resblocks", "mlp_mixer"} <= {
        a.name for a in public_suite.ARCHITECTURES.values() if a.held_out}
    rows = [{"model": "resnet_basic", "tilecraft_ms": 1.0, "onnxruntime_ms": 1.0},
            {"model": "unet", "tilecraft_ms": 3.0, "onnxruntime_ms": 2.0}]
    text = public_suite.table(rows)
    assert "| unet (held out) |" in text
    assert "geometric mean tilecraft / onnxruntime: 1.00 over 1 models" in text
    assert "held-out models: geometric mean 1.50 over 1; worst 1.50" in text
