"""Keras recurrent layers placed over the tasks of a cluster: their implementation-selector
functions (`api_implements`), which TensorFlow does not inline, run wherever they are placed."""

import numpy as np
import pytest

from tf_placeto.examples import held_out
from tests.helpers import round_robin
from tf_placeto.devices import DeviceSet
from tf_placeto.graph.grouping import group_ops
from tf_placeto.graph.importer import import_source
from tf_placeto.measure.runtimes.runner import OK, ModelRunner
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.rewrite import placed_proto

IMPLEMENTS = "api_implements"


@pytest.fixture(scope="module")
def recurrent_graphs(tmp_path_factory):
    """{name: OpGraph} of a small Keras LSTM and a bidirectional GRU SavedModel."""
    graphs = {}
    for name in ("lstm", "gru"):
        path = str(tmp_path_factory.mktemp(name))
        held_out.save(name, path, vocabulary=50, seq=6)
        graphs[name] = import_source(path)
    return graphs


def selector_instances(graph):
    functions = {f.signature.name: f for f in graph.source.graph_def.library.function}
    return [i for i in graph.instances if IMPLEMENTS in functions[i.function_name].attr]


def called_function(proto, graph, instance):
    """The FunctionDef that `instance`'s call runs in the written proto, and the call node."""
    graph_def = proto.meta_graphs[graph.source.meta_graph_index].graph_def
    bodies = {f.signature.name: f for f in graph_def.library.function}
    callers = graph_def.node if instance.parent is None else bodies[
        called_function(proto, graph, instance.parent)[0].signature.name].node_def
    call = next(n for n in callers if n.name == instance.call_node)
    return bodies[call.attr["f"].func.name], call


def test_a_recurrent_layer_split_over_devices_is_inlined_and_one_on_a_device_stays_swappable(
        recurrent_graphs):
    graph = recurrent_graphs["lstm"]
    (lstm,) = selector_instances(graph)
    body = list(lstm.subtree_ops())
    split = {graph.ops[i].name: f"/device:CPU:{k % 2}" for k, i in enumerate(body)}
    function, _ = called_function(placed_proto(graph.source, graph, split), graph, lstm)
    assert IMPLEMENTS not in function.attr        # TensorFlow inlines it: each op where placed

    whole = {graph.ops[i].name: "/device:CPU:1" for i in body}
    function, call = called_function(placed_proto(graph.source, graph, whole), graph, lstm)
    assert IMPLEMENTS in function.attr and call.device == "/device:CPU:1"
    assert IMPLEMENTS in called_function(graph.source.proto, graph, lstm)[0].attr  # untouched


def outputs_of(graph, runtime, placement):
    result = ModelRunner(graph).run(runtime, placement, warmup=0, repeats=1)
    assert result.status == OK, result.reason
    return result.outputs


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_recurrent_layers_run_split_over_two_worker_tasks_and_over_two_local_devices(
        recurrent_graphs, cluster, name):
    graph = recurrent_graphs[name]
    assert selector_instances(graph)
    groups = group_ops(graph, max_groups=16)
    on_cluster, local = Runtime.on_cluster(cluster), Runtime.local(DeviceSet.local(2))
    expected = outputs_of(graph, local, None)
    placements = [(on_cluster, round_robin(groups, cluster.device_names)),
                  (on_cluster, {op.name: cluster.device_names[1] for op in graph.ops}),
                  (local, round_robin(groups))]
    split = placements[0][1]
    assert all(len({split[graph.ops[i].name] for i in instance.subtree_ops()}) == 2
               for instance in selector_instances(graph))      # each layer over both tasks
    for runtime, placement in placements:
        got = outputs_of(graph, runtime, placement)
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6)


def test_profiling_times_a_recurrent_layers_ops_under_their_graph_names(recurrent_graphs,
                                                                        tmp_path):
    """A swappable body placed on one device runs under names local to its function; the
    profiler runs it inlined, so each op, the loop included, gets its own time."""
    from tf_placeto.measure.profiling.profiler import profile

    graph = recurrent_graphs["lstm"]
    (lstm,) = selector_instances(graph)
    whole = {graph.ops[i].name: "/device:CPU:0" for i in lstm.subtree_ops()}
    function, _ = called_function(placed_proto(graph.source, graph, whole,
                                               inline_every_call=True), graph, lstm)
    assert IMPLEMENTS not in function.attr

    ops = profile(graph, Runtime.local(DeviceSet.local(1)), cache=str(tmp_path)).model.ops
    (loop,) = [op.name for op in graph.ops
               if op.type in ("While", "StatelessWhile") and op.index in set(lstm.ops)]
    row = ops.set_index("op").loc[loop]
    assert row.traced and row.compute_us > 0
    assert row.executions == 7                   # 6 steps and the condition's last look
