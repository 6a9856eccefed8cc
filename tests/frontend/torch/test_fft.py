"""Complex tensors and the FFT family through ``tilecraft.torch.compile``, against eager.

Inside the graph complex values are real pairs (ir/complex_pairs.py), the
transforms dense DFT contractions (ir/dft.py); compiled modules take and return
complex64/complex128 tensors. Bad input (a dim out of range, ``n=0``, ``chalf``, a size
above the DFT limit, an op on complex tensors without a handler) is a typed error.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.torch
from tilecraft.errors import TorchImportError
from tilecraft.ir import dft
from torch_testing import Lambda, check


def test_rfft_abs_irfft_round_trip():
    """A magnitude spectrum back to a signal: real in, complex inside, real out."""
    torch.manual_seed(0)
    check(lambda x: torch.fft.irfft(torch.fft.rfft(x).abs(), n=x.shape[-1]), torch.randn(3, 32))


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_complex_in_complex_out(norm):
    """complex64 arguments and results cross the module boundary as numpy complex64."""
    torch.manual_seed(1)
    z = torch.randn(4, 10, dtype=torch.complex64)
    compiled = check(lambda v: torch.fft.fft(v, norm=norm), z)
    result = compiled(z)
    assert result.dtype == torch.complex64


def test_ifft_of_complex128():
    torch.manual_seed(2)
    check(lambda v: torch.fft.ifft(v, n=12, dim=0), torch.randn(9, 3, dtype=torch.complex128))


def test_fft2_fftn_rfftn_irfftn():
    torch.manual_seed(3)
    x = torch.randn(2, 6, 8)
    check(lambda v: (torch.fft.fft2(v), torch.fft.rfftn(v, dim=(0, 2)),
                     torch.fft.irfftn(torch.fft.rfftn(v), s=v.shape)), x)


def test_hermitian_transforms():
    torch.manual_seed(4)
    x = torch.randn(5, 7)
    check(lambda v: (torch.fft.hfft(torch.complex(v, v * 0.5)), torch.fft.ihfft(v, n=9).resolve_conj()), x)


def test_odd_and_padded_sizes():
    """``n`` larger than the input pads with zeros, smaller trims; odd sizes keep n // 2 + 1 bins."""
    torch.manual_seed(5)
    x = torch.randn(2, 7)
    check(lambda v: (torch.fft.rfft(v, n=11), torch.fft.rfft(v, n=4), torch.fft.irfft(torch.fft.rfft(v), n=7)), x)


def test_stft_magnitude():
    torch.manual_seed(6)
    window = torch.hann_window(16)
    check(lambda v: torch.stft(v, n_fft=16, hop_length=4, window=window, center=False, return_complex=True).abs(),
          torch.randn(2, 64))


def test_complex_construction():
    torch.manual_seed(7)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    check(lambda r, t: (torch.polar(r.abs(), t), torch.complex(r, t), torch.view_as_complex(
        torch.stack([r, t], -1)), r.to(torch.complex128), torch.conj_physical(torch.complex(r, t))),
          a, b)


def test_dynamic_batch():
    """Only the transformed dims need static sizes (the twiddle matrix is a constant)."""
    compiled = tilecraft.torch.compile(Lambda(lambda v: torch.fft.rfft(v).abs()).eval(), (torch.randn(2, 16),),
                                       dynamic_shapes={"args": ({0: torch.export.Dim("batch")},)})
    x = torch.randn(5, 16)
    np.testing.assert_allclose(compiled(x).numpy(), torch.fft.rfft(x).abs().numpy(), rtol=1e-4, atol=1e-5)


def _compile(fn, *inputs, **kwargs):
    return tilecraft.torch.compile(Lambda(fn).eval(), inputs, **kwargs)


def test_dim_out_of_range_is_typed():
    with pytest.raises(TorchImportError, match="out of range"):
        _compile(lambda v: torch.fft.fft(v, dim=3), torch.randn(4, 8))


def test_zero_points_is_typed():
    with pytest.raises(TorchImportError, match=r"Invalid number of data points \(0\)"):
        _compile(lambda v: torch.fft.rfft(v, n=0), torch.randn(4, 8))


def test_chalf_is_refused_with_a_reason():
    with pytest.raises(TorchImportError, match=r"complex32 \(chalf\) is not supported: numpy has no"):
        _compile(lambda v: v.to(torch.chalf), torch.randn(4, 8))


def test_size_above_the_dft_limit_is_typed():
    with pytest.raises(TorchImportError, match=f"limited to {dft.MAX_DFT_SIZE} points"):
        _compile(lambda v: torch.fft.rfft(v), torch.randn(1, 2 * dft.MAX_DFT_SIZE))


def test_dynamic_transformed_dim_is_typed():
    with pytest.raises(TorchImportError, match="must have a static size"):
        _compile(lambda v: torch.fft.rfft(v), torch.randn(2, 16),
                 dynamic_shapes={"args": ({1: torch.export.Dim("n")},)})


def test_complex_op_without_handler_is_refused_by_name():
    """A real handler never sees pairs: an op on complex tensors without a complex handler
    is refused under its ``complex:`` name."""
    with pytest.raises(TorchImportError, match=r"complex:aten\.exp\.default"):
        _compile(lambda v: torch.exp(torch.fft.rfft(v)), torch.randn(1, 16))


def test_complex_argument_checked_at_call():
    compiled = _compile(lambda v: torch.fft.fft(v), torch.randn(4, dtype=torch.complex64))
    with pytest.raises(tilecraft.TilecraftError, match="complex64"):
        compiled(torch.randn(4, dtype=torch.complex128))


def test_spectral_filter_arithmetic():
    """A learned complex filter on a spectrum (FNO/GFNet style): complex * complex, +, -, /,
    and complex with real operands and Python numbers."""
    torch.manual_seed(8)
    x, w = torch.randn(3, 16), torch.randn(9, dtype=torch.complex64)
    check(lambda v, f: (torch.fft.irfft(torch.fft.rfft(v) * f, n=16), torch.fft.rfft(v) - 2 * f,
                        torch.fft.rfft(v) / (f + 1), torch.fft.rfft(v) * v[:, :9], 1 - torch.fft.rfft(v)), x, w)
