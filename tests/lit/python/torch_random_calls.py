# Random ops import as calls, in program order, of private declarations of Python externs
# (frontend/torch/ops/random.py): one per op and constant arguments, so two rand_like of
# one input call one declaration twice, and an unused draw stays (its draw moves eager's
# generator). Dropout calls the extern for its keep mask only; the scaling and the multiply
# are a linalg.generic (x * (mask / (1 - p)), eager's order).
# RUN: %PYTHON %s | FileCheck %s

import torch
import torch.nn.functional as F

from tilecraft.frontend.torch import export, import_exported


class Draws(torch.nn.Module):
    def forward(self, x):
        torch.rand_like(x)
        a = torch.rand_like(x)
        b = torch.bernoulli(x, 0.25)
        return F.dropout(a + b, 0.5, training=True)


print(import_exported(export(Draws().eval(), (torch.zeros(2, 3),))))

# CHECK-DAG: func.func private @torch_random_native_dropout_{{[0-9a-f]+}}() -> tensor<2x3xf32>
# CHECK-DAG: func.func private @torch_random_bernoulli_p_{{[0-9a-f]+}}(tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK-DAG: func.func private @[[$RAND:torch_random_rand_like_default_[0-9a-f]+]](tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK-LABEL: func.func @main
# CHECK: call @[[$RAND]](%arg0)
# CHECK: call @[[$RAND]](%arg0)
# CHECK: call @torch_random_bernoulli_p_
# CHECK: arith.addf
# CHECK: %[[MASK:.*]] = call @torch_random_native_dropout_{{[0-9a-f]+}}() : () -> tensor<2x3xf32>
# CHECK: linalg.generic {{.*}} ins({{.*}}, %[[MASK]] : tensor<2x3xf32>, tensor<2x3xf32>)
# CHECK: arith.divf
# CHECK: arith.mulf
