"""The two objectives of the exact placer (placers.optimal), public so that any decision can be
scored on them: the comparison's gap of a placer to the optimum is measured here.

Both are models over the group DAG, after Tarnawski et al. (NeurIPS 2020): a group costs its
compute_us on its device, a group edge whose ends sit on two devices costs the transfer of its
tensors and what its consumer's ops take more with a remote input, and memory is a
constraint, not a cost.

- `latency_objective_us`: one step, no pipelining, its crossings charged as the list
  schedulers (placers.list_scheduling) and the simulator charge them. Each device runs its
  groups one at a time in one fixed order (`run_order`), each holding it for its compute,
  the copies of its edges that cross (a fixed time per tensor and a share of the bytes, at
  each end: CPU workers serialize and deserialize) and its ops' remote extra
  (`remote_extra_us`); a group starts once its device is free and the data of every input
  edge is there: ready the edge's lag after its producer started (common.EdgeTiming: a
  group's first ops may need only a producer's early outputs; at most the producer's run
  time), then, from another device, its tensors across the link one at a time, each paying
  its latency (`latency_crossings_us`; a message between tasks is not on this path). The
  step lasts at least each channel's wire time (its own transfers, one at a time; that
  they wait for each other on the way is left out). The objective is the makespan, and
  after it the session's work on a cluster's tasks, as the simulator
  adds it (`session_us`): a RunGraph call per task besides the session's that runs a group,
  a message per tensor an edge carries between tasks. Fixing the order makes the objective
  a function of the decision alone, which an integer program minimises exactly; the
  order is the one in which groups could start at the earliest, close to the order in which
  the op-level simulator's devices find them ready (it runs ready ops first come first
  served, and stays the judge of the step).
- `throughput_objective_us`: steps in flight, as TensorFlow's executors run them: every device
  runs the ready ops of any step in flight, so once enough steps are in flight the time per
  step is the busiest resource's load per step (`stream_loads_us`):
  - each device's processor: the compute of its groups, and for every edge that crosses
    devices (forward and feedback: both carry bytes every step) the copies of its bytes at
    the sender and at the receiver, and at the receiver what its consumer takes more with a
    remote input; device 0's also the session's work: a RunGraph call per remote task used,
    a message per tensor an edge carries between tasks (the master runs them in task 0's process);
  - each link, one way: the wire's share of every transfer on it (its latency and the bytes
    the processors do not copy);
  - all the processors together: their loads and the work that floats to whichever of them
    is free (simulator.stream: the client's calls, the runtime's threads; per step and per
    message between tasks, fitted on logged real streams), over the number of devices.
  These are the op-level simulator's terms (measure.simulator), summed per step, and a
  transfer's latency + bytes / bandwidth split among them as the simulator splits it. No
  pipeline of stages in one order is asked for (not Tarnawski et al.'s throughput model:
  docs/decisions.md says why): steps in flight overlap whichever way their tensors
  cross. It is what the time per step tends to with enough steps in flight and no step
  waiting on another; the stream simulator (PlacementProblem.evaluate) judges the decision.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tf_placeto.measure.simulator import schedule
from tf_placeto.placers.common import EdgeTiming, edge_timing
from tf_placeto.placers.problem import PlacementProblem


def latency_objective_us(problem: PlacementProblem, group_devices,
                         timing: Optional[EdgeTiming] = None) -> float:
    """The makespan of one step (module doc); inf when a group has no kernel on its device.

    timing: common.edge_timing(problem), computed once by a caller that scores many decisions."""
    devices = np.asarray(group_devices, np.int64)
    n = problem.n_groups
    timing = timing if timing is not None else edge_timing(problem)
    compute = problem.compute_us[np.arange(n), devices]
    src, dst, nbytes, _ = problem.all_edges()
    sender, receiver = devices[src], devices[dst]
    crossing = latency_crossings_us(problem, nbytes, problem.all_edge_tensors(), sender,
                                    receiver)
    occupied = (compute + np.bincount(src, crossing.copy_us, n)
                + np.bincount(dst, crossing.copy_us, n) + remote_extra_us(problem, devices))
    forward = len(problem.edge_src)
    src, dst = src[:forward], dst[:forward]
    ready = np.minimum(timing.lag_us, compute[src]) + crossing.path_us[:forward]
    by_consumer = np.argsort(dst, kind="stable")
    first_input = np.searchsorted(dst[by_consumer], np.arange(n + 1))
    start = np.zeros(n)
    free_at = np.zeros(problem.n_devices)
    for g in run_order(problem, timing):
        inputs = by_consumer[first_input[g]:first_input[g + 1]]
        start[g] = max(free_at[devices[g]], (start[src[inputs]] + ready[inputs]).max(initial=0.0))
        free_at[devices[g]] = start[g] + occupied[g]
    channels = np.zeros((problem.n_devices, problem.n_devices))
    np.add.at(channels, (sender, receiver), crossing.wire_us)
    return float(max((start + occupied).max(initial=0.0), channels.max(initial=0.0))
                 + session_us(problem, devices))


def remote_extra_us(problem: PlacementProblem, group_devices) -> np.ndarray:
    """Per group, what its ops take more with inputs from other devices: the part paid per
    input that travels, summed over its edges that cross, and the part paid once per op, at
    most an edge's (the ops of most groups that pay it read one producer's tensors)."""
    devices = np.asarray(group_devices, np.int64)
    src, dst, _, extra = problem.all_edges()
    per_input = problem.all_edge_input_us()
    crosses = devices[src] != devices[dst]
    once = np.zeros(problem.n_groups)
    np.maximum.at(once, dst, np.where(crosses, extra - per_input, 0.0))
    return once + np.bincount(dst, np.where(crosses, per_input, 0.0), problem.n_groups)


@dataclasses.dataclass(frozen=True)
class LatencyCrossings:
    """What edges cost one step when their ends sit on devices src and dst (0 on one device),
    as the simulator spends it: the sender's processor copies each tensor, the channel from
    src to dst carries the tensors one at a time, and the receiver's processor copies them."""

    copy_us: np.ndarray       # each end's processor
    path_us: np.ndarray       # from the data's readiness to the receiver's copy
    wire_us: np.ndarray       # the channel's own time


