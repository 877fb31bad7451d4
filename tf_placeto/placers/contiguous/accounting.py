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

import numpy as np

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import CostGraph


def device_loads(graph: CostGraph, assignment) -> np.ndarray:
    """Each device's load per sample (0 for an unused one), accelerators first."""
    a = _checked(graph, assignment)
    k = graph.max_accelerators
    on_cpu = a >= k
    loads = np.bincount(a, weights=np.where(on_cpu, graph.cpu_latency, graph.accel_latency),
                        minlength=graph.n_devices)
    src, dst = graph.edge_src, graph.edge_dst
    crossing = a[src] != a[dst]
    # once per (node, device that reads it elsewhere), and once for the node's own device
    pairs = np.unique(src[crossing] * graph.n_devices + a[dst[crossing]])
    readers, reader_device = pairs // graph.n_devices, pairs % graph.n_devices
    senders = np.unique(readers)
    for nodes, devices in ((readers, reader_device), (senders, a[senders])):
        paid = devices < k
        loads += np.bincount(devices[paid], weights=graph.output_cost[nodes[paid]],
                             minlength=graph.n_devices)
    return loads


def max_load(graph: CostGraph, assignment) -> float:
    """The busiest device's load: a pipeline's time per sample."""
    return float(device_loads(graph, assignment).max())


def infeasibility(graph: CostGraph, assignment) -> str | None:
    """Why the split breaks a rule of the instance (memory, support, colour classes), or
    None. Contiguity is not a rule of the instance: any split has a load."""
    a = _checked(graph, assignment)
    k = graph.max_accelerators
    on_accel = a < k
    used = np.bincount(a[on_accel], weights=graph.size[on_accel], minlength=k)
    if k and used.max() > graph.memory_per_accelerator:
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
    k, n = graph.max_accelerators, graph.n_nodes
    loads = device_loads(graph, a)
    # The units that run: each accelerator's call (0..k-1) and each node on a CPU (k + i).
    unit = np.where(a < k, a, k + np.arange(n))
    weight = np.concatenate([loads[:k], graph.cpu_latency])
    weight[k + np.flatnonzero(a < k)] = 0.0
    src, dst = unit[graph.edge_src], unit[graph.edge_dst]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    n_units = k + n
    indegree = np.bincount(dst, minlength=n_units)
    order_by_src = np.argsort(src, kind="stable")
    succ_ptr = np.searchsorted(src[order_by_src], np.arange(n_units + 1))
    succ = dst[order_by_src]
    ready_at = np.zeros(n_units)
    ready = list(np.flatnonzero(indegree == 0))
    done = 0
    while ready:
        u = ready.pop()
        done += 1
        finish = ready_at[u] + weight[u]
        for v in succ[succ_ptr[u]:succ_ptr[u + 1]]:
            ready_at[v] = max(ready_at[v], finish)
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    if done < n_units:
        raise PlacementError("the split's accelerators feed each other in a cycle, so no "
                             "accelerator can run its part as one call")
    return float((ready_at + weight).max())


def _checked(graph: CostGraph, assignment) -> np.ndarray:
    a = np.asarray(assignment)
    if a.shape != (graph.n_nodes,) or not np.issubdtype(a.dtype, np.integer):
        raise PlacementError(f"an assignment needs one integer device per node "
                             f"({graph.n_nodes}), not an array of shape {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= graph.n_devices):
        raise PlacementError(f"devices run from 0 to {graph.n_devices - 1} "
                             f"({graph.max_accelerators} accelerators, then the CPUs)")
    return a.astype(np.int64)
