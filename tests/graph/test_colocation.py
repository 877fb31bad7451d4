"""Hard colocation sets: _class attributes, resources with their users, kernel registry."""

import tensorflow as tf

import tf_placeto as tp
from tf_placeto.graph.colocation import colocation_sets
from tf_placeto.graph.kernels import kernel_device_types


def _set_names(graph, sets, name):
    members = sets.members[sets.set_of[graph.index(name)]]
    return {graph.ops[i].name for i in members}


def test_class_attribute_colocates():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        with g.colocate_with(a.op):
            b = tf.identity(a, name="b")
        tf.math.square(b, name="c")
    graph = tp.import_graph(g.as_graph_def())
    sets = colocation_sets(graph)
    assert _set_names(graph, sets, "b") == {"a", "b"}
    assert _set_names(graph, sets, "c") == {"c"}
    assert "_class" in sets.reasons[sets.set_of[graph.index("b")]]


def test_a_variable_is_colocated_with_its_readers_and_updates(mlp_model):
    graph = tp.import_graph(mlp_model)
    sets = colocation_sets(graph)
    kernel = next(op for op in graph.ops if op.type == "VarHandleOp"
                  and op.name.endswith("dense/kernel") and not op.name.startswith("m/"))
    members = sets.members[sets.set_of[kernel.index]]
    types = {graph.ops[i].type for i in members}
    assert {"VarHandleOp", "ReadVariableOp"} <= types
    assert any(t.startswith("Assign") for t in types)    # the optimizer's update
    assert "resource" in sets.reasons[sets.set_of[kernel.index]]
    # Nothing that merely consumes the value read (the MatMul) is dragged in.
    assert "MatMul" not in types


def test_kernel_registry_answers_per_device_type():
    g = tf.Graph()
    with g.as_default():
        tf.strings.join([tf.constant("a"), tf.constant("b")], name="join")
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="mm")
    nodes = {n.name: n for n in g.as_graph_def().node}
    assert kernel_device_types(nodes["join"]) == frozenset({"CPU"})
    assert {"CPU", "GPU"} <= kernel_device_types(nodes["mm"])


def test_a_set_may_only_go_where_every_member_has_a_kernel():
    g = tf.Graph()
    with g.as_default():
        s = tf.strings.join([tf.constant("a"), tf.constant("b")], name="join")
        with g.colocate_with(s.op):
            tf.strings.length(s, name="length")
    graph = tp.import_graph(g.as_graph_def())
    sets = colocation_sets(graph)
    assert sets.device_types[sets.set_of[graph.index("length")]] == frozenset({"CPU"})


def test_ref_variables_are_colocated_with_their_users():
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("v", [2], use_resource=False)
        tf.compat.v1.assign_add(v, [1.0, 1.0], name="bump")
        tf.identity(v, name="read")
    graph = tp.import_graph(g.as_graph_def())
    sets = colocation_sets(graph)
    members = _set_names(graph, sets, "v")
    assert {"v", "bump", "v/read"} <= members       # both take the ref tensor
    assert "read" not in members                    # takes v/read's plain float output
