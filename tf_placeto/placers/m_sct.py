"""m-SCT (Baechi): m-ETF plus favourite children chosen by a linear program.

Each group may have one favourite child, which should run right after it on the same device
so that their edge costs nothing. The choice comes from the LP relaxation of Hanen and Munier's
small-communication-time schedule: minimise the makespan w over start times s and edge
variables x in [0, 1] (0: the edge stays on one device) with
    s_i + l_ij + c_ij x_ij <= s_j         for every edge i -> j
    sum_j x_ij >= out-degree(i) - 1       (at most one favourite child)
    sum_i x_ij >= in-degree(j) - 1        (at most one favourite parent)
    s_i + p_i <= w,  s >= 0
with p the mean compute over allowed devices, c the mean transfer time of the edge's bytes and
l the edge's lag (how soon j may start after i starts, common.EdgeTiming; Hanen and Munier
have l = p_i, whole-group precedence).
Rounding as Baechi does, x <= 0.5 meaning favourite; where rounding gives a group two
favourite children or a child two favourite parents, the edges with the smallest x win (Baechi
keeps whichever it meets last). The list scheduler then lets a device wait for its last
group's favourite child (see list_scheduling).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.sparse

from tf_placeto.placers.common import edge_timing, mean_compute_us
from tf_placeto.placers.list_scheduling import earliest_start_first
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import PlacerSpec

ROUNDING_THRESHOLD = 0.5


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (the LP and the scheduler are deterministic)."""
    edge_x, lp_makespan = favourite_child_lp(problem)
    favourite = favourite_children(problem, edge_x)
    decision, info = earliest_start_first(problem, favourite)
    return decision, {**info, "lp_makespan_us": lp_makespan,
                      "favourite_children": int((favourite >= 0).sum())}


def favourite_child_lp(problem: PlacementProblem) -> tuple:
    """(x per forward edge, LP makespan) of the relaxation in the module doc."""
    n_edges, n_groups = len(problem.edge_src), problem.n_groups
    compute = mean_compute_us(problem)
    timing = edge_timing(problem)
    transfer, lag = timing.mean_transfer_us(problem), timing.lag_us
    start = n_edges + np.arange(n_groups)       # variable index of s_g
    makespan = n_edges + n_groups               # variable index of w
    edges = np.arange(n_edges)
    rows, cols, values, bounds = [], [], [], []

    def constrain(row_cols, row_values, bound):
        rows.append(np.full(len(row_cols), len(bounds)))
        cols.append(row_cols)
        values.append(row_values)
        bounds.append(bound)

    for e, (a, b) in enumerate(zip(problem.edge_src, problem.edge_dst)):
        constrain([start[a], start[b], e], [1.0, -1.0, transfer[e]], -lag[e])
    for ends in (problem.edge_src, problem.edge_dst):
        for g in np.unique(ends):
            mine = edges[ends == g]
            if len(mine) > 1:
                constrain(mine, -np.ones(len(mine)), 1.0 - len(mine))
    for g in range(n_groups):
        constrain([start[g], makespan], [1.0, -1.0], -compute[g])
    a_ub = scipy.sparse.csr_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
        shape=(len(bounds), makespan + 1))
    objective = np.zeros(makespan + 1)
    objective[makespan] = 1.0
    result = scipy.optimize.linprog(
        objective, A_ub=a_ub, b_ub=np.array(bounds),
        bounds=[(0.0, 1.0)] * n_edges + [(0.0, None)] * (n_groups + 1), method="highs")
    if not result.success:
        raise RuntimeError(f"the favourite-child LP failed: {result.message}")
    return result.x[:n_edges], float(result.fun)


def favourite_children(problem: PlacementProblem, edge_x: np.ndarray) -> np.ndarray:
    """favourite[g]: g's favourite child, -1 for none; at most one parent per child."""
    favourite = np.full(problem.n_groups, -1, np.int64)
    has_parent = np.zeros(problem.n_groups, bool)
    for e in np.argsort(edge_x, kind="stable"):
        if edge_x[e] > ROUNDING_THRESHOLD:
            break
        a, b = problem.edge_src[e], problem.edge_dst[e]
        if favourite[a] < 0 and not has_parent[b]:
            favourite[a] = b
            has_parent[b] = True
    return favourite


PLACER = PlacerSpec(
    "m_sct", place, "m-SCT (Baechi): m-ETF with favourite children from a linear program",
    order=80, fast=True, auto=True, objectives=OBJECTIVES)
