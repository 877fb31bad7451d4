"""Traced runs: outputs and the device every node ran on, from TensorFlow's step stats."""

import threading
import time

import numpy as np
import pytest

from tf_placeto.measure.runtimes.runner import StepSession, example_feeds, run_traced
from tf_placeto.graph.sources import load_source


def test_feeds_are_deterministic_and_valid_labels(mlp_model):
    a = example_feeds(load_source(mlp_model), seed=3)
    b = example_feeds(load_source(mlp_model), seed=3)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key][1], b[key][1])
    labels = [value for _, value in a.values() if value.dtype.kind == "i"]
    assert labels and all((v == 0).all() for v in labels)


def test_unplaced_model_runs_on_the_first_cpu(mlp_model):
    traced = run_traced(mlp_model, num_cpus=2)
    assert np.isfinite(traced.outputs["loss"])
    assert set(traced.node_devices.values()) == {"/device:CPU:0"}


def test_a_split_steps_partition_graphs_show_what_crosses_devices(mlp_model):
    """Each device's partition of the step, as the runtime ran it: a placement over two
    devices sends tensors from one partition to the other, one on a single device does not."""
    import tf_placeto as tp
    from tf_placeto.devices import DeviceSet
    from tf_placeto.measure.runtimes.runner import ModelRunner
    from tf_placeto.measure.runtimes.runtime import Runtime

    graph = tp.import_graph(mlp_model)
    runtime = Runtime.local(DeviceSet.local(2))
    halves = {op.name: f"/device:CPU:{int(op.index >= len(graph) // 2)}" for op in graph.ops}
    for placement, partitions in ((None, 1), (halves, 2)):
        with ModelRunner(graph).session(runtime, placement) as steps:
            graphs = steps.partition_graphs()
        assert len(graphs) == partitions
        sends = [node for g in graphs for node in g.node if node.op in ("_Send", "_HostSend")
                 and node.attr["send_device"].s != node.attr["recv_device"].s]
        assert bool(sends) == (partitions == 2)
        assert np.isfinite(steps.outputs["loss"])


def test_only_saved_models_are_run(tmp_path):
    import tensorflow as tf

    path = tmp_path / "g.pbtxt"
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0, name="c")
    tf.io.write_graph(g.as_graph_def(), str(tmp_path), "g.pbtxt")
    with pytest.raises(ValueError, match="SavedModel source"):
        run_traced(str(path))



class SleepingSession:
    """Stands in for a tf.compat.v1.Session whose every step takes `seconds` of waiting, as
    a step waits on its workers: what the stream's threads overlap."""

    def __init__(self, seconds: float):
        self.seconds, self.running, self.most_at_once = seconds, 0, 0
        self.lock = threading.Lock()

    def run(self, fetches, feed_dict=None, options=None):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        return {}


@pytest.mark.parametrize("in_flight", [1, 2, 4])
def test_a_stream_keeps_its_steps_in_flight_and_reports_seconds_per_step(in_flight):
    session = SleepingSession(0.05)
    steps = StepSession(session, {}, {}, timeout_s=10.0, watched=lambda call: call())
    per_step = steps.stream_step(in_flight)
    assert session.most_at_once == in_flight
    assert per_step == pytest.approx(0.05 / in_flight, rel=0.3)
