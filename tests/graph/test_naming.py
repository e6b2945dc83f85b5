"""Placeholders without a name are named after the variable they are assigned to."""
import pypto


def test_names_come_from_the_assignment():
    graph = pypto.TensorGraph(name="names")
    input_a = graph.placeholder(shape=(4,), dtype=pypto.float16)
    input_b = graph.placeholder(
        shape=(4,),
        dtype=pypto.float16,
    )
    first, second = graph.placeholder((4,), pypto.float32), graph.placeholder((4,), pypto.float32)
    annotated: pypto.GraphTensor = graph.placeholder((4,), pypto.float32)
    nested = graph.placeholder(shape=tuple([int(4)]), dtype=getattr(pypto, "float32"))
    assert [t.name for t in graph.placeholders] == ["input_a", "input_b", "first", "second",
                                                    "annotated", "nested"]
    assert input_a.name == "input_a" and input_b.name == "input_b"


def test_fallback_names():
    graph = pypto.TensorGraph(name="fallback")
    tensors = [graph.placeholder((4,), pypto.float32) for _ in range(2)]
    holder = {}
    holder["k"] = graph.placeholder((4,), pypto.float32)
    x = graph.placeholder((4,), pypto.float32)
    x = graph.placeholder((4,), pypto.float32)        # the name is taken: falls back
    exec("y = graph.placeholder((4,), pypto.float32)", {"graph": graph, "pypto": pypto})
    assert [t.name for t in graph.placeholders] == ["input0", "input1", "input2", "x",
                                                    "input4", "input5"]
    del tensors, holder, x


def test_explicit_name_wins():
    graph = pypto.TensorGraph(name="explicit")
    a = graph.placeholder((4,), pypto.float32, name="left")
    assert a.name == "left"
