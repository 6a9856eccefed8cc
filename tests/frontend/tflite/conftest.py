import mlir.ir  # noqa: F401  (before TensorFlow: MLIR's libraries loaded after TensorFlow's crash the process)
import pytest


@pytest.fixture(scope="session")
def tflite_folder(tmp_path_factory):
    """Where this session's converted models are cached."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tflite")
    return tmp_path_factory.mktemp("tflite")
