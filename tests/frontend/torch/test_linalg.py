"""The linear-algebra family through LAPACK (frontend/torch/ops/linalg.py): what the OpInfo
suite does not reach: bad inputs (a singular or not positive-definite matrix is a typed
run-time error, the ``*_ex`` variants return ``info``; non-square and mismatched inputs are
import errors), float64, broadcast batch dims, a package round trip, the C and CUDA targets' refusals.
Numerics of every op on OpInfo's samples: tests/conformance/torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.runtime as rt
import tilecraft.torch
from tilecraft.errors import CTargetUnsupportedOpError, GpuScheduleError, LinAlgError, RuntimeCheckError, TorchImportError
from torch_testing import Lambda, check

pytest.importorskip("scipy_openblas32")


def _module(fn) -> torch.nn.Module:
    return Lambda(fn).eval()


def _spd(*batch: int, n: int = 4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


def test_solve_inv_det_on_broadcast_batches_in_float64():
    torch.manual_seed(0)
    a = torch.randn(3, 1, 4, 4, dtype=torch.float64)
    b = torch.randn(2, 4, 3, dtype=torch.float64)
    check(lambda a, b: (torch.linalg.solve(a, b), torch.linalg.inv(a), torch.linalg.det(a),
                        torch.linalg.slogdet(a)), a, b)


def test_solve_takes_a_vector_right_hand_side_and_left_false():
    torch.manual_seed(1)
    a = torch.randn(2, 4, 4)
    check(lambda a, b: torch.linalg.solve(a, b), a, torch.randn(2, 4))
    check(lambda a, b: torch.linalg.solve(a, b, left=False), a, torch.randn(2, 3, 4))


def test_a_singular_matrix_to_solve_or_inv_is_a_typed_run_time_error():
    """Eager raises torch.linalg.LinAlgError; the compiled call raises LinAlgError (a
    RuntimeCheckError) naming the op, and works again on a good input."""
    torch.manual_seed(2)
    a, b = torch.randn(2, 3, 3), torch.randn(2, 3, 2)
    compiled = tilecraft.torch.compile(_module(lambda a, b: (torch.linalg.solve(a, b), torch.linalg.inv(a))), (a, b))
    singular = a.clone()
    singular[1, 2] = 0.0  # the second matrix of the batch has a zero row
    with pytest.raises(LinAlgError, match="singular") as raised:
        compiled(singular, b)
    assert isinstance(raised.value, RuntimeCheckError)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.solve(singular, b)
    x, inverse = compiled(a, b)
    torch.testing.assert_close(x, torch.linalg.solve(a, b), rtol=1e-4, atol=1e-5)


def test_cholesky_of_a_matrix_that_is_not_positive_definite():
    """linalg.cholesky raises; cholesky_ex returns LAPACK's info (the order of the minor)."""
    compiled = tilecraft.torch.compile(_module(torch.linalg.cholesky), (_spd(n=3),))
    bad = -torch.eye(3)
    with pytest.raises(LinAlgError, match="positive-definite"):
        compiled(bad)
    ex = tilecraft.torch.compile(_module(torch.linalg.cholesky_ex), (_spd(2, n=3),))
    factor, info = ex(torch.stack([_spd(n=3), bad]))
    expected_factor, expected_info = torch.linalg.cholesky_ex(torch.stack([_spd(n=3), bad]))
    assert info.dtype == torch.int32 and info.tolist() == expected_info.tolist() == [0, 1]


def test_inv_ex_returns_info_for_a_singular_matrix():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    _, info = tilecraft.torch.compile(_module(torch.linalg.inv_ex), (torch.eye(2),))(a)
    assert info.item() == torch.linalg.inv_ex(a).info.item() == 2


def test_det_of_a_singular_matrix_is_zero():
    check(lambda a: (torch.linalg.det(a), torch.linalg.slogdet(a)), torch.tensor([[1.0, 2.0], [2.0, 4.0]]))


@pytest.mark.parametrize("op", [torch.linalg.inv, torch.linalg.det, torch.linalg.cholesky])
def test_a_non_square_matrix_is_an_import_error(op):
    with pytest.raises(TorchImportError, match="square matrices"):
        tilecraft.torch.compile(_module(op), (torch.randn(3, 4),))


def test_integer_inputs_are_refused_by_name():
    with pytest.raises(TorchImportError, match="lu_factor_ex.*float32 or float64"):
        tilecraft.torch.compile(_module(torch.linalg.lu_factor), (torch.ones(3, 3, dtype=torch.int64),))


def test_eigh_and_svd_match_eager_vectors():
    """Vectors are unique only up to sign: the extern calls eager's LAPACK, so signs agree."""
    torch.manual_seed(3)
    s = _spd(2, n=6)
    check(lambda s: torch.linalg.eigh(s), s)
    check(lambda a: torch.linalg.svd(a, full_matrices=False), torch.randn(2, 7, 5))


def test_a_package_of_a_model_calling_lapack_loads_and_runs(tmp_path):
    torch.manual_seed(4)
    a, b = torch.randn(4, 4), torch.randn(4, 2)
    model = _module(lambda a, b: torch.linalg.solve(a, b) + torch.linalg.inv(a).sum())
    compiled = tilecraft.torch.compile(model, (a, b))
    loaded = rt.load_module(compiled.export_library(tmp_path / "solve.tar"))
    np.testing.assert_allclose(loaded(a.numpy(), b.numpy()), model(a, b).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target, error", [("c", CTargetUnsupportedOpError), ("cuda", GpuScheduleError)])
def test_the_c_and_cuda_targets_refuse_lapack_calls_naming_the_op(target, error):
    with pytest.raises(error, match="LAPACK.*_linalg_solve_ex"):
        tilecraft.torch.compile(_module(torch.linalg.solve), (torch.randn(3, 3), torch.randn(3, 1)), target=target)


def test_qr_in_mode_r_returns_an_empty_q_and_eigvalsh_svdvals_no_vectors():
    torch.manual_seed(5)
    check(lambda a: torch.linalg.qr(a, mode="r"), torch.randn(2, 5, 3))
    check(lambda s: (torch.linalg.eigvalsh(s), torch.linalg.svdvals(s)), _spd(3, n=4))
