"""The messages a placed step sends between tasks, as TensorFlow's runtime will send them.

The simulator sends one message per tensor that crosses tasks in the graph as imported
(SimulationResult.task_transfers). The runtime sends another set: before partitioning,
Grappler inlines each function call (adding an input gate and identities on the caller's
task, whose control edges cross wherever the body's ops are), drops identities and no-ops
where that adds no crossing, groups control edges from one task into one message, and
lowers loops into frames whose crossing edges, and whose condition, cross again in every
iteration. On a graph of small ops each message
costs about as much as an op, so the count ranks placements where the simulator's transfers
do not (docs/results/simulator.md, "Messages between tasks"). `TaskMessages` asks Grappler itself: it runs
TensorFlow's graph optimizer offline on the placed graph, over a virtual cluster of the
runtime's devices, and counts the edges that cross tasks in what comes out: 10 ms on a small
model, a third of a second on ResNet50, 1.6 s on the Inception-V3 training step, so it
serves evaluating and fitting on a few placements, not a search.
"""

from __future__ import annotations

import logging
import os
from typing import Optional, Sequence

import numpy as np

from tf_placeto.devices import parse_device
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.log import progress
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.records import append_record, read_records
from tf_placeto.rewrite import placed_proto

log = logging.getLogger(__name__)

MESSAGES_FILE = "messages-v3.jsonl"  # beside a profile: each placement counted once


def task_messages(graph: OpGraph, device_names: Sequence[str], cost_model: CostModel,
                  directory: Optional[str] = None) -> Optional["TaskMessages"]:
    """A TaskMessages of `graph` over `device_names`, its loops run as many times as the
    profile `cost_model` counted; None where nothing crosses tasks (one task) or the graph
    has no source to optimize."""
    tasks = {parse_device(name).task_name for name in device_names}
    if len(tasks) < 2 or graph.source is None:
        return None
    iterations = int(cost_model.executions(graph).max(initial=1))
    return TaskMessages(graph, device_names, directory, iterations)