def latency_crossings_us(problem: PlacementProblem, nbytes, tensors, src,
                         dst) -> LatencyCrossings:
    """LatencyCrossings of edges carrying `nbytes` in `tensors` tensors (arrays that broadcast
    with src and dst): each tensor pays the link's latency (less the message between tasks,
    which session_us counts) and a fixed copy at each end, the bytes their time on the link,
    a share of it copied by each end's processor (common.EdgeTiming's terms)."""
    simulation = problem.simulation
    src, dst = np.asarray(src), np.asarray(dst)
    crosses = src != dst
    moving = np.where(crosses, np.asarray(nbytes, np.float64) / problem.bytes_per_us[src, dst],
                      0.0)
    tensors = np.asarray(tensors, np.float64)
    message = np.where(simulation.device_task[src] != simulation.device_task[dst],
                       simulation.task_message_us, 0.0)
    fixed = simulation.link_copy_us[src, dst]
    copy = np.where(crosses, tensors * fixed + simulation.link_copy_share[src, dst] * moving,
                    0.0)
    path = np.where(crosses, tensors * (problem.latency_us[src, dst] - message) + moving, 0.0)
    return LatencyCrossings(copy_us=copy, path_us=path - copy,
                            wire_us=np.where(crosses, path - 2 * copy, 0.0))


def session_us(problem: PlacementProblem, group_devices) -> float:
    """What the simulator adds to a step after its last op or transfer on a cluster's tasks:
    remote_task_us per task besides the session's (task 0) that runs a group, and
    task_message_us per tensor that an edge (forward or feedback) carries between tasks."""
    devices = np.asarray(group_devices, np.int64)
    src, dst, _, _ = problem.all_edges()
    task = problem.simulation.device_task[devices]
    messages = problem.all_edge_tensors()[task[src] != task[dst]].sum()
    return float(schedule.session_us(problem.simulation, devices, messages))


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
    """The busiest resource's load per step (module doc)."""
    return stream_loads_us(problem, group_devices).busiest_us


