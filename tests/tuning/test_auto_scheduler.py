"""tilecraft.auto_scheduler: TVM's register_workload -> SearchTask -> tune -> apply_best on a
user's TE compute, through the model tuner's spaces and records."""

import numpy as np
import pytest
from tilecraft import auto_scheduler
from tilecraft.errors import TuningError
from tilecraft.schedule import te


@auto_scheduler.register_workload
def matmul_bias(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)
    k = te.reduce_axis(L, name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
    out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")
    return [A, B, C, out]


def test_tune_apply_best_and_print_best(tmp_path, capsys):
    records = tmp_path / "matmul_bias.json"
    task = auto_scheduler.SearchTask(func="matmul_bias", args=(64, 64, 64, "float32"), target="llvm")
    assert [t.kind for t in task.tasks] == ["matmul"]  # the matmul with its bias, one tunable op
    options = auto_scheduler.TuningOptions(num_measure_trials=4, verbose=0,
                                           measure_callbacks=[auto_scheduler.RecordToFile(records)])
    result = task.tune(options)
    assert sum(t.trials for t in result.tasks) == 4 and records.is_file()
    func = task.apply_best(records)
    rng = np.random.default_rng(0)
    a, b, c = (rng.random((64, 64), dtype=np.float32) for _ in range(3))
    np.testing.assert_allclose(func(a, b, c), a @ b + c, rtol=1e-4)
    text = task.print_best(records)
    assert "transform.named_sequence" in text and "config" in text
    assert text in capsys.readouterr().out
    # A second run resumes from the records: its trials come on top of the first run's.
    again = task.tune(options)
    assert sum(t.trials for t in again.tasks) >= 4


def test_registration_rules():
    def other(n):
        return [te.placeholder((n,), name="x")]

    with pytest.raises(TuningError, match="takes a function"):
        auto_scheduler.register_workload("not_callable")(42)
    named = auto_scheduler.register_workload("vector_copy")(lambda n: [
        (x := te.placeholder((n,), name="x")), te.compute((n,), lambda i: x[i] * 2.0, name="y")])
    assert auto_scheduler.WORKLOADS["vector_copy"] is named
    with pytest.raises(TuningError, match="already registered"):
        auto_scheduler.register_workload("vector_copy")(other)
    auto_scheduler.register_workload("vector_copy", override=True)(other)


def test_bad_tasks_and_options_are_typed_errors(tmp_path):
    with pytest.raises(TuningError, match="no workload named 'nope'"):
        auto_scheduler.SearchTask(func="nope", args=())
    with pytest.raises(TuningError, match="must return its TE tensors"):
        auto_scheduler.SearchTask(func=lambda: [1, 2], args=())
    task = auto_scheduler.SearchTask(func=matmul_bias, args=(16, 16, 16, "float32"))
    with pytest.raises(TuningError, match="one measure callback"):
        task.tune(auto_scheduler.TuningOptions(num_measure_trials=1))
    with pytest.raises(TuningError, match="no such records file"):
        task.apply_best(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(TuningError, match="holds no record"):
        task.apply_best(tmp_path / "empty.json")
    with pytest.raises(TuningError, match="CPU targets"):
        auto_scheduler.SearchTask(func=matmul_bias, args=(16, 16, 16, "float32"), target="cuda")


def test_a_topi_convolution_is_a_conv2d_task():
    """TOPI's conv2d is a generic reduction in TE; the search task specializes it into the
    named convolution, which the tuner knows (a conv2d task, NHWC, its ReLU fused)."""
    from tilecraft import topi

    def conv_relu(n, c, hw, f):
        x = te.placeholder((n, c, hw, hw), name="x")
        w = te.placeholder((f, c, 3, 3), name="w")
        return [x, w, topi.nn.relu(topi.nn.conv2d(x, w, strides=1, padding=1, dilation=1))]

    task = auto_scheduler.SearchTask(func=conv_relu, args=(1, 16, 14, 16))
    assert "conv2d" in [t.kind for t in task.tasks]
