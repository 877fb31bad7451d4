"""The dynamic program over ideals, for throughput: the stages of a pipeline, in order, are the
differences of a chain of ideals (down-sets of the group DAG), so the best pipeline that ends in
ideal J on a set of devices is the best, over ideals I inside J and devices d of the set, of the
best pipeline ending in I on the others and stage J \\ I on d. Exact where the links are alike
and the ideals are few."""

from __future__ import annotations

import itertools
from typing import Optional

import numpy as np
import scipy.sparse

from tf_placeto.placers.optimal.model import all_edges
from tf_placeto.placers.problem import PlacementProblem

DP_MAX_IDEALS = 2000      # its tables are ideals x ideals
DP_MAX_CELLS = 2e8        # table cells over all its states (sets of devices in use)


def pipeline_ideals(problem: PlacementProblem) -> Optional[np.ndarray]:
    """The ideals of the forward group DAG, as rows of a bool matrix ordered by size (the first
    empty, the last every group), where the dynamic program applies; else None."""
    if not problem.links_alike:
        return None
    needs = [0] * problem.n_groups
    for a, b in zip(problem.edge_src, problem.edge_dst):
        needs[b] |= 1 << int(a)
    level, found = [0], [0]
    while level:
        grown = set()
        for ideal in level:
            grown.update(ideal | 1 << g for g in range(problem.n_groups)
                         if not ideal >> g & 1 and not needs[g] & ~ideal)
            if len(found) + len(grown) > DP_MAX_IDEALS:
                return None
        level = sorted(grown)
        found.extend(level)
    classes = _device_classes(problem)
    if np.prod([len(c) + 1 for c in classes]) * len(classes) * len(found) ** 2 > DP_MAX_CELLS:
        return None
    return np.array([[ideal >> g & 1 for g in range(problem.n_groups)] for ideal in found],
                    bool).reshape(len(found), problem.n_groups)


def best_pipeline(problem: PlacementProblem, members: np.ndarray) -> Optional[np.ndarray]:
    """The pipeline of least throughput objective, over the ideals `members` (module doc);
    None when no pipeline fits the memory model."""
    classes = _device_classes(problem)
    loads = _stage_loads_us(problem, members, classes)
    n_ideals = len(members)
    states = list(itertools.product(*(range(len(c) + 1) for c in classes)))
    state_index = {state: k for k, state in enumerate(states)}
    best = np.full((len(states), n_ideals), np.inf)   # [devices in use per class, last ideal]
    best[0, 0] = 0.0
    came_from = np.zeros((len(states), n_ideals, 2), np.int64)    # (ideal before, class)
    for k, state in enumerate(states[1:], 1):
        for c in np.flatnonzero(state):
            fewer = state_index[state[:c] + (state[c] - 1,) + state[c + 1:]]
            options = np.maximum(best[fewer][:, None], loads[c])
            before = options.argmin(axis=0)
            value = options[before, np.arange(n_ideals)]
            better = value < best[k]
            best[k, better] = value[better]
            came_from[k, better, 0] = before[better]
            came_from[k, better, 1] = c
    if not np.isfinite(best[-1, -1]):
        return None
    decision = np.zeros(problem.n_groups, np.int64)
    state, ideal = list(states[-1]), n_ideals - 1
    while any(state):
        before, c = came_from[state_index[tuple(state)], ideal]
        state[c] -= 1
        decision[members[ideal] & ~members[before]] = classes[c][state[c]]
        ideal = before
    return decision


def _device_classes(problem: PlacementProblem) -> list:
    """Devices grouped by what a stage costs on them (compute column and capacity): the
    dynamic program counts the devices of each class in use, not which."""
    classes = {}
    for d in range(problem.n_devices):
        key = (problem.compute_us[:, d].tobytes(), float(problem.capacity_bytes[d]))
        classes.setdefault(key, []).append(d)
    return list(classes.values())


def _stage_loads_us(problem: PlacementProblem, members: np.ndarray, classes: list) -> list:
    """Per device class, the (ideal I, ideal J) matrix of the load of stage J \\ I on one of its
    devices: compute, the transfer of every edge with one end in the stage, and the remote extra
    of every edge into it; inf where I is not inside J, a group of the stage has no kernel there
    or the stage overflows memory.

    With x_I the indicator of I and A the symmetric matrix of edge transfer times, the edges of
    the stage s = x_J - x_I cost degree . s - s A s, whose bilinear terms for all pairs of
    ideals come from one product X A X^T. The edges into it (B[a, b]: the extra of a -> b) add
    s . (B's column sums) - s B s, from X B X^T the same way."""
    x = members.astype(np.float64)
    n = problem.n_groups
    src, dst, nbytes, extra = all_edges(problem)
    transfer = problem.crossing_us(nbytes, 0.0, 0, 1) if problem.n_devices > 1 \
        else 0.0 * nbytes
    links = scipy.sparse.csr_array(
        (np.r_[transfer, transfer], (np.r_[src, dst], np.r_[dst, src])), shape=(n, n))
    into = scipy.sparse.csr_array((extra, (src, dst)), shape=(n, n))
    cut = _crossing_load(x, links, links.sum(axis=1)) + _crossing_load(x, into, into.sum(axis=0))
    nested = x @ (1.0 - x).T < 0.5
    stage_memory = _stage(x @ problem.memory_bytes)
    loads = []
    for devices in classes:
        allowed = problem.allowed[:, devices[0]]
        possible = nested & (stage_memory <= problem.capacity_bytes[devices[0]]) \
            & (_stage(x @ ~allowed) < 0.5)
        compute = _stage(x @ np.where(allowed, problem.compute_us[:, devices[0]], 0.0))
        loads.append(np.where(possible, compute + cut, np.inf))
    return loads


def _crossing_load(x: np.ndarray, weights, per_group: np.ndarray) -> np.ndarray:
    """(ideal I, ideal J) matrix of s . per_group - s W s with s = x_J - x_I (W: `weights`)."""
    inner = x @ (weights @ x.T)              # [I, J] = x_I W x_J
    own = np.diag(inner)
    return _stage(x @ per_group) - (own[None, :] - inner - inner.T + own[:, None])


def _stage(per_ideal: np.ndarray) -> np.ndarray:
    """(ideal I, ideal J) matrix of per_ideal[J] - per_ideal[I]: a sum over groups, taken over
    the stage J \\ I where I is inside J."""
    return per_ideal[None, :] - per_ideal[:, None]
