"""The baselines of Tarnawski et al. (their dp.cpp -oneFpga, -localSearch, -pipeDream, and
greedy.cpp for latency), counted as accounting.py counts, so that each compares with the DP and
the programs on the same terms. Each returns (value, assignment), (inf, None) when it finds no
split that keeps the instance's rules (theirs ignore memory and support; these do not).
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import CostGraph
from tf_placeto.placers.contiguous.accounting import (device_loads, infeasibility, latency,
                                                      max_load)
from tf_placeto.placers.contiguous.ideals import contract

INF = np.inf


def one_accelerator(graph: CostGraph):
    """Everything on accelerator 0 but the classes it cannot run, which go to the first CPU:
    what one device does, the yardstick of their tables."""
    k = graph.max_accelerators
    cpu_only = _cpu_only(graph)
    if k == 0 or (cpu_only.any() and graph.max_cpus == 0):
        return INF, None
    assignment = np.where(cpu_only[graph.color_class], k, 0)
    if infeasibility(graph, assignment) is not None:
        return INF, None
    return max_load(graph, assignment), assignment


def local_search(graph: CostGraph, seed: int = 0, restarts: int = 10, tolerance=1e-6):
    """Their local search: from each class on a random accelerator, make the move of one class
    to another accelerator that lowers the max-load most, while one gains more than
    `tolerance` (relative); the best of `restarts` runs. As theirs, it never uses a CPU but for
    classes an accelerator cannot run. Theirs ignores memory; here a split over it ranks by its
    excess first, and a run that ends over memory is dropped. Only the two accelerators of a
    move change load, so each move is priced from its class's nodes and their feeders."""
    k = graph.max_accelerators
    cpu_only = _cpu_only(graph)
    if k == 0 or (cpu_only.any() and graph.max_cpus == 0):
        return INF, None
    cls = graph.color_class
    n_classes = cpu_only.size
    accel = np.bincount(cls, weights=graph.accel_latency, minlength=n_classes)
    size = np.bincount(cls, weights=graph.size, minlength=n_classes)
    member_ptr, members = _csr(n_classes, cls, np.arange(graph.n_nodes))
    pred_ptr, preds = _csr(graph.n_nodes, graph.edge_dst, graph.edge_src)
    degree = np.bincount(graph.edge_src, minlength=graph.n_nodes)
    movable = np.flatnonzero(~cpu_only)
    rng = np.random.default_rng(seed)
    best, best_assignment = INF, None
    for _ in range(restarts):
        device = np.where(cpu_only, k, rng.integers(0, k, n_classes))
        a = device[cls]
        count = np.zeros((graph.n_nodes, k), np.int64)
        on_accel = a[graph.edge_dst] < k
        np.add.at(count, (graph.edge_src[on_accel], a[graph.edge_dst[on_accel]]), 1)
        loads = device_loads(graph, a)
        memory = np.bincount(a, weights=graph.size, minlength=graph.n_devices)[:k]
        _descend(device, movable, accel, size, float(graph.memory_per_accelerator), loads,
                 memory, cls, member_ptr, members, pred_ptr, preds, degree,
                 graph.output_cost, count, k, tolerance)
        a = device[cls]
        if infeasibility(graph, a) is None and max_load(graph, a) < best:
            best, best_assignment = max_load(graph, a), a
    return best, best_assignment


