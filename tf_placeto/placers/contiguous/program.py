"""Integer programs over any split of a `CostGraph` (Tarnawski et al.'s ip.py and lip.py), on
HiGHS through highspy.

The DP (dp.py) is exact over contiguous splits only. The max-load program drops that rule; the
latency program keeps it for accelerators alone, as lip.py does, since a call that feeds itself
through another device cannot run. Each colour class is one set of variables. The devices are
interchangeable, and left so: HiGHS finds that symmetry itself, and did better with it whole
than with an order imposed on the devices (gaps at 60 s lower on each of five layer graphs that
did not close, 0.84% against 1.79% on GNMT training). Times are scaled by the start's value,
and the start is handed to HiGHS, so the answer is never worse than it.

With the goal only bounding the loads from above, HiGHS' dual bound hardly moves past the LP's
(on GNMT's layer graph, 5% under the best split after 30 s). A cap on every load, a constant,
makes each load row a knapsack that HiGHS cuts and probes: there, a cap 1.6% over that bound
was proved infeasible in 4 s. So the search is a bisection over caps between the proven bound
and the best split, each probe a HiGHS run that either finds a split under the cap, proves there
is none (the cap is a bound), or times out with its own dual bound (a bound too, up to the cap).
Each probe takes 60% of the time left: a probe cut at a third raised GNMT's bounds less.
The latency program also bounds the latency by the work along each path, rows without big-M.

The bisection raises the bound but seldom improves on the start: HiGHS finds better splits late
in a long run, which the probes cut short. So a second HiGHS run, under the start's value, takes
the whole time in a thread beside it (HiGHS releases the GIL: two cores), and the answer is the
better split and the higher bound of the two. Under max-load that run first improves the start
for up to a quarter of the time by balance.py's local search (on the layer graphs a better
split is mostly a better balance, which it finds in seconds where HiGHS took the minute or
never did), then re-splits pairs of devices (the busiest and each other in turn, a small HiGHS
run each) for 15%, where a better split moves several classes at once. The bisection takes up
the whole run's better splits between probes. Under latency the whole run starts after the
local search alone.
"""

from __future__ import annotations

import copy
import functools
import threading
import time
from typing import Callable, Optional

import highspy
import numpy as np
import scipy.sparse

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import CostGraph
from tf_placeto.placers.contiguous.accounting import (device_loads, infeasibility, latency,
                                                      max_load)
from tf_placeto.placers.contiguous.balance import rebalanced
from tf_placeto.placers.optimal.program import new_highs, report_progress

# Slack on a cap, above HiGHS' feasibility tolerance, so that a split at the cap stays.
_CAP_SLACK = 1e-6
# Each probe's share of the time left (under 2 s left, all of it).
_PROBE_SHARE = 0.6
# The whole run's shares of the time for the local search of balance.py and for re-splitting
# pairs of devices, before its HiGHS run, and each pair's HiGHS run's limit.
_BALANCE_SHARE = 0.25
_POLISH_SHARE = 0.15
_PAIR_SECONDS = 2.0


def solve_max_load_program(graph: CostGraph, start=None, time_limit_s: float = 60.0,
                           progress: Optional[Callable[[float, float], None]] = None,
                           rel_gap: float = 1e-4):
    """(max-load, assignment, info) of the best split of `graph`, contiguous or not, found
    within `time_limit_s` (or once within `rel_gap` of the optimum); (inf, None, info) when
    none fits.

    start: a feasible assignment (the DP's, say): the answer is never worse. progress(
    incumbent, bound) follows the search. info: bound (proven lower bound on the optimum), gap
    ((max-load - bound) / max-load), seconds, status ("optimal" within rel_gap, "time limit"
    or "infeasible"), probes (HiGHS runs), columns and rows (of the last).
    """
    return _search(graph, graph.n_devices, _max_load_model, functools.partial(max_load, graph),
                   start, time_limit_s, progress, rel_gap, polish=_improved)


