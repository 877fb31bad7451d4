"""The exact placer: the best decision under an objective of placers.objectives, and its proof.

Two exact methods, after Tarnawski et al. (NeurIPS 2020):
- dynamic programming over the ideals (down-sets) of the group DAG, for throughput: the stages
  of a pipeline, in order, are the differences of a chain of ideals, so the best pipeline that
  ends in ideal J on a set of devices is the best, over ideals I inside J and devices d of the
  set, of the best pipeline ending in I on the others and stage J \\ I on d. Exact where the
  links are alike (a stage's transfers then cost the same whoever is at the other end) and
  the ideals are few: their number grows with the graph's width, not its size;
- a mixed integer program otherwise, and always for latency, whose best decision need not be a
  pipeline: HiGHS through scipy.optimize.milp. Under a time limit it returns the best decision
  found and the lower bound it proved.

Both obey the kernel rules and keep each device's modelled memory (problem.memory_bytes, the
linear model) within its capacity; where nothing fits, the answer is the start that goes least
past it. The decisions of the fast placers (common.FAST_PLACERS) bound the program from above,
and stand where it finds nothing better in time: the answer is never worse than theirs.

info (JSON-ready): objective, objective_us (the decision's score; None for inf: a throughput
decision that is no pipeline), bound_us (proven lower bound on the optimum; None where no
decision fits the memory model), gap ((objective_us - bound_us) / objective_us, None without a
bound), solver ("dp" or "milp"), proven_optimal (gap <= PROVEN_GAP), time_limit_s, incumbent
(what found the decision: the solver or one of the fast placers).
"""

from __future__ import annotations

import itertools
import time
from typing import Optional

import numpy as np
import scipy.optimize
import scipy.sparse

from tf_placeto.errors import PlacetoError
from tf_placeto.placers.common import EdgeTiming, edge_timing, fast_decisions
from tf_placeto.placers.objectives import OBJECTIVES, chain_heads, run_order
from tf_placeto.placers.problem import PlacementProblem

SOLVERS = ("auto", "dp", "milp")
TIME_LIMIT_S = 30.0       # for the whole decision, unless the caller gives one
DP_MAX_IDEALS = 2000      # its tables are ideals x ideals
DP_MAX_CELLS = 2e8        # table cells over all its states (sets of devices in use)
MIP_REL_GAP = 1e-6        # relative gap at which HiGHS stops
PROVEN_GAP = 1e-5         # a gap that counts as proven optimal: HiGHS's own, and its tolerances


def place(problem: PlacementProblem, *, seed: int = 0, objective: str = "latency",
          time_limit: Optional[float] = TIME_LIMIT_S, solver: str = "auto") -> tuple:
    """seed: unused (deterministic). objective: "latency" or "throughput". time_limit: seconds
    for the whole decision, None for no limit. solver: "auto" (the dynamic program where it
    applies), "dp" or "milp"."""
    began = time.monotonic()
    if objective not in OBJECTIVES:
        raise PlacetoError(f"unknown objective {objective!r}; objectives: "
                           f"{', '.join(OBJECTIVES)}")
    if solver not in SOLVERS:
        raise PlacetoError(f"unknown solver {solver!r}; solvers: {', '.join(SOLVERS)}")
    score = OBJECTIVES[objective]
    members = pipeline_ideals(problem) \
        if objective == "throughput" and solver != "milp" else None
    if solver == "dp" and members is None:
        raise PlacetoError("the dynamic program solves throughput on devices joined by alike "
                           f"links, with at most {DP_MAX_IDEALS} ideals; use the milp solver")
    if members is not None:
        solved, found = "dp", best_pipeline(problem, members)
        candidates = [("dp", found)] if found is not None else fast_decisions(problem)
        bound = score(problem, found) if found is not None else None
    else:
        solved, candidates = "milp", fast_decisions(problem)
        left = None if time_limit is None else max(time_limit - (time.monotonic() - began), 0)
        found, bound = _solve_program(problem, objective, candidates, left)
        candidates = ([("milp", found)] if found is not None else []) + candidates
    name, decision, value = min(
        ((name, d, score(problem, d)) for name, d in candidates),
        key=lambda c: (memory_excess_bytes(problem, c[1]), c[2]))
    if bound is None or not np.isfinite(value) or not fits_memory(problem, decision):
        gap = None
    else:
        gap = float(max(value - bound, 0.0) / value) if value > 0 else 0.0
    return decision, {"objective": objective,
                      "objective_us": float(value) if np.isfinite(value) else None,
                      "bound_us": None if bound is None else float(bound), "gap": gap,
                      "solver": solved, "proven_optimal": gap is not None and gap <= PROVEN_GAP,
                      "time_limit_s": time_limit, "incumbent": name}


