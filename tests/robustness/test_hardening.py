"""Bad input ends in a typed error with one clear line (issue 17), one test per class:
wrong successes (opsets, type errors, target names, records files), untyped library
exceptions (external data, raw data, binary text, missing folders, truncated archives, bad
options), native aborts (int64 overflow, deep nesting) and resource exhaustion (huge folds).
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import (  # noqa: E402
    ArgumentValueError, ModelImportError, OptionError, PipelineError, ResourceLimitError, TargetError,
)
from tilecraft.runtime.limits import check_nesting  # noqa: E402
from tilecraft.runtime.run import load_inputs  # noqa: E402
from tilecraft.tools import opt  # noqa: E402

MATMUL_MLIR = """
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
"""


def matmul_model(opset: int = 17, weight_dtype=np.float32) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.ones((4, 4), weight_dtype), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm0")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def external_weight_model(tmp_path, location: str) -> str:
    model = matmul_model()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_opset_newer_than_supported_names_the_range():
    with pytest.raises(ModelImportError, match=r"opset 99 is newer .*opsets 7\.\.\d+"):
        tilecraft.compile(matmul_model(opset=99))


def test_inputs_of_one_type_variable_with_different_types_name_the_node():
    with pytest.raises(ModelImportError, match=r"node 'mm0' \(MatMul\).*'W' \(INT64\)"):
        tilecraft.compile(matmul_model(weight_dtype=np.int64))


def test_an_element_type_code_onnx_does_not_define_is_named_by_number():
    """Found by the fuzz suite (onnx_bytes, seed 11 case 1432): a flipped byte made an
    input's elem_type 33, and naming it raised protobuf's ValueError."""
    model = matmul_model()
    model.graph.input[0].type.tensor_type.elem_type = 33
    with pytest.raises(ModelImportError, match=r"\(element type 33\) and 'W' \(FLOAT\)"):
        tilecraft.compile(model)


@pytest.mark.parametrize("spec, message", [
    ("llvm -mcpu=notacpu", r"unknown CPU 'notacpu'.*-mcpu=help"),
    ("llvm -mattr=+notafeature", r"unknown CPU feature\(s\) \['\+notafeature'\].*-mcpu=help"),
    ("llvm -mcpu='znver4", r"cannot parse the target.*No closing quotation"),
])
def test_bad_target_names_are_target_errors(spec, message):
    with pytest.raises(TargetError, match=message):
        tilecraft.Target.parse(spec)


def test_known_target_names_still_parse():
    assert tilecraft.Target.parse("llvm -mcpu=znver4 -mattr=+avx512f,-avx2").mcpu == "znver4"


@pytest.mark.parametrize("options, message", [
    ({"pipeline": "builtin.module(canonicalize)"}, r"pipeline must be a tilecraft.Pipeline"),
    ({"opt_level": float("nan")}, r"opt_level must be 0, 1, 2 or 3, got nan"),
    ({"opt_level": -1}, r"opt_level must be"),
    ({"tuning_records": 3}, r"tuning_records must be a path"),
    ({"no_such_option": 1}, r"unknown compile option"),
])
def test_bad_compile_options_are_option_errors(options, message):
    with pytest.raises(OptionError, match=message):
        tilecraft.compile(MATMUL_MLIR, **options)


def test_bad_tune_options_are_tuning_errors():
    with pytest.raises(tilecraft.TilecraftError, match="timeout must be a positive finite"):
        tilecraft.TuneOptions(timeout=float("nan"))
    with pytest.raises(tilecraft.TilecraftError, match="batch_size must be an integer >= 1"):
        tilecraft.TuneOptions(batch_size=-3)


def test_missing_records_file_as_a_pass_option_is_refused(tmp_path):
    source = tmp_path / "in.mlir"
    source.write_text(MATMUL_MLIR)
    stderr = io.StringIO()
    code = opt.run([str(source), f"--tilecraft-schedule=tuning-records={tmp_path}/none.jsonl"],
                   stdout=io.StringIO(), stderr=stderr)
    assert code == 1
    assert "none.jsonl': no such file" in stderr.getvalue()
    with pytest.raises(tilecraft.TilecraftError, match="no such file"):
        tilecraft.compile(MATMUL_MLIR, tuning_records=tmp_path / "none.jsonl")


@pytest.mark.parametrize("location, message", [
    ("../../outside.bin", "points outside the directory"),
    ("/etc/hostname", "should be a relative path"),
    ("missing.bin", "not regular file"),
    ("link.bin", "symbolic link"),
])
def test_external_data_problems_are_import_errors(tmp_path, location, message):
    (tmp_path / "link.bin").symlink_to("/etc/hostname")
    path = external_weight_model(tmp_path, location)
    with pytest.raises(ModelImportError, match=message):
        tilecraft.compile(path)


def test_raw_data_of_the_wrong_length_is_an_import_error():
    model = matmul_model()
    model.graph.initializer[0].raw_data = b"\0" * 7
    with pytest.raises(ModelImportError, match="raw_data size"):
        tilecraft.compile(model)


def run_opt(argv: list[str], stdin: str = "") -> tuple[int, str]:
    """``tilecraft-opt argv``: (exit code, stderr)."""
    stderr = io.StringIO()
    code = opt.run(argv, stdin=io.StringIO(stdin), stdout=io.StringIO(), stderr=stderr)
    return code, stderr.getvalue()


def test_binary_input_and_missing_output_folder_in_tilecraft_opt(tmp_path):
    binary = tmp_path / "bin.mlir"
    binary.write_bytes(b"\xff\xfe\x00binary")
    code, err = run_opt([str(binary)])
    assert code == 1 and "is not UTF-8 text" in err
    # what a surrogateescape stdin makes of bytes that are not UTF-8
    code, err = run_opt(["-"], stdin="\udcff garbage")
    assert code == 1 and "<stdin> is not UTF-8 text" in err
    source = tmp_path / "in.mlir"
    source.write_text(MATMUL_MLIR)
    code, err = run_opt([str(source), "-o", str(tmp_path / "no" / "out.mlir")])
    assert code == 1 and "its folder does not exist" in err


def test_binary_mlir_file_is_an_import_error_in_the_api_and_the_cli(tmp_path, capsys):
    from tilecraft.tools import cli

    binary = tmp_path / "bin.mlir"
    binary.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ModelImportError, match="bin.mlir is not UTF-8 text"):
        tilecraft.compile(binary)
    assert cli.run_cli(["compile", str(binary)]) == 1  # was a UnicodeDecodeError traceback
    assert capsys.readouterr().err.strip().splitlines() == [
        f"tilecraft: error: {binary} is not UTF-8 text (byte 0); MLIR bytecode is read from a .mlirbc file"]


def test_truncated_npz_is_an_argument_error(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.ones(1000))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ArgumentValueError, match="not a readable .npz"):
        load_inputs(path)


def test_element_count_overflowing_int64_is_refused_before_mlir_aborts():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**40, 2**40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**40, 2**40])])
    with pytest.raises(ResourceLimitError, match="more than int64 can count"):
        tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    text = "func.func @main(%a: tensor<4611686018427387904x4xf32>) { return }"
    with pytest.raises(ResourceLimitError, match="more than int64"):
        tilecraft.compile(text)


def test_deep_nesting_is_refused_before_the_parser_overflows_the_stack(tmp_path):
    depth = 20000
    text = ("func.func @main() { " + '"test.op"() ({ ' * depth + "}) : () -> () " * depth + " return }")
    with pytest.raises(ResourceLimitError, match="nests brackets 40001 levels deep.*TILECRAFT_MAX_NESTING"):
        tilecraft.compile(text)
    path = tmp_path / "deep.mlir"
    path.write_text(text)
    code, err = run_opt([str(path)])
    assert code == 1 and "TILECRAFT_MAX_NESTING" in err
    check_nesting('"' + "[" * 5000 + '"  // ' + "{" * 5000)  # strings and comments do not nest


def test_nesting_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("TILECRAFT_MAX_NESTING", "4")
    with pytest.raises(ResourceLimitError, match="limit of 4"):
        check_nesting("a = [[[[[1]]]]]")
    monkeypatch.setenv("TILECRAFT_MAX_NESTING", "lots")
    with pytest.raises(ResourceLimitError, match="TILECRAFT_MAX_NESTING must be a positive size"):
        check_nesting("a")


def test_huge_constant_of_shape_is_not_folded_and_is_refused_at_compile_time():
    """A 4 TiB ConstantOfShape feeding a reduction used to hang in the reference evaluator."""
    shape = numpy_helper.from_array(np.array([2**20, 2**20], np.int64), "s")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"],
                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
         helper.make_node("ReduceSum", ["c"], ["r"], keepdims=0),
         helper.make_node("Add", ["x", "r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
    with pytest.raises(ResourceLimitError, match="per-tensor limit.*TILECRAFT_MAX_TENSOR"):
        tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_fold_limit_leaves_large_results_to_run_time(monkeypatch):
    monkeypatch.setenv("TILECRAFT_MAX_FOLD", "1K")
    shape = numpy_helper.from_array(np.array([64, 64], np.int64), "s")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"],
                          value=numpy_helper.from_array(np.array([2.0], np.float32))),
         helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [shape])
    module = tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = np.ones((64, 64), np.float32)
    np.testing.assert_allclose(module(x), x + 2)


def test_tensor_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("TILECRAFT_MAX_TENSOR", "32")
    with pytest.raises(ResourceLimitError, match="limit of 32"):
        tilecraft.compile(MATMUL_MLIR)
    monkeypatch.delenv("TILECRAFT_MAX_TENSOR")
    assert os.environ.get("TILECRAFT_MAX_TENSOR") is None


@pytest.mark.parametrize("iterators", ["[#linalg.iterator_type<reduction>]", "[3]", '["parallel", 3]'])
def test_iterator_types_of_the_wrong_kind_are_refused_before_mlir_aborts(iterators):
    text = """#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ITERATORS}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""".replace("ITERATORS", iterators)
    with pytest.raises(ModelImportError, match="iterator_types entries must be strings"):
        tilecraft.compile(text)
    assert run_opt(["-"], stdin=text)[0] == 1


