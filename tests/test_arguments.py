"""How a compiled function takes its arguments: checks and their messages, keyword calls,
non-contiguous and read-only arrays, and the guarantee that inputs are never written."""

import numpy as np
import pytest

import mlir_text as mt
import tilecraft

ADD_NAMED = """
func.func @add(%a: tensor<4x8xf32> {tilecraft.name = "x"}, %b: tensor<4x8xf32> {tilecraft.name = "y"}) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.add ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""

SCALE = """
func.func @scale(%x: tensor<?x8xf32>, %s: f32, %k: i8) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%rows) : tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %kf = arith.sitofp %k : i8 to f32
    %p = arith.mulf %in, %s : f32
    %q = arith.mulf %p, %kf : f32
    linalg.yield %q : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
"""


@pytest.fixture(scope="module")
def add():
    return tilecraft.compile(ADD_NAMED)


@pytest.fixture(scope="module")
def scale():
    return tilecraft.compile(SCALE)


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)


# --- calls that work -----------------------------------------------------------------------

def test_positional_and_keyword_calls(add, rand):
    a, b = rand((4, 8)), rand((4, 8))
    expected = a + b
    np.testing.assert_allclose(add(a, b), expected)
    np.testing.assert_allclose(add(x=a, y=b), expected)
    np.testing.assert_allclose(add(y=b, x=a), expected)
    np.testing.assert_allclose(add(a, y=b), expected)


def test_default_argument_names(rand):
    module = tilecraft.compile(mt.matmul(3, 4, 5))
    assert [spec.name for spec in module.signature.arguments] == ["arg0", "arg1"]
    a, b = rand((3, 5)), rand((5, 4))
    np.testing.assert_allclose(module(arg1=b, arg0=a), a @ b, rtol=1e-5)


def test_scalar_arguments(scale, rand):
    x = rand((3, 8))
    np.testing.assert_allclose(scale(x, 2.0, 3), x * 6, rtol=1e-6)
    np.testing.assert_allclose(scale(x, arg1=np.float32(0.5), arg2=np.int8(-2)), -x, rtol=1e-6)


# --- bad calls: exact exception types, messages naming argument, expected and given -----------

def test_wrong_dtype(add):
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"'y'.*float32.*got float64") as info:
        add(ones((4, 8)), ones((4, 8), np.float64))
    assert isinstance(info.value, TypeError)
    assert "tensor<4x8xf32>" in str(info.value)


def test_wrong_rank(add):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'x'.*rank 2.*tensor<4x8xf32>.*\(4, 8, 1\)") as info:
        add(ones((4, 8, 1)), ones((4, 8)))
    assert isinstance(info.value, ValueError)


def test_wrong_static_dim(add):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'y'.*tensor<4x8xf32>.*\(4, 9\).*dimension 1 is 9, must be 8"):
        add(ones((4, 8)), ones((4, 9)))


def test_wrong_dim_beside_dynamic_dim(scale):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'arg0'.*tensor<\?x8xf32>.*\(3, 9\)"):
        scale(ones((3, 9)), 1.0, 1)


def test_too_many_arguments(add):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"@add takes 2 argument.*x: tensor<4x8xf32>.*got 3"):
        add(ones((4, 8)), ones((4, 8)), ones((4, 8)))


def test_too_few_arguments(add):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"missing argument.*\['y'\].*y: tensor<4x8xf32>"):
        add(ones((4, 8)))


def test_unknown_keyword(add):
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"no argument 'z'.*x: tensor<4x8xf32>, y: tensor<4x8xf32>"):
        add(ones((4, 8)), z=ones((4, 8)))


def test_argument_given_twice(add):
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"argument 'x' given twice"):
        add(ones((4, 8)), ones((4, 8)), x=ones((4, 8)))


def test_list_instead_of_array(add):
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"'x'.*numpy array tensor<4x8xf32>.*got list"):
        add([[1.0] * 8] * 4, ones((4, 8)))


def test_scalar_given_an_array(scale):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'arg1'.*scalar float32.*shape \(3,\)"):
        scale(ones((2, 8)), ones((3,)), 1)


def test_scalar_of_wrong_kind(scale):
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"'arg2'.*scalar int8.*got float"):
        scale(ones((2, 8)), 1.0, 1.5)
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"'arg1'.*scalar float32.*got str"):
        scale(ones((2, 8)), "1.0", 1)
    with pytest.raises(tilecraft.ArgumentTypeError, match=r"'arg2'.*scalar int8.*got int16"):
        scale(ones((2, 8)), 1.0, np.int16(1))


def test_scalar_out_of_range(scale):
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'arg2'.*1000 does not fit in int8"):
        scale(ones((2, 8)), 1.0, 1000)


def test_errors_are_tilecraft_errors(add):
    with pytest.raises(tilecraft.TilecraftError):
        add(ones((4, 8)))


# --- layouts: non-contiguous and read-only arrays --------------------------------------------

def test_transposed_views(rand):
    module = tilecraft.compile(mt.matmul(8, 5, 6))
    a_t, b_t = rand((6, 8)), rand((5, 6))
    a, b = a_t.T, b_t.T  # (8, 6) and (6, 5) views, not C-contiguous
    assert not a.flags.c_contiguous
    np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-5)


def test_strided_and_fortran_arrays(add, rand):
    big = rand((8, 16))
    strided = big[::2, ::2]
    fortran = np.asfortranarray(rand((4, 8)))
    np.testing.assert_allclose(add(strided, fortran), strided + fortran)


def test_unaligned_input(add, rand):
    raw = np.zeros(4 * 8 * 4 + 1, np.uint8)
    a = np.frombuffer(raw.data, np.float32, count=32, offset=1).reshape(4, 8)
    a[...] = rand((4, 8))
    assert not a.flags.aligned
    b = rand((4, 8))
    np.testing.assert_allclose(add(a, b), a + b)


def test_read_only_inputs(add, rand):
    a, b = rand((4, 8)), rand((4, 8))
    a.setflags(write=False)
    b.setflags(write=False)
    np.testing.assert_allclose(add(a, b), a + b)


# --- inputs are never modified ---------------------------------------------------------------

IDENTITY = """
func.func @identity(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}
"""

IN_PLACE_DOUBLE = """
func.func @double(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%a : tensor<4x8xf32>) {
  ^bb0(%out: f32):
    %d = arith.addf %out, %out : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""

IN_PLACE_ACCUMULATE = """
func.func @accumulate(%acc: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%acc : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""

INSERT_INTO_ARGUMENT = """
func.func @insert(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %r = tensor.insert_slice %b into %a[1, 0] [2, 8] [1, 1] : tensor<2x8xf32> into tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""

SCALAR_IDENTITY = """
func.func @identity0d(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}
"""


def _call_keeps_inputs(module, *args):
    """Call ``module``; assert no argument changed; return the result."""
    before = [a.copy() for a in args]
    result = module(*args)
    for original, arg in zip(before, args):
        np.testing.assert_array_equal(arg, original)
    return result


def test_identity_returns_a_copy(rand):
    module = tilecraft.compile(IDENTITY)
    a = rand((4, 8))
    result = _call_keeps_inputs(module, a)
    np.testing.assert_array_equal(result, a)
    assert not np.shares_memory(result, a)
    result[:] = 0  # writing the result leaves the input alone
    assert np.all(a != 0)


def test_0d_identity_returns_a_copy():
    module = tilecraft.compile(SCALAR_IDENTITY)
    a = np.array(3.5, np.float32)
    for _ in range(3):  # once freed wrongly, a later call or the gc would crash
        result = _call_keeps_inputs(module, a)
        assert result.shape == () and result == 3.5
        assert not np.shares_memory(result, a)
    del result
    assert a == 3.5


@pytest.mark.parametrize("text, reference", [
    (IN_PLACE_DOUBLE, lambda a: 2 * a),
])
def test_in_place_generic_leaves_input(rand, text, reference):
    module = tilecraft.compile(text)
    a = rand((4, 8))
    np.testing.assert_allclose(_call_keeps_inputs(module, a), reference(a))
    # Again on a read-only array and on a transposed view.
    frozen = a.copy()
    frozen.setflags(write=False)
    np.testing.assert_allclose(_call_keeps_inputs(module, frozen), reference(frozen))
    view = rand((8, 4)).T
    np.testing.assert_allclose(_call_keeps_inputs(module, view), reference(view))


def test_accumulate_into_argument(rand):
    module = tilecraft.compile(IN_PLACE_ACCUMULATE)
    acc, x = rand((4, 8)), rand((4, 8))
    np.testing.assert_allclose(_call_keeps_inputs(module, acc, x), acc + x)
    # The same array as both arguments.
    np.testing.assert_allclose(_call_keeps_inputs(module, acc, acc), 2 * acc)


def test_insert_slice_into_argument(rand):
    module = tilecraft.compile(INSERT_INTO_ARGUMENT)
    a, b = rand((4, 8)), rand((2, 8))
    expected = a.copy()
    expected[1:3] = b
    np.testing.assert_array_equal(_call_keeps_inputs(module, a, b), expected)


# --- dynamic dimensions that must agree ------------------------------------------------------

def test_dynamic_matmul_rejects_mismatched_inner_dims():
    """Each tensor<?x?xf32> is fine alone; together the matmul needs a.shape[1] == b.shape[0].
    Unchecked, the loops read ``b`` far out of bounds."""
    module = tilecraft.compile(mt.dynamic_matmul())
    with pytest.raises(tilecraft.ArgumentValueError,
                       match=r"'arg1'.*tensor<\?x\?xf32>.*\(2, 3\).*dimension 0 is 2.*dimension 1 of argument 'arg0' \(100000\)"):
        module(ones((4, 100_000)), ones((2, 3)))


def test_dynamic_elementwise_rejects_mismatched_rows(rand):
    body = ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"]
    module = tilecraft.compile(mt.elementwise((None, 8), 2, body))
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'arg1'.*\(3, 8\).*dimension 0 is 3.*'arg0' \(5\)"):
        module(ones((5, 8)), ones((3, 8)))
    a, b = rand((5, 8)), rand((5, 8))
    np.testing.assert_allclose(module(a, b), a + b)


def test_dynamic_dim_fixed_by_a_static_operand():
    text = """
func.func @main(%a: tensor<?x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.mulf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
"""
    module = tilecraft.compile(text)
    with pytest.raises(tilecraft.ArgumentValueError, match=r"'arg0'.*\(7, 4\).*dimension 0 is 7.*needs 3"):
        module(ones((7, 4)), ones((3, 4)))
    np.testing.assert_array_equal(module(ones((3, 4)), 2 * ones((3, 4))), 2 * ones((3, 4)))


# --- checks once the per-signature call frame is warm -----------------------------------------

def test_every_check_still_raises_after_good_calls(add, scale, rand):
    """The call path keeps a per-signature frame layout and a fast path for well-formed
    arrays (runtime/memref.py's CallFrame, TensorSpec.check); neither may skip a check once
    warm. Good and bad calls alternate, so each bad one follows a cached good one."""
    x, y = rand((4, 8)), rand((4, 8))
    bad_calls = [
        (tilecraft.ArgumentTypeError, lambda: add(x.astype(np.float64), y)),
        (tilecraft.ArgumentValueError, lambda: add(x, y[:, :4].copy())),
        (tilecraft.ArgumentValueError, lambda: add(x.reshape(32), y)),
        (tilecraft.ArgumentValueError, lambda: add(x)),
        (tilecraft.ArgumentTypeError, lambda: add(x, list(y))),
        (tilecraft.ArgumentTypeError, lambda: add(x, y=y, x=x)),
    ]
    for error, call in bad_calls:
        np.testing.assert_allclose(add(x, y), x + y)
        with pytest.raises(error):
            call()
    np.testing.assert_allclose(add(x, y), x + y)

    rows = rand((3, 8))
    for error, call in [
        (tilecraft.ArgumentValueError, lambda: scale(rand((3, 7)), 2.0, 1)),
        (tilecraft.ArgumentTypeError, lambda: scale(rows, "2", 1)),
        (tilecraft.ArgumentValueError, lambda: scale(rows, 2.0, 300)),
    ]:
        np.testing.assert_allclose(scale(rows, 2.0, np.int8(3)), rows * 6, rtol=1e-6)
        with pytest.raises(error):
            call()


def test_dynamic_dim_relation_checked_after_good_calls(rand):
    """The matmul's a.shape[1] == b.shape[0] relation is checked on every call, also after
    good calls of other shapes warmed the frame."""
    module = tilecraft.compile(mt.dynamic_matmul())
    for m, k, n in [(2, 3, 4), (5, 1, 2), (2, 3, 4)]:
        a, b = rand((m, k)), rand((k, n))
        np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-5)
        with pytest.raises(tilecraft.ArgumentValueError, match=r"dimension 0 is"):
            module(a, rand((k + 1, n)))