def pipedream(graph: CostGraph, ignore=None):
    """Their PipeDream-style partitioner: classes joined along each biconnected component of
    the undirected graph (the sources of its edges, as theirs), the blocks laid in a
    topological order, then the best split of that order into runs, one device each.

    ignore: the file's ids of the nodes whose out-edges the components leave out; by default
    the inputs without work. Theirs names them per graph (BERT-24's inputs, and GNMT's inputs
    and attention memory), as PipeDream leaves such layers out of its chain.
    """
    src, dst = graph.edge_src, graph.edge_dst
    if ignore is None:
        has_input = np.bincount(dst, minlength=graph.n_nodes) > 0
        keep = has_input[src] | (graph.accel_latency + graph.cpu_latency > 0)[src]
    else:
        keep = ~np.isin(graph.node_ids[src], list(ignore))
    cls = graph.color_class
    n_classes = int(cls.max()) + 1
    src, dst = src[keep], dst[keep]
    joined = [(cls[src[c[0]]], cls[src[e]]) for c in _biconnected(graph.n_nodes, src, dst)
              for e in c[1:]]
    a, b = np.array(joined, np.int64).reshape(-1, 2).T
    matrix = coo_matrix((np.ones(a.size), (a, b)), shape=(n_classes, n_classes))
    _, label = connected_components(matrix, directed=False)
    blocks = contract(dataclasses.replace(graph, color_class=label[cls]))
    return _best_runs(graph, blocks.block_of, blocks.n_blocks)


def greedy_latency(graph: CostGraph):
    """Their latency greedy (greedy.cpp): the blocks in a topological order fill one
    accelerator after another up to its memory; a block too big for one, or that an
    accelerator cannot run, or past the last accelerator, goes to the first CPU. For inference
    graphs, as theirs."""
    blocks = contract(graph)
    k, capacity = graph.max_accelerators, graph.memory_per_accelerator
    device = np.empty(blocks.n_blocks, np.int64)
    used, held = -1, capacity + 1.0            # no accelerator opened yet
    for v in range(blocks.n_blocks):
        cpu_only = blocks.unsupported[v] > 0 or blocks.size[v] > capacity
        if not cpu_only and held + blocks.size[v] <= capacity:
            held += blocks.size[v]
        elif not cpu_only and used + 1 < k:
            used, held = used + 1, blocks.size[v]
        else:
            device[v] = k
            held = capacity + 1.0              # the next block opens a new accelerator
            continue
        device[v] = used
    assignment = device[blocks.block_of]
    if (assignment >= graph.n_devices).any() or infeasibility(graph, assignment) is not None:
        return INF, None
    try:
        return latency(graph, assignment), assignment
    except PlacementError:          # a training graph's backward pass feeds its forward
        return INF, None


def _cpu_only(graph: CostGraph) -> np.ndarray:
    """Per colour class: whether it holds a node an accelerator cannot run."""
    return np.bincount(graph.color_class, weights=~graph.supported,
                       minlength=int(graph.color_class.max()) + 1) > 0


def _csr(n: int, key, value):
    order = np.argsort(key, kind="stable")
    return np.searchsorted(key[order], np.arange(n + 1)), np.asarray(value)[order]


def _biconnected(n: int, src, dst) -> list:
    """The biconnected components of the undirected graph of edges (src, dst), each a list of
    edge indices (Tarjan's edge stack, without recursion)."""
    ends = np.concatenate([src, dst])
    ptr, order = _csr(n, ends, np.arange(ends.size))
    other = np.concatenate([dst, src])
    discovered = np.full(n, -1)
    low = np.zeros(n, np.int64)
    clock, edges, components = 0, [], []
    for root in range(n):
        if discovered[root] >= 0:
            continue
        discovered[root] = low[root] = clock
        clock += 1
        stack = [[root, -1, ptr[root]]]         # node, the edge it was reached by, next slot
        while stack:
            top = stack[-1]
            v, via, slot = top
            if slot < ptr[v + 1]:
                top[2] += 1
                e = order[slot] % src.size
                w = other[order[slot]]
                if e == via:
                    continue
                if discovered[w] < 0:
                    edges.append(e)
                    discovered[w] = low[w] = clock
                    clock += 1
                    stack.append([w, e, ptr[w]])
                elif discovered[w] < discovered[v]:
                    edges.append(e)
                    low[v] = min(low[v], discovered[w])
                continue
            stack.pop()
            if stack:
                u = stack[-1][0]
                low[u] = min(low[u], low[v])
                if low[v] >= discovered[u]:
                    component = []
                    while not component or component[-1] != via:
                        component.append(edges.pop())
                    components.append(component)
    return components


