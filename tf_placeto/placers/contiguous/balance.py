"""An iterated local search over the colour classes of a split, under max-load or latency:
the programs' fast source of better splits (program.py).

On the layer graphs a max-load split is mostly a balance of work between the devices, the
crossings' costs small beside it, and the CPU a device too (slower, it still takes a share).
HiGHS finds such balances late and by chance; moving one class at a time, or swapping two,
while the busiest load falls (or stays and the loads even out), finds them in seconds. Random
kicks of a few classes from the best split, each followed by a descent, go on from there (what
it does for the program: docs/results/tarnawski.md). On operator graphs, where crossings
dominate and a better split moves many classes at once, it finds little; the programs do.
Under latency a move is priced alike, then the longest path through the calls is walked
(accounting.class_latency); a move that makes the calls feed each other in a cycle is refused.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import numba
import numpy as np

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import CostGraph
from tf_placeto.placers.contiguous.accounting import (class_latency, class_loads,
                                                      crossing_charge, infeasibility,
                                                      successors)

OBJECTIVES = ("max_load", "latency")
# Loads closer than this are equal (sums of the same times in another order).
_EQUAL = 1e-9
# The search ends after this many kicks in a row without a better split, or this share of its
# time without one (where it finds nothing, the programs have the time); the classes a kick
# moves.
_PATIENCE = 200
_IDLE_SHARE = 1 / 3
_KICKED = (2, 6)


def rebalanced(graph: CostGraph, split, deadline: float, stop=None, seed: int = 0,
               found: Optional[Callable[[np.ndarray], None]] = None,
               objective: str = "max_load") -> np.ndarray:
    """`split` (a feasible assignment) improved by moves and swaps of colour classes and random
    kicks until `deadline` (a time.perf_counter() value), `stop` (a threading.Event) is set, or
    it finds nothing better for _PATIENCE kicks or _IDLE_SHARE of its time; never worse than
    `split`. found(assignment) hears of each better split as it is found. objective:
    "max_load", or "latency" (accounting.latency; the CPU nodes then all on the first CPU,
    which runs as many at once as there are)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective is one of {OBJECTIVES}, not {objective!r}")
    began = time.perf_counter()
    why = infeasibility(graph, split)
    if why is not None:
        raise PlacementError(f"the split to rebalance breaks a rule of the instance: {why}")
    search = _Search(graph, np.asarray(split), objective == "latency")
    best, best_device = search.descend(search.device.copy())
    if found is not None:
        found(best_device[graph.color_class])
    rng = np.random.default_rng(seed)
    idle, patience_s, last = 0, (deadline - began) * _IDLE_SHARE, time.perf_counter()
    while idle < _PATIENCE and time.perf_counter() < min(deadline, last + patience_s) \
            and not (stop and stop.is_set()):
        idle += 1
        device = search.kicked(best_device, rng)
        if device is None:
            continue
        load, device = search.descend(device)
        if load < best - _EQUAL:
            best, best_device, idle, last = load, device, 0, time.perf_counter()
            if found is not None:
                found(device[graph.color_class])
    return best_device[graph.color_class]


