"""What a split of a `CostGraph` costs, as Tarnawski et al. count it.

Max-load (time per sample of a pipeline, their dp.cpp computeLoadForResultOrg): each
accelerator pays its nodes' accelerator time, plus the output cost of every node whose output
crosses its boundary (one of its nodes feeding another device, or another device's node
feeding it), once per node and device; a CPU pays its nodes' CPU time and no communication.
Latency of one sample (their lip.py): each accelerator runs its nodes as one call that starts
once all its inputs are in and lasts its load; nodes on the CPUs run as soon as their inputs
are ready, as many at once as there are.

An assignment gives each node a device: accelerators 0..k-1, then the CPUs k..k+max_cpus-1.
"""

from __future__ import annotations

import numba
import numpy as np

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import CostGraph


def device_loads(graph: CostGraph, assignment) -> np.ndarray:
    """Each device's load per sample (0 for an unused one), accelerators first."""
    a = _checked(graph, assignment)
    return _loads(graph, a, *successors(graph))


def _loads(graph: CostGraph, a: np.ndarray, succ_ptr, succ) -> np.ndarray:
    loads = np.zeros(graph.n_devices)
    class_loads(a, np.arange(graph.n_nodes), graph.accel_latency, graph.cpu_latency,
                graph.output_cost, succ_ptr, succ, graph.max_accelerators, loads,
                np.zeros(graph.n_devices, np.bool_))
    return loads


def successors(graph: CostGraph):
    """(pointer, successor) of each node's out-edges, as CSR arrays: what class_loads takes."""
    order = np.argsort(graph.edge_src, kind="stable")
    return (np.searchsorted(graph.edge_src[order], np.arange(graph.n_nodes + 1)),
            graph.edge_dst[order].astype(np.int64))


@numba.njit(cache=True, nogil=True)
def class_loads(device, cls, accel, cpu, cost, succ_ptr, succ, k, loads, seen):
    """Each device's load into `loads` when node u is on device[cls[u]] (the accounting of the
    module's docstring); `seen` is scratch of one flag per device. Compiled: the local search
    of balance.py prices every move with it and with crossing_charge."""
    loads[:] = 0.0
    for u in range(cls.shape[0]):
        d = device[cls[u]]
        loads[d] += accel[u] if d < k else cpu[u]
    for u in range(cls.shape[0]):
        crossing_charge(u, device, cls, cost, succ_ptr, succ, k, loads, seen, 1.0)


@numba.njit(cache=True, nogil=True)
def crossing_charge(u, device, cls, cost, succ_ptr, succ, k, loads, seen, sign):
    """Add `sign` times what node u's output crossing costs each accelerator: its cost to its
    own device and to each other device that reads it, once each."""
    if cost[u] <= 0.0:
        return
    here = device[cls[u]]
    seen[:] = False
    crosses = False
    for e in range(succ_ptr[u], succ_ptr[u + 1]):
        there = device[cls[succ[e]]]
        if there != here and not seen[there]:
            seen[there] = crosses = True
            if there < k:
                loads[there] += sign * cost[u]
    if crosses and here < k:
        loads[here] += sign * cost[u]


def max_load(graph: CostGraph, assignment) -> float:
    """The busiest device's load: a pipeline's time per sample."""
    return float(device_loads(graph, assignment).max())


def accelerator_memory(graph: CostGraph, assignment) -> np.ndarray:
    """The bytes each accelerator holds under the split."""
    a = _checked(graph, assignment)
    on_accel = a < graph.max_accelerators
    return np.bincount(a[on_accel], weights=graph.size[on_accel],
                       minlength=graph.max_accelerators)


