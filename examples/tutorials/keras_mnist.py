"""TVM's Keras MNIST tutorial with tilecraft: a Sequential CNN built and trained with Keras,
compiled with ``tilecraft.compile(model)`` (TVM: ``relay.frontend.from_keras(model,
shape_dict)``), and its accuracy on the held-out images equal to Keras' own ``predict``.

The images are scikit-learn's bundled 8x8 digits (no download), NHWC as Keras has them.

    python examples/tutorials/keras_mnist.py --epochs 15
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up chatter

import numpy as np


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and held-out splits: (N, 8, 8, 1) float32 images in [0, 1], integer labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]
    return train_test_split(images, data.target, test_size=0.25, random_state=0, stratify=data.target)


def mnist_cnn():
    """The tutorial's convnet (Keras' MNIST example), sized for 8x8 images."""
    import keras
    from keras import layers

    return keras.Sequential([
        keras.Input(shape=(8, 8, 1), name="image"),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(10, activation="softmax", name="digit"),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()

    import keras

    import tilecraft

    keras.utils.set_random_seed(0)
    train_x, test_x, train_y, test_y = digits()
    model = mnist_cnn()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(train_x, train_y, batch_size=32, epochs=args.epochs, verbose=0)

    # TVM: relay.frontend.from_keras(model, shape_dict); the input is named after its layer.
    shape_dict = {"image": [len(test_x), 8, 8, 1]}
    start = time.perf_counter()
    compiled = tilecraft.compile(model, shape_dict=shape_dict)
    print(f"compiled the Keras model in {time.perf_counter() - start:.1f} s: {compiled.signature}")

    ours = np.asarray(compiled(test_x))
    theirs = model.predict(test_x, verbose=0)
    ours_accuracy = float(np.mean(ours.argmax(axis=1) == test_y))
    keras_accuracy = float(np.mean(theirs.argmax(axis=1) == test_y))
    print(f"held-out images: {len(test_y)}")
    print(f"keras accuracy:     {keras_accuracy:.4f}")
    print(f"tilecraft accuracy: {ours_accuracy:.4f}")
    print(f"max |tilecraft - keras| probability: {float(np.max(np.abs(ours - theirs))):.2e}")
    if ours_accuracy != keras_accuracy:
        raise SystemExit("the accuracies differ")
    print("accuracy equal: yes")


if __name__ == "__main__":
    main()