class _Search:
    """What the compiled descent needs: per class its memory and devices it may take, the
    nodes' costs and out-edges."""

    def __init__(self, graph: CostGraph, split: np.ndarray, by_latency: bool):
        cls = graph.color_class
        n_classes, k = int(cls.max()) + 1, graph.max_accelerators
        self.graph, self.k, self.by_latency = graph, k, by_latency
        self.size = np.bincount(cls, weights=graph.size, minlength=n_classes)
        supported = np.bincount(cls, weights=~graph.supported, minlength=n_classes) == 0
        self.allowed = np.ones((n_classes, graph.n_devices), np.bool_)
        self.allowed[~(supported & (self.size <= graph.memory_per_accelerator)), :k] = False
        self.device = np.empty(n_classes, np.int64)
        self.device[cls] = split
        if by_latency:                  # one CPU stands for all: each of its nodes runs alone
            self.allowed[:, k + 1:] = False
            self.device = np.minimum(self.device, k)
        self.succ_ptr, self.succ = successors(graph)
        # per class: its work on an accelerator and on a CPU; the nodes whose charges a move
        # of it changes (its own and those feeding them), as CSR arrays
        self.work = np.stack([np.bincount(cls, weights=w, minlength=n_classes)
                              for w in (graph.accel_latency, graph.cpu_latency)], axis=1)
        pairs = np.unique(np.concatenate([cls * graph.n_nodes + np.arange(graph.n_nodes),
                                          cls[graph.edge_dst] * graph.n_nodes
                                          + graph.edge_src]))
        self.touched = pairs % graph.n_nodes
        self.touched_ptr = np.searchsorted(pairs // graph.n_nodes, np.arange(n_classes + 1))

    def memory(self, device: np.ndarray) -> np.ndarray:
        return np.bincount(device, weights=self.size, minlength=self.graph.n_devices)

    def descend(self, device: np.ndarray):
        """(max-load or latency, device per class) at the local optimum the descent from
        `device` reaches (inf where no move makes a cyclic split's latency finite)."""
        g = self.graph
        load = _descend(device, self.allowed, self.size, float(g.memory_per_accelerator),
                        self.memory(device), self.work, self.touched_ptr, self.touched,
                        g.color_class, g.accel_latency, g.cpu_latency, g.output_cost,
                        self.succ_ptr, self.succ, self.k, self.by_latency)
        return load, device

    def kicked(self, device: np.ndarray, rng) -> np.ndarray | None:
        """A copy of `device` with a few random classes on random devices they may take;
        None where it breaks an accelerator's memory."""
        device = device.copy()
        for c in rng.integers(0, device.size, rng.integers(*_KICKED)):
            device[c] = rng.choice(np.flatnonzero(self.allowed[c]))
        memory = self.memory(device)[:self.k]
        return None if memory.size and memory.max() > self.graph.memory_per_accelerator \
            else device


@numba.njit(cache=True, nogil=True)
def _score(device, loads, by_latency, cls, cpu, succ_ptr, succ, k):
    """(max-load or latency, sum of squared loads): the objective first, then how even the
    loads are; a latency of inf where the split's calls feed each other in a cycle."""
    spread = (loads * loads).sum()
    if not by_latency:
        return loads.max(), spread
    value = class_latency(device, cls, loads, cpu, succ_ptr, succ, k)
    return (value if value >= 0 else np.inf), spread


@numba.njit(cache=True, nogil=True)
def _better(load, spread, best_load, best_spread):
    return load < best_load - _EQUAL or (load <= best_load + _EQUAL
                                         and spread < best_spread - _EQUAL)


@numba.njit(cache=True, nogil=True)
def _fits(memory, k, capacity, device, change):
    """Whether accelerator `device`'s memory stays within capacity after `change` bytes."""
    return device >= k or memory[device] + change <= capacity


@numba.njit(cache=True, nogil=True)
def _priced(classes, targets, device, loads, work, touched_ptr, touched, stamp, mark, cls, cost,
            cpu, succ_ptr, succ, k, out, seen, by_latency):
    """(_score once each of `classes` is on its `targets`, the last stamp used): only the
    nodes the classes touch (theirs and their feeders) change their charges."""
    out[:] = loads
    mark = _recharge(classes, device, touched_ptr, touched, stamp, mark, cls, cost, succ_ptr,
                     succ, k, out, seen, -1.0)
    origins = device[classes].copy()
    for i in range(classes.shape[0]):
        c = classes[i]
        out[origins[i]] -= work[c, int(origins[i] >= k)]
        out[targets[i]] += work[c, int(targets[i] >= k)]
        device[c] = targets[i]
    mark = _recharge(classes, device, touched_ptr, touched, stamp, mark, cls, cost, succ_ptr,
                     succ, k, out, seen, 1.0)
    score = _score(device, out, by_latency, cls, cpu, succ_ptr, succ, k)
    device[classes] = origins
    return score, mark


@numba.njit(cache=True, nogil=True)
def _recharge(classes, device, touched_ptr, touched, stamp, mark, cls, cost, succ_ptr, succ, k,
              out, seen, sign):
    """Add `sign` times the crossing charges of each node the classes touch, once each (a
    node stamped with the new mark is done); returns the mark."""
    mark += 1
    for i in range(classes.shape[0]):
        for j in range(touched_ptr[classes[i]], touched_ptr[classes[i] + 1]):
            u = touched[j]
            if stamp[u] != mark:
                stamp[u] = mark
                crossing_charge(u, device, cls, cost, succ_ptr, succ, k, out, seen, sign)
    return mark


@numba.njit(cache=True, nogil=True)
def _descend(device, allowed, size, capacity, memory, work, touched_ptr, touched, cls, accel,
             cpu, cost, succ_ptr, succ, k, by_latency):
    """Best-improvement moves of one class, then swaps of two, on `device` (changed in place)
    until neither lowers _score; returns its objective."""
    n_classes, n_devices = allowed.shape
    loads, out = np.zeros(n_devices), np.zeros(n_devices)
    seen = np.zeros(n_devices, np.bool_)
    stamp, mark = np.zeros(cls.shape[0], np.int64), 0
    one, two = np.zeros(1, np.int64), np.zeros(2, np.int64)
    at, ats = np.zeros(1, np.int64), np.zeros(2, np.int64)
    while True:
        class_loads(device, cls, accel, cpu, cost, succ_ptr, succ, k, loads, seen)
        load, spread = _score(device, loads, by_latency, cls, cpu, succ_ptr, succ, k)
        best_load, best_spread, moved, to, swapped = load, spread, -1, -1, -1
        for c in range(n_classes):
            for d in range(n_devices):
                if d == device[c] or not allowed[c, d] or not _fits(memory, k, capacity, d,
                                                                    size[c]):
                    continue
                one[0], at[0] = c, d
                (new_load, new_spread), mark = _priced(
                    one, at, device, loads, work, touched_ptr, touched, stamp, mark, cls, cost,
                    cpu, succ_ptr, succ, k, out, seen, by_latency)
                if _better(new_load, new_spread, best_load, best_spread):
                    best_load, best_spread, moved, to = new_load, new_spread, c, d
        if moved < 0:
            for c in range(n_classes):
                for other in range(c + 1, n_classes):
                    here, there = device[c], device[other]
                    change = size[other] - size[c]
                    if here == there or not allowed[c, there] or not allowed[other, here] \
                            or not _fits(memory, k, capacity, here, change) \
                            or not _fits(memory, k, capacity, there, -change):
                        continue
                    two[0], two[1], ats[0], ats[1] = c, other, there, here
                    (new_load, new_spread), mark = _priced(
                        two, ats, device, loads, work, touched_ptr, touched, stamp, mark, cls,
                        cost, cpu, succ_ptr, succ, k, out, seen, by_latency)
                    if _better(new_load, new_spread, best_load, best_spread):
                        best_load, best_spread, moved, to, swapped = (new_load, new_spread, c,
                                                                      there, other)
        if moved < 0:
            return load
        if swapped >= 0:
            memory[device[moved]] += size[swapped] - size[moved]
            memory[to] += size[moved] - size[swapped]
            device[swapped] = device[moved]
        else:
            memory[device[moved]] -= size[moved]
            memory[to] += size[moved]
        device[moved] = to
