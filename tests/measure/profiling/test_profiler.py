"""Profiling: real traced runs become per-op costs; a second call finds the cache."""

import logging
import time

import pandas as pd
import pytest
import tensorflow as tf

import tf_placeto as tp
from tf_placeto.measure.profiling.profiler import (profile, remote_input_ops, remote_slowdowns,
                                                   same_kernel_means, single_device_placement)
from tf_placeto.measure.runtimes.runtime import Runtime


@pytest.fixture(scope="module")
def graph(small_cnn_model):
    return tp.import_graph(small_cnn_model)


def test_profile_measures_ops_and_is_cached(graph, runtime, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tf_placeto")
    first = profile(graph, runtime, cache=str(tmp_path), runs=3, calibration_runs=0)
    assert not first.cached
    ops = first.model.ops.set_index("op")
    convs = [op.name for op in graph.ops if op.type == "Conv2DBackpropFilter"]
    assert all(ops.loc[name, "compute_us"] > 0 and ops.loc[name, "traced"] for name in convs)
    assert len(ops) == len(graph)
    assert first.model.ops["compute_us"].sum() > 0
    assert (first.model.ops["remote_extra_us"] >= 0).all()
    assert "slowdowns" in first.model.meta["remote_inputs"]
    start = time.process_time()     # CPU time: another test process may share the cores
    second = profile(graph, runtime, cache=str(tmp_path))
    assert second.cached and time.process_time() - start < 1.0
    pd.testing.assert_series_equal(second.model.ops["remote_extra_us"],
                                   first.model.ops["remote_extra_us"])
    assert any("found a profile in the cache" in m for m in caplog.messages)


def test_identical_kernels_share_their_mean_time_and_the_total_stays():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0, shape=[8, 8], name="x")
        for name in ("a", "b", "c"):
            tf.matmul(x, x, name=name)
        tf.matmul(x, x, transpose_b=True, name="other")
    graph = tp.import_graph(g.as_graph_def())
    charged = {"a": 1.0, "b": 8.0, "c": 3.0, "other": 5.0, "x": 0.5, "_Recv_fused": 2.0}
    pooled = same_kernel_means(graph, charged, {})
    assert pooled == {"a": 4.0, "b": 4.0, "c": 4.0, "other": 5.0, "x": 0.5, "_Recv_fused": 2.0}
    in_a_loop = same_kernel_means(graph, charged, {"c": 3})
    assert in_a_loop["c"] == 3.0 and in_a_loop["a"] == in_a_loop["b"] == 4.5


def test_single_device_placement_covers_every_op(graph, runtime):
    placement = single_device_placement(graph, runtime, "/device:CPU:1")
    assert len(placement) == len(graph) and set(placement.values()) == {"/device:CPU:1"}


def test_remote_inputs_are_the_consumers_of_edges_that_cross(graph):
    names = [op.name for op in graph.ops]
    assert not remote_input_ops(graph, dict.fromkeys(names, "a")).any()
    edge = graph.data_edges[0]
    apart = {**dict.fromkeys(names, "a"), graph.ops[edge.dst].name: "b"}
    remote = remote_input_ops(graph, apart)
    assert remote[edge.dst]
    # the moved op's consumers now read from another device too
    assert set(remote.nonzero()[0]) == {edge.dst} | {
        e.dst for e in graph.data_edges if e.src == edge.dst}


def test_only_types_much_slower_with_remote_inputs_count():
    """Every op of the split run took 1.2x (a busy worker); MaxPoolGrad with a remote input
    10x; Neg 4x, but worth too little of the step to matter."""
    rows = [("Conv2D", False, 1000.0, 1200.0), ("Conv2D", True, 1000.0, 1250.0),
            ("MaxPoolGrad", True, 50.0, 600.0), ("Neg", True, 1.0, 4.8),
            ("Mul", False, 100.0, 120.0)]
    table = pd.DataFrame(rows, columns=["type", "remote", "profiled_us", "run_us"])
    slowdowns = remote_slowdowns(table, single_step_us=2000.0)
    assert list(slowdowns) == ["MaxPoolGrad"]
    assert slowdowns["MaxPoolGrad"] == pytest.approx(600.0 / (50.0 * 1.2))


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    """A raw tf.while_loop of 6 matmuls in a serving function."""
    import tensorflow as tf

    weights = tf.Variable(tf.random.normal([64, 64], stddev=0.1, seed=1))

    def serve(x):
        _, y = tf.while_loop(lambda i, y: i < 6, lambda i, y: (i + 1, tf.matmul(y, weights)),
                             (tf.constant(0), x))
        return {"y": y}

    module = tf.Module()
    module.weights = weights
    module.serve = tf.function(serve, input_signature=[tf.TensorSpec([64, 64], tf.float32)])
    path = str(tmp_path_factory.mktemp("loop") / "model")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


def test_a_loop_op_owns_its_lowered_body_and_counts_its_iterations(loop_model, tmp_path):
    """The While op is atomic in the op graph; TensorFlow lowers it and runs its body's
    nodes under names below it, 6 times a step: their time is the loop's, and so are their
    executions."""
    graph = tp.import_graph(loop_model)
    [loop] = [op for op in graph.ops if op.type in ("While", "StatelessWhile")]
    made = profile(graph, Runtime.local(tp.DeviceSet.local(1)), cache=str(tmp_path), runs=2)
    ops = made.model.ops.set_index("op")
    assert ops.loc[loop.name, "traced"] and ops.loc[loop.name, "compute_us"] > 0
    assert ops.loc[loop.name, "executions"] >= 6
    executions = made.model.executions(graph)
    assert executions[loop.index] >= 6
    assert (executions[[op.index for op in graph.ops if op is not loop]] <= 1).all()


def test_a_cached_profile_on_a_cluster_starts_no_workers(mlp_model, tmp_path, monkeypatch):
    from tests.helpers import estimated_cost_model
    from tf_placeto.measure.runtimes import local as local_module
    from tf_placeto.measure.costs.costmodel import graph_profile_directory
    from tf_placeto.measure.runtimes.runtime import planned_runtime

    graph = tp.import_graph(mlp_model)
    names, fingerprint = planned_runtime(cluster="local:2")
    assert names == [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in (0, 1)]
    directory = graph_profile_directory(graph, names, fingerprint, str(tmp_path))
    estimated_cost_model(graph).save(directory)

    def started(*args, **kwargs):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(local_module.LocalCluster, "__init__", started)
    found = tp.profile(mlp_model, tp.Target(cluster="local:2", cache=str(tmp_path)))
    assert found.cached and found.directory == directory
