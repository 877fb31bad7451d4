"""Ops -> groups: the units a placer decides for.

1. Atoms: hard colocation sets (never split), plus producer/consumer pairs that Grappler fuses
   into one kernel (Conv2D+BiasAdd+Relu, ...), so a placement cannot cut a fused chain whose
   profile says it costs one kernel.
2. Order: a topological order of the atoms, ties going to the atom whose first op comes first
   in the graph's demand order (each op just before its first consumer, depth first from the
   sinks), which keeps chains together and puts a variable next to the layer that reads it.
   Where colocation closes a cycle, the atom that comes first in demand order goes first.
3. Coarsening: the order is cut into at most `max_groups` contiguous pieces of equal weight,
   weight being half estimated work and half op count. Contiguous pieces of an order that all
   group edges follow cannot form a cycle, and the cut is deterministic.

A colocation set whose ops sit far apart in the step (a variable read in the forward pass and
updated after the backward pass) makes edges that point backwards in that order: TensorFlow
forces them, and no grouping that keeps the set whole can avoid them. They are kept apart as
`feedback_edges`; `edges` only go forward, so the group graph itself is a DAG whose group ids
are a topological order.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Optional

import numpy as np

from tf_placeto.graph.colocation import ColocationSets, UnionFind, colocation_sets
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.work import estimate_work

# The RNN planner of Mirhoseini et al. capped groups at 256; episodes of a few hundred steps
# keep learned placers fast while leaving Inception-V3 ~19 ops per group.
DEFAULT_MAX_GROUPS = 256

_PRODUCERS = {"Conv2D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2", "Conv3D"}
_NORMALISERS = {"BiasAdd", "FusedBatchNorm", "FusedBatchNormV3", "Add", "AddV2"}
_ACTIVATIONS = {"Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid", "Selu", "Softplus"}
_FUSABLE = {(p, n) for p in _PRODUCERS for n in _NORMALISERS} | {
    (n, a) for n in _NORMALISERS | _PRODUCERS for a in _ACTIVATIONS}


@dataclasses.dataclass
class GroupGraph:
    """Groups of ops, a DAG over them, and the hard rules each group carries."""

    op_graph: OpGraph
    colocation: ColocationSets
    group_of: np.ndarray          # op index -> group id
    groups: list                  # group id -> sorted op indices; ids are a topological order
    edges: dict                   # (src group, dst group) -> bytes sent, src < dst
    feedback_edges: dict          # (src group, dst group) -> bytes, src > dst (forced)
    op_work: np.ndarray           # per op, the estimate the groups were balanced with

    def __len__(self) -> int:
        return len(self.groups)

    def __repr__(self) -> str:
        return (f"GroupGraph({len(self.groups)} groups over {len(self.op_graph)} ops, "
                f"{len(self.edges)} edges, {len(self.feedback_edges)} feedback edges)")

    @property
    def work(self) -> np.ndarray:
        """Estimated work per group."""
        return np.bincount(self.group_of, weights=self.op_work, minlength=len(self.groups))

    def device_types(self, group: int) -> Optional[frozenset]:
        """Device types every op of the group has a kernel for (None: any)."""
        allowed = None
        for s in np.unique(self.colocation.set_of[self.groups[group]]):
            types = self.colocation.device_types[s]
            if types is not None:
                allowed = types if allowed is None else allowed & types
        return allowed

    def op_names(self, group: int) -> list:
        return [self.op_graph.ops[i].name for i in self.groups[group]]

    def placement_for(self, group_devices) -> dict:
        """{op name: device} giving every op its group's device."""
        if len(group_devices) != len(self.groups):
            raise ValueError(f"{len(group_devices)} devices for {len(self.groups)} groups")
        return {self.op_graph.ops[i].name: group_devices[g]
                for g, ops in enumerate(self.groups) for i in ops}

    def summary(self) -> dict:
        """Counts and balance, for `inspect` and reports."""
        sizes = np.array([len(g) for g in self.groups])
        work = self.work
        return {
            "num_ops": len(self.op_graph),
            "num_edges": len(self.op_graph.data_edges),
            "num_control_edges": len(self.op_graph.control_edges),
            "num_colocation_groups": len(self.colocation.multi_op_sets()),
            "num_groups": len(self.groups),
            "num_group_edges": len(self.edges),
            "num_feedback_edges": len(self.feedback_edges),
            "largest_group_ops": int(sizes.max()) if len(sizes) else 0,
            "work_imbalance": float(work.max() / work.mean()) if len(work) else 0.0,
        }


def group_ops(graph: OpGraph, max_groups: int = DEFAULT_MAX_GROUPS,
              op_work: Optional[np.ndarray] = None) -> GroupGraph:
    """Group `graph` into at most `max_groups` groups (see module doc).

    op_work: per-op cost to balance with (measured costs once profiled); defaults to the
    static estimate of `estimate_work`.
    """
    if max_groups < 1:
        raise ValueError("max_groups must be at least 1")
    colocation = colocation_sets(graph)
    op_work = estimate_work(graph) if op_work is None else np.asarray(op_work, dtype=np.float64)

    atoms = UnionFind(len(graph.ops))
    for ops in colocation.members:
        for i in ops[1:]:
            atoms.union(ops[0], i)
    _merge_fusable_chains(graph, atoms)
    atom_of = atoms.labels()
    n_atoms = int(atom_of.max()) + 1 if len(atom_of) else 0

    first = np.full(n_atoms, np.iinfo(np.int64).max)
    np.minimum.at(first, atom_of, graph.demand_order())
    colocated = np.zeros(n_atoms, dtype=bool)
    for ops in colocation.members:
        if len(ops) > 1:
            colocated[atom_of[ops[0]]] = True
    atom_rank = _atom_order(graph, atom_of, first, colocated)

    total_work = op_work.sum() or 1.0
    op_weight = 0.5 * op_work / total_work + 0.5 / max(len(graph.ops), 1)
    atom_weight = np.bincount(atom_rank[atom_of], weights=op_weight, minlength=n_atoms)
    chunk_of_rank = contiguous_chunks(atom_weight, max_groups)
    group_of = chunk_of_rank[atom_rank[atom_of]]

    return _group_graph(graph, colocation, group_of, op_work)