def solve_latency_program(graph: CostGraph, start=None, time_limit_s: float = 60.0,
                          progress: Optional[Callable[[float, float], None]] = None,
                          rel_gap: float = 1e-4):
    """(latency, assignment, info) of the best split under accounting.latency (one call per
    accelerator, on a convex set of nodes; CPUs unlimited), as solve_max_load_program gives
    its optimum. The CPU nodes all go to device k, the first CPU."""
    return _search(graph, graph.max_accelerators + (graph.max_cpus > 0), _latency_model,
                   functools.partial(latency, graph), start, time_limit_s, progress, rel_gap,
                   polish=functools.partial(_improved, objective="latency"))


def _max_load_model(graph: CostGraph, classes: "_Classes", scale: float, cap: float,
                    devices=None):
    """(builder, x, goal): the busiest device's load, every load at most `cap` (scaled); of
    `devices` only, if given (the others' loads are then left out)."""
    k, n_devices = graph.max_accelerators, graph.n_devices
    devices = range(n_devices) if devices is None else devices
    b = _Builder()
    x = classes.assignment(b, graph, n_devices)
    payer, cost, pair_payer, pair_reader = _payers(graph)
    # z[g, a]: payer group g's output crosses accelerator a's boundary, one way or the other
    z = b.columns((len(payer), k))
    goal = b.columns(1, upper=cap)[0]
    for a in (d for d in devices if d < k):
        inside, reader, cross = x[payer, a], x[pair_reader, a], z[pair_payer, a]
        b.rows(0.0, np.inf, [cross, reader, inside[pair_payer]], [1.0, -1.0, 1.0])
        b.rows(0.0, np.inf, [cross, inside[pair_payer], reader], [1.0, -1.0, 1.0])
        load = [x[:, a], z[:, a]], [classes.accel / scale, cost / scale]
        b.row(-np.inf, cap, *load)
        b.row(-np.inf, 0.0, load[0] + [[goal]], load[1] + [-1.0])
    for c in (d for d in devices if d >= k):
        b.row(-np.inf, cap, [x[:, c]], [classes.cpu / scale])
        b.row(-np.inf, 0.0, [x[:, c], [goal]], [classes.cpu / scale, -1.0])
    return b, x, goal


