"""Tarnawski et al.'s contiguous DP on a TensorFlow graph: the best pipeline split of its groups.

The graph becomes one of their cost graphs (placers/contiguous/): each op a node with its time
on each kind of device, what its outputs that leave its group take of each end per step (their
copies or their bytes on the link; a link's latency overlaps other steps' work in a stream), its
group's memory against a device's capacity, and its group as its colour class, so that groups
move whole. The forward edges order the pipeline: a split is a chain of pieces of the group
DAG, one per device, and the DP finds the one whose busiest device is least busy, each output
that crosses charged to its sender and to every device that reads it (their accounting; the
time per sample of a pipeline). The op-level simulator then judges the split as it judges
every placer's, under the problem's objective (a stream of steps under throughput).

A training step is a training graph of theirs: the ops of its backward pass
(OpGraph.backward_mask) are backward nodes, which follow their colour class and do not order
the pipeline, so a layer's forward and backward ops can share a stage. A group of backward ops
alone joins the class of the forward group whose outputs it reads most (the layer it
differentiates); its edges are charged, not ordered. Without this, the whole backward pass
came after the forward pass in the chain, and every split cut the activations that the
backward pass reads.

Their model has no place for the fixed cost of using another task of a cluster (its RunGraph
call each step): the DP's table holds the best split for each number of accelerators, and the
one whose max-load plus that cost is least wins. Nor for the feedback edges of a graph
without gradient scopes (a variable and its late update), which do not order the pipeline
and whose bytes are not charged. Devices of two speeds are their accelerators (the faster)
and CPUs (which pay for no transfer, as in their model); more are refused. A group goes
wherever an accelerator runs it; `common.repair` then moves a group off a device without its
kernel, and off a device over its memory where it can.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.graph.cost_graph import CostGraph
from tf_placeto.graph.grouping import coarsen
from tf_placeto.measure.simulator.schedule import remote_tasks
from tf_placeto.placers.common import repair
from tf_placeto.placers.contiguous.dp import (solve_max_load_per_accelerators,
                                               with_progress_bar)
from tf_placeto.placers.contiguous.ideals import MAX_IDEALS as COST_GRAPH_MAX_IDEALS
from tf_placeto.placers.contiguous.ideals import TooManyIdeals
from tf_placeto.placers.objectives import crossing_costs_us
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import Option, PlacerSpec

# Ideals the DP may enumerate before it splits coarser pieces instead: enumerating a million
# takes seconds where the DP over 20,000 takes a tenth of one (Inception-V3: 127 groups have
# more than a million, their 63 halves 18,708).
MAX_IDEALS = 100_000


def place(problem: PlacementProblem, *, seed: int = 0, max_ideals: Optional[int] = None) -> tuple:
    """seed: unused (deterministic). max_ideals: the most ideals (downward-closed sets of
    pieces) the DP may enumerate (default MAX_IDEALS): where the groups have more, the DP
    splits chunks of consecutive groups instead, halving their number until it fits (info:
    "pieces"). On a cluster's tasks, where each task a step uses beside the session's costs
    a fixed time per step, the DP's table gives the best split for each number of
    accelerators from one up, and the one whose max-load plus that cost is least wins
    (info: "accelerators")."""
    max_ideals = max_ideals or MAX_IDEALS
    accelerators, cpus = _device_kinds(problem)
    simulation = problem.simulation
    # what the tasks beside the session's can cost at most: a split with fewer accelerators
    # that wins must be within it of the best with all
    slack_us = simulation.remote_task_us * (len(np.unique(simulation.device_task)) - 1)
    counts = None if slack_us > 0 else [accelerators.size]
    piece_of_group = np.arange(problem.n_groups)
    while True:
        graph = cost_graph(problem, accelerators, cpus, piece_of_group)
        try:
            splits, info = with_progress_bar(solve_max_load_per_accelerators, graph, slack_us,
                                             max_ideals=max_ideals, counts=counts)
            break
        except TooManyIdeals:
            pieces = int(piece_of_group.max()) + 1
            if pieces == 1:
                raise
            _, piece_of_group = coarsen(problem.groups, pieces // 2)
    fits = splits[-1][1] is not None
    if not fits:        # no split fits the memory model: the least loaded one, for repair
        splits, info = with_progress_bar(
            solve_max_load_per_accelerators,
            dataclasses.replace(graph, memory_per_accelerator=np.inf), slack_us,
            max_ideals=max_ideals, counts=counts)
    # all accelerators first, then one up: the first of equals wins
    ranked = [_decided(problem, load, assignment, accelerators, cpus)
              for load, assignment in [splits[-1], *splits[1:-1]] if assignment is not None]
    _, load, used, decision, moved = min(ranked, key=lambda split: split[0])
    return decision, {
        "max_load_us": load, "fits_memory_model": fits, "moved_by_repair": moved,
        "accelerators": used, "pieces": int(piece_of_group.max()) + 1,
        "ideals": info["ideals"], "dp_seconds": info["seconds"]}


def _decided(problem: PlacementProblem, load: float, assignment: np.ndarray,
             accelerators: np.ndarray, cpus: np.ndarray) -> tuple:
    """(max-load plus the fixed cost of the tasks the split uses beside the session's,
    max-load, accelerators used, the repaired decision, groups repair moved): what `place`
    ranks splits by, first."""
    decision, moved = repair(problem, _in_pipeline_order(assignment[_first_ops(problem)],
                                                         accelerators, cpus))
    simulation = problem.simulation
    tasks = len(remote_tasks(simulation, problem.op_devices(decision)))
    used = int(np.isin(accelerators, decision).sum())
    return float(load) + simulation.remote_task_us * tasks, float(load), used, decision, moved


def cost_graph(problem: PlacementProblem, accelerators: np.ndarray, cpus: np.ndarray,
               piece_of_group: np.ndarray) -> CostGraph:
    """The problem's op graph as a cost graph in their model: node i is op i, its colour
    class its group's piece (piece ids: non-decreasing in group ids); `accelerators` and
    `cpus` are the problem's device indices of each kind (accelerators first in the cost
    graph's device numbering)."""
    simulation = problem.simulation
    group_of = problem.groups.group_of
    backward = problem.groups.op_graph.backward_mask()
    piece_of = piece_of_group[_stage_groups(problem, backward)][group_of]
    n_ops = group_of.shape[0]
    op_us = simulation.compute_us[:, simulation.device_type_of] + simulation.op_overhead_us
    producer = simulation.tensor_producer[simulation.edge_tensor]     # per data edge
    src = np.concatenate([producer, simulation.control_src])
    dst = np.concatenate([simulation.edge_consumer, simulation.control_dst])
    # feedback edges into forward ops left out; edges into backward ops order nothing
    keep = (src != dst) & ((piece_of[src] <= piece_of[dst]) | backward[dst])
    pairs = np.unique(src[keep] * n_ops + dst[keep])
    # an output pays its transfer when some reader is in another piece
    leaves = piece_of[producer] != piece_of[simulation.edge_consumer]
    crossing = np.unique(simulation.edge_tensor[leaves])
    output_cost = np.bincount(simulation.tensor_producer[crossing], minlength=n_ops,
                              weights=_occupied_us(problem, simulation.tensor_bytes[crossing]))
    size = np.zeros(n_ops)
    size[_first_ops(problem)] = problem.memory_bytes
    op_us = np.where(np.isfinite(op_us), op_us, 0.0)       # no kernel: `supported` says so
    on_cpu = op_us[:, cpus[0]] if cpus.size else np.zeros(n_ops)
    return CostGraph(
        node_ids=np.arange(n_ops, dtype=np.int64), names=tuple(simulation.op_names),
        cpu_latency=on_cpu, accel_latency=op_us[:, accelerators[0]],
        supported=problem.allowed[:, accelerators].any(axis=1)[group_of], size=size,
        is_backward=backward, color_class=piece_of.astype(np.int64),
        edge_src=pairs // n_ops, edge_dst=pairs % n_ops, output_cost=output_cost,
        max_accelerators=int(accelerators.size), max_cpus=int(cpus.size),
        memory_per_accelerator=float(problem.capacity_bytes[accelerators].min()),
        topological_order=np.asarray(problem.groups.op_graph.topological_order(), np.int64),
        source="the graph's groups")