def coarsen(groups: GroupGraph, max_groups: int) -> tuple:
    """(coarser GroupGraph, chunk of each group): consecutive group ids merged into at most
    `max_groups` chunks of equal weight. Ids are a topological order, so chunks of consecutive
    ids keep the group graph acyclic; colocation sets stay whole, being inside groups."""
    if max_groups < 1:
        raise ValueError("max_groups must be at least 1")
    work = groups.work
    weight = 0.5 * work / (work.sum() or 1.0) + 0.5 * np.array(
        [len(g) for g in groups.groups]) / max(len(groups.op_graph), 1)
    chunk_of_group = contiguous_chunks(weight, max_groups)
    coarse = _group_graph(groups.op_graph, groups.colocation, chunk_of_group[groups.group_of],
                          groups.op_work)
    return coarse, chunk_of_group


def _group_graph(graph: OpGraph, colocation: ColocationSets, group_of: np.ndarray,
                 op_work: np.ndarray) -> GroupGraph:
    """The GroupGraph of an assignment of ops to groups numbered in a topological order."""
    groups = [[] for _ in range(int(group_of.max()) + 1 if len(group_of) else 0)]
    for i, g in enumerate(group_of):
        groups[g].append(i)
    edges, feedback = {}, {}
    sent = set()          # a tensor read by several ops of one group travels to it once
    for e in graph.data_edges:
        if (e.src, e.src_slot, group_of[e.dst]) in sent:
            continue
        sent.add((e.src, e.src_slot, group_of[e.dst]))
        _add_edge(edges, feedback, group_of[e.src], group_of[e.dst], graph.edge_bytes(e))
    for src, dst in graph.control_edges:
        _add_edge(edges, feedback, group_of[src], group_of[dst], 0)
    return GroupGraph(op_graph=graph, colocation=colocation, group_of=group_of, groups=groups,
                      edges=edges, feedback_edges=feedback, op_work=op_work)


def _atom_order(graph: OpGraph, atom_of: np.ndarray, first: np.ndarray,
                colocated: np.ndarray) -> np.ndarray:
    """Rank of each atom: Kahn's algorithm over the atom graph, by demand position.

    When every remaining atom waits on another, a colocation set has closed a cycle (fused
    chains cannot: their producer's only consumer is inside). The remaining colocated atom that
    comes first in demand order is taken; its unmet inputs become the feedback edges.
    """
    n_atoms = len(first)
    succ = [set() for _ in range(n_atoms)]
    for src, dst in [(e.src, e.dst) for e in graph.data_edges] + list(graph.control_edges):
        a, b = atom_of[src], atom_of[dst]
        if a != b:
            succ[a].add(b)
    waiting = np.zeros(n_atoms, dtype=np.int64)
    for targets in succ:
        for b in targets:
            waiting[b] += 1
    ready = [(first[a], a) for a in range(n_atoms) if waiting[a] == 0]
    heapq.heapify(ready)
    # Cycle breakers: colocated atoms first, each kind by demand position.
    by_position = sorted(range(n_atoms), key=lambda a: (not colocated[a], first[a]))
    next_forced = 0
    rank = np.full(n_atoms, -1, dtype=np.int64)
    for r in range(n_atoms):
        if ready:
            _, atom = heapq.heappop(ready)
        else:
            while rank[by_position[next_forced]] >= 0:
                next_forced += 1
            atom = by_position[next_forced]
        rank[atom] = r
        for b in succ[atom]:
            waiting[b] -= 1
            if waiting[b] == 0 and rank[b] < 0:
                heapq.heappush(ready, (first[b], b))
    return rank


def _merge_fusable_chains(graph: OpGraph, atoms: UnionFind) -> None:
    consumers = [set() for _ in graph.ops]
    for e in graph.data_edges:
        consumers[e.src].add(e.dst)
    for e in graph.data_edges:
        if e.src_slot != 0 or len(consumers[e.src]) != 1:
            continue
        if (graph.ops[e.src].type, graph.ops[e.dst].type) in _FUSABLE:
            atoms.union(e.src, e.dst)


def contiguous_chunks(weights: np.ndarray, max_chunks: int) -> np.ndarray:
    """Chunk id per item: contiguous, non-decreasing, at most max_chunks, equal weight.

    Item i goes to the chunk its weight midpoint falls in, so no chunk is empty of reason
    and each holds about total/max_chunks (more only when a single item is heavier).
    """
    if len(weights) <= max_chunks:
        return np.arange(len(weights))
    total = weights.sum()
    midpoints = np.cumsum(weights) - weights / 2
    raw = np.minimum((midpoints / total * max_chunks).astype(np.int64), max_chunks - 1)
    _, dense = np.unique(raw, return_inverse=True)
    return dense


def _add_edge(edges: dict, feedback: dict, a: int, b: int, nbytes: int) -> None:
    if a == b:
        return
    key = (int(a), int(b))
    target = edges if a < b else feedback
    target[key] = target.get(key, 0) + nbytes
