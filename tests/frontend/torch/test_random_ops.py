"""Random-sampling ATen ops (frontend/torch/ops/random.py): a compiled random op draws from
PyTorch's default CPU generator at call time, so ``torch.manual_seed(s); compiled(x)`` equals
``torch.manual_seed(s); module(x)`` draw for draw (bit for bit), leaves the generator in
eager's state, and two calls draw differently. Targets that cannot call Python refuse the
model naming the op. OpInfo's samples: tests/conformance/torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.torch
from tilecraft.errors import CTargetUnsupportedOpError, ExternError, GpuScheduleError, TorchImportError
from torch_testing import Lambda

FAMILIES = {
    "bernoulli": lambda x: (torch.bernoulli(x), torch.bernoulli(x, 0.25), (x > 0.5).float().bernoulli()),
    "normal": lambda x: (torch.normal(x, 0.5), torch.normal(1.5, x + 0.1), torch.normal(x, x + 0.1),
                         torch.empty_like(x).normal_(2.0, 3.0)),
    "uniform_and_friends": lambda x: (torch.empty_like(x).uniform_(-2, 3), x.clone().cauchy_(),
                                      x.clone().exponential_(2.0), x.clone().geometric_(0.3),
                                      x.clone().log_normal_()),
    "like": lambda x: (torch.rand_like(x), torch.randn_like(x, dtype=torch.float64),
                       torch.randint_like(x, 3, 9), torch.randint_like(x, 5)),
    # x[0, 0], not x.sum(): a float sum's order may differ from eager's in the last bit for
    # some (unseeded) x, and this compares the draws bit for bit, not summation orders.
    "factories": lambda x: (torch.rand(3, 5) + x[0, 0], torch.randn(2, 2, dtype=torch.float64),
                            torch.randint(0, 10, (4,)), torch.randperm(7)),
    "multinomial": lambda x: (torch.multinomial(x, 3), torch.multinomial(x, 9, replacement=True)),
    "rrelu": lambda x: F.rrelu(x - 0.5, training=True),
    "dropout": lambda x: (F.dropout(x, 0.3, training=True) * 2, F.dropout(x, 0.0, training=True),
                          F.dropout(x, 1.0, training=True), F.alpha_dropout(x, 0.4, training=True),
                          F.feature_alpha_dropout(x.unsqueeze(0), 0.5, training=True)),
}


def _seeded(function, *inputs: torch.Tensor, seed: int = 7):
    """``function``'s outputs after ``torch.manual_seed(seed)``, and a draw made right after
    (which tells whether the generator was left where eager leaves it)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        result = function(*inputs)
    return result, torch.rand(4)


def _assert_equal(got, expected) -> None:
    got_leaves, expected_leaves = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for index, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        assert g.dtype == e.dtype and g.shape == e.shape, (index, g.dtype, e.dtype, g.shape, e.shape)
        assert torch.equal(g, e), f"output {index} differs from eager: {g} vs {e}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_seeded_compiled_draws_equal_eager_bit_for_bit(family):
    module = Lambda(FAMILIES[family]).eval()
    x = torch.rand(4, 6)
    compiled = tilecraft.torch.compile(module, (x,))
    expected, after_eager = _seeded(module, x)
    got, after_compiled = _seeded(compiled, x)
    _assert_equal(got, expected)
    assert torch.equal(after_compiled, after_eager), "the generator is not where eager leaves it"


def test_draws_keep_program_order_and_an_unused_draw_still_advances_the_generator():
    def two_draws(x):
        torch.rand_like(x)  # unused: eager still draws it
        first = torch.rand_like(x)
        second = torch.rand_like(x)
        return second - first, first

    module = Lambda(two_draws).eval()
    x = torch.zeros(3, 8)
    compiled = tilecraft.torch.compile(module, (x,))
    assert compiled.ir("input").count("call @torch_random_rand_like") == 3
    (difference, first), _ = _seeded(compiled, x)
    _assert_equal((difference, first), _seeded(module, x)[0])
    assert not torch.equal(difference, torch.zeros_like(difference)), "two rand_like gave one draw"


