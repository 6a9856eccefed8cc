"""examples/tutorials/keras_mnist.py (TVM's Keras MNIST tutorial) runs end to end: trained,
compiled, and tilecraft's accuracy equal to Keras' on the held-out digits."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")
pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tutorials" / "keras_mnist.py"


@pytest.mark.slow
def test_keras_mnist_tutorial():
    result = subprocess.run([sys.executable, str(EXAMPLE), "--epochs", "4"], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    keras_accuracy = float(re.search(r"keras accuracy:\s+([0-9.]+)", result.stdout).group(1))
    ours = float(re.search(r"tilecraft accuracy:\s+([0-9.]+)", result.stdout).group(1))
    assert ours == keras_accuracy > 0.5  # trained (10 classes: chance is 0.1) and equal
    assert "accuracy equal: yes" in result.stdout
