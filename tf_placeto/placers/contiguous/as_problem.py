"""A cost graph as the `PlacementProblem` every placer of the project decides on, so that
metis, m-*, heft, hill_climb and placeto split Tarnawski et al.'s instances too.

One op per node, named as the node: its accelerator time (fpgaLatency) and CPU time
(cpuLatency) are the two device types' compute columns; a colour class is a group, the unit
placers move whole (a class with a node that no accelerator runs may only go to the CPUs).
Group ids follow each class's first node in the topological order; an edge against that
order (a training graph's backward node in a class of its forward one) is a feedback edge.

Times stay in the file's unit, read as the simulator's microseconds. A node's output is one
tensor whose wire time between any two devices is the node's output cost: the largest cost is
`BYTES_PER_COST` bytes, every link carries that many in that cost's time, without latency.
A node's `size` is what it holds on its device for the whole step (persistent bytes), and
each accelerator holds `maxSizePerFPGA`, the CPUs without limit. The simulator counts live
tensors too, which their accounting does not: sizes and capacities are scaled by a power of
two that puts all the tensors of a stream under 1 / TENSOR_SHARE of a capacity, and each
accelerator holds those tensors more. A split then fits in the simulator where it fits their
accounting, and fails where some accelerator's sizes pass its capacity by more than that
share.
"""

from __future__ import annotations

import math

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.graph.colocation import ColocationSets
from tf_placeto.graph.cost_graph import CostGraph, device_names, node_names
from tf_placeto.graph.grouping import GroupGraph
from tf_placeto.graph.op_graph import DataEdge, Op, OpGraph, TensorInfo
from tf_placeto.measure.simulator import SimulationProblem
from tf_placeto.measure.simulator.stream import stream_steps
from tf_placeto.placers.problem import PlacementProblem

BYTES_PER_COST = 2**20     # the largest output's bytes: costs kept to about 1e-6 of it
TENSOR_SHARE = 2**20       # a capacity over all the tensors a stream holds, at least
_ACCELERATOR, _CPU = 0, 1  # compute columns
_MAX_BYTES = 2**62         # what int64 byte counts may reach


def placement_problem(graph: CostGraph, objective: str, in_flight: int) -> PlacementProblem:
    """The problem of placing `graph` under the project's `objective` (throughput: with
    `in_flight` steps at once); group g's device is node i's where group_of(graph)[i] == g."""
    if graph.max_cpus == 0 and not graph.supported.all():
        i = int(np.flatnonzero(~graph.supported)[0])
        raise InputError(f"{graph.source}: node {graph.node_ids[i]} runs only on a CPU, "
                         "and the graph has none")
    ops = op_graph(graph)
    steps = stream_steps(in_flight) if objective == "throughput" else 1
    simulation = _simulation(graph, ops, steps)
    return PlacementProblem.from_simulation(_groups(graph, ops), simulation).with_objective(
        objective, in_flight)


def group_of(graph: CostGraph) -> np.ndarray:
    """Each node's group: its colour class, numbered by the class's first node in the
    topological order."""
    position = np.empty(graph.n_nodes, np.int64)
    position[graph.topological_order] = np.arange(graph.n_nodes)
    first = np.full(int(graph.color_class.max()) + 1, graph.n_nodes)
    np.minimum.at(first, graph.color_class, position)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[graph.color_class]


def op_graph(graph: CostGraph) -> OpGraph:
    """One op per node (node_names), one output each carrying the node's output cost as bytes
    (output_bytes), one data edge per edge of the file."""
    nbytes = output_bytes(graph)
    ops = [Op(index=i, name=name, type="CostGraphNode", requested_device="", node_def=None,
              scope=None, outputs=[TensorInfo("float32", None, int(nbytes[i]))])
           for i, name in enumerate(node_names(graph))]
    slot = np.zeros(graph.n_nodes, np.int64)
    edges = []
    for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
        edges.append(DataEdge(src, 0, dst, int(slot[dst])))
        slot[dst] += 1
    return OpGraph(ops, edges, [], [], source=graph.source)


def output_bytes(graph: CostGraph) -> np.ndarray:
    """Each node's output in bytes: its cost times bytes_per_unit(graph), rounded."""
    return np.rint(graph.output_cost * bytes_per_unit(graph)).astype(np.int64)


def bytes_per_unit(graph: CostGraph) -> float:
    """The links' bandwidth: bytes per unit of the file's time (BYTES_PER_COST for the
    largest output cost)."""
    largest = float(graph.output_cost.max(initial=0.0))
    return BYTES_PER_COST / largest if largest > 0 else 1.0


def memory_scale(graph: CostGraph, steps: int) -> tuple:
    """(what sizes and capacities are multiplied by, the bytes of all the tensors of `steps`
    steps): the least power of two that puts those tensors under 1 / TENSOR_SHARE of a
    capacity, within int64."""
    tensors = int(output_bytes(graph).sum()) * steps
    room = max(graph.memory_per_accelerator, float(graph.size.max(initial=0.0)), 1.0)
    wanted = max(0, math.ceil(math.log2(max(tensors * TENSOR_SHARE / room, 1.0))))
    largest = max(float(graph.size.sum()), graph.memory_per_accelerator, 1.0) + tensors
    return 2 ** min(wanted, int(math.log2(_MAX_BYTES / largest))), tensors


def _simulation(graph: CostGraph, ops: OpGraph, steps: int) -> SimulationProblem:
    """The op-level problem, its memory scaled for a stream of `steps` steps (memory_scale)."""
    k, names = graph.max_accelerators, device_names(graph)
    scale, tensors = memory_scale(graph, steps)
    return SimulationProblem.from_op_graph(
        ops, compute_us=np.stack([graph.accel_latency, graph.cpu_latency], axis=1),
        device_names=names,
        device_type_of=np.array([_ACCELERATOR] * k + [_CPU] * graph.max_cpus),
        link_latency_us=0.0, link_bytes_per_us=bytes_per_unit(graph),
        memory_capacity=np.array([graph.memory_per_accelerator * scale + tensors] * k
                                 + [np.inf] * graph.max_cpus),
        persistent_bytes=np.rint(graph.size * scale).astype(np.int64))


def _groups(graph: CostGraph, ops: OpGraph) -> GroupGraph:
    """The colour classes as groups and as colocation sets (CPU only where a member is)."""
    groups = group_of(graph)
    n_groups = int(groups.max()) + 1
    members = [np.flatnonzero(groups == g).tolist() for g in range(n_groups)]
    cpu_only = np.bincount(groups, weights=~graph.supported, minlength=n_groups) > 0
    colocation = ColocationSets(
        set_of=groups, members=members, reasons=[["colorClass"]] * n_groups,
        device_types=[frozenset({"CPU"}) if only else None for only in cpu_only])
    # an output read by several nodes of one group travels to it once
    a, b = groups[graph.edge_src], groups[graph.edge_dst]
    crossing = np.flatnonzero(a != b)
    sent = np.unique(np.stack([graph.edge_src[crossing], b[crossing]], axis=1), axis=0)
    nbytes = output_bytes(graph)
    edges, feedback = {}, {}
    for node, dst in sent.tolist():
        src = int(groups[node])
        target = edges if src < dst else feedback
        target[(src, dst)] = target.get((src, dst), 0) + int(nbytes[node])
    work = np.where(graph.supported, graph.accel_latency, graph.cpu_latency)
    return GroupGraph(op_graph=ops, colocation=colocation, group_of=groups, groups=members,
                      edges=edges, feedback_edges=feedback, op_work=work)