def _latency_model(graph: CostGraph, classes: "_Classes", scale: float, cap: float):
    """(builder, x, goal): lip.py's latency, every time at most `cap` (scaled), which is also
    the big-M of its rows that hold only for some assignments."""
    k, n = graph.max_accelerators, graph.n_nodes
    n_columns = k + (graph.max_cpus > 0)
    b = _Builder()
    x = classes.assignment(b, graph, n_columns)
    node_x = x[graph.color_class]
    src, dst = graph.edge_src, graph.edge_dst
    split = graph.color_class[src] != graph.color_class[dst]
    src, dst = src[split], dst[split]
    # in[u, a]: u is off a and feeds it; out[u, a]: u is on a and feeds another device
    feeders = np.unique(src)
    row_of = np.full(n, -1)
    row_of[feeders] = np.arange(feeders.size)
    comm_in = b.columns((feeders.size, k))
    comm_out = b.columns((feeders.size, k))
    cost = graph.output_cost[feeders] / scale
    begin, finish = b.columns(k, upper=cap), b.columns(k, upper=cap)
    done = b.columns(n, upper=cap)          # when each node's output is ready
    goal = b.columns(1, upper=cap)[0]
    for a in range(k):
        here_u, here_v = node_x[src, a], node_x[dst, a]
        b.rows(0.0, np.inf, [comm_in[row_of[src], a], here_v, here_u], [1.0, -1.0, 1.0])
        b.rows(0.0, np.inf, [comm_out[row_of[src], a], here_u, here_v], [1.0, -1.0, 1.0])
        load = [x[:, a], comm_in[:, a], comm_out[:, a]], [classes.accel / scale, cost, cost]
        b.row(-np.inf, cap, *load)
        b.row(0.0, 0.0, load[0] + [[finish[a]], [begin[a]]], load[1] + [-1.0, 1.0])
        # the call starts once each input is ready; its nodes are ready when it ends
        b.rows(-cap, np.inf, [np.full(feeders.size, begin[a]), done[feeders], comm_in[:, a]],
               [1.0, -1.0, -cap])
        b.rows(-cap, np.inf, [done, np.full(n, finish[a]), node_x[:, a]], [1.0, -1.0, -cap])
        _convex_rows(b, graph, node_x[:, a])
    # path[v]: the work along a path to v, each node at its device's time, which the latency
    # is at least (a path's nodes on one accelerator are all in its call); no big-M, so it
    # holds the relaxation up where `done` does not
    path = b.columns(n, upper=cap)
    accel = graph.accel_latency / scale
    work = [node_x[:, a] for a in range(k)], [accel] * k
    if n_columns > k:
        on_cpu = node_x[:, k]
        cpu = graph.cpu_latency / scale
        work = work[0] + [on_cpu], work[1] + [cpu]
        b.rows(0.0, np.inf, [done, on_cpu], [1.0, -cpu])
        b.rows(0.0, np.inf, [done[graph.edge_dst], done[graph.edge_src],
                             on_cpu[graph.edge_dst]], [1.0, -1.0, -cpu[graph.edge_dst]])
    else:
        b.rows(0.0, np.inf, [done[graph.edge_dst], done[graph.edge_src]], [1.0, -1.0])
    b.rows(0.0, np.inf, [path] + work[0], [1.0] + [-w for w in work[1]])
    d = graph.edge_dst
    b.rows(0.0, np.inf, [path[d], path[graph.edge_src]] + [w[d] for w in work[0]],
           [1.0, -1.0] + [-w[d] for w in work[1]])
    b.rows(0.0, np.inf, [np.full(n, goal), done], [1.0, -1.0])
    b.rows(0.0, np.inf, [np.full(n, goal), path], [1.0, -1.0])
    return b, x, goal


class _Classes:
    """Per colour class: its nodes' sums, and which columns it may take (an accelerator only if
    it can run the class and hold it)."""

    def __init__(self, graph: CostGraph, n_columns: int):
        cls = graph.color_class
        n = int(cls.max()) + 1
        self.accel, self.cpu, self.size = (np.bincount(cls, weights=w, minlength=n) for w in
                                           (graph.accel_latency, graph.cpu_latency, graph.size))
        supported = np.bincount(cls, weights=~graph.supported, minlength=n) == 0
        on_accel = supported & (self.size <= graph.memory_per_accelerator)
        self.upper = np.ones((n, n_columns))
        self.upper[~on_accel, :graph.max_accelerators] = 0.0
        # More than any split's max-load or latency: all work at its slowest, every crossing
        # paid on every accelerator.
        self.worst = float(np.maximum(self.accel, self.cpu).sum()
                           + max(graph.max_accelerators, 1) * graph.output_cost.sum())

    def assignment(self, b: "_Builder", graph: CostGraph, n_columns: int) -> np.ndarray:
        """x[c, d] = 1 when class c is on column d: one each, memory within capacity."""
        x = b.columns((self.upper.shape[0], n_columns), upper=self.upper, integral=True)
        b.rows(1.0, 1.0, list(x.T), [1.0] * n_columns)
        capacity = graph.memory_per_accelerator
        if self.size.sum() > capacity:
            unit = max(capacity, 1.0)
            for a in range(graph.max_accelerators):
                b.row(-np.inf, capacity / unit, [x[:, a]], [self.size / unit])
        return x

    def within(self, column: np.ndarray, devices) -> "_Classes":
        """These classes with those on `devices` free to move among them only and the others
        kept on their `column`."""
        free = np.isin(column, devices)
        allowed = np.zeros_like(self.upper)
        allowed[np.ix_(free, devices)] = 1.0
        allowed[~free, column[~free]] = 1.0
        restricted = copy.copy(self)
        restricted.upper = self.upper * allowed
        return restricted

    def columns(self, graph: CostGraph, assignment, n_columns: int) -> np.ndarray:
        """Each class's column under `assignment` (every CPU to the one CPU column, if so)."""
        column = np.empty(self.upper.shape[0], np.int64)
        column[graph.color_class] = np.minimum(assignment, n_columns - 1)
        return column


