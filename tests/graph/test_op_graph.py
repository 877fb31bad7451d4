"""OpGraph: orders and tables over the imported ops."""

import tensorflow as tf

import tf_placeto as tp


def _diamond():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        b = tf.math.square(a, name="b")
        c = tf.math.sqrt(a, name="c")
        tf.add(b, c, name="d")
    return tp.import_graph(g.as_graph_def())


def test_orders_respect_every_edge():
    graph = _diamond()
    position = graph.demand_order()
    order = graph.topological_order()
    rank = {op: k for k, op in enumerate(order)}
    for e in graph.data_edges:
        assert position[e.src] < position[e.dst]
        assert rank[e.src] < rank[e.dst]
    assert sorted(position.tolist()) == list(range(len(graph)))


def test_dataframe_has_a_row_per_op():
    graph = _diamond()
    table = graph.to_dataframe()
    assert list(table["name"]) == [op.name for op in graph.ops]
    assert table.set_index("name").loc["d", "inputs"] == 2
    assert table.set_index("name").loc["a", "consumers"] == 2


def test_ops_running_one_kernel_on_one_shape_share_a_signature():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0, shape=[8, 8], name="x")
        wide = tf.constant(1.0, shape=[8, 16], name="wide")
        tf.matmul(x, x, name="first")
        tf.matmul(x, x, name="second")
        tf.matmul(x, x, transpose_a=True, name="transposed")
        tf.matmul(x, wide, name="wider")
        unknown = tf.compat.v1.placeholder(tf.float32, [None, 8], name="unknown")
        tf.matmul(unknown, x, name="batch_unknown")
    graph = tp.import_graph(g.as_graph_def())
    signature = dict(zip((op.name for op in graph.ops), graph.kernel_signatures()))
    assert signature["first"] == signature["second"]
    assert signature["transposed"] != signature["first"]
    assert signature["wider"] != signature["first"]
    assert signature["batch_unknown"] is None


def test_the_backward_pass_is_the_gradient_scopes_and_what_depends_on_them():
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0], name="x")
        w = tf1.get_variable("w", [2], use_resource=True)
        y = tf.square(x * w, name="y")
        tf.identity(y, name="served")
        step = tf1.assign_sub(w, tf.multiply(0.1, tf1.gradients(y, [w])[0], name="scaled"))
        tf.identity(tf1.gradients(tf.reduce_sum(y, name="total"), [x])[0], name="dx")
        tf.group(step, name="train")
    graph = tp.import_graph(g.as_graph_def())
    backward = {graph.ops[i].name for i in graph.backward_mask().nonzero()[0]}
    assert {"scaled", "dx", "train"} <= backward
    updates = {op.name for op in graph.ops if op.type == "AssignSubVariableOp"}
    assert updates and updates <= backward
    assert any(name.startswith("gradients/") for name in backward)
    assert any(name.startswith("gradients_1/") for name in backward)
    assert not backward & {"x", "w", "y", "served", "total"}
    assert not _diamond().backward_mask().any()
