import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).parent))