class _Builder:
    """Columns and rows of a program, gathered as triplets for highspy."""

    def __init__(self):
        self.n_columns = self.n_rows = 0
        self.lower, self.upper, self.integral = [], [], []
        self.entries, self.row_lower, self.row_upper = [], [], []

    def columns(self, shape, upper=1.0, integral=False) -> np.ndarray:
        index = self.n_columns + np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        self.n_columns += index.size
        self.lower.append(np.zeros(index.size))
        self.upper.append(np.broadcast_to(np.asarray(upper, float), index.shape).ravel())
        self.integral.append(np.full(index.size, integral))
        return index

    def rows(self, lower, upper, columns, coefficients) -> None:
        """lower <= sum of coefficient * column <= upper, a row per entry of each column
        array; a coefficient is a number or one per row."""
        n = len(columns[0])
        index = self.n_rows + np.arange(n)
        for column, coefficient in zip(columns, coefficients):
            self.entries.append((index, np.asarray(column, np.int64),
                                 np.broadcast_to(np.asarray(coefficient, float), (n,))))
        self.row_lower.append(np.full(n, float(lower)))
        self.row_upper.append(np.full(n, float(upper)))
        self.n_rows += n

    def row(self, lower, upper, columns, coefficients) -> None:
        """One row: the terms of each column array, with a coefficient each or one for all."""
        for column, coefficient in zip(columns, coefficients):
            column = np.asarray(column, np.int64).ravel()
            self.entries.append((np.full(column.size, self.n_rows), column,
                                 np.broadcast_to(np.asarray(coefficient, float),
                                                 column.shape)))
        self.row_lower.append(np.array([float(lower)]))
        self.row_upper.append(np.array([float(upper)]))
        self.n_rows += 1

    def matrix(self) -> scipy.sparse.csc_array:
        row, column, value = (np.concatenate(a) for a in zip(*self.entries))
        kept = value != 0
        return scipy.sparse.csc_array((value[kept], (row[kept], column[kept])),
                                      shape=(self.n_rows, self.n_columns))


def _payers(graph: CostGraph):
    """Who pays for crossings, in groups that pay alike: nodes with a cost and readers in other
    classes, grouped by their class and the set of those classes (each group's summed cost).
    Returns (class, cost) per group and the (group, reader class) pairs."""
    cls = graph.color_class
    n_classes = int(cls.max()) + 1
    src, dst = graph.edge_src, graph.edge_dst
    keep = (cls[src] != cls[dst]) & (graph.output_cost[src] > 0)
    pairs = np.unique(src[keep] * n_classes + cls[dst[keep]])
    node, reader = pairs // n_classes, pairs % n_classes
    groups = {}
    for u in np.unique(node):
        key = (int(cls[u]), tuple(reader[node == u].tolist()))
        groups[key] = groups.get(key, 0.0) + graph.output_cost[u]
    payer = np.array([c for c, _ in groups], np.int64)
    cost = np.array(list(groups.values()), float)
    pair_payer = np.array([g for g, (_, readers) in enumerate(groups) for _ in readers],
                          np.int64)
    pair_reader = np.array([r for _, readers in groups for r in readers], np.int64)
    return payer, cost, pair_payer, pair_reader