def _stage_groups(problem: PlacementProblem, backward: np.ndarray) -> np.ndarray:
    """Per group, the group whose stage it shares: itself where it holds a forward op; for a
    group of backward ops alone, the forward group whose outputs it reads the most bytes of
    (each edge weighing a byte more, so that empty tensors count), or itself where it reads
    none (their DP then places it by the mirror image of its backward edges)."""
    simulation = problem.simulation
    group_of = problem.groups.group_of
    has_forward = np.bincount(group_of[~backward], minlength=problem.n_groups) > 0
    producer = simulation.tensor_producer[simulation.edge_tensor]
    reader = simulation.edge_consumer
    reads_forward = ~has_forward[group_of[reader]] & ~backward[producer]
    read_bytes = np.zeros((problem.n_groups, problem.n_groups))
    np.add.at(read_bytes, (group_of[reader[reads_forward]], group_of[producer[reads_forward]]),
              simulation.tensor_bytes[simulation.edge_tensor[reads_forward]] + 1.0)
    stage = np.arange(problem.n_groups)
    joins = read_bytes.sum(axis=1) > 0
    stage[joins] = read_bytes[joins].argmax(axis=1)
    return stage


def _first_ops(problem: PlacementProblem) -> np.ndarray:
    """Each group's first op (the group's device is its first op's in the cost graph)."""
    return np.array([ops[0] for ops in problem.groups.groups], np.int64)


