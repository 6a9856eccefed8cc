"""ONNX models with string tensors (frontend/onnx/string_partition.py, compiler/partitioned.py):
the string nodes run on the host, the numeric rest compiled, segments run in order."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tilecraft
from tilecraft import PartitionedModule
from tilecraft.errors import ArgumentTypeError, ArgumentValueError, HostOpError, OptionError
from tilecraft.frontend.onnx.string_partition import has_string_tensors, split_at_strings

RNG = np.random.default_rng(11)
VOCABULARY = ["good", "bad", "fine", "awful", "great"]
LABELS = ["negative", "neutral", "positive"]


def text_classifier() -> onnx.ModelProto:
    """Words in, class names and scores out: a tokenizer (host), an embedding bag and a
    linear layer (compiled), a label lookup (host)."""
    embedding = RNG.standard_normal((len(VOCABULARY) + 1, 8)).astype(np.float32)
    weight = RNG.standard_normal((8, 3)).astype(np.float32)
    bias = RNG.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("StringNormalizer", ["words"], ["lower"], case_change_action="LOWER",
                         locale="C.UTF-8"),  # en_US, the default, is missing on minimal machines
        helper.make_node("LabelEncoder", ["lower"], ["ids"], domain="ai.onnx.ml",
                         keys_strings=VOCABULARY, values_int64s=list(range(1, len(VOCABULARY) + 1)),
                         default_int64=0),
        helper.make_node("Gather", ["embedding", "ids"], ["vectors"]),
        helper.make_node("ReduceMean", ["vectors", "axes"], ["pooled"], keepdims=1),
        helper.make_node("MatMul", ["pooled", "weight"], ["product"]),
        helper.make_node("Add", ["product", "bias"], ["scores"]),
        helper.make_node("ArgMax", ["scores"], ["best"], axis=1, keepdims=0),
        helper.make_node("LabelEncoder", ["best"], ["label"], domain="ai.onnx.ml",
                         keys_int64s=[0, 1, 2], values_strings=LABELS, default_string="?"),
    ]
    graph = helper.make_graph(
        nodes, "text_classifier",
        [helper.make_tensor_value_info("words", TensorProto.STRING, [5])],
        [helper.make_tensor_value_info("label", TensorProto.STRING, [1]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3])],
        initializer=[numpy_helper.from_array(embedding, "embedding"), numpy_helper.from_array(weight, "weight"),
                     numpy_helper.from_array(bias, "bias"), numpy_helper.from_array(np.array([0], np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 9
    return model


def numbers_to_words_and_back() -> onnx.ModelProto:
    """Compiled, host, compiled: scores -> winning class as a word -> compared with the
    expected words -> how many match, as a number the second compiled segment doubles."""
    nodes = [
        helper.make_node("Relu", ["scores"], ["positive"]),
        helper.make_node("ArgMax", ["positive"], ["best"], axis=1, keepdims=0),
        helper.make_node("LabelEncoder", ["best"], ["word"], domain="ai.onnx.ml",
                         keys_int64s=[0, 1, 2], values_strings=LABELS, default_string="?"),
        helper.make_node("StringConcat", ["word", "suffix"], ["tagged"]),
        helper.make_node("Equal", ["tagged", "expected"], ["same"]),
        helper.make_node("Cast", ["same"], ["same_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["same_f", "positive_max"], ["weighted"]),
        helper.make_node("ReduceMax", ["positive", "axis1"], ["positive_max"], keepdims=0),
        helper.make_node("ReduceSum", ["weighted"], ["total"], keepdims=0),
    ]
    nodes = nodes[:6] + [nodes[7], nodes[6], nodes[8]]  # ReduceMax before its reader
    graph = helper.make_graph(
        nodes, "round_trip",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("suffix", TensorProto.STRING, []),
         helper.make_tensor_value_info("expected", TensorProto.STRING, [4])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("tagged", TensorProto.STRING, [4])],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axis1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 9
    return model


def test_a_tokenizer_and_a_label_lookup_around_a_compiled_body_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = text_classifier()
    compiled = tilecraft.compile(model)
    assert isinstance(compiled, PartitionedModule)
    assert [kind for kind, _ in compiled.segments] == ["host", "compiled", "host"]
    assert compiled.segments[1][1] == ["Add", "ArgMax", "Gather", "MatMul", "ReduceMean"]
    assert "linalg" in compiled.ir("source")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for words in (["Good", "GREAT", "fine", "unknown", "bad"], ["awful", "awful", "bad", "x", "Fine"]):
        array = np.array(words)  # numpy str_ (dtype <U...): accepted and read as ONNX strings
        label, scores = compiled(array)
        expected_label, expected_scores = session.run(None, {"words": np.array(words, dtype=object)})
        assert label.dtype == object and label.tolist() == expected_label.tolist()
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)


def test_segments_alternate_as_the_data_flow_needs():
    model = numbers_to_words_and_back()
    compiled = tilecraft.compile(model)
    assert [kind for kind, _ in compiled.segments] == ["compiled", "host", "compiled"]
    assert compiled.segments[1][1] == ["Equal", "LabelEncoder", "StringConcat"]
    scores = RNG.standard_normal((4, 3)).astype(np.float32)
    expected = np.array(["negative!", "positive!", "neutral!", "negative!"], dtype=object)
    feeds = {"scores": scores, "suffix": np.array("!", dtype=object), "expected": expected}
    total, tagged = compiled(**feeds)
    want_total, want_tagged = ReferenceEvaluator(model).run(None, feeds)
    assert tagged.tolist() == want_tagged.tolist()
    np.testing.assert_allclose(total, want_total, rtol=1e-6)
    assert total.dtype == np.float32 and total.shape == ()


def test_models_without_strings_are_compiled_whole():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not has_string_tensors(model)
    assert isinstance(tilecraft.compile(model), tilecraft.CompiledModule)


def test_a_string_constant_inside_a_branch_counts():
    branch = helper.make_graph([helper.make_node("Constant", [], ["s"], value_strings=["a"])], "then", [],
                               [helper.make_tensor_value_info("s", TensorProto.STRING, [1])])
    node = helper.make_node("If", ["c"], ["s"], then_branch=branch, else_branch=branch)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert has_string_tensors(model)
    partition = split_at_strings(model)
    assert [s.on_host for s in partition.segments] == [True]
    assert tilecraft.compile(model)(np.array(True)).tolist() == ["a"]


@pytest.mark.parametrize("value, error, words", [
    (["good"] * 5, ArgumentTypeError, "numpy array of str"),
    (np.zeros(5, np.float32), ArgumentTypeError, "dtype float32"),
    (np.array(["good", 3, "bad", "x", "y"], dtype=object), ArgumentTypeError, "found a int"),
    (np.array([b"good"] * 5), ArgumentTypeError, "dtype |S4"),
    (np.array([["good"] * 5]), ArgumentValueError, "expected rank 1"),
    (np.array(["good"] * 4), ArgumentValueError, "dimension 0 is 4, must be 5"),
])
def test_bad_string_arguments_are_refused_before_any_op_runs(value, error, words):
    compiled = tilecraft.compile(text_classifier())
    with pytest.raises(error, match=words.replace("|", r"\|")):
        compiled(value)


def test_a_failing_host_op_is_a_typed_error():
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="([a-z")  # unbalanced
    graph = helper.make_graph([node], "regex", [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    compiled = tilecraft.compile(model)
    with pytest.raises(HostOpError, match="RegexFullMatch"):
        compiled(np.array(["ab", "c"]))


@pytest.mark.parametrize("overrides", [{"target": "c"}, {"package_path": "model.tar"}])
def test_packages_and_c_sources_are_refused_for_string_models(overrides, tmp_path):
    if "package_path" in overrides:
        overrides = {"package_path": str(tmp_path / "model.tar")}
    with pytest.raises(OptionError, match="string tensors"):
        tilecraft.compile(text_classifier(), **overrides)


def normalizer(rank: int = 1, **attributes) -> onnx.ModelProto:
    node = helper.make_node("StringNormalizer", ["x"], ["y"], **attributes)
    shape = ["C"] if rank == 1 else [1, "C"]
    graph = helper.make_graph([node], "normalize", [helper.make_tensor_value_info("x", TensorProto.STRING, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, shape[:-1] + ["kept"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])


@pytest.mark.parametrize("attributes, words, expected", [
    # Accents stay, empty strings stay, a stop word removes whole elements only.
    ({"case_change_action": "UPPER"}, ["café", "", "straße"], ["CAFÉ", "", "STRAßE"]),
    ({"stopwords": ["the"], "is_case_sensitive": 1}, ["the end", "the", "The"], ["the end", "The"]),
    ({"stopwords": ["THE"], "case_change_action": "LOWER"}, ["the", "The", "cat"], ["cat"]),
    ({"stopwords": ["a"]}, ["a", "A"], [""]),
])
def test_string_normalizer_follows_the_specification(attributes, words, expected):
    import locale

    before = locale.setlocale(locale.LC_ALL)
    assert tilecraft.compile(normalizer(1, **attributes))(np.array(words, dtype=object)).tolist() == expected
    assert tilecraft.compile(normalizer(2, **attributes))(np.array([words], dtype=object)).tolist() == [expected]
    assert locale.setlocale(locale.LC_ALL) == before  # no process-wide locale change


def test_string_normalizer_refuses_what_the_specification_does_not_define():
    with pytest.raises(tilecraft.ModelImportError, match="case_change_action 'TITLE'"):
        tilecraft.compile(normalizer(case_change_action="TITLE"))
    unchecked = normalizer()
    unchecked.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "rows"
    unchecked.graph.input[0].type.tensor_type.shape.dim.add().dim_param = "C"
    with pytest.raises(HostOpError, match=r"shape \[C\] or \[1, C\]"):
        tilecraft.compile(unchecked)(np.array([["a"], ["b"]], dtype=object))


def test_casts_between_numbers_and_strings_run_on_the_host():
    nodes = [helper.make_node("Cast", ["x"], ["text"], to=TensorProto.STRING),
             helper.make_node("Cast", ["text"], ["back"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["back", "x"], ["square"])]
    graph = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("text", TensorProto.STRING, [4]),
                               helper.make_tensor_value_info("square", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    compiled = tilecraft.compile(model)
    assert [kind for kind, _ in compiled.segments] == ["host", "compiled"]
    x = np.array([1.5, -2.0, 0.25, 3e9], np.float32)
    text, square = compiled(x)
    want_text, want_square = ReferenceEvaluator(model).run(None, {"x": x})
    assert text.tolist() == want_text.tolist()
    np.testing.assert_array_equal(square, x * x)


def test_an_op_that_takes_no_strings_is_refused_on_strings():
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"], name="add")], "add",
                              [helper.make_tensor_value_info(n, TensorProto.STRING, [2]) for n in "ab"],
                              [helper.make_tensor_value_info("c", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(tilecraft.ModelImportError, match=r"Add \(node 'add'\): A 'a' is tensor\(string\)") as caught:
        tilecraft.compile(model)
    assert caught.value.problems == [("add", "Add", caught.value.problems[0][2])]


def test_tuning_takes_the_numeric_segments_one_by_one(tmp_path):
    """Task extraction refuses the whole model with directions; each numeric segment is a
    model of its own whose tasks extract."""
    model = text_classifier()
    with pytest.raises(tilecraft.errors.TaskExtractionError, match="split_at_strings"):
        tilecraft.extract_tasks(model)
    body = [s.model for s in split_at_strings(model).segments if not s.on_host]
    assert len(body) == 1 and tilecraft.extract_tasks(body[0])
