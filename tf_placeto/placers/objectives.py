"""The two objectives of the exact placer (placers.optimal), public so that any decision can be
scored on them: the comparison's gap of a placer to the optimum is measured here.

Both follow Tarnawski et al.'s model (NeurIPS 2020) over the group DAG: a group costs its
compute_us on its device, a group edge whose ends sit on two devices costs its link's latency
+ bytes / bandwidth and what its consumer's ops take more with a remote input
(problem.crossing_us), and memory is a constraint, not a cost.

- `latency_objective_us`: one step, no pipelining. Each device runs its groups one at a time
  in one fixed order (`run_order`); a group starts once its device is free and the data of
  every input edge is there: ready the edge's lag after its producer started
  (common.EdgeTiming: a group's first ops may need only a producer's early outputs; at most
  the producer's run time), then, from another device, across the link (a link carries any
  number of transfers at once). The objective is the makespan. Fixing the order makes the
  makespan a function of the decision alone, which an integer program minimises exactly; the
  order is the one in which groups could start at the earliest, close to the order in which
  the op-level simulator's devices find them ready (it runs ready ops first come first
  served, and stays the judge of the step).
- `throughput_objective_us`: pipelined, micro-batches in flight: the time per micro-batch is
  the busiest device's load, its compute plus every transfer it sends or receives (forward and
  feedback edges: both carry bytes every step). A pipeline hands data on in one direction: its
  devices have an order that every forward edge follows (their quotient graph is acyclic, which
  also makes each device's groups contiguous). A decision that is no such pipeline scores inf.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from tf_placeto.placers.common import EdgeTiming, edge_timing
from tf_placeto.placers.problem import PlacementProblem


def latency_objective_us(problem: PlacementProblem, group_devices,
                         timing: Optional[EdgeTiming] = None) -> float:
    """The makespan of one step (module doc); inf when a group has no kernel on its device.

    timing: common.edge_timing(problem), computed once by a caller that scores many decisions."""
    devices = np.asarray(group_devices, np.int64)
    compute = problem.compute_us[np.arange(problem.n_groups), devices]
    timing = timing if timing is not None else edge_timing(problem)
    ready = np.minimum(timing.lag_us, compute[problem.edge_src]) + problem.crossing_us(
        problem.edge_bytes, problem.edge_extra_us, devices[problem.edge_src],
        devices[problem.edge_dst])
    by_consumer = np.argsort(problem.edge_dst, kind="stable")
    first_input = np.searchsorted(problem.edge_dst[by_consumer], np.arange(problem.n_groups + 1))
    start = np.zeros(problem.n_groups)
    free_at = np.zeros(problem.n_devices)
    for g in run_order(problem, timing):
        inputs = by_consumer[first_input[g]:first_input[g + 1]]
        start[g] = max(free_at[devices[g]],
                       (start[problem.edge_src[inputs]] + ready[inputs]).max(initial=0.0))
        free_at[devices[g]] = start[g] + compute[g]
    return float((start + compute).max(initial=0.0))


def run_order(problem: PlacementProblem, timing: Optional[EdgeTiming] = None) -> np.ndarray:
    """Group ids in the order every device runs its groups under the latency objective: by
    earliest start along chains of fastest computes and lags (transfers left out; negative lags
    count as 0, which keeps the order topological), ties by id."""
    fastest = np.where(problem.allowed, problem.compute_us, np.inf).min(axis=1)
    lag = (timing if timing is not None else edge_timing(problem)).lag_us
    earliest = chain_heads(problem, np.maximum(np.minimum(lag, fastest[problem.edge_src]), 0.0))
    return np.lexsort((np.arange(problem.n_groups), earliest))


def chain_heads(problem: PlacementProblem, step: np.ndarray) -> np.ndarray:
    """Per group, the longest chain of forward edges ending at it, edge e adding step[e] (from
    its producer's start to its consumer's), and at least 0."""
    head = np.zeros(problem.n_groups)
    for e in np.argsort(problem.edge_src, kind="stable"):   # a producer's inputs come first
        a, b = problem.edge_src[e], problem.edge_dst[e]
        head[b] = max(head[b], head[a] + step[e])
    return head


def throughput_objective_us(problem: PlacementProblem, group_devices) -> float:
    """The busiest device's load (module doc) when the decision is a pipeline, else inf."""
    if not is_pipeline(problem, group_devices):
        return float("inf")
    return float(device_loads_us(problem, group_devices).max(initial=0.0))


# the exact placer's model of each objective of PlacementProblem.objective
MODEL_SCORES = {"latency": latency_objective_us, "throughput": throughput_objective_us}


def device_loads_us(problem: PlacementProblem, group_devices) -> np.ndarray:
    """Per device: the compute of its groups plus every transfer it sends or receives, and
    what its groups take more with remote inputs."""
    devices = np.asarray(group_devices, np.int64)
    compute = problem.compute_us[np.arange(problem.n_groups), devices]
    loads = np.bincount(devices, weights=compute, minlength=problem.n_devices)
    for src, dst, nbytes, extra in (
            (problem.edge_src, problem.edge_dst, problem.edge_bytes, problem.edge_extra_us),
            (problem.feedback_src, problem.feedback_dst, problem.feedback_bytes,
             problem.feedback_extra_us)):
        transfer = problem.crossing_us(nbytes, 0.0, devices[src], devices[dst])
        slower = np.where(devices[src] != devices[dst], extra, 0.0)
        loads += np.bincount(devices[src], weights=transfer, minlength=problem.n_devices)
        loads += np.bincount(devices[dst], weights=transfer + slower,
                             minlength=problem.n_devices)
    return loads


def is_pipeline(problem: PlacementProblem, group_devices) -> bool:
    """Whether the devices, joined by the forward edges between them, form no cycle."""
    devices = np.asarray(group_devices, np.int64)
    src, dst = devices[problem.edge_src], devices[problem.edge_dst]
    feeds = np.zeros((problem.n_devices, problem.n_devices), bool)
    feeds[src, dst] = True
    np.fill_diagonal(feeds, False)
    remaining = np.ones(problem.n_devices, bool)
    while remaining.any():
        first = remaining & ~feeds[remaining].any(axis=0)
        if not first.any():
            return False
        remaining &= ~first
    return True

