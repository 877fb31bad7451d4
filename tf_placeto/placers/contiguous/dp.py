"""The exact max-load DP over contiguous splits (Tarnawski et al., NeurIPS 2020, their dp.cpp).

A contiguous split is a chain of ideals of the block DAG (ideals.py), empty to full, each
difference on one device. dp[I, (c, f)] is the least max-load that covers ideal I with c CPUs
and f accelerators: the best over ideals J below I of max(dp[J, one device fewer], the load
of I minus J on that device), or dp[I] with a device left empty. The optimum is
dp[all, (max CPUs, max accelerators)], the same model as theirs: loads as accounting.py
counts them, an accelerator refused a set over its memory or with an unsupported node.

Their program stores every pair of ideals with its load (15.5 M pairs on GNMT; Inception-V3's
36,596 ideals ran it out of 16 GB). Here nothing per pair is stored: each ideal walks down the
ideals below it depth first, adding one block at a time to the difference and updating its
load from that block's edges alone, and relaxes its row of the table at once. What is pruned
can only be slower than a bound, the load of the best split into runs of a topological order
(found first, in O(blocks^2)):
- a state (c, f) of an ideal whose blocks cannot fit on c CPUs and f accelerators within
  the bound, or the rest of the graph on the devices left, counting compute alone (ideals
  with no such state are not walked: on Inception-V3, 7 in 8);
- a walk's branch where the difference's accelerator time (or memory, or an unsupported
  node) and its CPU time both exceed what could still improve the row; they only grow down
  the branch.
The walks are compiled with numba and run in chunks of ideals, between which
`progress(done, total)` is called.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from tf_placeto.graph.cost_graph import CostGraph
from tf_placeto.log import progress as progress_bar
from tf_placeto.placers.contiguous.accounting import max_load
from tf_placeto.placers.contiguous.ideals import (MAX_IDEALS, Blocks, Ideals, contract,
                                                   enumerate_ideals)

INF = np.inf
# Seconds of work between two calls of `progress`.
_CHUNK_S = 0.25


def solve_max_load(graph: CostGraph, progress=None, max_ideals: int = MAX_IDEALS):
    """(max-load, assignment, info) of the best contiguous split of `graph`.

    The assignment gives each node a device (accelerators 0..k-1 in chain order, then the
    CPUs); (inf, None, info) when no split fits. info: blocks, ideals, pairs (ideal pairs
    whose load was computed), upper_bound (the best split along a topological order) and
    seconds. TooManyIdeals past `max_ideals`.
    """
    splits, info = solve_max_load_per_accelerators(graph, 0.0, progress, max_ideals,
                                                   counts=[graph.max_accelerators])
    return (*splits[-1], info)


def solve_max_load_per_accelerators(graph: CostGraph, slack: float, progress=None,
                                    max_ideals: int = MAX_IDEALS, counts=None):
    """([(max-load, assignment) with at most f accelerators, for f = 0 .. max_accelerators],
    info), as solve_max_load, from one table: its row of the whole graph holds every count's
    optimum. Each is exact where it is within `slack` of the best split along a topological
    order with every accelerator (the DP's pruning bound, raised by `slack`), else (inf,
    None). counts: the accelerator counts to read back (default all; the others (inf, None)).
    """
    began = time.perf_counter()
    blocks = contract(graph)
    ideals = enumerate_ideals(blocks, max_ideals)
    n_cpus, n_accels = graph.max_cpus, graph.max_accelerators
    comm = _comm_tables(graph, blocks)
    sums = (blocks.accel_latency, blocks.cpu_latency, blocks.size, blocks.unsupported)
    demand, absorb = _demand(blocks)
    scratch = _scratch(blocks, comm, len(ideals))
    upper_bound = _chain_bound(blocks.n_blocks, n_cpus, n_accels,
                               graph.memory_per_accelerator, demand, absorb, *sums, *comm,
                               *scratch[:2])
    ideal_demand = _ideal_sums(ideals.down_ptr, ideals.down_block, ideals.down_ideal, demand)
    n = len(ideals)
    n_states = (n_cpus + 1) * (n_accels + 1)
    table = np.empty((n, n_states))
    back_sub = np.empty((n, n_states), np.int64)
    back_accel = np.zeros((n, n_states), np.int8)
    # Sums in another order may exceed the bound's own by an ulp: what reaches it must stay.
    bound = (upper_bound + slack) * (1.0 + 1e-9)
    pairs, done, chunk = 0, 0, 16
    while done < n:
        high = min(n, done + chunk)
        started = time.perf_counter()
        pairs += _sweep(done, high, n_cpus, n_accels, bound,
                        graph.memory_per_accelerator, ideal_demand, absorb,
                        ideals.down_ptr, ideals.down_block, ideals.down_ideal, *sums, *comm,
                        table, back_sub, back_accel, *scratch)
        took = time.perf_counter() - started
        chunk = int(np.clip(chunk * _CHUNK_S / max(took, 1e-4), 1, 4 * chunk))
        done = high
        if progress is not None:
            progress(done, n)
    splits = []
    for count in range(n_accels + 1):
        state = n_cpus * (n_accels + 1) + count          # (every CPU, `count` accelerators)
        best = float(table[n - 1, state])
        if not np.isfinite(best) or (counts is not None and count not in counts):
            splits.append((INF, None))
            continue
        assignment = _assignment(graph, blocks, ideals, back_sub, back_accel, state)
        load = max_load(graph, assignment)
        assert abs(load - best) <= 1e-9 * max(1.0, load), (load, best)
        splits.append((load, assignment))
    info = {"blocks": blocks.n_blocks, "ideals": n, "pairs": int(pairs),
            "upper_bound": float(upper_bound), "seconds": time.perf_counter() - began}
    return splits, info


def with_progress_bar(solve, graph: CostGraph, *args, **kwargs):
    """solve(graph, ..., progress=...), its ideals counted on a progress bar (log.progress)."""
    with progress_bar(desc="dp: ideals", unit=" ideals", leave=False) as bar:
        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
        return solve(graph, *args, progress=advance, **kwargs)


def _comm_tables(graph: CostGraph, blocks: Blocks):
    """Who pays for crossings, per block: each node with a cost and readers in other blocks
    (its cost, its block, how many blocks read it), the nodes each block holds (members)
    and the nodes each block reads (feeders), as CSR arrays."""
    block_of = blocks.block_of
    src, dst = graph.edge_src, graph.edge_dst
    keep = (block_of[src] != block_of[dst]) & (graph.output_cost[src] > 0)
    n_blocks = blocks.n_blocks
    pairs = np.unique(src[keep] * n_blocks + block_of[dst[keep]])
    node, reader = pairs // n_blocks, pairs % n_blocks
    payers, index, readers = np.unique(node, return_inverse=True, return_counts=True)
    home = block_of[payers]
    member_order = np.argsort(home, kind="stable")
    member_ptr = np.searchsorted(home[member_order], np.arange(n_blocks + 1))
    feeder_order = np.argsort(reader, kind="stable")
    feeder_ptr = np.searchsorted(reader[feeder_order], np.arange(n_blocks + 1))
    return (graph.output_cost[payers], home, readers.astype(np.int64), member_ptr,
            member_order.astype(np.int64), feeder_ptr, index[feeder_order].astype(np.int64))


def _demand(blocks: Blocks):
    """What each block asks of the devices whatever the split: the accelerator time of a
    block an accelerator may run, the CPU time of one it may not, and whether it may not; and
    the most accelerator time a CPU can take off the accelerators per unit of its own time
    (the largest ratio of a block's accelerator time to its CPU time). From these the DP
    tells which ideals can hold (c, f) devices within a bound."""
    ok = blocks.unsupported == 0
    demand = np.stack([np.where(ok, blocks.accel_latency, 0.0),
                       np.where(ok, 0.0, blocks.cpu_latency),
                       (~ok).astype(np.float64)], axis=1)
    timed = ok & (blocks.accel_latency > 0)
    ratios = blocks.accel_latency[timed] / np.maximum(blocks.cpu_latency[timed], 1e-300)
    return demand, float(ratios.max()) if ratios.size else 0.0


def _scratch(blocks: Blocks, comm, n_ideals: int) -> tuple:
    """Working arrays of the walks: reader counts, the difference's blocks, stamps, stack."""
    depth = blocks.n_blocks + 2
    return (np.zeros(comm[0].shape[0], np.int64), np.zeros(blocks.n_blocks, np.bool_),
            np.full(n_ideals, -1, np.int64), np.empty(depth, np.int64), np.empty(depth, np.int64),
            np.empty(depth, np.int64), np.empty((depth, 5)))


def _assignment(graph: CostGraph, blocks: Blocks, ideals: Ideals, back_sub, back_accel,
                state: int):
    """The devices of the best split of the whole graph in `state` (CPUs and accelerators),
    read back along the table's choices."""
    device = np.empty(blocks.n_blocks, np.int64)
    width = graph.max_accelerators + 1
    ideal, accel, cpu = len(ideals) - 1, 0, graph.max_accelerators
    while ideal != 0:
        below, on_accel = back_sub[ideal, state], bool(back_accel[ideal, state])
        if below != ideal:
            members = np.setdiff1d(ideals.members(ideal), ideals.members(below))
            device[members] = accel if on_accel else cpu
            accel, cpu = accel + on_accel, cpu + (not on_accel)
        state -= 1 if on_accel else width
        ideal = below
    return device[blocks.block_of]


@numba.njit(cache=True)
def _add(v, count, inside, cost, home, readers, member_ptr, members, feeder_ptr, feeders):
    """Block v joins the difference: the change in its crossing cost. A node pays when it is
    inside with a reader outside, or outside with a reader inside."""
    delta = 0.0
    for k in range(member_ptr[v], member_ptr[v + 1]):
        u = members[k]
        was, now = count[u] > 0, count[u] < readers[u]
        if was != now:
            delta += cost[u] if now else -cost[u]
    inside[v] = True
    for k in range(feeder_ptr[v], feeder_ptr[v + 1]):
        u = feeders[k]
        if inside[home[u]]:
            was = count[u] < readers[u]
            count[u] += 1
            now = count[u] < readers[u]
        else:
            was = count[u] > 0
            count[u] += 1
            now = True
        if was != now:
            delta += cost[u] if now else -cost[u]
    return delta


@numba.njit(cache=True)
def _remove(v, count, inside, feeder_ptr, feeders):
    inside[v] = False
    for k in range(feeder_ptr[v], feeder_ptr[v + 1]):
        count[feeders[k]] -= 1


@numba.njit(cache=True)
def _thresholds(table, ideal, live, n_live, n_accels, bound):
    """The most an accelerator's and a CPU's load may be and still improve the row."""
    width = n_accels + 1
    accel, cpu = -1.0, -1.0
    for k in range(n_live):
        s = live[k]
        value = min(table[ideal, s], bound)
        if s % width > 0:
            accel = max(accel, value)
        if s >= width:
            cpu = max(cpu, value)
    return accel, cpu


@numba.njit(cache=True)
def _relax(table, back_sub, back_accel, ideal, below, accel_load, cpu_load, live, n_live,
           n_accels):
    """Ideal minus `below` on one more accelerator or CPU; whether the row improved."""
    width = n_accels + 1
    improved = False
    for k in range(n_live):
        s = live[k]
        best = table[ideal, s]
        if s % width > 0 and accel_load < best:
            candidate = max(table[below, s - 1], accel_load)
            if candidate < best:
                best = candidate
                back_sub[ideal, s], back_accel[ideal, s] = below, 1
        if s >= width and cpu_load < best:
            candidate = max(table[below, s - width], cpu_load)
            if candidate < best:
                best = candidate
                back_sub[ideal, s], back_accel[ideal, s] = below, 0
        if best < table[ideal, s]:
            table[ideal, s] = best
            improved = True
    return improved


@numba.njit(cache=True)
def _leave_empty(table, back_sub, back_accel, ideal, live, n_live, n_accels):
    """A device may stay unused: dp[I, (c, f)] <= dp[I, (c - 1, f)], dp[I, (c, f - 1)]."""
    width = n_accels + 1
    for k in range(n_live):
        s = live[k]
        if s >= width and table[ideal, s - width] < table[ideal, s]:
            table[ideal, s] = table[ideal, s - width]
            back_sub[ideal, s], back_accel[ideal, s] = ideal, 0
        if s % width > 0 and table[ideal, s - 1] < table[ideal, s]:
            table[ideal, s] = table[ideal, s - 1]
            back_sub[ideal, s], back_accel[ideal, s] = ideal, 1


@numba.njit(cache=True)
def _fits(demand, n_cpus, n_accels, bound, absorb):
    """Whether `demand` (accelerator time, CPU time that must be on a CPU, nodes that must)
    can fit on that many devices each loaded at most `bound`, counting no communication."""
    if demand[2] > 0 and n_cpus == 0:
        return False
    if bound == INF:
        return True
    spare = n_cpus * bound - demand[1]
    return spare >= 0 and demand[0] <= n_accels * bound + spare * absorb


@numba.njit(cache=True)
def _live_states(live, demand, total, is_full, n_cpus, n_accels, bound, absorb):
    """The states (c, f) of a nonempty ideal that can lie on a split within `bound`, into
    `live`; how many. The ideal must fit on c CPUs and f accelerators, and the rest on those
    left; every device used means the ideal is all."""
    width = n_accels + 1
    rest = total - demand
    n_live = 0
    for c in range(n_cpus + 1):
        for f in range(width):
            if c + f == 0 or not _fits(demand, c, f, bound, absorb):
                continue
            if not is_full and (c + f == n_cpus + n_accels or not _fits(
                    rest, n_cpus - c, n_accels - f, bound, absorb)):
                continue
            live[n_live] = c * width + f
            n_live += 1
    return n_live


@numba.njit(cache=True)
def _ideal_sums(down_ptr, down_block, down_ideal, values):
    """Each ideal's sums of `values` (a row per block) over its blocks, from the ideal just
    below it."""
    sums = np.zeros((down_ptr.shape[0] - 1, values.shape[1]))
    for i in range(1, sums.shape[0]):
        e = down_ptr[i]
        sums[i] = sums[down_ideal[e]] + values[down_block[e]]
    return sums


@numba.njit(cache=True)
def _chain_bound(n_blocks, n_cpus, n_accels, capacity, demand, absorb, accel_latency,
                 cpu_latency, size, unsupported, cost, home, readers, member_ptr, members,
                 feeder_ptr, feeders, count, inside):
    """The best split into runs of the blocks' topological order (each prefix is an ideal):
    a feasible load that bounds the walks of the exact DP."""
    n_states = (n_cpus + 1) * (n_accels + 1)
    table = np.full((n_blocks + 1, n_states), INF)
    table[0, :] = 0.0
    back_sub = np.zeros((n_blocks + 1, n_states), np.int64)
    back_accel = np.zeros((n_blocks + 1, n_states), np.int8)
    live = np.empty(n_states, np.int64)
    prefix = np.zeros((n_blocks + 1, demand.shape[1]))
    for v in range(n_blocks):
        prefix[v + 1] = prefix[v] + demand[v]
    for end in range(1, n_blocks + 1):
        n_live = _live_states(live, prefix[end], prefix[n_blocks], end == n_blocks, n_cpus,
                              n_accels, INF, absorb)
        accel_max, cpu_max = _thresholds(table, end, live, n_live, n_accels, INF)
        accel = cpu = used = comm = 0.0
        bad = 0
        start = end
        while start > 0:
            v = start - 1
            accel += accel_latency[v]
            cpu += cpu_latency[v]
            used += size[v]
            bad += unsupported[v]
            accel_load = accel if bad == 0 and used <= capacity else INF
            if accel_load > accel_max and cpu > cpu_max:
                break
            comm += _add(v, count, inside, cost, home, readers, member_ptr, members,
                         feeder_ptr, feeders)
            start = v
            if _relax(table, back_sub, back_accel, end, start, accel_load + comm, cpu, live,
                      n_live, n_accels):
                accel_max, cpu_max = _thresholds(table, end, live, n_live, n_accels, INF)
        for v in range(start, end):
            _remove(v, count, inside, feeder_ptr, feeders)
        _leave_empty(table, back_sub, back_accel, end, live, n_live, n_accels)
    return table[n_blocks, n_states - 1]


@numba.njit(cache=True)
def _sweep(low, high, n_cpus, n_accels, bound, capacity, ideal_demand, absorb, down_ptr,
           down_block, down_ideal, accel_latency, cpu_latency, size, unsupported, cost, home,
           readers, member_ptr, members, feeder_ptr, feeders, table, back_sub, back_accel,
           count, inside, stamp, stack_ideal, stack_next, stack_block, stack_sums):
    """Rows low..high-1 of the table, each from a depth-first walk down the ideals below it;
    the number of differences whose load was computed."""
    full = ideal_demand.shape[0] - 1
    live = np.empty(table.shape[1], np.int64)
    pairs = 0
    for ideal in range(low, high):
        table[ideal, :] = INF
        back_sub[ideal, :] = ideal
        if ideal == 0:
            table[0, :] = 0.0
            continue
        n_live = _live_states(live, ideal_demand[ideal], ideal_demand[full], ideal == full,
                              n_cpus, n_accels, bound, absorb)
        if n_live == 0:
            continue
        accel_max, cpu_max = _thresholds(table, ideal, live, n_live, n_accels, bound)
        stamp[ideal] = ideal
        top = 0
        stack_ideal[0], stack_next[0], stack_block[0] = ideal, down_ptr[ideal], -1
        stack_sums[0, :] = 0.0          # accelerator time, CPU time, bytes, unsupported, comm
        while top >= 0:
            below = stack_ideal[top]
            edge = stack_next[top]
            if edge == down_ptr[below + 1]:
                if stack_block[top] >= 0:
                    _remove(stack_block[top], count, inside, feeder_ptr, feeders)
                top -= 1
                continue
            stack_next[top] = edge + 1
            lower = down_ideal[edge]
            if stamp[lower] == ideal:
                continue
            stamp[lower] = ideal
            v = down_block[edge]
            accel = stack_sums[top, 0] + accel_latency[v]
            cpu = stack_sums[top, 1] + cpu_latency[v]
            used = stack_sums[top, 2] + size[v]
            bad = stack_sums[top, 3] + unsupported[v]
            accel_load = accel if bad == 0 and used <= capacity else INF
            if accel_load > accel_max and cpu > cpu_max:
                continue
            comm = stack_sums[top, 4] + _add(v, count, inside, cost, home, readers,
                                             member_ptr, members, feeder_ptr, feeders)
            pairs += 1
            if _relax(table, back_sub, back_accel, ideal, lower, accel_load + comm, cpu, live,
                      n_live, n_accels):
                accel_max, cpu_max = _thresholds(table, ideal, live, n_live, n_accels, bound)
            top += 1
            stack_ideal[top], stack_next[top], stack_block[top] = lower, down_ptr[lower], v
            stack_sums[top, 0], stack_sums[top, 1], stack_sums[top, 2] = accel, cpu, used
            stack_sums[top, 3], stack_sums[top, 4] = bad, comm
        _leave_empty(table, back_sub, back_accel, ideal, live, n_live, n_accels)
    return pairs