def _convex_rows(b: _Builder, graph: CostGraph, on) -> None:
    """Rows that keep the nodes with `on` (a column per node) convex, as lip.py does: w is at
    least `on`, never grows along an edge, and is 0 past an edge that leaves the set."""
    w = b.columns(graph.n_nodes)
    src, dst = graph.edge_src, graph.edge_dst
    b.rows(0.0, np.inf, [w, on], [1.0, -1.0])
    b.rows(0.0, np.inf, [w[src], w[dst]], [1.0, -1.0])
    split = graph.color_class[src] != graph.color_class[dst]
    b.rows(-1.0, np.inf, [on[dst[split]], on[src[split]], w[dst[split]]], [1.0, -1.0, -1.0])


def _scale(graph: CostGraph, start, value, classes: _Classes) -> float:
    """The start's value, which the program's times are divided by; without a start, a value
    above any split's. A start that breaks a rule of the instance is refused."""
    if start is None:
        return classes.worst or 1.0
    why = infeasibility(graph, np.asarray(start))
    if why is not None:
        raise PlacementError(f"the start is not a split of {graph.source or 'the graph'}: {why}")
    return value(start) or 1.0


def _search(graph: CostGraph, n_columns: int, build, value, start, time_limit_s, progress,
            rel_gap, polish=None):
    """The bisection over caps of the module's docstring, and the whole run beside it (after
    `polish`, if any, has improved the start): (value, assignment, info)."""
    began = time.perf_counter()
    deadline = began + time_limit_s
    classes = _Classes(graph, n_columns)
    scale = _scale(graph, start, value, classes)
    best, assignment = np.inf, None
    if start is not None:
        best, assignment = value(start), np.asarray(start, np.int64)
    shown = None if progress is None else _Shown(progress)
    lower, cap = 0.0, 1.0 + _CAP_SLACK          # scaled; a split of value `scale` fits
    whole = _WholeRun(graph, classes, build, value, scale, n_columns, assignment, deadline,
                      rel_gap, shown, polish)
    probes = 1
    try:
        while True:
            load, split = whole.incumbent()
            if load < best:
                best, assignment = load, split
                cap = min(cap, (lower + best / scale) / 2.0)
            b, x, goal, hint = _probe(graph, classes, build, scale, cap, best, assignment,
                                      n_columns)
            remaining = deadline - time.perf_counter()
            highs = _prepared(b, x, goal, lower, hint, remaining * _PROBE_SHARE
                              if remaining > 2.0 else remaining, rel_gap,
                              _reporter(shown, scale, best, lower, cap))
            highs.run()
            found, bound, infeasible = _outcome(highs, x)
            probes += 1
            load, split = _split_of(graph, found, value)
            if load < best:
                best, assignment = load, split
            resolved = infeasible or found is not None
            lower = max(lower, cap if infeasible else min(cap, bound))
            # a probe that ran out of time aims lower: refuting a cap is what it did not manage
            cap = (lower + (best / scale if resolved else cap)) / 2.0
            if cap * scale >= best * (1.0 - rel_gap / 2) or time.perf_counter() >= deadline - 0.05:
                break
    finally:                                    # the whole run ends with the search
        split, bound = whole.outcome()
    load = np.inf if split is None else value(split)
    if load < best:
        best, assignment = load, split
    lower = max(lower, bound)
    bound = min(lower * scale, best)
    if not np.isfinite(best):
        status = "infeasible" if lower >= 1.0 else "time limit"
    else:
        status = "optimal" if bound >= best * (1.0 - rel_gap) else "time limit"
    return best, assignment, {
        "bound": bound, "gap": (best - bound) / best if 0 < best < np.inf else
        float(best > 0) * np.inf, "seconds": time.perf_counter() - began, "status": status,
        "probes": probes, "columns": b.n_columns, "rows": b.n_rows}


def _probe(graph, classes, build, scale, cap, best, assignment, n_columns):
    """(builder, x, goal, hint) of a HiGHS run under `cap`: the best split as its hint where
    it fits under the cap."""
    b, x, goal = build(graph, classes, scale, cap)
    fits = assignment is not None and best <= cap * scale
    return b, x, goal, classes.columns(graph, assignment, n_columns) if fits else None