def _best_runs(graph: CostGraph, block_of, n_blocks: int):
    """(max-load, assignment) of the best split of blocks 0..B-1 (a topological order) into
    runs, each on one device, as their DP does on a chain. A run [i, j) on an accelerator pays
    for each node whose blocks S (its own and its readers') lie partly in the run: for one
    node, such runs are a few rectangles of (i, j), all summed at once in a difference table."""
    cost, grid = graph.output_cost, np.zeros((n_blocks + 2, n_blocks + 2))
    readers = [[] for _ in range(graph.n_nodes)]
    for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
        readers[u].append(block_of[v])
    for u in np.flatnonzero(cost > 0):
        s = np.unique(np.append(readers[u], block_of[u]))
        if s.size < 2:
            continue
        # the first block of S at or after i is s[t], and the run reaches it: j > s[t] ...
        starts = np.concatenate([[0], s[:-1] + 1])
        _rectangles(grid, starts, s, s + 1, n_blocks, cost[u])
        # ... less the runs that hold all of S
        _rectangles(grid, [0], [s[0]], [s[-1] + 1], n_blocks, -cost[u])
    comm = grid.cumsum(axis=0).cumsum(axis=1)[:n_blocks + 1, :n_blocks + 1]
    sums = [np.concatenate([[0.0], np.bincount(block_of, weights=w, minlength=n_blocks)
                            .cumsum()]) for w in (graph.accel_latency, graph.cpu_latency,
                                                  graph.size, ~graph.supported)]
    accel, cpu, size, unsupported = (p[None, :] - p[:, None] for p in sums)
    on_accel = np.where((size <= graph.memory_per_accelerator) & (unsupported == 0),
                        accel + comm, INF)
    k, n_cpus = graph.max_accelerators, graph.max_cpus
    # best[j, c, f]: blocks before j split over exactly c CPUs and f accelerators
    best = np.full((n_blocks + 1, n_cpus + 1, k + 1), INF)
    best[0, 0, 0] = 0.0
    back = np.zeros((n_blocks + 1, n_cpus + 1, k + 1, 2), np.int64)    # (i, on a CPU)
    for j in range(1, n_blocks + 1):
        if k:
            options = np.maximum(best[:j, :, :-1], on_accel[:j, j, None, None])
            best[j, :, 1:] = options.min(axis=0)
            back[j, :, 1:, 0] = options.argmin(axis=0)
        if n_cpus:
            options = np.maximum(best[:j, :-1, :], cpu[:j, j, None, None])
            better = options.min(axis=0) < best[j, 1:, :]
            best[j, 1:, :] = np.where(better, options.min(axis=0), best[j, 1:, :])
            back[j, 1:, :, 0] = np.where(better, options.argmin(axis=0), back[j, 1:, :, 0])
            back[j, 1:, :, 1] = better
    c, f = np.unravel_index(np.argmin(best[n_blocks]), best[n_blocks].shape)
    if not np.isfinite(best[n_blocks, c, f]):
        return INF, None
    device = np.empty(n_blocks, np.int64)
    j = n_blocks
    while j > 0:
        i, on_cpu = back[j, c, f]
        c, f = c - on_cpu, f - (1 - on_cpu)
        device[i:j] = k + c if on_cpu else f
        j = i
    assignment = device[block_of]
    return max_load(graph, assignment), assignment


def _rectangles(grid, i_low, i_high, j_low, n_blocks: int, weight: float) -> None:
    """Adds `weight` to the runs [i, j) with i in [i_low, i_high] and j in [j_low, n_blocks],
    as corners of a 2-D difference table."""
    i_low, i_high, j_low = (np.asarray(x) for x in (i_low, i_high, j_low))
    np.add.at(grid, (i_low, j_low), weight)
    np.add.at(grid, (i_high + 1, j_low), -weight)
    np.add.at(grid, (i_low, np.full(j_low.shape, n_blocks + 1)), -weight)
    np.add.at(grid, (i_high + 1, np.full(j_low.shape, n_blocks + 1)), weight)


