"""The messages a placed step sends between tasks, as TensorFlow's runtime will send them.

The simulator sends one message per tensor that crosses tasks in the graph as imported. The
runtime sends another set: before partitioning, Grappler inlines each function call (adding
an input gate and identities on the caller's task, whose control edges cross wherever the
body's ops are), drops identities and no-ops where that adds no crossing, and groups control
edges from one task into one message. On a graph of small ops each message costs about as
much as an op, so the count ranks placements where the simulator's transfers do not (BUILD.md,
"The calibrated simulator"). `TaskMessages` asks Grappler itself: it runs TensorFlow's graph
optimizer offline on the placed graph, over a virtual cluster of the runtime's devices, and
counts the edges that cross tasks in what comes out: 10 ms on a small model, a third of a
second on ResNet50, 1.6 s on the Inception-V3 training step, so it serves evaluating and
fitting on a few placements, not a search.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Optional, Sequence

import numpy as np

from tf_placeto.devices import parse_device
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.simulator import SimulationProblem
from tf_placeto.rewrite import placed_proto

log = logging.getLogger(__name__)

MESSAGES_FILE = "messages.jsonl"     # beside a profile: each placement counted once


def task_messages(graph: OpGraph, device_names: Sequence[str],
                  directory: Optional[str] = None) -> Optional["TaskMessages"]:
    """A TaskMessages of `graph` over `device_names`; None where nothing crosses tasks (one
    task) or the graph has no source to optimize."""
    tasks = {parse_device(name).task_name for name in device_names}
    return TaskMessages(graph, device_names, directory) if len(tasks) > 1 and graph.source \
        else None


class TaskMessages:
    """Counts the messages between tasks of placements of `graph` (which must carry its
    source) over `device_names` (the runtime's, the session's own first), each placement
    optimized once: once ever with a `directory` (the profile's), where the counts are kept
    (a refit counts every logged run's placement)."""

    def __init__(self, graph: OpGraph, device_names: Sequence[str],
                 directory: Optional[str] = None):
        if graph.source is None:
            raise ValueError("counting TensorFlow's messages needs the graph's source")
        self.graph = graph
        self.device_names = list(device_names)
        self._path = os.path.join(directory, MESSAGES_FILE) if directory else None
        self._counted: dict = self._stored()
        self._extra: dict = {}
        self._failed = False

    def count(self, assignment) -> int:
        """Messages between tasks in one step of the placement (a device index per op, in
        the graph's order): data and control, the session's feeds and fetches included."""
        key = tuple(int(d) for d in assignment)
        if key not in self._counted:
            placement = {op.name: self.device_names[d] for op, d in zip(self.graph.ops, key)}
            self._counted[key] = len(crossing_edges(
                self._optimized(placement), parse_device(self.device_names[0]).task_name,
                self._feeds(), self._fetches()))
            if self._path:
                with open(self._path, "a", encoding="utf-8") as file:
                    file.write(json.dumps({"assignment": key, "messages": self._counted[key]})
                               + "\n")
        return self._counted[key]

    def _stored(self) -> dict:
        """Counts kept by earlier runs, skipping lines a killed run left unfinished."""
        counted = {}
        if self._path and os.path.isfile(self._path):
            with open(self._path, encoding="utf-8") as file:
                for line in file:
                    try:
                        entry = json.loads(line)
                        counted[tuple(entry["assignment"])] = int(entry["messages"])
                    except (ValueError, KeyError, TypeError):
                        continue
        return counted

    def extra(self, problem: SimulationProblem, assignment) -> int:
        """How many more messages the runtime sends than the simulator's transfers between
        tasks (negative: fewer); 0 once Grappler has failed on this graph (said once, as a
        warning: the simulator then goes without the count)."""
        key = tuple(int(d) for d in assignment)
        if key not in self._extra and not self._failed:
            try:
                self._extra[key] = self.count(key) - simulated_messages(problem,
                                                                        np.asarray(key))
            except Exception as exc:  # noqa: BLE001 -- a refinement: never worth a failure
                self._failed = True
                log.warning("could not count TensorFlow's messages between tasks (%s); the "
                            "simulator goes without them", exc)
        return self._extra.get(key, 0)

    def _feeds(self) -> set:
        return {self.graph.ops[i].name for i in self.graph.feed_ops}

    def _fetches(self) -> list:
        source = self.graph.source
        if source.fetches:
            return [name.lstrip("^").split(":")[0] for name in source.fetches]
        return [self.graph.ops[op].name for op, _ in self.graph.fetch_outputs]

    def _optimized(self, placement: dict):
        """The placed graph as Grappler leaves it for the runtime: pruned to what the step
        fetches, every op without a device on the session's (as the runtime's placer puts
        it), functions inlined, no-ops and identities dropped, control edges grouped."""
        import tensorflow as tf  # heavy: loaded on first use, not with the package
        from tensorflow.core.protobuf import config_pb2, device_properties_pb2, meta_graph_pb2
        from tensorflow.python.grappler import cluster as grappler_cluster
        from tensorflow.python.grappler import tf_optimizer

        source = self.graph.source
        proto = placed_proto(source, self.graph, placement)
        graph_def = (proto.meta_graphs[source.meta_graph_index].graph_def
                     if source.kind == "saved_model" else
                     proto.graph_def if source.kind == "meta_graph_def" else proto)
        fetches = self._fetches()
        if fetches:
            graph_def = tf.compat.v1.graph_util.extract_sub_graph(graph_def, fetches)
        meta_graph = meta_graph_pb2.MetaGraphDef(graph_def=graph_def)
        for node in meta_graph.graph_def.node:
            node.device = node.device or self.device_names[0]
        meta_graph.collection_def["train_op"].node_list.value.extend(fetches)
        # a core and a clock for each device: Grappler's cost estimates want them (they do
        # not change what crosses) and warn without them
        cluster = grappler_cluster.Cluster(devices=[
            device_properties_pb2.NamedDevice(name=name, properties=(
                device_properties_pb2.DeviceProperties(type=parse_device(name).device_type,
                                                       num_cores=1, frequency=1000)))
            for name in self.device_names])
        return tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta_graph, cluster=cluster)


def crossing_edges(graph_def, client: str, feeds: set, fetches: Sequence[str]) -> set:
    """{(node, output slot or -1 for control, receiving task)}: each a message, as the
    partitioner sends one per tensor (or per control source) and receiving task. A fed node's
    value comes from the session's task (`client`); a fetched node made elsewhere sends its
    value there; a node without a device runs there."""
    nodes = {node.name: node for node in graph_def.node}
    task_of = {device: parse_device(device).task_name
               for device in {node.device for node in graph_def.node} if device}

    def task(name: str) -> str:
        return client if name in feeds else task_of.get(nodes[name].device, client)

    messages = set()
    for node in graph_def.node:
        for text in node.input:
            control = text.startswith("^")
            source, _, slot = text.lstrip("^").partition(":")
            if source in nodes and task(source) != task(node.name):
                messages.add((source, -1 if control else int(slot or 0), task(node.name)))
    messages.update((name, 0, client) for name in fetches
                    if name in nodes and task(name) != client)
    return messages


def simulated_messages(problem: SimulationProblem, assignment: np.ndarray) -> int:
    """The simulator's transfers between tasks in one step of `assignment`: each tensor once
    per other task that reads it, each feed placed outside the session's task, each fetched
    tensor made outside it (engine.py's rules)."""
    device_task = np.asarray(problem.device_task)
    home, task = device_task[0], device_task[assignment]
    producer_task = task[problem.tensor_producer]
    reads = {(int(t), int(task[c])) for t, c in zip(problem.edge_tensor, problem.edge_consumer)
             if task[c] != producer_task[t]}
    feeds = int(np.sum(task[problem.feed_ops] != home))
    fetches = int(np.sum(producer_task[problem.fetch_tensors] != home))
    return len(reads) + feeds + fetches
