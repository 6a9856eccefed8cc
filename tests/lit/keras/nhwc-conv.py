# A Keras CNN keeps its NHWC layout: the importer wraps each convolution and pool in
# Transposes to ONNX's NCHW, and the graph stage's layout pass cancels every pair, leaving
# NHWC convolutions and no transpose. (Two input channels: a one-channel image's first
# convolution is a matmul of its windows, ir/conv.py single_channel_as_matmul.)
# RUN: %PYTHON %s | FileCheck %s

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
from keras import layers  # noqa: E402

import tilecraft  # noqa: E402

keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((8, 8, 2), name="image"),
    layers.Conv2D(4, 3, padding="same", activation="relu"),
    layers.MaxPooling2D(2),
    layers.Conv2D(8, 3, padding="same", activation="relu"),
    layers.Flatten(),
    layers.Dense(3, name="logits"),
])
compiled = tilecraft.compile(model, shape_dict={"image": [2, 8, 8, 2]}, keep_ir=True)

# CHECK-LABEL: STAGE source
# CHECK: func.func @main(%{{.*}}: tensor<2x8x8x2xf32> {{.*}}"image"
# CHECK: linalg.transpose
# CHECK: linalg.conv_2d_nchw_fchw
print("STAGE source")
print(compiled.ir("source"))

# CHECK-LABEL: STAGE graph
# CHECK-NOT: linalg.transpose
# CHECK: linalg.conv_2d_nhwc_hwcf
# CHECK-NOT: linalg.transpose
# CHECK: linalg.conv_2d_nhwc_hwcf
# CHECK-NOT: linalg.transpose
# CHECK: return
print("STAGE graph")
print(compiled.ir("graph"))