def test_two_calls_draw_differently_and_a_reseed_repeats_them():
    module = Lambda(lambda x: torch.bernoulli(x) + torch.randn_like(x)).eval()
    x = torch.full((16, 16), 0.5)
    compiled = tilecraft.torch.compile(module, (x,))
    torch.manual_seed(11)
    first, second = compiled(x), compiled(x)
    assert not torch.equal(first, second)
    torch.manual_seed(11)
    _assert_equal(compiled(x), first)


def test_deterministic_parts_stay_compiled():
    """Only the draw is PyTorch's: dropout's scaling and multiply and pca_lowrank's QR and
    SVD are compiled code around the extern call."""
    x = torch.randn(8, 5)
    dropout = tilecraft.torch.compile(Lambda(lambda x: F.dropout(x, 0.25, training=True)).eval(), (x,))
    source = dropout.ir("source")
    assert source.count("call @torch_random_") == 1 and "linalg.generic" in source and "arith.divf" in source
    lowrank = Lambda(lambda a: torch.pca_lowrank(a, q=3)).eval()
    compiled = tilecraft.torch.compile(lowrank, (x,))
    assert "torch_random_randn_default" in compiled.ir("source")
    assert "call @tilecraft_torch_lapack_" in compiled.ir("source") or "call @tilecraft_lapack_" in compiled.ir("source")
    got, _ = _seeded(compiled, x)
    expected, _ = _seeded(lowrank, x)
    for g, e in zip(got, expected):  # LAPACK may round differently from eager's
        np.testing.assert_allclose(g.abs().numpy(), e.abs().numpy(), rtol=1e-4, atol=1e-5)


class MonteCarloDropout(torch.nn.Module):
    """A model in eval mode whose dropout layers are in train mode (Monte Carlo dropout)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.drop2d = torch.nn.Dropout2d(0.3)
        self.linear = torch.nn.Linear(8 * 6 * 6, 32)
        self.act = torch.nn.RReLU()
        self.drop = torch.nn.Dropout(0.5)
        self.alpha = torch.nn.AlphaDropout(0.2)

    def forward(self, x):
        x = self.drop2d(torch.relu(self.conv(x)))
        dropped = self.drop(self.act(self.linear(x.flatten(1))))
        return dropped, self.alpha(dropped)


def test_dropout_layers_in_train_mode_mask_and_scale_like_eager():
    module = MonteCarloDropout().eval()
    for layer in (module.drop2d, module.act, module.drop, module.alpha):
        layer.train()
    x = torch.randn(4, 3, 6, 6)
    compiled = tilecraft.torch.compile(module, (x,))
    got, after_compiled = _seeded(compiled, x)
    expected, after_eager = _seeded(module, x)
    # the masks are eager's exactly; the convolution and the linear layer are compiled
    for g, e in zip(got, expected):
        assert torch.equal(g == 0, e == 0)
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
    assert torch.equal(after_compiled, after_eager)
    assert 0.3 < (got[0] == 0).float().mean() < 0.8  # Dropout(0.5) after RReLU and Dropout2d


def test_a_module_in_training_mode_is_still_refused_by_name():
    """Only layers whose training mode means drawing at random may be in it."""
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    with pytest.raises(TorchImportError, match=r"training mode \(Sequential, 0\): .*call module.eval\(\)"):
        tilecraft.torch.compile(module, (torch.rand(2, 4),))


@pytest.mark.parametrize("target, error", [("c", CTargetUnsupportedOpError), ("cuda", GpuScheduleError)])
def test_targets_without_python_refuse_a_random_op_naming_it(target, error):
    module = Lambda(lambda x: x * torch.rand_like(x)).eval()
    with pytest.raises(error, match=r"cannot call Python.*rand_like\(aten\.rand_like\.default\)"):
        tilecraft.torch.compile(module, (torch.rand(2, 3),), target=target)


def test_a_package_refuses_a_random_op_naming_it(tmp_path):
    module = Lambda(lambda x: torch.bernoulli(x)).eval()
    with pytest.raises(ExternError, match="Python extern function.*torch_random_bernoulli_default"):
        tilecraft.torch.compile(module, (torch.rand(2, 3),), package_path=tmp_path / "random.tar")
    assert not (tmp_path / "random.tar").exists()


def test_float16_and_int16_draws_equal_eager():
    module = Lambda(lambda x, i: (torch.rand_like(x), F.dropout(x, 0.5, training=True),
                                  torch.randint_like(i, 100), torch.normal(x, 1.0))).eval()
    inputs = (torch.rand(5, 7, dtype=torch.float16), torch.zeros(5, dtype=torch.int16))
    compiled = tilecraft.torch.compile(module, inputs)
    _assert_equal(_seeded(compiled, *inputs)[0], _seeded(module, *inputs)[0])


def test_a_dtype_the_extern_cannot_carry_is_a_typed_error():
    """bfloat16 has no extern element type (runtime/extern.py): refused by name."""
    import ml_dtypes

    from tilecraft.errors import OperandTypeError
    from tilecraft.frontend.torch.ops import random as random_ops

    with pytest.raises(OperandTypeError, match="rand_like.default: dtype bfloat16 cannot be passed"):
        random_ops._carrier(np.dtype(ml_dtypes.bfloat16), "rand_like.default")


# The pooling reads its windows at computed positions (a gather): the schedule keeps scalar
# loops and warns, which tests/conftest.py would turn into an error.
@pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")
@pytest.mark.parametrize("pool, x", [
    (lambda x: F.fractional_max_pool2d(x, 3, output_size=(5, 4), return_indices=True), torch.randn(2, 3, 11, 9)),
    (lambda x: F.fractional_max_pool2d(x, (2, 3), output_ratio=(0.5, 0.5), return_indices=True), torch.randn(3, 10, 12)),
    (lambda x: F.fractional_max_pool3d(x, 2, output_size=(3, 4, 1), return_indices=True), torch.randn(2, 2, 7, 8, 5)),
], ids=["2d", "2d-unbatched", "3d"])
def test_fractional_max_pool_draws_its_windows_and_pools_them_compiled(pool, x):
    """The window offsets are a random op (``torch.rand``); the pooling given them is
    compiled (ops/fractional_pool.py) and picks eager's windows, maxima and indices."""
    module = Lambda(pool).eval()
    compiled = tilecraft.torch.compile(module, (x,))
    assert compiled.ir("source").count("call @torch_random_rand_default") == 1
    expected, _ = _seeded(module, x)
    got, _ = _seeded(compiled, x)
    _assert_equal(got, expected)


