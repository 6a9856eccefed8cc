# The loop an nn.LSTM imports to through the torch route (frontend/torch/ops/recurrent.py):
# aten.lstm kept whole, the input projection X @ W^T for every step one GEMM before the
# loop, one scf.for over time carrying h, c and the stacked outputs, H @ R^T inside.
# RUN: %PYTHON %s | FileCheck %s

import warnings

import torch

from tilecraft.frontend.torch.export import export, import_exported

warnings.filterwarnings("ignore")


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


# CHECK-LABEL: TEST: lstm_one_loop_over_time
# CHECK: func.func @main(%arg0: tensor<6x2x4xf32>
# CHECK: linalg.matmul ins(%{{.*}} : tensor<12x4xf32>, tensor<4x32xf32>)
# CHECK: %[[T:.*]] = arith.constant 6 : index
# CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]] step %{{.*}} iter_args({{.*}}) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<6x2x8xf32>)
# CHECK-NOT: tensor<12x4xf32>
# CHECK: linalg.matmul ins(%{{.*}} : tensor<2x8xf32>, tensor<8x32xf32>)
# CHECK: math.tanh
# CHECK: scf.yield
# CHECK-NOT: scf.for
# CHECK: return
@run
def lstm_one_loop_over_time():
    torch.manual_seed(0)
    module = torch.nn.LSTM(4, 8).eval()
    print(import_exported(export(module, (torch.randn(6, 2, 4),))))


# Two layers, both directions: one loop per layer and direction, whatever the length.
# CHECK-LABEL: TEST: gru_two_layers_bidirectional
# CHECK-COUNT-4: scf.for
# CHECK-NOT: scf.for
# CHECK: return
@run
def gru_two_layers_bidirectional():
    torch.manual_seed(0)
    module = torch.nn.GRU(4, 8, num_layers=2, bidirectional=True, batch_first=True).eval()
    print(import_exported(export(module, (torch.randn(2, 40, 4),))))