def _split_of(graph: CostGraph, found, value) -> tuple:
    """(value, split) of a run's solution (each class's column): (inf, None) if none, or if
    it breaks a rule."""
    if found is None:
        return np.inf, None
    split = found[graph.color_class]
    try:
        if infeasibility(graph, split) is None:
            return value(split), split
    except PlacementError:                          # the latency of a cyclic split
        pass
    return np.inf, None


class _Shown:
    """progress() of the two runs together: the lower incumbent and the higher bound."""

    def __init__(self, progress: Callable[[float, float], None]):
        self._progress = progress
        self._lock = threading.Lock()
        self._best, self._bound = np.inf, 0.0

    def __call__(self, incumbent: float, bound: float) -> None:
        with self._lock:
            self._best, self._bound = min(self._best, incumbent), max(self._bound, bound)
            self._progress(self._best, self._bound)


class _WholeRun:
    """In a thread: `polish` improves the start for part of the time, then one HiGHS run under
    its value takes the rest (the module's docstring says why). Its best split so far is the
    bisection's to use."""

    def __init__(self, graph, classes, build, value, scale, n_columns, start, deadline, rel_gap,
                 shown, polish):
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._highs = None
        self._value, self._shown = value, shown
        self._split, self._bound = start, 0.0
        self._best = np.inf if start is None else value(start)
        self._thread = threading.Thread(target=self._work, daemon=True, args=(
            graph, classes, build, scale, n_columns, deadline, rel_gap, polish))
        self._thread.start()

    def _work(self, graph, classes, build, scale, n_columns, deadline, rel_gap, polish):
        if polish is not None and self._split is not None:
            polish(graph, classes, self._split, self._stop, deadline, self._offer)
        best, start = self.incumbent()
        cap = (best / scale if np.isfinite(best) else 1.0) + _CAP_SLACK
        b, x, goal, hint = _probe(graph, classes, build, scale, cap, best, start, n_columns)
        with self._lock:
            if self._stop.is_set():
                return
            self._highs = _prepared(b, x, goal, 0.0, hint, deadline - time.perf_counter(),
                                    rel_gap, _reporter(self._shown, scale, best, 0.0, cap))
            self._highs.HandleUserInterrupt = True
        self._highs.run()
        found, bound, infeasible = _outcome(self._highs, x)
        self._offer(_split_of(graph, found, self._value)[1])
        self._bound = cap if infeasible else min(cap, bound)

    def _offer(self, split) -> None:
        """Keep `split` (an assignment, or None) where it is better than the best so far."""
        load = np.inf if split is None else self._value(split)
        with self._lock:
            if load >= self._best:
                return
            self._best, self._split = load, split
        if self._shown is not None:
            self._shown(load, 0.0)

    def incumbent(self):
        """(value, split) of the best split so far (the start's, or (inf, None))."""
        with self._lock:
            return self._best, self._split

    def outcome(self):
        """(the best split found or the start, a proven bound, scaled), the work stopped now
        if it has not ended."""
        with self._lock:
            self._stop.set()
            if self._highs is not None:
                self._highs.cancelSolve()
        self._thread.join()
        return self._split, self._bound


def _improved(graph: CostGraph, classes: "_Classes", split, stop, deadline, offer,
              objective: str = "max_load") -> None:
    """Offers `split` improved by balance.py's local search under `objective` for up to
    _BALANCE_SHARE of the time to `deadline`, then, under max-load, by re-splitting pairs of
    devices for _POLISH_SHARE."""
    began = time.perf_counter()
    span = deadline - began
    split = rebalanced(graph, split, began + span * _BALANCE_SHARE, stop, found=offer,
                       objective=objective)
    if objective == "max_load":
        offer(_resplit_pairs(graph, classes, split, stop, time.perf_counter()
                             + span * _POLISH_SHARE))