def infeasibility(graph: CostGraph, assignment) -> str | None:
    """Why the split breaks a rule of the instance (memory, support, colour classes), or
    None. Contiguity is not a rule of the instance: any split has a load."""
    a = _checked(graph, assignment)
    on_accel = a < graph.max_accelerators
    used = accelerator_memory(graph, a)
    if graph.max_accelerators and used.max() > graph.memory_per_accelerator:
        d = int(used.argmax())
        return (f"accelerator {d} holds {used[d]:.6g} bytes, over its "
                f"{graph.memory_per_accelerator:.6g}")
    unsupported = np.flatnonzero(on_accel & ~graph.supported)
    if unsupported.size:
        return f"node {graph.node_ids[unsupported[0]]} cannot run on an accelerator"
    _, first = np.unique(graph.color_class, return_index=True)   # each class's first node
    split = np.flatnonzero(a[first][graph.color_class] != a)
    if split.size:
        return (f"node {graph.node_ids[split[0]]} is not on the device of the rest of its "
                "colour class")
    return None


def latency(graph: CostGraph, assignment) -> float:
    """One sample's latency under their lip.py model (one call per accelerator, CPUs
    unlimited). A split whose accelerators feed each other in a cycle has no such schedule:
    PlacementError."""
    a = _checked(graph, assignment)
    succ_ptr, succ = successors(graph)
    value = class_latency(a, np.arange(graph.n_nodes), _loads(graph, a, succ_ptr, succ),
                          graph.cpu_latency, succ_ptr, succ, graph.max_accelerators)
    if value < 0:
        raise PlacementError("the split's accelerators feed each other in a cycle, so no "
                             "accelerator can run its part as one call")
    return value


@numba.njit(cache=True, nogil=True)
def class_latency(device, cls, loads, cpu, succ_ptr, succ, k):
    """latency() when node u is on device[cls[u]] and `loads` are the devices' loads: the
    longest path through the units that run (each accelerator's call, each node on a CPU),
    or -1 where the accelerators' calls feed each other in a cycle."""
    n = cls.shape[0]
    n_units = k + n
    unit = np.empty(n, np.int64)
    weight = np.zeros(n_units)
    for a in range(k):
        weight[a] = loads[a]
    for u in range(n):
        d = device[cls[u]]
        unit[u] = d if d < k else k + u
        if d >= k:
            weight[k + u] = cpu[u]
    # the units' arcs, by their tail (counting sort)
    out_degree = np.zeros(n_units + 1, np.int64)
    for u in range(n):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            if unit[succ[e]] != unit[u]:
                out_degree[unit[u] + 1] += 1
    arc_ptr = np.cumsum(out_degree)
    fill = arc_ptr[:-1].copy()
    arc_head = np.empty(arc_ptr[-1], np.int64)
    in_degree = np.zeros(n_units, np.int64)
    for u in range(n):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            head = unit[succ[e]]
            if head != unit[u]:
                arc_head[fill[unit[u]]] = head
                fill[unit[u]] += 1
                in_degree[head] += 1
    ready_at = np.zeros(n_units)
    ready = np.empty(n_units, np.int64)
    top = 0
    for x in range(n_units):
        if in_degree[x] == 0:
            ready[top] = x
            top += 1
    done = 0
    longest = 0.0
    while top > 0:
        top -= 1
        x = ready[top]
        done += 1
        finish = ready_at[x] + weight[x]
        longest = max(longest, finish)
        for j in range(arc_ptr[x], arc_ptr[x + 1]):
            y = arc_head[j]
            ready_at[y] = max(ready_at[y], finish)
            in_degree[y] -= 1
            if in_degree[y] == 0:
                ready[top] = y
                top += 1
    return longest if done == n_units else -1.0


def _checked(graph: CostGraph, assignment) -> np.ndarray:
    a = np.asarray(assignment)
    if a.shape != (graph.n_nodes,) or not np.issubdtype(a.dtype, np.integer):
        raise PlacementError(f"an assignment needs one integer device per node "
                             f"({graph.n_nodes}), not an array of shape {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= graph.n_devices):
        raise PlacementError(f"devices run from 0 to {graph.n_devices - 1} "
                             f"({graph.max_accelerators} accelerators, then the CPUs)")
    return a.astype(np.int64)