@numba.njit(cache=True)
def _pays(m, device, readers_on_m, degree):
    """Whether node u's output crosses accelerator m's boundary (0 or 1)."""
    if device == m:
        return 1 if degree > readers_on_m else 0
    return 1 if readers_on_m > 0 else 0


@numba.njit(cache=True)
def _move(c, d, apply, device, cls, member_ptr, members, pred_ptr, preds, degree, cost, count,
          stamp, edges_in, touched):
    """The change in the crossing costs of class c's accelerator and of accelerator d when c
    moves to d; with `apply`, the move's reader counts are made. Only those two change."""
    s = device[c]
    stamp[0] += 1
    n = 0
    for k in range(member_ptr[c], member_ptr[c + 1]):
        v = members[k]
        for p in range(pred_ptr[v] - 1, pred_ptr[v + 1]):
            u = v if p < pred_ptr[v] else preds[p]        # the member, then its feeders
            if stamp[u + 1] != stamp[0]:
                stamp[u + 1] = stamp[0]
                edges_in[u] = 0
                touched[n] = u
                n += 1
            edges_in[u] += p >= pred_ptr[v]
    change_s = change_d = 0.0
    for t in range(n):
        u = touched[t]
        old = device[cls[u]]
        new = d if cls[u] == c else old
        e = edges_in[u]
        if apply:
            count[u, s] -= e
            count[u, d] += e
        elif cost[u] > 0:
            change_s += cost[u] * (_pays(s, new, count[u, s] - e, degree[u])
                                   - _pays(s, old, count[u, s], degree[u]))
            change_d += cost[u] * (_pays(d, new, count[u, d] + e, degree[u])
                                   - _pays(d, old, count[u, d], degree[u]))
    if apply:
        device[c] = d
    return change_s, change_d


@numba.njit(cache=True)
def _descend(device, movable, accel, size, capacity, loads, memory, cls, member_ptr, members,
             pred_ptr, preds, degree, cost, count, k, tolerance):
    """Best-improvement single-class moves between accelerators until none gains; ranks a
    split by its bytes over memory, then its max-load."""
    n = cls.shape[0]
    stamp = np.zeros(n + 1, np.int64)
    edges_in = np.zeros(n, np.int64)
    touched = np.empty(n, np.int64)
    while True:
        excess = np.maximum(memory - capacity, 0.0).sum()
        current = loads.max()
        best_excess, best_load, best_c, best_d = excess, current, -1, -1
        best_change = (0.0, 0.0)
        for c in movable:
            s = device[c]
            for d in range(k):
                if d == s:
                    continue
                change = _move(c, d, False, device, cls, member_ptr, members, pred_ptr,
                               preds, degree, cost, count, stamp, edges_in, touched)
                load_s = loads[s] - accel[c] + change[0]
                load_d = loads[d] + accel[c] + change[1]
                over = excess - max(memory[s] - capacity, 0.0) - max(memory[d] - capacity, 0.0) \
                    + max(memory[s] - size[c] - capacity, 0.0) \
                    + max(memory[d] + size[c] - capacity, 0.0)
                peak = max(load_s, load_d)
                for m in range(loads.shape[0]):
                    if m != s and m != d:
                        peak = max(peak, loads[m])
                if over < best_excess - 0.5 or (over <= best_excess + 0.5
                                                and peak < best_load):
                    best_excess, best_load, best_c, best_d = over, peak, c, d
                    best_change = change
        if best_c < 0 or (best_excess > excess - 0.5
                          and best_load > current * (1.0 - tolerance)):
            return
        s = device[best_c]
        loads[s] += best_change[0] - accel[best_c]
        loads[best_d] += best_change[1] + accel[best_c]
        memory[s] -= size[best_c]
        memory[best_d] += size[best_c]
        _move(best_c, best_d, True, device, cls, member_ptr, members, pred_ptr, preds, degree,
              cost, count, stamp, edges_in, touched)