class Jitter(torch.nn.Module):
    def forward(self, x):
        return x * torch.rand_like(x)


def test_a_random_result_of_dynamic_shape_is_a_typed_error_naming_the_node():
    """The buffer PyTorch's kernel fills is allocated, at its static size, before the call."""
    with pytest.raises(TorchImportError, match=r"node 'rand_like'.*random result of symbolic shape"):
        tilecraft.torch.compile(Jitter().eval(), (torch.rand(4, 3),),
                                dynamic_shapes={"x": {0: torch.export.Dim("batch")}})


def test_an_error_of_the_kernel_at_call_time_is_a_typed_error():
    """A probability outside [0, 1] is eager's error at call time; the compiled call raises
    it as an ExternError naming the draw, with eager's exception chained."""
    compiled = tilecraft.torch.compile(Lambda(lambda p: torch.bernoulli(p)).eval(), (torch.rand(3),))
    with pytest.raises(ExternError, match=r"torch_random_bernoulli_default_\w+' raised RuntimeError") as caught:
        compiled(torch.full((3,), 2.0))
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert compiled(torch.ones(3)).tolist() == [1.0, 1.0, 1.0]


def test_f16_extern_parameters_are_memrefs_only():
    """f16 crosses the extern boundary in buffers (the draws above); ctypes has no half type
    to pass a scalar one by value, so registration refuses it."""
    from tilecraft.errors import ExternSignatureError

    with pytest.raises(ExternSignatureError, match="a scalar f16 is not supported"):
        tilecraft.extern.register_python("half_scalar", print, inputs=["f16"])
    assert "half_scalar" not in tilecraft.extern.registered()


def test_the_torch_compile_backend_draws_like_eager():
    """Dynamo's graphs reach the same handlers: the random ops compile (no eager region,
    whose warning tests/conftest.py would turn into an error) and draw as eager."""
    def noisy(x):
        return F.dropout(x, 0.4, training=True) + torch.rand_like(x) * torch.bernoulli(x)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(noisy, backend="tilecraft")
        x = torch.rand(8, 16)
        _assert_equal(_seeded(compiled, x)[0], _seeded(noisy, x)[0])
    finally:
        torch._dynamo.reset()
