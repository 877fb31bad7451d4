"""The mixed integer program of either objective: HiGHS (program.py), started from the best
fast decision, which under a time limit returns the best decision found and the lower bound it
proved."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from tf_placeto.measure.simulator.schedule import remote_tasks
from tf_placeto.placers.common import EdgeTiming, edge_timing
from tf_placeto.placers.objectives import (MODEL_SCORES, chain_heads, crossing_costs_us,
                                           latency_crossings_us, run_order)
from tf_placeto.placers.optimal.model import fits_memory
from tf_placeto.placers.optimal.program import MIP_REL_GAP, Program
from tf_placeto.placers.problem import PlacementProblem


def solve(problem: PlacementProblem, objective: str, starts: list,
          time_limit: Optional[float], progress: Optional[Callable] = None,
          interface: Optional[str] = None) -> tuple:
    """(the program's decision, None if it found none; the proven lower bound on the optimum,
    None when no decision fits the memory model; the interface to HiGHS that ran).

    Times are scaled by a ceiling on the optimum, the best start's score where one fits, so
    that the ceiling is 1 and doubles as the big-M of the device order rows. That start is
    the search's first incumbent. progress(incumbent_us, bound_us) follows the search."""
    score = MODEL_SCORES[objective]
    fits = [d for _, d in starts if fits_memory(problem, d)]
    best = min(fits, key=lambda d: score(problem, d), default=None)
    ceiling = score(problem, best) if best is not None else np.inf
    if not np.isfinite(ceiling):
        ceiling, best = _worst_us(problem), None
    program = Program()
    renamed = _renamed_from(problem, objective)
    x = _assignment(program, problem, renamed)
    build = _latency_rows if objective == "latency" else _throughput_rows
    goal = build(program, problem, x, ceiling)
    scaled = None if progress is None else (
        lambda incumbent, bound: progress(incumbent * ceiling, max(bound, 0.0) * ceiling))
    solved = program.minimise(goal, time_limit, interface=interface, progress=scaled,
                              start=None if best is None else _start(problem, x, best,
                                                                     renamed))
    if solved.infeasible:
        return None, None, solved.interface
    bound = _lower_bound_us(problem, objective)
    if solved.bound is not None:
        bound = max(bound, ceiling * solved.bound)
    decision = None if solved.values is None else np.argmax(solved.values[x], axis=1)
    return decision, bound, solved.interface


def _renamed_from(problem: PlacementProblem, objective: str) -> Optional[int]:
    """The first of the devices that the program may take in the names of their first use
    alone (_assignment), None if none: 0 where the devices are interchangeable, but 1 under
    throughput where device 0 is the session's among a cluster's tasks (a stream's session
    work loads it; in one step, a decision renamed so pays no more RunGraph calls)."""
    if not problem.interchangeable:
        return None
    return 1 if objective == "throughput" and problem.session_apart else 0


