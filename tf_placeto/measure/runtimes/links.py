"""Warm a cluster's links before anything on it is timed.

A fresh cluster moves tensors between its tasks slower for its first few dozen steps of bulk
traffic. On `local:2`, the first new session of a split of the branches model ran slower
on a cold cluster than once the cluster had run steps that send megabytes each way between
its tasks; the same steps with kilobyte tensors did not help (docs/results/sessions.md, "A
cold cluster"). A measurement taken cold charges a split a cost that
a long-lived job does not pay, and one taken warm and another cold disagree: `place` could
see a gain that the user's re-measure on a new cluster does not, or miss one.

So `open_runtime` warms every cluster it opens, and `Runtime.restart_dead_workers` warms again
after starting a worker anew: every ordered pair of tasks, and the session's client and task
0 both ways, exchange WARM_BYTES per step for WARM_STEPS steps or WARM_BUDGET_S seconds.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from tf_placeto.devices import parse_device

log = logging.getLogger(__name__)

WARM_STEPS = 30
WARM_BYTES = 4 * 2**20
WARM_BUDGET_S = 10.0


def task_devices(device_names) -> list:
    """One device of each task (its first), in the order the tasks first appear."""
    firsts = {}
    for name in device_names:
        firsts.setdefault(parse_device(name).task_name, name)
    return list(firsts.values())


def cross_task_messages(partition_graphs) -> list:
    """[(sending task, receiving task, tensor name)] of a step's Send/Recv pairs between
    tasks, from the partition graphs the runtime returns (StepSession.partition_graphs): what
    the step really sends over the links, data and control, sorted."""
    messages = []
    for graph_def in partition_graphs:
        for node in graph_def.node:
            if node.op in ("_Send", "_HostSend"):
                src = parse_device(node.attr["send_device"].s.decode()).task_name
                dst = parse_device(node.attr["recv_device"].s.decode()).task_name
                if src != dst:
                    messages.append((src, dst, node.attr["tensor_name"].s.decode()))
    return sorted(messages)


def link_graph(device_names, nbytes: int = WARM_BYTES) -> tuple:
    """(graph, feed, fetches): one step of it sends `nbytes` from every task to every other
    task, from the client to the first task (the fed tensor) and back (a fetched one)."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    elements = max(1, nbytes // 4)
    devices = task_devices(device_names)
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(devices[0]):
            feed = tf.compat.v1.placeholder(tf.float32, [elements], name="from_client")
            fetches = [tf.reduce_sum(feed)]
        made = []
        for task, device in enumerate(devices):
            with tf.device(device):     # random, so that no rewrite folds it into a constant
                made.append(tf.random.uniform([elements], seed=task))
        fetches.append(made[0])         # back to the client
        for src, tensor in enumerate(made):
            for dst, device in enumerate(devices):
                if dst != src:
                    with tf.device(device):
                        fetches.append(tf.reduce_sum(tensor))
    return graph, feed, fetches


def warm_links(runtime, steps: int = WARM_STEPS, nbytes: int = WARM_BYTES,
               budget_s: float = WARM_BUDGET_S) -> list:
    """Run `steps` steps of link_graph on the runtime's cluster (fewer once `budget_s` has
    passed); the seconds each took. Nothing to warm in this process: []."""
    if runtime.cluster is None:
        return []
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    graph, feed, fetches = link_graph(runtime.device_names, nbytes)
    values = {feed: np.ones(feed.shape.as_list(), np.float32)}
    seconds = []
    config = runtime.session_config(timeout_s=budget_s + 60)

    def run_steps():
        with tf.compat.v1.Session(runtime.target, graph=graph, config=config) as session:
            deadline = time.perf_counter() + budget_s
            while len(seconds) < steps and (not seconds or time.perf_counter() < deadline):
                start = time.perf_counter()
                session.run(fetches, values)
                seconds.append(time.perf_counter() - start)

    runtime.watched(run_steps)
    log.debug("warmed the links of %d tasks: %d steps of %.1f MB each way, %.1f ms first, "
             "%.1f ms last", len(task_devices(runtime.device_names)), len(seconds),
             nbytes / 2**20, seconds[0] * 1e3, seconds[-1] * 1e3)
    return seconds
