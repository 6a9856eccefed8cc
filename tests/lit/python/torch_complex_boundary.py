# A complex64 argument and result keep their type at the module boundary
# (tensor<...xcomplex<f32>>, numpy's layout); inside, the value is a tensor<...x2xf32> of
# pairs, made and unmade by tensor.generate, and the DFT is one 2-d matmul of the pairs
# (merged with the transformed dim by a reshape) by a [n * 2, k * 2] twiddle constant
# (ir/dft.py).
# RUN: %PYTHON %s | FileCheck %s

import torch

from tilecraft.frontend.torch import export, import_exported


class Spectrum(torch.nn.Module):
    def forward(self, z):
        return torch.fft.fft(z)


print(import_exported(export(Spectrum().eval(), (torch.zeros(3, 8, dtype=torch.complex64),))))

# CHECK-LABEL: func.func @main
# CHECK-SAME: tensor<3x8xcomplex<f32>>
# CHECK-SAME: -> tensor<3x8xcomplex<f32>>
# CHECK: tensor.generate
# CHECK: complex.re
# CHECK: complex.im
# CHECK: tensor<3x8x2xf32>
# CHECK: tensor.collapse_shape {{.*}} : tensor<3x8x2xf32> into tensor<3x16xf32>
# CHECK: linalg.matmul ins({{.*}} : tensor<3x16xf32>, tensor<16x16xf32>)
# CHECK: tensor.expand_shape {{.*}} : tensor<3x16xf32> into tensor<3x8x2xf32>
# CHECK: tensor.generate
# CHECK: complex.create
# CHECK: return {{.*}} : tensor<3x8xcomplex<f32>>