def _resplit_pairs(graph: CostGraph, classes: _Classes, split: np.ndarray, stop, deadline):
    """The split improved pair by pair until `deadline` or `stop` is set: the busiest device's
    classes and another device's split again between the two by a HiGHS run (the rest
    fixed), kept where the pair's busier side gets lighter, until no pair does."""
    column = classes.columns(graph, split, graph.n_devices)
    while not stop.is_set() and time.perf_counter() < deadline:
        loads = device_loads(graph, column[graph.color_class])
        busiest, *others = np.argsort(-loads, kind="stable").tolist()
        if loads[busiest] <= 0:
            break
        for other in others:
            pair = [busiest, other]
            remaining = deadline - time.perf_counter()
            if stop.is_set() or remaining <= 0:
                return column[graph.color_class]
            b, x, goal = _max_load_model(graph, classes.within(column, pair), loads[busiest],
                                         1.0 + _CAP_SLACK, devices=pair)
            highs = _prepared(b, x, goal, 0.0, column, min(_PAIR_SECONDS, remaining), 1e-6,
                              None)
            highs.run()
            found, _, _ = _outcome(highs, x)
            resplit = None if found is None else found[graph.color_class]
            if resplit is not None and infeasibility(graph, resplit) is None and \
                    device_loads(graph, resplit)[pair].max() < loads[busiest] - 1e-12:
                column = found
                break
        else:
            break                                   # no pair improves: a local optimum
    return column[graph.color_class]


def _reporter(shown: Optional[_Shown], scale, best, lower, cap):
    """What a run under `cap` reports its (scaled) incumbent and bound to, if anything."""
    return None if shown is None else functools.partial(_combined, shown, scale, best, lower,
                                                        cap)


def _combined(progress, scale, best, lower, cap, incumbent, bound):
    """progress() of the whole search from one run's incumbent and bound (scaled)."""
    progress(min(best, incumbent * scale), max(lower, min(cap, bound)) * scale)


def _prepared(b: _Builder, x, goal, lower, hint, time_limit_s, rel_gap, report):
    """A HiGHS instance holding the program, the goal at least `lower`, from `hint` (each
    class's column) if any, ready to run."""
    highs = new_highs()
    for name, setting in (("output_flag", False), ("threads", 1), ("mip_rel_gap", rel_gap),
                          ("time_limit", max(float(time_limit_s), 0.01))):
        highs.setOptionValue(name, setting)
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = b.n_columns, b.n_rows
    cost, lowest, highest = np.zeros(b.n_columns), np.concatenate(b.lower), np.concatenate(b.upper)
    cost[goal], lowest[goal] = 1.0, min(lower, highest[goal])
    model.col_cost_, model.col_lower_, model.col_upper_ = cost, lowest, highest
    model.row_lower_ = np.concatenate(b.row_lower)
    model.row_upper_ = np.concatenate(b.row_upper)
    matrix = b.matrix()
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_ = matrix.indptr, matrix.indices
    model.a_matrix_.value_ = matrix.data
    kinds = highspy.HighsVarType
    model.integrality_ = [kinds.kInteger if i else kinds.kContinuous
                          for i in np.concatenate(b.integral)]
    highs.passModel(model)
    if hint is not None:
        values = np.zeros(x.shape)
        values[np.arange(x.shape[0]), hint] = 1.0
        highs.setSolution(x.size, x.ravel().astype(np.int32), values.ravel())
    if report is not None:
        report_progress(highs, report)
    return highs


def _outcome(highs, x):
    """(each class's column in the run's best solution or None, its dual bound (0 if none),
    whether no solution exists)."""
    info = highs.getInfo()
    found = None
    if info.primal_solution_status == 2:            # kSolutionStatusFeasible
        found = np.argmax(np.array(highs.getSolution().col_value)[x], axis=1)
    bound = float(info.mip_dual_bound)
    infeasible = highs.getModelStatus() == highspy.HighsModelStatus.kInfeasible
    return found, bound if np.isfinite(bound) else 0.0, infeasible
