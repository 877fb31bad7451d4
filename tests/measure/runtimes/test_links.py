"""Warming a cluster's links: what one warm-up step sends, and when a runtime warms."""

import os
import signal
import time

import numpy as np
import tensorflow as tf

from tf_placeto.devices import parse_device
from tf_placeto.measure.runtimes.local import LocalCluster
from tf_placeto.measure.runtimes.links import (WARM_STEPS, cross_task_messages, link_graph,
                                               task_devices, warm_links)
from tf_placeto.measure.runtimes.runtime import Runtime, open_runtime


def test_one_device_per_task_in_the_order_tasks_appear():
    names = [f"/job:worker/replica:0/task:{task}/device:{kind}"
             for task, kind in ((1, "CPU:0"), (0, "GPU:0"), (1, "GPU:0"), (0, "CPU:0"))]
    assert task_devices(names) == names[:2]


def test_a_warmup_step_crosses_every_link_both_ways():
    """Every ordered pair of three tasks exchanges a tensor, and the client feeds task 0 and
    fetches from it: each link that a placement's step can use carries bulk data."""
    with LocalCluster(3) as cluster:
        runtime = Runtime.on_cluster(cluster)
        graph, feed, fetches = link_graph(runtime.device_names, nbytes=4096)
        options = tf.compat.v1.RunOptions(output_partition_graphs=True)
        metadata = tf.compat.v1.RunMetadata()
        with tf.compat.v1.Session(runtime.target, graph=graph,
                                  config=runtime.session_config()) as session:
            values = session.run(fetches, {feed: np.ones([1024], np.float32)},
                                 options=options, run_metadata=metadata)
        assert values[0] == 1024.0 and values[1].shape == (1024,)
        pairs = {(src, dst) for src, dst, _ in cross_task_messages(metadata.partition_graphs)}
        tasks = [parse_device(name).task_name for name in task_devices(runtime.device_names)]
        assert len(tasks) == 3
        assert pairs == {(a, b) for a in tasks for b in tasks if a != b}
        client_ends = {node.op for g in metadata.partition_graphs for node in g.node
                       if node.attr["client_terminated"].b}
        assert client_ends == {"_Recv", "_Send"}
        assert len(warm_links(runtime, steps=3, nbytes=4096)) == 3


def test_a_runtime_warms_a_cluster_it_opens_and_a_worker_it_restarts():
    assert warm_links(Runtime(device_names=["/device:CPU:0"])) == []   # nothing to warm
    with open_runtime(cluster="local:2") as runtime:
        first = runtime.warmup_steps_s
        assert len(first) == WARM_STEPS and min(first) > 0
        pid = runtime.cluster.pids[1]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while runtime.cluster.alive()[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runtime.restart_dead_workers() == [1]
        assert runtime.warmup_steps_s is not first and len(runtime.warmup_steps_s) == WARM_STEPS
        assert runtime.restart_dead_workers() == []