def _occupied_us(problem: PlacementProblem, nbytes: np.ndarray) -> np.ndarray:
    """What a tensor that crosses takes of each end per step, averaged over ordered pairs of
    distinct devices, from the simulator's split of a transfer (objectives.crossing_costs_us):
    the larger of its copy at each end (processor time where workers serialize) and its bytes
    on the link, which the ends' pipeline stages share. Not the link's latency (the wire's
    time for no bytes): in a stream, other steps' work fills it."""
    if problem.n_devices < 2:
        return np.zeros(len(nbytes))
    src, dst = np.nonzero(~np.eye(problem.n_devices, dtype=bool))
    costs = crossing_costs_us(problem, np.asarray(nbytes, np.float64)[:, None], 0.0, src, dst)
    latency_us = crossing_costs_us(problem, 0.0, 0.0, src, dst).wire_us
    return np.maximum(costs.sender_us, costs.wire_us - latency_us).mean(axis=1)


def _device_kinds(problem: PlacementProblem) -> tuple:
    """(accelerators, cpus): the problem's devices split by their speed, what the groups
    that every device runs cost on them; devices of one kind are all accelerators, of two
    the faster kind is."""
    everywhere = problem.allowed.all(axis=1)
    kinds, kind_of = np.unique(problem.compute_us[everywhere].T, axis=0, return_inverse=True)
    kind_of = kind_of.reshape(-1)
    if len(kinds) > 2:
        raise InputError(f"method dp splits over devices of at most two kinds (their "
                         f"accelerators and CPUs); these {problem.n_devices} devices run the "
                         f"groups at {len(kinds)} speeds")
    fast = int(np.argmin(kinds.sum(axis=1)))
    devices = np.arange(problem.n_devices)
    return devices[kind_of == fast], devices[kind_of != fast]


def _in_pipeline_order(pieces: np.ndarray, accelerators: np.ndarray,
                       cpus: np.ndarray) -> np.ndarray:
    """Device per group from the DP's device per group (accelerators 0..k-1, then the
    CPUs): the accelerators in the order of the pipeline's pieces, the first piece (which
    reads the step's inputs) on the first accelerator (on a cluster, the session's task)."""
    k = accelerators.size
    on_accel = pieces < k
    used, first = np.unique(pieces[on_accel], return_index=True)
    device_of = np.concatenate([accelerators, cpus])
    device_of[used[np.argsort(first)]] = accelerators[:used.size]
    return device_of[pieces]


PLACER = PlacerSpec(
    "dp", place, "Tarnawski et al.'s DP: the contiguous split of the group DAG, one piece per "
    "device, whose busiest device is least busy per step (a pipeline's throughput)",
    order=97, objectives=("throughput",), options=(
        Option("--max-ideals", "max_ideals", int, None, metavar="N", least=1,
               help="the most ideals (downward-closed sets) the DP may enumerate; a "
                    f"TensorFlow graph's wider group DAG is split in coarser pieces (default "
                    f"{MAX_IDEALS:,}), a wider cost graph refused (default "
                    f"{COST_GRAPH_MAX_IDEALS:,})"),))
