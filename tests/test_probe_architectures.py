"""benchmarks/probe_architectures.py's definitions build and run in eager PyTorch; the probe
itself (compile, compare, time) is a benchmark with no thresholds."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_architectures  # noqa: E402


def test_the_probe_lists_its_models():
    assert len(probe_architectures.MODELS) >= 30
    with pytest.raises(SystemExit):
        probe_architectures.main(["--only", "no_such_model"])


@pytest.mark.parametrize("name", ["video3d", "topk_head", "cumsum_long", "vae_decoder", "text_encoder"])
def test_the_models_behind_round_30s_fixes_run_in_eager(name):
    build, make_inputs = probe_architectures.MODELS[name]
    torch.manual_seed(0)
    with torch.no_grad():
        out = build().eval()(*make_inputs())
    assert all(torch.isfinite(t).all() for t in (out if isinstance(out, tuple) else (out,)) if t.is_floating_point())
