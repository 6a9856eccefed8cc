"""Every TOPI operator against numpy / PyTorch at two shapes, one with a symbolic extent where
the operator allows it (TVM's ``te.var``); built with the default schedule."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tilecraft import topi
import tilecraft.scheduling as te

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return (RNG.random(shape) * 2 - 1).astype(dtype)


def run(inputs, output, *arrays):
    return te.build(te.Schedule(list(inputs) + [output]))(*arrays)


def close(actual, expected, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=rtol, atol=atol)


N = te.var("n")


def shape_of(shape, symbolic):
    """``shape`` with its first extent the var ``n`` when ``symbolic``."""
    return ((N,) + tuple(shape[1:])) if symbolic else tuple(shape)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("op, fn", [
    (topi.add, np.add), (topi.subtract, np.subtract), (topi.multiply, np.multiply), (topi.divide, np.divide)])
def test_broadcasting_binary_ops(op, fn, symbolic):
    A = te.placeholder(shape_of((4, 3, 5), symbolic), name="A")
    B = te.placeholder((3, 1), name="B")
    a, b = rand(4, 3, 5), rand(3, 1) + 2.0
    close(run([A, B], op(A, B), a, b), fn(a, b))
    close(run([A], op(A, 2.0), a), fn(a, 2.0))


def test_tensor_operators_broadcast():
    A = te.placeholder((2, 3), name="A")
    B = te.placeholder((3,), name="B")
    a, b = rand(2, 3), rand(3) + 2.0
    close(run([A, B], (A + B) * 2.0 - A / B, a, b), (a + b) * 2.0 - a / b)
    close(run([A], 1.0 - A, a), 1.0 - a)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axis, keepdims", [(1, False), ((0, 2), True), (None, False)])
def test_reductions(name, axis, keepdims, symbolic):
    A = te.placeholder(shape_of((4, 3, 5), symbolic), name="A")
    a = rand(4, 3, 5)
    expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    out = run([A], getattr(topi, name)(A, axis=axis, keepdims=keepdims), a)
    close(out, np.reshape(expected, out.shape))


@pytest.mark.parametrize("shape, newshape", [((4, 6), (3, 8)), ((2, 3, 4), (-1, 2))])
def test_reshape(shape, newshape):
    A = te.placeholder(shape, name="A")
    a = rand(*shape)
    close(run([A], topi.reshape(A, newshape), a), a.reshape(newshape))


def test_reshape_keeps_a_symbolic_batch():
    A = te.placeholder((N, 3, 4), name="A")
    a = rand(5, 3, 4)
    close(run([A], topi.reshape(A, (N, -1)), a), a.reshape(5, 12))
    close(run([A], topi.reshape(A, (N, 2, 6)), a), a.reshape(5, 2, 6))
    with pytest.raises(te.ScheduleError, match="symbolic extents may only be leading dims kept"):
        topi.reshape(A, (-1, 4))


@pytest.mark.parametrize("symbolic", [False, True])
def test_transpose(symbolic):
    A = te.placeholder(shape_of((2, 3, 4), symbolic), name="A")
    a = rand(2, 3, 4)
    close(run([A], topi.transpose(A, (1, 2, 0)), a), a.transpose(1, 2, 0))
    close(run([A], topi.transpose(A), a), a.transpose())


@pytest.mark.parametrize("symbolic", [False, True])
def test_concatenate_and_split(symbolic):
    A = te.placeholder(shape_of((2, 3), symbolic), name="A")
    B = te.placeholder(shape_of((2, 5), symbolic), name="B")
    a, b = rand(2, 3), rand(2, 5)
    close(run([A, B], topi.concatenate([A, B, A], axis=1), a, b), np.concatenate([a, b, a], axis=1))
    C = te.placeholder(shape_of((3, 6), symbolic), name="C")
    c = rand(3, 6)
    parts = topi.split(C, [1, 4], axis=1)
    for part, expected in zip(parts, np.split(c, [1, 4], axis=1)):
        close(run([C], part, c), expected)
    halves = topi.split(C, 2, axis=1)
    close(run([C], halves[1], c), c[:, 3:])


@pytest.mark.parametrize("symbolic", [False, True])
def test_take(symbolic):
    A = te.placeholder((5, 3), name="A")
    I = te.placeholder(shape_of((4,), symbolic), name="I", dtype="int64")
    a, i = rand(5, 3), np.array([4, 0, 2, 7], dtype=np.int64)  # 7 clips to 4 (mode="clip")
    close(run([A, I], topi.take(A, I, axis=0), a, i), np.take(a, i, axis=0, mode="clip"))
    close(run([A, I], topi.take(A, I), a, i), np.take(a, i, mode="clip"))


@pytest.mark.parametrize("symbolic", [False, True])
def test_where(symbolic):
    C = te.placeholder(shape_of((4, 3), symbolic), name="C", dtype="bool")
    X = te.placeholder(shape_of((4, 3), symbolic), name="X")
    Y = te.placeholder((3,), name="Y")
    c, x, y = rand(4, 3) > 0, rand(4, 3), rand(3)
    close(run([C, X, Y], topi.where(C, X, Y), c, x, y), np.where(c, x, y))
    close(run([C, X], topi.where(C, X, 0.0), c, x), np.where(c, x, 0.0))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("name", ["relu", "gelu", "sigmoid", "tanh"])
def test_activations(name, symbolic):
    X = te.placeholder(shape_of((3, 17), symbolic), name="X")
    x = rand(3, 17) * 4
    expected = getattr(F, name)(torch.from_numpy(x)).numpy()
    close(run([X], getattr(topi.nn, name)(X), x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True])
def test_pad(symbolic):
    X = te.placeholder(shape_of((2, 3, 4), symbolic), name="X")
    x = rand(2, 3, 4)
    close(run([X], topi.nn.pad(X, (0, 1, 2), (0, 2, 0), pad_value=-1.5), x),
          np.pad(x, ((0, 0), (1, 2), (2, 0)), constant_values=-1.5))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, (1, 2), 2, 1), (2, (0, 1, 1, 0), 1, 2), (1, 1, 1, 4)])
def test_conv2d(layout, stride, padding, dilation, groups, symbolic):
    n, c, h, w, k, kh = 2, 4, 9, 8, 8, 3
    x, wt = rand(n, c, h, w), rand(k, c // groups, kh, kh)
    pads = (padding,) * 4 if isinstance(padding, int) else padding * 2 if len(padding) == 2 else padding
    top, left, bottom, right = pads
    xt = F.pad(torch.from_numpy(x), (left, right, top, bottom))
    expected = F.conv2d(xt, torch.from_numpy(wt), stride=stride, dilation=dilation, groups=groups).numpy()
    if layout == "NCHW":
        X = te.placeholder(shape_of((n, c, h, w), symbolic), name="X")
        W = te.placeholder(wt.shape, name="W")
        out = run([X, W], topi.nn.conv2d(X, W, stride, padding, dilation, groups=groups), x, wt)
    else:
        X = te.placeholder(shape_of((n, h, w, c), symbolic), name="X")
        W = te.placeholder((kh, kh, c // groups, k), name="W")
        y = topi.nn.conv2d(X, W, stride, padding, dilation, data_layout="NHWC", groups=groups)
        out = run([X, W], y, x.transpose(0, 2, 3, 1).copy(), wt.transpose(2, 3, 1, 0).copy())
        out = out.transpose(0, 3, 1, 2)
    close(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("stride, padding, output_padding", [(1, 0, 0), (2, 1, 1)])
def test_conv2d_transpose(stride, padding, output_padding, symbolic):
    x, wt = rand(2, 3, 5, 4), rand(3, 6, 3, 3)
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    W = te.placeholder(wt.shape, name="W")
    y = topi.nn.conv2d_transpose_nchw(X, W, stride, padding, output_padding=(output_padding,) * 2)
    expected = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(wt), stride=stride, padding=padding,
                                  output_padding=output_padding).numpy()
    close(run([X, W], y, x, wt), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("symbolic", [False, True])
def test_dense_and_batch_matmul(symbolic):
    x, w, b = rand(5, 7), rand(6, 7), rand(6)
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    W, B = te.placeholder(w.shape, name="W"), te.placeholder(b.shape, name="B")
    close(run([X, W], topi.nn.dense(X, W), x, w), x @ w.T)
    close(run([X, W, B], topi.nn.dense(X, W, B), x, w, b), x @ w.T + b)
    p, q, r = rand(3, 4, 5), rand(3, 6, 5), rand(1, 5, 6)
    P = te.placeholder(shape_of(p.shape, symbolic), name="P")
    Q = te.placeholder(shape_of(q.shape, symbolic), name="Q")
    close(run([P, Q], topi.nn.batch_matmul(P, Q), p, q), p @ q.transpose(0, 2, 1))
    R = te.placeholder(r.shape, name="R")
    close(run([P, R], topi.nn.batch_matmul(P, R, transpose_b=False), p, r), p @ r)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride, padding, ceil_mode, include_pad", [
    (2, 2, 0, False, True), (3, 2, 1, False, True), (3, 2, 1, True, True), (3, 2, 1, True, False),
    (3, 1, 1, False, False)])
def test_pool2d(pool_type, kernel, stride, padding, ceil_mode, include_pad, symbolic):
    x = rand(2, 3, 10, 9)
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    y = topi.nn.pool2d(X, kernel, stride, 1, (padding,) * 4, pool_type, ceil_mode=ceil_mode,
                       count_include_pad=include_pad)
    xt = torch.from_numpy(x)
    if pool_type == "max":
        expected = F.max_pool2d(xt, kernel, stride, padding, ceil_mode=ceil_mode)
    else:
        expected = F.avg_pool2d(xt, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=include_pad)
    close(run([X], y, x), expected.numpy())


def test_pool2d_and_global_pool_nhwc():
    x = rand(1, 11, 10, 3)
    X = te.placeholder(x.shape, name="X")
    y = topi.nn.pool2d(X, (3, 2), (2, 1), (2, 1), (1, 1, 1, 1), "max", layout="NHWC")
    expected = F.max_pool2d(torch.from_numpy(x.transpose(0, 3, 1, 2)), (3, 2), (2, 1), (1, 1), dilation=(2, 1))
    close(run([X], y, x), expected.numpy().transpose(0, 2, 3, 1))
    for include_pad in (True, False):
        y = topi.nn.pool2d(X, 3, 2, 1, (1, 1, 1, 1), "avg", ceil_mode=True, layout="NHWC",
                           count_include_pad=include_pad)
        expected = F.avg_pool2d(torch.from_numpy(x.transpose(0, 3, 1, 2)), 3, 2, 1, ceil_mode=True,
                                count_include_pad=include_pad)
        close(run([X], y, x), expected.numpy().transpose(0, 2, 3, 1))
    close(run([X], topi.nn.global_pool(X, "avg", layout="NHWC"), x), x.mean(axis=(1, 2), keepdims=True))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_global_pool(pool_type, symbolic):
    x = rand(2, 3, 5, 4)
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    fn = np.max if pool_type == "max" else np.mean
    close(run([X], topi.nn.global_pool(X, pool_type), x), fn(x, axis=(2, 3), keepdims=True))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_and_log_softmax(axis, symbolic):
    x = rand(4, 7) * 10
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    xt = torch.from_numpy(x)
    close(run([X], topi.nn.softmax(X, axis), x), torch.softmax(xt, axis).numpy(), atol=1e-6)
    close(run([X], topi.nn.log_softmax(X, axis), x), torch.log_softmax(xt, axis).numpy())


@pytest.mark.parametrize("symbolic", [False, True])
def test_layer_norm(symbolic):
    x, g, b = rand(3, 4, 8), rand(8), rand(8)
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    G, B = te.placeholder(g.shape, name="G"), te.placeholder(b.shape, name="B")
    expected = F.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(g), torch.from_numpy(b), eps=1e-5)
    close(run([X, G, B], topi.nn.layer_norm(X, G, B, axis=[-1]), x, g, b), expected.numpy())
    G2, B2 = te.placeholder((4, 8), name="G2"), te.placeholder((4, 8), name="B2")
    g2, b2 = rand(4, 8), rand(4, 8)
    expected = F.layer_norm(torch.from_numpy(x), (4, 8), torch.from_numpy(g2), torch.from_numpy(b2))
    close(run([X, G2, B2], topi.nn.layer_norm(X, G2, B2, axis=[1, 2]), x, g2, b2), expected.numpy())


@pytest.mark.parametrize("symbolic", [False, True])
def test_batch_norm_inference(symbolic):
    x = rand(2, 3, 4, 5)
    g, b, m, v = rand(3), rand(3), rand(3), rand(3) + 1.5
    X = te.placeholder(shape_of(x.shape, symbolic), name="X")
    G, B, M, V = (te.placeholder((3,), name=n) for n in "GBMV")
    out, mean, var = topi.nn.batch_norm(X, G, B, M, V)
    assert mean is M and var is V
    expected = F.batch_norm(*(torch.from_numpy(a) for a in (x, m, v, g, b)), training=False, eps=1e-5)
    close(run([X, G, B, M, V], out, x, g, b, m, v), expected.numpy())


def test_flops_count_the_whole_operator():
    X, W = te.placeholder((1, 4, 8, 8), name="X"), te.placeholder((6, 4, 3, 3), name="W")
    y = topi.nn.conv2d(X, W, 1, 0, 1)
    assert y.flops == 2 * 6 * 6 * 6 * 4 * 3 * 3  # one multiply-add per filter tap
    D, V = te.placeholder((5, 7), name="D"), te.placeholder((6, 7), name="V")
    assert topi.nn.dense(D, V).flops == 2 * 5 * 6 * 7
    assert topi.nn.relu(te.placeholder((te.var("n"), 4), name="R")).flops is None  # symbolic


@pytest.mark.parametrize("make, message", [
    (lambda: topi.add(te.placeholder((2, 3)), te.placeholder((4,))), "do not broadcast"),
    (lambda: topi.sum(te.placeholder((2, 3)), axis=2), "out of range"),
    (lambda: topi.reshape(te.placeholder((2, 3)), (4, 2)), "cannot reshape"),
    (lambda: topi.nn.conv2d(te.placeholder((1, 4, 5, 5)), te.placeholder((4, 3, 3, 3)), 1, 0, 1),
     "do not make 1 groups"),
    (lambda: topi.nn.conv2d(te.placeholder((1, 4, 2, 2)), te.placeholder((4, 4, 3, 3)), 1, 0, 1), "does not fit"),
    (lambda: topi.nn.pool2d(te.placeholder((1, 1, 4, 4)), 2, 2, 1, (0, 0, 0, 0), "sum"), "'max' or 'avg'"),
    (lambda: topi.take(te.placeholder((3,)), te.placeholder((2,))), "indices must be integers"),
    (lambda: topi.nn.batch_norm(*[te.placeholder((3,))] * 5, training=True), "training=True"),
    (lambda: topi.nn.conv2d(te.placeholder((1, 4, 5, 5)), te.placeholder((4, 4, 3, 3)), 1, 0, 1,
                            data_layout="NCWH"), "not supported"),
    (lambda: topi.nn.dense(te.placeholder((2, 3)), 5), "must be a Tensor"),
])
def test_bad_arguments_are_schedule_errors(make, message):
    with pytest.raises(te.ScheduleError, match=message):
        make()


def test_topi_is_a_public_name_of_tilecraft():
    import tilecraft
    assert tilecraft.topi is topi and tilecraft.topi.nn.conv2d is topi.nn.conv2d