# the exact placer's model of each objective of PlacementProblem.objective
MODEL_SCORES = {"latency": latency_objective_us, "throughput": throughput_objective_us}


@dataclasses.dataclass(frozen=True)
class StreamLoads:
    """Per step of a full stream, what each resource does (module doc)."""

    processors_us: np.ndarray   # (n_devices,): device 0's with the session's work
    links_us: np.ndarray        # (n_devices, n_devices): from row to column
    session_us: float           # the session's part of processors_us[0]
    floating_us: float = 0.0    # on whichever processor is free

    @property
    def busiest_us(self) -> float:
        shared = (self.processors_us.sum() + self.floating_us) / len(self.processors_us)
        return float(max(self.processors_us.max(initial=0.0), self.links_us.max(initial=0.0),
                         shared))


def stream_loads_us(problem: PlacementProblem, group_devices) -> StreamLoads:
    """The loads of throughput_objective_us under a decision."""
    devices = np.asarray(group_devices, np.int64)
    n_devices = problem.n_devices
    processors = np.bincount(devices, weights=problem.compute_us[np.arange(problem.n_groups),
                                                                 devices],
                             minlength=n_devices)
    links = np.zeros((n_devices, n_devices))
    src, dst, nbytes, extra = problem.all_edges()
    sender, receiver = devices[src], devices[dst]
    cost = crossing_costs_us(problem, nbytes, extra, sender, receiver,
                             problem.all_edge_tensors())
    np.add.at(processors, sender, cost.sender_us)
    np.add.at(processors, receiver, cost.receiver_us)
    np.add.at(links, (sender, receiver), cost.wire_us)
    session = session_us(problem, devices)
    processors[0] += session
    floating = (problem.simulation.floating_us
                + problem.simulation.floating_message_us * cost.messages.sum())
    return StreamLoads(processors, links, float(session), float(floating))


@dataclasses.dataclass(frozen=True)
class CrossingCosts:
    """What edges cost per step in a stream, by where their ends sit (0 on one device)."""

    sender_us: np.ndarray     # the sender's processor: its copy of the bytes
    receiver_us: np.ndarray   # the receiver's: its copy, and its consumer's remote extra
    wire_us: np.ndarray       # the link from sender to receiver
    message_us: np.ndarray    # the session's (device 0's): its messages between tasks
    messages: np.ndarray      # where the edge crosses tasks, its tensors (a message each)


def crossing_costs_us(problem: PlacementProblem, nbytes, extra_us, src, dst,
                      tensors=1.0) -> CrossingCosts:
    """The stream terms of edges carrying `nbytes` in `tensors` tensors whose consumers take
    `extra_us` more with a remote input, from devices src to dst (arrays that broadcast
    together). The problem's transfer (latency_us + bytes / bytes_per_us) is split as the
    simulator splits it: each end's processor copies a share of bytes / bandwidth and a fixed
    time per tensor, the session pays a message per tensor between tasks, and the wire the
    rest."""
    simulation = problem.simulation
    src, dst = np.asarray(src), np.asarray(dst)
    crosses = src != dst
    shape = np.broadcast_shapes(np.shape(nbytes), np.shape(extra_us), np.shape(tensors),
                                crosses.shape)
    moving_us = np.broadcast_to(np.where(
        crosses, np.asarray(nbytes, np.float64) / problem.bytes_per_us[src, dst], 0.0), shape)
    share, fixed = simulation.link_copy_share[src, dst], simulation.link_copy_us[src, dst]
    between = np.broadcast_to(
        (simulation.device_task[src] != simulation.device_task[dst]).astype(np.float64), shape)
    message = simulation.task_message_us * between      # the one in latency_us
    copy = np.where(crosses, share * moving_us + fixed, 0.0)
    wire = np.where(crosses, problem.latency_us[src, dst] - 2 * fixed - message
                    + (1 - 2 * share) * moving_us, 0.0)
    return CrossingCosts(copy, copy + np.where(crosses, extra_us, 0.0), wire,
                         message * tensors, between * tensors)