class TaskMessages:
    """Counts the messages between tasks of placements of `graph` (which must carry its
    source) over `device_names` (the runtime's, the session's own first), each placement
    optimized once: once ever with a `directory` (the profile's), where the counts are kept
    (a refit counts every logged run's placement). loop_iterations: how many times a step
    runs each loop (the profile's count of its most-run op; loops nested or of different
    lengths are not told apart)."""

    def __init__(self, graph: OpGraph, device_names: Sequence[str],
                 directory: Optional[str] = None, loop_iterations: int = 1):
        if graph.source is None:
            raise ValueError("counting TensorFlow's messages needs the graph's source")
        self.graph = graph
        self.device_names = list(device_names)
        self.loop_iterations = int(loop_iterations)
        self._path = os.path.join(directory, MESSAGES_FILE) if directory else None
        self._counted: dict = self._stored()     # assignment bytes -> (once, per iteration)
        self._failed = False

    def count(self, assignment) -> int:
        """Messages between tasks in one step of the placement (a device index per op, in
        the graph's order): data and control, the session's feeds and fetches included, a
        loop's messages once per iteration (`loop_iterations`, every loop alike)."""
        assignment = np.asarray(assignment, np.int64)
        key = assignment.tobytes()
        if key not in self._counted:
            placement = {op.name: self.device_names[d]
                         for op, d in zip(self.graph.ops, assignment)}
            self._counted[key] = step_messages(
                self._optimized(placement), parse_device(self.device_names[0]).task_name,
                self._feeds(), self._fetches())
            if self._path:
                append_record(self._path, {"assignment": assignment.tolist(),
                                           "messages": self._counted[key]})
        once, per_iteration = self._counted[key]
        return once + self.loop_iterations * per_iteration

    def _stored(self) -> dict:
        """Counts kept by earlier runs; lines that are not counts of this graph on these
        devices (torn by a killed run, damaged) are skipped, named in one line and dropped
        from the log (records.read_records)."""
        if not self._path:
            return {}
        return {np.asarray(entry["assignment"], np.int64).tobytes(): tuple(entry["messages"])
                for entry in read_records(self._path, self._a_count)}

    def _a_count(self, entry: dict) -> bool:
        """Whether a line of the log is a count as count() writes one: a device index per op
        of the graph, and two counts."""
        assignment, (once, per_iteration) = entry["assignment"], entry["messages"]
        return (len(assignment) == len(self.graph.ops)
                and all(type(device) is int and 0 <= device < len(self.device_names)
                        for device in assignment)
                and all(type(count) is int and count >= 0 for count in (once, per_iteration)))

    def extra(self, assignments, simulated) -> np.ndarray:
        """For each placement (a device index per op), how many more messages the runtime
        sends than the simulator's transfers between tasks (`simulated`, each placement's
        SimulationResult.task_transfers; negative: fewer); 0 once Grappler has failed on
        this graph (said once, as a warning: the simulator then goes without the count).
        Placements not counted yet are counted first, under a progress bar when many."""
        missing = [a for a in assignments
                   if np.asarray(a, np.int64).tobytes() not in self._counted]
        if missing and not self._failed:
            try:
                for assignment in missing if len(missing) < 8 else progress(
                        missing, desc="counting TensorFlow's messages", unit="placement",
                        leave=False):
                    self.count(assignment)
            except Exception as exc:  # noqa: BLE001 -- a refinement: never worth a failure
                self._failed = True
                log.warning("could not count TensorFlow's messages between tasks (%s); the "
                            "simulator goes without them", exc)
        if self._failed:
            return np.zeros(len(assignments))
        return np.array([self.count(a) for a in assignments]) - np.asarray(simulated)

    def sent(self, assignments, simulated) -> np.ndarray:
        """For each placement, the messages between tasks its step sends: TensorFlow's count,
        or the simulator's transfers (`simulated`) once Grappler has failed (extra)."""
        return np.asarray(simulated, float) + self.extra(assignments, simulated)

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
        it), functions inlined, loops lowered, no-ops and identities dropped, control edges
        grouped."""
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
    task = _task_of(graph_def, client, feeds)
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


def step_messages(graph_def, client: str, feeds: set, fetches: Sequence[str]) -> tuple:
    """(once, per iteration): the messages of a step that are sent once, and those sent in
    every iteration of its loops: the crossing edges made inside a loop's frame, and the
    loop's condition (its LoopCond's value), which the partitioner sends every iteration to
    each other task that runs part of the frame, once per task even where a Switch there
    reads it too."""
    task = _task_of(graph_def, client, feeds)
    frame = loop_frames(graph_def)
    messages = crossing_edges(graph_def, client, feeds, fetches)
    looped = sum(1 for source, _, _ in messages if frame.get(source, ""))
    tasks: dict = {}
    for node in graph_def.node:
        if frame.get(node.name, ""):
            tasks.setdefault(frame[node.name], set()).add(task(node.name))
    conditions = sum(1 for node in graph_def.node
                     if node.op == "LoopCond" and frame.get(node.name, "")
                     for other in tasks[frame[node.name]] - {task(node.name)}
                     if (node.name, 0, other) not in messages)
    return len(messages) - looped, looped + conditions


def _task_of(graph_def, client: str, feeds: set):
    """name -> the task its node runs on (see crossing_edges)."""
    device = {node.name: node.device for node in graph_def.node}
    tasks = {d: parse_device(d).task_name for d in set(device.values()) if d}
    return lambda name: client if name in feeds else tasks.get(device[name], client)


def loop_frames(graph_def) -> dict:
    """{node: its loop frame ("" outside every loop)} of a graph whose loops are lowered
    (Enter, Merge, Switch, NextIteration, Exit): an Enter opens its `frame_name` inside its
    input's frame, an Exit closes it, any other node runs in its inputs' frame. Nodes are
    taken in an order where each follows its inputs, a NextIteration's edge into its Merge
    left out (the loop's one back edge)."""
    nodes = {node.name: node for node in graph_def.node}
    parent, frame = {"": ""}, {}
    inputs = {name: [i.lstrip("^").split(":")[0] for i in node.input
                     if i.lstrip("^").split(":")[0] in nodes
                     and nodes[i.lstrip("^").split(":")[0]].op != "NextIteration"]
              for name, node in nodes.items()}
    waiting = {name: len(sources) for name, sources in inputs.items()}
    consumers: dict = {}
    for name, sources in inputs.items():
        for source in sources:
            consumers.setdefault(source, []).append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    while ready:
        name = ready.pop()
        node = nodes[name]
        outer = frame.get(inputs[name][0], "") if inputs[name] else ""
        if node.op in ("Enter", "RefEnter"):
            frame[name] = node.attr["frame_name"].s.decode() or name
            parent.setdefault(frame[name], outer)
        elif node.op in ("Exit", "RefExit"):
            frame[name] = parent.get(outer, "")
        else:
            frame[name] = outer
        for consumer in consumers.get(name, []):
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    return frame
