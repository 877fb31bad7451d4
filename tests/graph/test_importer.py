"""Import: function bodies are reached, edges kept, signatures pruned, bad graphs refused."""

import pytest
import tensorflow as tf

import tf_placeto as tp
from tf_placeto.errors import SourceError

SPEC = tf.TensorSpec([4, 4], tf.float32)


@tf.function
def _inner(x):
    return tf.nn.relu(tf.matmul(x, x))


@tf.function
def _outer(x):
    return _inner(x) + _inner(x * 2.0)


def test_ops_inside_nested_functions_are_reached_per_call_site():
    graph = tp.import_graph(_outer, SPEC)
    names = {op.name for op in graph.ops}
    matmuls = sorted(n for n in names if n.endswith("MatMul"))
    assert len(matmuls) == 2 and matmuls[0] != matmuls[1]
    assert all("PartitionedCall" in n for n in matmuls)
    # The call ops themselves are gone: their bodies run instead.
    assert not [op for op in graph.ops if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    assert len(graph.instances) == 2


def test_arguments_and_results_are_wired_through_the_call():
    graph = tp.import_graph(_outer, SPEC)
    producers = {}
    for e in graph.data_edges:
        producers.setdefault(graph.ops[e.dst].name, []).append(graph.ops[e.src].name)
    first, second = sorted(n for n in producers if n.endswith("MatMul"))
    assert set(producers[first]) == {"x"}            # the outer placeholder, through the arg
    assert set(producers[second]) == {"mul"}         # x * 2.0, through the second call's arg
    add = next(op.name for op in graph.ops if op.type == "AddV2")
    # Each call's result arrives from the Identity its body returns.
    assert sorted(producers[add]) == ["PartitionedCall/Identity", "PartitionedCall_1/Identity"]


def test_control_edges_are_kept():
    v = tf.Variable(1.0)

    @tf.function
    def step(x):
        v.assign_add(x)
        return v.read_value() * 2.0

    graph = tp.import_graph(step, tf.TensorSpec([], tf.float32))
    assign = graph.index(next(op.name for op in graph.ops if op.type == "AssignAddVariableOp"))
    assert any(src == assign for src, _ in graph.control_edges)


def test_jit_compiled_functions_stay_atomic():
    @tf.function(jit_compile=True)
    def compiled(x):
        return tf.matmul(x, x) + 1.0

    @tf.function
    def caller(x):
        return compiled(x) * 3.0

    graph = tp.import_graph(caller, SPEC)
    assert any(op.type in ("PartitionedCall", "StatefulPartitionedCall") for op in graph.ops)
    assert not any(op.type == "MatMul" for op in graph.ops)


def test_while_loops_are_one_op():
    @tf.function
    def loop(x):
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (0, x))[1]

    graph = tp.import_graph(loop, SPEC)
    assert sum(op.type in ("While", "StatelessWhile") for op in graph.ops) == 1


def test_saved_model_signature_keeps_only_what_the_step_runs(mlp_model):
    graph = tp.import_graph(mlp_model)
    names = {op.name for op in graph.ops}
    assert graph.source.signature == "train_step"
    assert not any(n.startswith("saver_filename") for n in names)   # the checkpoint machinery
    types = {op.type for op in graph.ops}
    assert {"MatMul", "VarHandleOp", "AssignVariableOp"} <= types
    # The update of a variable is inside the signature's function body.
    assert any(op.scope is not None and op.type == "AssignVariableOp" for op in graph.ops)


def test_the_signature_feeds_its_inputs_and_fetches_its_outputs(mlp_model):
    """What the session feeds and fetches: the signature's input placeholders, and the ops
    inside the call that make its outputs (the simulator sends them from and to the
    session's task)."""
    graph = tp.import_graph(mlp_model)
    signature = graph.source.meta_graph.signature_def["train_step"]
    inputs = {info.name.split(":")[0] for info in signature.inputs.values()}
    assert {graph.ops[i].name for i in graph.feed_ops} == inputs
    outputs = signature.outputs
    assert len(graph.fetch_outputs) == len(outputs)
    for op, slot in graph.fetch_outputs:
        assert graph.ops[op].scope is not None and slot < len(graph.ops[op].outputs)


def test_graph_def_and_meta_graph_def_protos():
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [2, 3], name="a")
        tf.identity(tf.matmul(a, tf.ones([3, 5])), name="out")
    graph = tp.import_graph(g.as_graph_def())
    out = graph.op("out")
    assert out.outputs[0].shape == (2, 5)           # inferred: plain GraphDefs carry no shapes
    with g.as_default():
        meta = tf.compat.v1.train.export_meta_graph()
    assert len(tp.import_graph(meta)) == len(graph)


def test_a_graph_referring_to_a_missing_node_is_refused():
    g = tf.Graph()
    with g.as_default():
        tf.identity(tf.constant(1.0), name="out")
    graph_def = g.as_graph_def()
    graph_def.node[-1].input[0] = "vanished"
    with pytest.raises(SourceError, match="vanished"):
        tp.import_graph(graph_def)


def test_unsupported_python_objects_are_refused():
    with pytest.raises(SourceError, match="cannot import"):
        tp.import_graph(42)


def test_importing_grouping_and_validating_leave_the_source_proto_untouched(small_cnn_model):
    """Reading a proto map with [] inserts the key: none of our reads may do that."""
    source = tp.load_source(small_cnn_model)
    before = source.proto.SerializeToString(deterministic=True)
    graph = tp.import_graph(source)
    groups = tp.group(graph, max_groups=8)
    tp.Placement(groups.placement_for(["/device:CPU:0"] * len(groups))).validate(
        graph, tp.DeviceSet.this_machine())
    assert source.proto.SerializeToString(deterministic=True) == before


