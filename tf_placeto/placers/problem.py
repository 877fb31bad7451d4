"""What a placer decides on: groups with their costs on each device, sizes, memory and links.

Every placer (algorithmic or learned) sees one `PlacementProblem`: the group graph of
tf_placeto.graph.grouping, the devices, and, per group and device, what running the group
there costs, all derived from one profile (a tf_placeto.measure.costs.costmodel.CostModel) through
the op-level simulator's arrays. The same problem judges a decision: `simulate(group_devices)` replays the
step at op level, which is what every placer is compared on.

A group edge that crosses devices costs its transfer and, where the profile found kernels that
are slower with an input from another device, that extra time of the consumer's ops
(`edge_extra_us`): placers keep such ops beside their producers when it pays.

Memory is modelled linearly so that placers can budget it: a group holds its variables for the
whole step plus a share of its outputs, the share chosen so that the groups of the whole graph
add up to its simulated single-device peak. The simulator remains the judge of feasibility.

The problem also says what a placement is for (`objective`): "latency", one step as short as
possible, or "throughput", as many steps per second as possible with `in_flight` steps at once
(a server's concurrent requests, a training loop that keeps steps queued). `evaluate` scores a
decision under it in the op-level simulator, one step or a stream (simulator.stream); every
placer that optimises something follows it (PlacerSpec.objectives says which).
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from typing import Optional, Sequence

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.graph.grouping import GroupGraph, coarsen
from tf_placeto.measure import simulator
from tf_placeto.measure.evaluation.measurer import simulation_problem
from tf_placeto.measure.simulator.stream import Stream

OBJECTIVES = ("latency", "throughput")
IN_FLIGHT = 4      # steps at once under the throughput objective, unless the caller says
_STREAM_LOCK = threading.Lock()     # a policy's move evaluates its device rows in threads


def check_objective(objective: str, in_flight: int = IN_FLIGHT) -> None:
    """Raise InputError for an objective not of OBJECTIVES or fewer than 1 step in flight."""
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    if in_flight < 1:
        raise InputError(f"a stream needs at least 1 step in flight, not {in_flight}")


def objective_and_in_flight(objective: str = "latency", stream: Optional[int] = None) -> tuple:
    """(objective, steps in flight) from what a user asked for, checked: `stream` (steps in
    flight, default IN_FLIGHT) belongs to the throughput objective alone."""
    if stream is not None and objective != "throughput":
        raise InputError("a stream's steps in flight are the throughput objective's: pass "
                         "objective throughput with them")
    in_flight = IN_FLIGHT if stream is None else stream
    check_objective(objective, in_flight)
    return objective, in_flight


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A decision under the problem's objective, in the op-level simulator."""

    us_per_step: float             # latency: the step; throughput: once the stream is full
    feasible: bool                 # every device's simulated peak within its capacity
    memory_excess_bytes: float     # sum over devices of what the peaks pass capacity by
    peak_memory_bytes: np.ndarray  # (n_devices,): with the steps in flight under throughput