def fits_memory(problem: PlacementProblem, group_devices) -> bool:
    return memory_excess_bytes(problem, group_devices) == 0


def memory_excess_bytes(problem: PlacementProblem, group_devices) -> float:
    """How far the fullest device goes past its capacity in the memory model (0: fits)."""
    excess = problem.device_loads(group_devices) - problem.capacity_bytes
    return float(max(excess.max(initial=0.0), 0.0))


# --- the dynamic program over ideals (throughput) ---------------------------------------------

def pipeline_ideals(problem: PlacementProblem) -> Optional[np.ndarray]:
    """The ideals of the forward group DAG, as rows of a bool matrix ordered by size (the first
    empty, the last every group), where the dynamic program applies; else None."""
    if not _links_alike(problem):
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
    src, dst, nbytes, extra = _all_edges(problem)
    transfer = problem.crossing_us(nbytes, 0.0, 0, 1) if problem.n_devices > 1 \
        else 0.0 * nbytes
    links = scipy.sparse.csr_array((np.r_[transfer, transfer], (np.r_[src, dst], np.r_[dst, src])),
                                   shape=(n, n))
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


# --- the integer program (latency, and throughput where the dynamic program does not apply) ---

def _solve_program(problem: PlacementProblem, objective: str, starts: list,
                   time_limit: Optional[float]) -> tuple:
    """(the program's decision, None if it found none; the proven lower bound on the optimum,
    None when no decision fits the memory model).

    Times are scaled by a ceiling on the optimum, the best start's score where one fits, so
    that the ceiling is 1 and doubles as the big-M of the device order rows."""
    score = OBJECTIVES[objective]
    ceiling = min((score(problem, d) for _, d in starts if fits_memory(problem, d)),
                  default=np.inf)
    if not np.isfinite(ceiling):
        ceiling = _worst_us(problem)
    program = _Program()
    x = _assignment(program, problem)
    build = _latency_rows if objective == "latency" else _throughput_rows
    goal = build(program, problem, x, ceiling)
    result = program.minimise(goal, time_limit)
    if result.status == 2:
        return None, None
    bound = _lower_bound_us(problem, objective)
    if result.mip_dual_bound is not None:     # scipy gives it only with a decision
        bound = max(bound, ceiling * result.mip_dual_bound)
    return (None if result.x is None else np.argmax(result.x[x], axis=1)), bound


def _lower_bound_us(problem: PlacementProblem, objective: str) -> float:
    """A bound that needs no solver: the work spread evenly over the devices, and for latency
    the longest chain (what the program's relaxation starts from)."""
    bound = _fastest_us(problem).sum() / problem.n_devices
    if objective == "latency":
        head, rest = _chains_us(problem, edge_timing(problem))
        bound = max(bound, (head + rest).max(initial=0.0))
    return float(bound)


def _worst_us(problem: PlacementProblem) -> float:
    """More than either objective of any decision: every group at its slowest, every edge
    over its slowest link."""
    _, _, nbytes, extra = _all_edges(problem)
    slowest_link = (problem.latency_us.max() + nbytes / problem.bytes_per_us.min()
                    + extra) if problem.n_devices > 1 else 0.0
    return float(np.where(problem.allowed, problem.compute_us, 0.0).max(axis=1).sum()
                 + np.sum(slowest_link) + 1.0)


def _assignment(program: "_Program", problem: PlacementProblem) -> np.ndarray:
    """x[g, d] = 1 when group g is on device d: one device each, with its kernel, memory within
    capacity. On interchangeable devices, group g is on one of the first g + 1 (any decision
    is so once its devices are renumbered by first use), which spares the solver symmetric
    copies of each decision."""
    n, n_devices = problem.n_groups, problem.n_devices
    upper = problem.allowed.astype(np.float64)
    if _interchangeable(problem):
        upper[np.arange(n_devices)[None, :] > np.arange(n)[:, None]] = 0.0
    x = program.variables((n, n_devices), upper=upper, integral=True)
    program.constrain(np.ones(n), (1.0, x), upper=np.ones(n))
    limited = np.flatnonzero(np.isfinite(problem.capacity_bytes))
    unit = np.maximum(problem.capacity_bytes[limited], 1.0)
    program.constrain(np.full(len(limited), -np.inf),
                      (problem.memory_bytes[None, :] / unit[:, None], x[:, limited].T),
                      upper=problem.capacity_bytes[limited] / unit)
    return x