def test_a_concrete_function_is_imported_like_its_tf_function():
    concrete = _outer.get_concrete_function(SPEC)
    assert [op.name for op in tp.import_graph(concrete).ops] == \
        [op.name for op in tp.import_graph(_outer, SPEC).ops]


def _v1_loop_graph():
    g = tf.Graph()
    with g.as_default():
        from tensorflow.python.ops import control_flow_v2_toggles

        control_flow_v2_toggles.disable_control_flow_v2()
        try:
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            tf.identity(tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0),
                                      (0, x))[1], name="out")
        finally:
            control_flow_v2_toggles.enable_control_flow_v2()
    return g.as_graph_def()


def test_tf1_loops_keep_their_ops_and_stay_a_dag():
    graph = tp.import_graph(_v1_loop_graph())
    assert {"Enter", "Merge", "NextIteration", "Exit"} <= {op.type for op in graph.ops}
    assert graph.loop_back_edges and all(
        graph.ops[e.src].type == "NextIteration" for e in graph.loop_back_edges)
    graph.topological_order()                       # raises on a cycle
    groups = tp.group(graph, max_groups=4)
    assert sum(len(g) for g in groups.groups) == len(graph)


def test_tf1_defun_calls_stay_whole():
    from tensorflow.python.framework import function

    @function.Defun(tf.float32)
    def square(x):
        return x * x

    g = tf.Graph()
    with g.as_default():
        tf.identity(square(tf.constant(2.0)), name="out")
    graph = tp.import_graph(g.as_graph_def())
    assert any(op.type.startswith("square") for op in graph.ops)
    assert not any(op.type == "Mul" for op in graph.ops)


def test_a_node_naming_a_missing_function_is_refused():
    @tf.function
    def loop(x):
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (0, x))[1]

    graph_def = loop.get_concrete_function(SPEC).graph.as_graph_def()
    del graph_def.library.function[:]
    with pytest.raises(SourceError, match="not in the graph's function library"):
        tp.import_graph(graph_def)


def _graph_calling(bodies: dict):
    """A hand-made GraphDef, as a damaged or hostile file holds one: the graph calls function
    "f0" on a placeholder, and `bodies` maps each function's name to the functions its body
    calls on its float argument (a name twice: called twice)."""
    from tensorflow.core.framework import graph_pb2, node_def_pb2, types_pb2

    def call(name, function):
        node = node_def_pb2.NodeDef(name=name, op="PartitionedCall", input=["x"])
        node.attr["f"].func.name = function
        node.attr["Tin"].list.type.append(types_pb2.DT_FLOAT)
        node.attr["Tout"].list.type.append(types_pb2.DT_FLOAT)
        return node

    graph = graph_pb2.GraphDef()
    graph.versions.producer = 1
    placeholder = graph.node.add(name="x", op="Placeholder")
    placeholder.attr["dtype"].type = types_pb2.DT_FLOAT
    graph.node.append(call("call", "f0"))
    for name, callees in bodies.items():
        function = graph.library.function.add()
        function.signature.name = name
        function.signature.input_arg.add(name="x", type=types_pb2.DT_FLOAT)
        function.signature.output_arg.add(name="y", type=types_pb2.DT_FLOAT)
        function.node_def.extend(call(f"call{k}", callee) for k, callee in enumerate(callees))
        function.node_def.add(name="y", op="Identity", input=["x"]).attr["T"].type = \
            types_pb2.DT_FLOAT
        function.ret["y"] = "y:output:0"
    return graph


@pytest.mark.parametrize("bodies, message", [
    ({"f0": ["f0"]}, "function 'f0' calls itself (f0 -> f0)"),
    ({"f0": ["f1"], "f1": ["f2"], "f2": ["f1"]}, "function 'f1' calls itself (f1 -> f2 -> f1)"),
])
def test_a_function_that_calls_itself_is_refused_by_name(bodies, message):
    with pytest.raises(SourceError) as raised:
        tp.import_graph(_graph_calling(bodies))
    assert message in str(raised.value)


def test_calls_nested_past_the_bound_are_refused():
    from tf_placeto.graph.importer import MAX_CALL_DEPTH

    chain = {f"f{k}": [f"f{k + 1}"] for k in range(MAX_CALL_DEPTH - 1)}
    within = tp.import_graph(_graph_calling({**chain, f"f{MAX_CALL_DEPTH - 1}": []}))
    assert len(within.instances) == MAX_CALL_DEPTH
    deeper = {**chain, f"f{MAX_CALL_DEPTH - 1}": [f"f{MAX_CALL_DEPTH}"], f"f{MAX_CALL_DEPTH}": []}
    with pytest.raises(SourceError, match=f"function calls nest more than {MAX_CALL_DEPTH} "
                                          "deep"):
        tp.import_graph(_graph_calling(deeper))


def test_calls_that_double_at_every_level_are_refused_before_they_are_inlined():
    """2**60 ops once inlined: refused by counting, at once."""
    doubling = {f"f{k}": [f"f{k + 1}", f"f{k + 1}"] for k in range(60)}
    with pytest.raises(SourceError, match="more than 1,000,000 ops once its function calls "
                                          "are inlined"):
        tp.import_graph(_graph_calling({**doubling, "f60": []}))