def _start(problem: PlacementProblem, x: np.ndarray, decision: np.ndarray,
           renamed: Optional[int]) -> tuple:
    """(columns, values) of the assignment x for `decision`, its devices from `renamed` on
    renamed by first use as _assignment asks; HiGHS completes the other columns."""
    devices = problem.check(decision) if renamed is None else problem.canonical(decision,
                                                                                 renamed)
    values = np.zeros(x.shape)
    values[np.arange(problem.n_groups), devices] = 1.0
    return x.ravel(), values.ravel()


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
    over its slowest link, every remote task's per-step cost and every tensor's message
    between tasks."""
    _, _, nbytes, extra = problem.all_edges()
    slowest_link = (problem.latency_us.max() + nbytes / problem.bytes_per_us.min()
                    + extra) if problem.n_devices > 1 else 0.0
    simulation = problem.simulation
    return float(np.where(problem.allowed, problem.compute_us, 0.0).max(axis=1).sum()
                 + np.sum(slowest_link) + simulation.remote_task_us * problem.n_devices
                 + simulation.task_message_us * problem.all_edge_tensors().sum() + 1.0)


def _assignment(program: Program, problem: PlacementProblem,
                renamed: Optional[int]) -> np.ndarray:
    """x[g, d] = 1 when group g is on device d: one device each, with its kernel, memory within
    capacity. Of the devices from `renamed` on (_renamed_from), group g is on one of the
    first g + 1 (any decision is so once they are renumbered by first use), which spares the
    solver symmetric copies of each decision."""
    n, n_devices = problem.n_groups, problem.n_devices
    upper = problem.allowed.astype(np.float64)
    if renamed is not None:
        upper[np.arange(n_devices)[None, :] > np.arange(n)[:, None] + renamed] = 0.0
    x = program.variables((n, n_devices), upper=upper, integral=True)
    program.constrain(np.ones(n), (1.0, x), upper=np.ones(n))
    limited = np.flatnonzero(np.isfinite(problem.capacity_bytes))
    unit = np.maximum(problem.capacity_bytes[limited], 1.0)
    program.constrain(np.full(len(limited), -np.inf),
                      (problem.memory_bytes[None, :] / unit[:, None], x[:, limited].T),
                      upper=problem.capacity_bytes[limited] / unit)
    return x


def _crossings(program: Program, problem: PlacementProblem, x: np.ndarray, src,
               dst) -> tuple:
    """(y, pairs): y[e, p] in [0, 1] is at least 1 when edge e runs from the first device of
    the ordered pair p to the second; whatever the program charges for y pushes the others
    to 0."""
    first, second = np.nonzero(~np.eye(problem.n_devices, dtype=bool))
    y = program.variables((len(src), len(first)), upper=1.0)
    program.constrain(np.full(y.shape, -1.0), (1.0, y), (-1.0, x[src][:, first]),
                      (-1.0, x[dst][:, second]))
    return y, (first, second)


def _remote_tasks_used(program: Program, problem: PlacementProblem, x: np.ndarray) -> tuple:
    """(used, remote): used[k] in [0, 1] is at least 1 when the decision puts a group on a
    device of the remote task remote[k] (its RunGraph call is the session's)."""
    task = problem.simulation.device_task
    remote = remote_tasks(problem.simulation, np.arange(problem.n_devices))
    used = program.variables(len(remote), upper=1.0)
    for k, remote_task in enumerate(remote):
        on_task = np.flatnonzero(task == remote_task)
        program.constrain(np.zeros((problem.n_groups, len(on_task))),
                          (1.0, np.full((problem.n_groups, len(on_task)), used[k])),
                          (-1.0, x[:, on_task]))
    return used, remote


def _session_terms(program: Program, problem: PlacementProblem, x: np.ndarray,
                   ceiling: float) -> list:
    """objectives.session_us as (coefficients in units of `ceiling`, variables) terms: a
    RunGraph call per remote task used, and per edge (forward and feedback) a message for
    each tensor it carries when z[e], at least 1 where its ends sit in two tasks, is."""
    simulation = problem.simulation
    terms = []
    if simulation.remote_task_us:
        used, _ = _remote_tasks_used(program, problem, x)
        terms.append((simulation.remote_task_us / ceiling, used))
    tasks = np.unique(simulation.device_task)
    if simulation.task_message_us and len(tasks) > 1:
        src, dst, _, _ = problem.all_edges()
        z = program.variables(len(src), upper=1.0)
        for task in tasks:     # z[e] >= (src's share of the task) - (dst's share of it)
            on_task = np.flatnonzero(simulation.device_task == task)
            program.constrain(np.zeros(len(src)), (1.0, z), (-1.0, x[src][:, on_task]),
                              (1.0, x[dst][:, on_task]))
        terms.append((simulation.task_message_us * problem.all_edge_tensors() / ceiling, z))
    return terms


def _latency_rows(program: Program, problem: PlacementProblem, x: np.ndarray,
                  ceiling: float) -> np.ndarray:
    """objectives.latency_objective_us in units of `ceiling`, at most 1: the makespan and
    after it the session's work on a cluster's tasks (_session_terms).

    For fixed x, the least makespan these rows allow is the objective's schedule: a group
    starts after each input's producer start + lag (capped at the producer's run time on its
    device: linear in x) + crossing, and after the groups before it in the run order on its
    device, which free[k, d] (when device d is done with the first k + 1 groups of the order)
    carries along; a group holds its device for its compute and what its crossings take
    there (_occupied); each channel carries its edges' wire time. Valid rows that the
    relaxation lacks: each device's load, and the chains of fastest computes and lags before
    a group's start and after it."""
    n, n_devices = problem.n_groups, problem.n_devices
    compute = np.where(problem.allowed, problem.compute_us, 0.0) / ceiling
    src, dst = problem.edge_src, problem.edge_dst
    timing = edge_timing(problem)
    lag = np.minimum(timing.lag_us[:, None], problem.compute_us[src]) / ceiling
    head, rest = (chain / ceiling for chain in _chains_us(problem, timing))
    order = run_order(problem, timing)
    edges = problem.all_edges()     # forward, then feedback
    y, (first, second) = _crossings(program, problem, x, *edges[:2])
    crossing = latency_crossings_us(problem, edges[2][:, None],
                                    problem.all_edge_tensors()[:, None], first[None, :],
                                    second[None, :])
    received = crossing.copy_us + problem.all_edge_input_us()[:, None]   # (edge, pair)
    big = 1.0 + MIP_REL_GAP
    start = program.variables(n, lower=head)
    makespan = program.variables(1, upper=big)
    free = program.variables((n - 1, n_devices))
    occupied = _occupied(program, x, y, edges, compute, crossing.copy_us, received,
                         problem.all_edge_input_us(), ceiling)
    forward = len(src)
    program.constrain(np.zeros(forward), (1.0, start[dst]), (-1.0, start[src]),
                      (-lag, x[src]), (-crossing.path_us[:forward] / ceiling, y[:forward]))
    program.constrain(np.zeros(n), (1.0, makespan), (-1.0, start), (-1.0, occupied))
    program.constrain(rest, (1.0, makespan), (-1.0, start))
    devices = np.arange(n_devices)[:, None, None]
    crossings_there = (crossing.copy_us * (first == devices)
                       + received * (second == devices)).reshape(n_devices, -1)
    program.constrain(np.zeros(n_devices), (1.0, makespan), (-compute.T, x.T),
                      (-crossings_there / ceiling,
                       np.broadcast_to(y.ravel(), (n_devices, y.size))))
    program.constrain(np.zeros(len(first)), (1.0, np.repeat(makespan, len(first))),
                      (-crossing.wire_us.T / ceiling, y.T))
    later, earlier = order[1:], order[:-1]
    program.constrain(np.full(free.shape, -big), (1.0, start[later, None]), (-1.0, free),
                      (-big, x[later]))
    program.constrain(np.full(free.shape, -big), (1.0, free), (-1.0, start[earlier, None]),
                      (-1.0, np.broadcast_to(occupied[earlier, None], free.shape)),
                      (-big, x[earlier]))
    program.constrain(np.zeros(free[1:].shape), (1.0, free[1:]), (-1.0, free[:-1]))
    session = _session_terms(program, problem, x, ceiling)
    if not session:
        return makespan
    total = program.variables(1, upper=big)
    program.constrain(np.zeros(1), (1.0, total), (-1.0, makespan),
                      *((-coefficients, variables[None]) for coefficients, variables in session))
    return total


def _occupied(program: Program, x: np.ndarray, y: np.ndarray, edges: tuple,
              compute: np.ndarray, sent_us: np.ndarray, received_us: np.ndarray,
              input_us: np.ndarray, ceiling: float) -> np.ndarray:
    """occupied[g]: at least group g's time on its device (objectives.latency_objective_us),
    in units of `ceiling`: its compute (`compute`, already in them), what its edges
    (`edges`, problem.all_edges()) that cross take there as the pair of y says (sent_us at
    the sender, its copies; received_us at the receiver, its copies and the remote extra
    paid per input, `input_us` of the edge's extra; both per edge and pair), and its ops'
    remote extra paid once per op, at least any of its crossing edges' (once[g])."""
    n = len(compute)
    src, dst, _, extra = edges
    once_us = extra - input_us
    sent, received = program.variables(len(src)), program.variables(len(src))
    once = program.variables(n)
    program.constrain(np.zeros(len(src)), (1.0, sent), (-sent_us / ceiling, y))
    program.constrain(np.zeros(len(src)), (1.0, received), (-received_us / ceiling, y))
    program.constrain(np.zeros(len(src)), (1.0, once[dst]), (-once_us[:, None] / ceiling, y))
    occupied = program.variables(n)
    into = (dst[None, :] == np.arange(n)[:, None]).astype(np.float64)
    out_of = (src[None, :] == np.arange(n)[:, None]).astype(np.float64)
    program.constrain(np.zeros(n), (1.0, occupied), (-compute, x), (-1.0, once),
                      (-into, np.broadcast_to(received, into.shape)),
                      (-out_of, np.broadcast_to(sent, out_of.shape)))
    return occupied


def _throughput_rows(program: Program, problem: PlacementProblem, x: np.ndarray,
                     ceiling: float) -> np.ndarray:
    """The busiest load of objectives.throughput_objective_us, in units of `ceiling`: a row
    for each device's processor (device 0's with the session's work), each link one way and,
    where work floats, all the processors together over their number,
    whose load `busiest` is at least; used[t] is at least 1 when the decision puts a group on
    a device of remote task t (its RunGraph call is the session's)."""
    n_devices = problem.n_devices
    compute = np.where(problem.allowed, problem.compute_us, 0.0) / ceiling
    src, dst, nbytes, extra = problem.all_edges()
    y, (first, second) = _crossings(program, problem, x, src, dst)
    cost = crossing_costs_us(problem, nbytes[:, None], extra[:, None], first[None, :],
                             second[None, :], problem.all_edge_tensors()[:, None])
    busiest = program.variables(1, upper=1.0 + MIP_REL_GAP)
    devices = np.arange(n_devices)[:, None, None]
    session = (np.arange(n_devices) == 0)[:, None].astype(np.float64)   # its row: device 0
    processor = (cost.sender_us[None] * (first == devices)
                 + cost.receiver_us[None] * (second == devices)).reshape(n_devices, -1)
    used, remote = _remote_tasks_used(program, problem, x)
    program.constrain(
        np.zeros(n_devices), (1.0, np.repeat(busiest, n_devices)), (-compute.T, x.T),
        (-(processor + session * cost.message_us.ravel()[None]) / ceiling,
         np.broadcast_to(y.ravel(), (n_devices, y.size))),
        (-session * np.full((1, len(remote)), problem.simulation.remote_task_us / ceiling),
         np.broadcast_to(used, (n_devices, len(remote)))))
    program.constrain(np.zeros(len(first)), (1.0, np.repeat(busiest, len(first))),
                      (-cost.wire_us.T / ceiling, y.T))
    simulation = problem.simulation
    if simulation.floating_us or simulation.floating_message_us:    # all processors at once
        crossing = (processor.sum(axis=0) + cost.message_us.ravel()
                    + simulation.floating_message_us * cost.messages.ravel())
        program.constrain(np.full(1, simulation.floating_us / ceiling),
                          (float(n_devices), busiest), (-compute[None], x[None]),
                          (-crossing[None] / ceiling, y.reshape(1, -1)),
                          (-simulation.remote_task_us / ceiling, used[None]))
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