def _crossings(program: "_Program", problem: PlacementProblem, x: np.ndarray, src, dst,
               nbytes, extra_us) -> tuple:
    """(y, transfer_us, pairs): y[e, p] in [0, 1] is at least 1 when edge e runs from the first
    device of the ordered pair p to the second, and costs transfer_us[e, p] there; whatever
    the program charges for y pushes the others to 0."""
    first, second = np.nonzero(~np.eye(problem.n_devices, dtype=bool))
    y = program.variables((len(src), len(first)), upper=1.0)
    program.constrain(np.full(y.shape, -1.0), (1.0, y), (-1.0, x[src][:, first]),
                      (-1.0, x[dst][:, second]))
    transfer = problem.crossing_us(np.asarray(nbytes, np.float64)[:, None],
                                   np.asarray(extra_us, np.float64).reshape(-1, 1),
                                   first[None, :], second[None, :])
    return y, transfer, (first, second)


def _latency_rows(program: "_Program", problem: PlacementProblem, x: np.ndarray,
                  ceiling: float) -> np.ndarray:
    """The makespan of objectives.latency_objective_us, in units of `ceiling`, at most 1.

    For fixed x, the least makespan these rows allow is the objective's schedule: a group
    starts after each input's producer start + lag (capped at the producer's run time on its
    device: linear in x) + crossing, and after the groups before it in the run order on its
    device, which free[k, d] (when device d is done with the first k + 1 groups of the order)
    carries along. Valid rows that the relaxation lacks: each device's load, and the chains of
    fastest computes and lags before a group's start and after it."""
    n, n_devices = problem.n_groups, problem.n_devices
    compute = np.where(problem.allowed, problem.compute_us, 0.0) / ceiling
    src, dst = problem.edge_src, problem.edge_dst
    timing = edge_timing(problem)
    lag = np.minimum(timing.lag_us[:, None], problem.compute_us[src]) / ceiling
    head, rest = (chain / ceiling for chain in _chains_us(problem, timing))
    order = run_order(problem, timing)
    y, transfer, _ = _crossings(program, problem, x, src, dst, problem.edge_bytes,
                                problem.edge_extra_us)
    big = 1.0 + MIP_REL_GAP
    start = program.variables(n, lower=head)
    makespan = program.variables(1, upper=big)
    free = program.variables((n - 1, n_devices))
    program.constrain(np.zeros(len(src)), (1.0, start[dst]), (-1.0, start[src]),
                      (-lag, x[src]), (-transfer / ceiling, y))
    program.constrain(np.zeros(n), (1.0, makespan), (-1.0, start), (-compute, x))
    program.constrain(rest, (1.0, makespan), (-1.0, start))
    program.constrain(np.zeros(n_devices), (1.0, makespan), (-compute.T, x.T))
    later, earlier = order[1:], order[:-1]
    program.constrain(np.full(free.shape, -big), (1.0, start[later, None]), (-1.0, free),
                      (-big, x[later]))
    program.constrain(np.full(free.shape, -big), (1.0, free), (-1.0, start[earlier, None]),
                      (-(big + compute[earlier]), x[earlier]))
    program.constrain(np.zeros(free[1:].shape), (1.0, free[1:]), (-1.0, free[:-1]))
    return makespan


def _throughput_rows(program: "_Program", problem: PlacementProblem, x: np.ndarray,
                     ceiling: float) -> np.ndarray:
    """The busiest load of objectives.throughput_objective_us, in units of `ceiling`.

    A pipeline: each device sits at a position in [0, n_devices - 1], each group at its
    device's, and a forward edge that crosses devices goes at least one position further, so
    the devices' quotient graph has no cycle (and any acyclic one has such positions)."""
    n, n_devices = problem.n_groups, problem.n_devices
    compute = np.where(problem.allowed, problem.compute_us, 0.0) / ceiling
    src, dst, nbytes, extra = _all_edges(problem)
    y, transfer, (first, second) = _crossings(program, problem, x, src, dst, nbytes, 0.0)
    ends = np.array([np.flatnonzero((first == d) | (second == d)) for d in range(n_devices)],
                    np.int64).reshape(n_devices, -1)
    # a device at either end carries the transfer; the receiving one also the remote extra
    receives = second[ends] == np.arange(n_devices)[:, None]
    load = transfer[:, ends] + extra[:, None, None] * receives[None]
    busiest = program.variables(1, upper=1.0 + MIP_REL_GAP)
    program.constrain(np.zeros(n_devices), (1.0, busiest), (-compute.T, x.T),
                      (-load.transpose(1, 0, 2) / ceiling, y[:, ends].transpose(1, 0, 2)))
    position = program.variables(n_devices, upper=n_devices - 1)
    stage = program.variables(n, upper=n_devices - 1)
    for sign in (1.0, -1.0):
        program.constrain(np.full((n, n_devices), -n_devices), (sign, stage[:, None]),
                          (-sign, position[None, :]), (-n_devices, x))
    forward = len(problem.edge_src)
    program.constrain(np.zeros(forward), (1.0, stage[problem.edge_dst]),
                      (-1.0, stage[problem.edge_src]), (-1.0, y[:forward]))
    return busiest


