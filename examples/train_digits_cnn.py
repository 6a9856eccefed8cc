"""Reproduce the bundled demo model: a small CNN trained on scikit-learn's 8x8 digits.

    .venv/bin/pip install -e '.[train]'        # scikit-learn, torch, onnx
    .venv/bin/python examples/train_digits_cnn.py

Writes ``examples/digits_cnn.onnx`` and ``examples/digits_test.npz`` (the held-out split the
demo classifies: ``images`` float32 [N, 1, 16, 16] and ``labels`` int64 [N]).

The model is in the spirit of the MLC course's: two conv + ReLU + max-pool blocks and two
dense layers, for 1x16x16 inputs (the 8x8 images, scaled to [0, 1] and upsampled 2x by
repeating pixels). Training is deterministic: fixed seeds, ``torch.use_deterministic_algorithms``,
one thread, a fixed split and a seeded batch order, so the same machine reproduces the same
weights. The ONNX graph is written from the trained weights with ``onnx.helper`` (opset 17,
batch dimension dynamic): ``torch.onnx.export`` in torch 2.13 needs onnxscript, which the
project does not depend on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
SEED = 0
SIDE = 16  # model input is SIDE x SIDE: the 8x8 digits upsampled 2x


def preprocess(images: np.ndarray) -> np.ndarray:
    """[N, 64] digits (0..16) -> [N, 1, 16, 16] float32 in [0, 1] (each pixel repeated 2x2)."""
    square = images.reshape(-1, 8, 8).astype(np.float32) / 16.0
    return square.repeat(2, axis=1).repeat(2, axis=2)[:, None, :, :]


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def train(x: np.ndarray, y: np.ndarray, epochs: int) -> DigitsCNN:
    torch.manual_seed(SEED)
    model = DigitsCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    inputs, labels = torch.from_numpy(x), torch.from_numpy(y)
    order = torch.Generator().manual_seed(SEED)
    for epoch in range(epochs):
        permutation = torch.randperm(len(inputs), generator=order)
        for start in range(0, len(inputs), 64):
            batch = permutation[start : start + 64]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs[batch]), labels[batch])
            loss.backward()
            optimizer.step()
    return model.eval()


def to_onnx(model: DigitsCNN) -> onnx.ModelProto:
    """The trained network as an ONNX graph (Conv, Relu, MaxPool, Flatten, Gemm)."""
    weights = {name: p.detach().numpy().copy() for name, p in model.state_dict().items()}
    initializers = [numpy_helper.from_array(array, name) for name, array in weights.items()]
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", **pool),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", **pool),
        helper.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["g1"], name="fc1", transB=1),
        helper.make_node("Relu", ["g1"], ["r3"], name="relu3"),
        helper.make_node("Gemm", ["r3", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializers,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tilecraft examples/train_digits_cnn.py")
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    return proto


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out-dir", type=Path, default=HERE)
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.2, random_state=SEED, stratify=digits.target
    )
    model = train(preprocess(x_train), y_train.astype(np.int64), args.epochs)
    test_images = preprocess(x_test)
    with torch.no_grad():
        predicted = model(torch.from_numpy(test_images)).argmax(1).numpy()
    print(f"PyTorch accuracy on the held-out split: {np.mean(predicted == y_test):.4f} ({len(y_test)} images)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(to_onnx(model), str(args.out_dir / "digits_cnn.onnx"))
    np.savez_compressed(args.out_dir / "digits_test.npz", images=test_images, labels=y_test.astype(np.int64))
    print(f"wrote {args.out_dir / 'digits_cnn.onnx'} and {args.out_dir / 'digits_test.npz'}")


if __name__ == "__main__":
    main()