@dataclasses.dataclass
class PlacementProblem:
    groups: GroupGraph
    device_names: list
    compute_us: np.ndarray        # (n_groups, n_devices): run time of the group there; inf: no kernel
    memory_bytes: np.ndarray      # (n_groups,): what the group adds to its device's peak (model)
    persistent_bytes: np.ndarray  # (n_groups,): variables it holds for the whole step
    edge_src: np.ndarray          # group DAG edges (src < dst), with the bytes they carry
    edge_dst: np.ndarray
    edge_bytes: np.ndarray
    feedback_src: np.ndarray      # forced backward edges (a variable and its late update)
    feedback_dst: np.ndarray
    feedback_bytes: np.ndarray
    latency_us: np.ndarray        # (n_devices, n_devices), diagonal 0; with each end's fixed copy
    #                               and, between tasks, a message's cost (task_message_us)
    bytes_per_us: np.ndarray      # (n_devices, n_devices), diagonal inf
    capacity_bytes: np.ndarray    # (n_devices,), inf: unlimited
    simulation: simulator.SimulationProblem     # the op-level problem
    single_device_peak_bytes: float = 0.0
    edge_extra_us: Optional[np.ndarray] = None      # per edge: what its consumer's ops take
    feedback_extra_us: Optional[np.ndarray] = None  # more when it crosses (default 0)
    # the part of it paid per input that travels (a loop's messages), the rest once per op
    edge_input_us: Optional[np.ndarray] = None      # (default 0)
    feedback_input_us: Optional[np.ndarray] = None
    # per edge: the distinct tensors it carries, each a message when it crosses tasks
    edge_tensors: Optional[np.ndarray] = None       # (default 1)
    feedback_tensors: Optional[np.ndarray] = None
    objective: str = "latency"                      # one of OBJECTIVES
    in_flight: int = IN_FLIGHT                      # throughput: steps at once
    # the stream of the throughput objective, unrolled once per problem (see evaluate)
    stream: Optional[Stream] = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self):
        check_objective(self.objective, self.in_flight)
        for name, edges, default in (("edge_extra_us", self.edge_src, 0.0),
                                     ("feedback_extra_us", self.feedback_src, 0.0),
                                     ("edge_input_us", self.edge_src, 0.0),
                                     ("feedback_input_us", self.feedback_src, 0.0),
                                     ("edge_tensors", self.edge_src, 1.0),
                                     ("feedback_tensors", self.feedback_src, 1.0)):
            if getattr(self, name) is None:
                setattr(self, name, np.full(len(edges), default))

    @classmethod
    def build(cls, groups: GroupGraph, cost_model, devices,
              capacity_bytes: Optional[Sequence[float]] = None) -> "PlacementProblem":
        """The problem of placing `groups` on `devices` (a DeviceSet) under a profile's costs.

        capacity_bytes: memory per device (default unlimited).
        """
        capacity = None if capacity_bytes is None else dict(zip(devices.names, capacity_bytes))
        return cls.from_simulation(groups, simulation_problem(groups.op_graph, cost_model,
                                                              devices, capacity))

    @classmethod
    def from_simulation(cls, groups: GroupGraph, simulation,
                        capacity_bytes: Optional[Sequence[float]] = None) -> "PlacementProblem":
        """Aggregate an op-level SimulationProblem over `groups`.

        capacity_bytes: per device (default: the simulation's own memory capacity).
        """
        n_groups, n_devices = len(groups), simulation.n_devices
        op_cost = simulation.compute_us[:, simulation.device_type_of] + simulation.op_overhead_us
        compute = np.zeros((n_groups, n_devices))
        np.add.at(compute, groups.group_of, op_cost)
        device_types = [name.rsplit("device:", 1)[-1].split(":")[0]
                        for name in simulation.device_names]
        for g in range(n_groups):
            allowed = groups.device_types(g)
            if allowed is not None:
                compute[g, [t not in allowed for t in device_types]] = np.inf
        persistent = np.bincount(groups.group_of, weights=simulation.persistent_bytes,
                                 minlength=n_groups)
        outputs = np.bincount(groups.group_of[simulation.tensor_producer],
                              weights=simulation.tensor_bytes, minlength=n_groups)
        single = simulator.simulate(simulation, np.zeros(simulation.n_ops, np.int64))
        peak = float(single.peak_memory_bytes[0])
        share = np.clip((peak - persistent.sum()) / outputs.sum(), 0.0, 1.0) \
            if outputs.sum() > 0 else 0.0
        forward = sorted(groups.edges.items())
        backward = sorted(groups.feedback_edges.items())
        edges = [edge for edge, _ in forward + backward]
        once, per_input = _edge_extra_us(groups, simulation, edges)
        extra = once + per_input
        tensors = _edge_tensors(groups, simulation, edges)
        problem = cls(
            groups=groups, device_names=list(simulation.device_names), compute_us=compute,
            memory_bytes=persistent + share * outputs, persistent_bytes=persistent,
            edge_src=np.array([a for (a, _), _ in forward], np.int64),
            edge_dst=np.array([b for (_, b), _ in forward], np.int64),
            edge_bytes=np.array([n for _, n in forward], np.float64),
            feedback_src=np.array([a for (a, _), _ in backward], np.int64),
            feedback_dst=np.array([b for (_, b), _ in backward], np.int64),
            feedback_bytes=np.array([n for _, n in backward], np.float64),
            latency_us=(simulation.link_latency_us + 2 * simulation.link_copy_us
                        + simulation.task_message_us * _between_tasks(simulation)),
            bytes_per_us=simulation.link_bytes_per_us,
            capacity_bytes=np.asarray(simulation.memory_capacity, np.float64),
            simulation=simulation, single_device_peak_bytes=peak,
            edge_extra_us=extra[:len(forward)], feedback_extra_us=extra[len(forward):],
            edge_input_us=per_input[:len(forward)], feedback_input_us=per_input[len(forward):],
            edge_tensors=tensors[:len(forward)], feedback_tensors=tensors[len(forward):])
        return problem if capacity_bytes is None else problem.with_capacity(capacity_bytes)

    def with_capacity(self, capacity_bytes: Sequence[float]) -> "PlacementProblem":
        """The same problem with another memory capacity per device (inf: unlimited)."""
        capacity = np.asarray(capacity_bytes, np.float64).reshape(self.n_devices)
        simulation = copy.copy(self.simulation)     # arrays shared; only the capacity differs
        simulation.memory_capacity = capacity
        return dataclasses.replace(self, capacity_bytes=capacity, simulation=simulation,
                                   stream=None)

    def with_objective(self, objective: str, in_flight: Optional[int] = None
                       ) -> "PlacementProblem":
        """The same problem placed for another objective (in_flight: steps at once under
        throughput; default: as now)."""
        return dataclasses.replace(self, objective=objective,
                                   in_flight=in_flight or self.in_flight, stream=None)

    def with_pins(self, device_of_group: dict) -> "PlacementProblem":
        """The same problem with some groups held on one device ({group: device index}),
        such as the ops of a variable that already lives somewhere."""
        compute = self.compute_us.copy()
        for group, device in device_of_group.items():
            if not np.isfinite(compute[group, device]):
                raise ValueError(f"group {group} has no kernel for {self.device_names[device]}")
            held = compute[group, device]
            compute[group] = np.inf
            compute[group, device] = held
        return dataclasses.replace(self, compute_us=compute)

    def coarsened(self, max_groups: int) -> tuple:
        """(the problem over at most `max_groups` groups, chunk of each of this problem's
        groups): consecutive groups merged; a decision d on it is `d[chunk]` here."""
        if self.n_groups <= max_groups:
            return self, np.arange(self.n_groups)
        groups, chunk_of_group = coarsen(self.groups, max_groups)
        coarse = PlacementProblem.from_simulation(groups, self.simulation, self.capacity_bytes
                                                  ).with_objective(self.objective,
                                                                   self.in_flight)
        barred = np.zeros((coarse.n_groups, self.n_devices), dtype=bool)
        np.logical_or.at(barred, chunk_of_group, ~self.allowed)    # pins included
        coarse.compute_us[barred] = np.inf
        return coarse, chunk_of_group

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    @property
    def allowed(self) -> np.ndarray:
        """(n_groups, n_devices) bool: the group has kernels for the device's type."""
        return np.isfinite(self.compute_us)

    @property
    def interchangeable(self) -> bool:
        """Every device runs every group alike and holds as much, and every link is alike:
        the device names in a decision are then arbitrary (on a cluster's tasks, a decision
        renamed by first use is on the session's device first and pays no more RunGraph
        calls per step; `session_apart` says where that counts)."""
        return bool((self.compute_us == self.compute_us[:, :1]).all()
                    and (self.capacity_bytes == self.capacity_bytes[0]).all()
                    and self.links_alike)

    @property
    def session_apart(self) -> bool:
        """Device 0 is the session's among a cluster's tasks that charge for a step's
        RunGraph calls or messages: it pays no call, and a stream's session work is its."""
        simulation = self.simulation
        return (np.unique(simulation.device_task).size > 1
                and bool(simulation.remote_task_us or simulation.task_message_us))

    @property
    def links_alike(self) -> bool:
        """Every link between two devices has the same latency and bandwidth."""
        off = ~np.eye(self.n_devices, dtype=bool)
        return bool(np.unique(self.latency_us[off]).size <= 1
                    and np.unique(self.bytes_per_us[off]).size <= 1)

    def canonical(self, group_devices, first: int = 0) -> np.ndarray:
        """The same placement with interchangeable devices, those from `first` on, renamed
        in the order the groups first use them (as given where devices differ)."""
        group_devices = self.check(group_devices)
        if not self.interchangeable:
            return group_devices
        used, first_use = np.unique(group_devices[group_devices >= first], return_index=True)
        rename = np.arange(self.n_devices)
        rename[used[np.argsort(first_use)]] = first + np.arange(len(used))
        return rename[group_devices]

    def mean_transfer_us(self, nbytes):
        """Average time to send `nbytes` between two distinct devices (HEFT's rank costs)."""
        if self.n_devices < 2:
            return 0.0 * np.asarray(nbytes)
        off = ~np.eye(self.n_devices, dtype=bool)
        return (self.latency_us[off].mean()
                + np.asarray(nbytes) * (1.0 / self.bytes_per_us[off]).mean())

    def crossing_us(self, nbytes, extra_us, src, dst):
        """What edges carrying `nbytes` whose consumers take `extra_us` more with a remote
        input cost from device src to dst: the transfer and that extra (0 on one device)."""
        transfer = self.latency_us[src, dst] + np.asarray(nbytes) / self.bytes_per_us[src, dst]
        return np.where(np.asarray(src) == np.asarray(dst), 0.0, transfer + extra_us)

    def all_edges(self) -> tuple:
        """(src, dst, bytes, extra_us) of the forward edges, then the feedback edges."""
        return (np.concatenate([self.edge_src, self.feedback_src]),
                np.concatenate([self.edge_dst, self.feedback_dst]),
                np.concatenate([self.edge_bytes, self.feedback_bytes]),
                np.concatenate([self.edge_extra_us, self.feedback_extra_us]))

    def all_edge_input_us(self) -> np.ndarray:
        """The part of each edge's extra of all_edges() paid per input that travels."""
        return np.concatenate([self.edge_input_us, self.feedback_input_us])

    def all_edge_tensors(self) -> np.ndarray:
        """The tensors each edge of all_edges() carries."""
        return np.concatenate([self.edge_tensors, self.feedback_tensors])

    def predecessors(self) -> list:
        pred = [[] for _ in range(self.n_groups)]
        for a, b in zip(self.edge_src, self.edge_dst):
            pred[b].append(int(a))
        return pred

    def successors(self) -> list:
        succ = [[] for _ in range(self.n_groups)]
        for a, b in zip(self.edge_src, self.edge_dst):
            succ[a].append(int(b))
        return succ

    def op_devices(self, group_devices) -> np.ndarray:
        """Device index per op, from one device index per group."""
        group_devices = np.asarray(group_devices, dtype=np.int64)
        if group_devices.shape != (self.n_groups,):
            raise ValueError(f"need one device per group ({self.n_groups}), "
                             f"got shape {group_devices.shape}")
        return group_devices[self.groups.group_of]

    def check(self, group_devices) -> np.ndarray:
        """The decision as an int array, refused if it breaks a kernel rule or a range."""
        group_devices = np.asarray(group_devices, dtype=np.int64)
        if group_devices.shape != (self.n_groups,) or group_devices.min(initial=0) < 0 \
                or group_devices.max(initial=0) >= self.n_devices:
            raise ValueError(f"a placement is {self.n_groups} device indices in "
                             f"[0, {self.n_devices})")
        bad = ~self.allowed[np.arange(self.n_groups), group_devices]
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            raise ValueError(f"group {g} has no kernel for {self.device_names[group_devices[g]]}")
        return group_devices

    def simulate(self, group_devices, schedule: bool = False):
        """The op-level simulation of one decision (a measure.simulator.SimulationResult)."""
        return simulator.simulate(self.simulation, self.op_devices(self.check(group_devices)),
                                  schedule=schedule)

    def evaluate(self, group_devices) -> Evaluation:
        """The decision under the problem's objective: the simulated step (latency), or the
        simulated seconds per step of a stream of `in_flight` steps once it is full
        (throughput)."""
        if self.objective == "latency":
            result = self.simulate(group_devices)
            return Evaluation(result.step_time_us, result.feasible, result.memory_excess_bytes,
                              result.peak_memory_bytes)
        if self.stream is None:
            with _STREAM_LOCK:
                if self.stream is None:
                    self.stream = Stream(self.simulation, self.in_flight)
        flow = self.stream.simulate(self.op_devices(self.check(group_devices)))
        excess = np.maximum(flow.peak_memory_bytes - self.simulation.memory_capacity, 0.0)
        return Evaluation(1e6 / flow.steps_per_s, flow.feasible, float(excess.sum()),
                          flow.peak_memory_bytes)

    @property
    def steps_in_flight(self) -> int:
        """Steps at once in the problem's real and simulated runs: 0 (one at a time) under
        latency, in_flight under throughput."""
        return self.in_flight if self.objective == "throughput" else 0

    def placement(self, group_devices) -> dict:
        """{op name: device name} for the decision."""
        return self.groups.placement_for(
            [self.device_names[d] for d in self.check(group_devices)])

    def lower_bound_us(self) -> float:
        """No decision scores below this under the problem's objective. Latency: the
        op-level bound of one step (simulator.lower_bound_us). Throughput, per step of a full
        stream: max((total work + the work that floats per step) / devices, the largest
        group), each group on its fastest device; a busiest link's bytes / bandwidth is 0
        over all decisions (one device sends nothing), so it bounds a decision, not the
        problem."""
        if self.objective == "latency":
            return simulator.lower_bound_us(self.simulation)
        fastest = np.where(self.allowed, self.compute_us, np.inf).min(axis=1)
        return float(max((fastest.sum() + self.simulation.floating_us) / self.n_devices,
                         fastest.max(initial=0.0)))

    def device_loads(self, group_devices) -> np.ndarray:
        """Modelled memory per device under a decision."""
        return np.bincount(np.asarray(group_devices, np.int64), weights=self.memory_bytes,
                           minlength=self.n_devices)