def test_initializer_data_longer_than_its_dims_is_an_import_error():
    model = matmul_model()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.float_data.extend([1.0] * 20)
    with pytest.raises(ModelImportError, match="initializer 'W': its data does not fit its shape"):
        tilecraft.compile(model)


class _SpentTuner:
    """A tuner whose space still counts unvisited points (``has_next``) that are all invalid:
    ``next_batch`` finds nothing. A 4x4x4 matmul's space is like that after 51 trials."""

    best_cost = 1.0

    def has_next(self) -> bool:
        return True

    def next_batch(self, size: int) -> list:
        return []


class _SpentTask:
    def __init__(self) -> None:
        self.name, self.count, self.executions, self.task = "spent", 1, 1, self
        self.default_cost = self.best_cost = 1.0
        self.trials, self.failures, self.since_best, self.stopped = 0, 0, 0, False
        self.tuner = _SpentTuner()
        self.peak_gflops = self.bound_gflops = None

    def gflops(self, cost: float) -> float:
        return 1.0

    def headroom(self) -> float:
        return 1.0


def test_tuning_a_spent_space_ends_instead_of_looping():
    """`tilecraft tune` of a small matmul with the default 64 trials looped forever once no
    valid config was left (found by the fuzz suite's cli category, seed 5)."""
    import threading

    from tilecraft.tuning import TaskScheduler, TuneOptions

    task = _SpentTask()
    scheduler = TaskScheduler([task], TuneOptions(trials_per_task=2, batch_size=4, progress=False),
                              run=None, deadline=None)
    thread = threading.Thread(target=scheduler.run, args=(64,), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the task scheduler kept asking a spent tuner for trials"
    assert task.stopped and task.trials == 0