def _chains_us(problem: PlacementProblem, timing: EdgeTiming) -> tuple:
    """(head, rest): per group, the least time before it can start, and from its start to the
    end of the step, along chains of fastest computes and least lags (transfers left out)."""
    fastest = _fastest_us(problem)
    lag = np.minimum(timing.lag_us, fastest[problem.edge_src])
    rest = fastest.copy()
    for e in np.argsort(problem.edge_src, kind="stable")[::-1]:   # a consumer's rest is final
        a, b = problem.edge_src[e], problem.edge_dst[e]
        rest[a] = max(rest[a], lag[e] + rest[b])
    return chain_heads(problem, lag), rest


def _fastest_us(problem: PlacementProblem) -> np.ndarray:
    return np.where(problem.allowed, problem.compute_us, np.inf).min(axis=1)


def _all_edges(problem: PlacementProblem) -> tuple:
    """(src, dst, bytes, extra_us) of the forward edges, then the feedback edges."""
    return (np.concatenate([problem.edge_src, problem.feedback_src]),
            np.concatenate([problem.edge_dst, problem.feedback_dst]),
            np.concatenate([problem.edge_bytes, problem.feedback_bytes]),
            np.concatenate([problem.edge_extra_us, problem.feedback_extra_us]))


def _links_alike(problem: PlacementProblem) -> bool:
    off = ~np.eye(problem.n_devices, dtype=bool)
    return np.unique(problem.latency_us[off]).size <= 1 \
        and np.unique(problem.bytes_per_us[off]).size <= 1


def _interchangeable(problem: PlacementProblem) -> bool:
    """Every device alike: its costs, its capacity and its links."""
    return bool(np.array_equal(problem.compute_us, problem.compute_us[:, :1].repeat(
        problem.n_devices, axis=1)) and np.unique(problem.capacity_bytes).size == 1
        and _links_alike(problem))


class _Program:
    """A mixed integer program built in blocks: variables are arrays of column indices, a block
    of rows is lower <= sum of (coefficients, variables) terms <= upper."""

    def __init__(self):
        self.n_columns = 0
        self.n_rows = 0
        self._columns = []    # (lower, upper, integral) per block
        self._rows = []       # (lower, upper) per block
        self._entries = []    # (row, column, coefficient)

    def variables(self, shape, lower=0.0, upper=np.inf, integral=False) -> np.ndarray:
        index = self.n_columns + np.arange(int(np.prod(shape))).reshape(shape)
        self.n_columns += index.size
        self._columns.append((np.broadcast_to(lower, index.shape).ravel(),
                              np.broadcast_to(upper, index.shape).ravel(),
                              np.full(index.size, int(integral))))
        return index

    def constrain(self, lower, *terms, upper=np.inf) -> None:
        """One row per entry of `lower`; a term's variables have the rows' shape (one per row),
        or one more axis (several per row); coefficients broadcast to them."""
        lower = np.asarray(lower, np.float64)
        rows = self.n_rows + np.arange(lower.size).reshape(lower.shape)
        for coefficients, variables in terms:
            variables = np.asarray(variables)
            shape = lower.shape + variables.shape[lower.ndim:]
            self._entries.append(tuple(np.broadcast_to(a, shape).ravel() for a in (
                rows.reshape(rows.shape + (1,) * (len(shape) - lower.ndim)), variables,
                coefficients)))
        self._rows.append((lower.ravel(), np.broadcast_to(upper, lower.shape).ravel()))
        self.n_rows += lower.size

    def minimise(self, goal: np.ndarray, time_limit: Optional[float]):
        """scipy.optimize.milp's result for the least value of the variable `goal`."""
        row, column, coefficient = (np.concatenate(a) for a in zip(*self._entries))
        kept = coefficient != 0
        matrix = scipy.sparse.csr_array((coefficient[kept], (row[kept], column[kept])),
                                        shape=(self.n_rows, self.n_columns))
        lower, upper, integral = (np.concatenate(a) for a in zip(*self._columns))
        row_lower, row_upper = (np.concatenate(a) for a in zip(*self._rows))
        cost = np.zeros(self.n_columns)
        cost[goal] = 1.0
        options = {"mip_rel_gap": MIP_REL_GAP}
        if time_limit is not None:
            options["time_limit"] = time_limit
        return scipy.optimize.milp(
            cost, integrality=integral, bounds=scipy.optimize.Bounds(lower, upper),
            constraints=scipy.optimize.LinearConstraint(matrix, row_lower, row_upper),
            options=options)