def _between_tasks(simulation) -> np.ndarray:
    """(n_devices, n_devices): 1 where the two devices are in different tasks."""
    task = simulation.device_task
    return (task[:, None] != task[None, :]).astype(np.float64)


def _edge_tensors(groups: GroupGraph, simulation, edges: list) -> np.ndarray:
    """Per group edge (a, b) of `edges`: the distinct tensors of a that ops of b read: as
    many transfers, and messages between tasks, when the edge crosses them (the simulator
    sends a tensor once per device that reads it, so groups reading one tensor on one device
    are counted once each here)."""
    group_of = groups.group_of
    producer = group_of[simulation.tensor_producer[simulation.edge_tensor]]
    consumer = group_of[simulation.edge_consumer]
    crossing = producer != consumer
    read = np.unique(np.stack([simulation.edge_tensor[crossing], producer[crossing],
                               consumer[crossing]], axis=1), axis=0)
    index = {edge: k for k, edge in enumerate(edges)}
    counts = np.zeros(len(edges))
    np.add.at(counts, np.array([index[(a, b)] for _, a, b in read.tolist()], np.int64), 1.0)
    return counts


def _edge_extra_us(groups: GroupGraph, simulation, edges: list) -> tuple:
    """Per group edge (a, b) of `edges`, what the ops of b that read tensors of a take more
    when the edge crosses devices: (their remote_extra_us, averaged over the devices, once per
    op; their remote_input_us per tensor they read)."""
    once_total, per_input_total = np.zeros(len(edges)), np.zeros(len(edges))
    extra = simulation.remote_extra_us[:, simulation.device_type_of].mean(axis=1)
    per_input = simulation.remote_input_us
    if not extra.any() and not per_input.any():
        return once_total, per_input_total
    group_of = groups.group_of
    consumer = simulation.edge_consumer
    producer = group_of[simulation.tensor_producer[simulation.edge_tensor]]
    crossing = producer != group_of[consumer]
    paying = crossing & (extra[consumer] > 0)
    # an op reading several tensors of one group pays its extra once for that edge
    reads = np.unique(np.stack([producer[paying], consumer[paying]], axis=1), axis=0)
    index = {edge: k for k, edge in enumerate(edges)}
    for a, op in reads:
        once_total[index[(a, group_of[op])]] += extra[op]
    inputs = crossing & (per_input[consumer] > 0)
    for a, op in zip(producer[inputs], consumer[inputs]):
        per_input_total[index[(a, group_of[op])]] += per_input[op]
    return once_total, per_input_total
