"""List scheduling over the group DAG: the engine m-ETF, m-SCT and HEFT share.

A schedule is built group by group, as the simulator would run it: each device runs one group
at a time, appended after the last one it was given (no insertion into idle gaps: the
simulator's devices run ready work first come first served, so a gap filled on paper is not
filled in the replay). A group waits for its producers at op level (`common.EdgeTiming`): on
another device it may start the edge's lag after the producer started, once the edge's data
has crossed the link; on the producer's own device it waits for the device anyway. Each
ordered pair of devices is a channel that carries one edge's data at a time, one latency per
tensor plus bytes / bandwidth, booked in the order groups are scheduled (again no insertion),
as the simulator's channels do. What a crossing costs the devices' processors is their time,
not the link's, as in the simulator: its copies (on CPU workers, the serialization at the
sender and the deserialization at the receiver, `EdgeTiming.copy_us`) keep the sender busy
longer and the receiving group runs longer by its copy and its ops' remote extra. The drivers
choose as if a device of a task that the step does not use yet started and finished later by
the task's per-step cost (its RunGraph call, `remote_task_us`), which the estimated step
includes. Only forward edges order groups: feedback edges point backwards and carry no
precedence. "Ready" means every producer is scheduled (placed, with a start time), not
finished.

Under the throughput objective (PlacementProblem.objective) the schedule is the stream's
steady state instead, where steps in flight hide the waits of one step: a device's timeline
is its load per step, a group may start as soon as its device is free whatever its inputs'
progress, and an edge that crosses devices adds its copies to both ends' loads (CPU workers
serialize and deserialize it) and its consumer's remote extra to the receiver's: each
device's load is then its processor's load of the throughput objective
(objectives.stream_loads_us), less the session's work that objective adds to device 0 (a
new task is paid as in the one-step schedule, by a later start). Both drivers then pick by
finish first: what a group adds to the busiest load is what counts.
The one-step schedule is built too, and the decision whose simulated stream is faster is
kept (info "schedule"): steps in flight on TensorFlow's runtime move in convoys (they share
each device op by op), so a decision that spreads each step's work evenly over the devices,
as a good one-step schedule does, can stream faster than the steady-state one.

Memory: a group is only offered devices with its kernel whose modelled memory still has room
for it (Baechi's m- prefix); when none has, the allowed device with the most room (best effort).

Two drivers:
- `earliest_start_first`: ETF, repeatedly the (ready group, device) pair that can start
  earliest; with favourite children (m-SCT), a device whose last group's favourite child is
  ready and starts earliest there waits for it, taking other work only if it is urgent (it
  could start nowhere sooner);
- `earliest_finish_by_priority`: HEFT's step, repeatedly the ready group of highest priority
  to the device where it finishes earliest.
Both return (device per group, {"estimated_step_us", "moved_by_repair"}, and "schedule"
under throughput); when some group fitted nowhere, `common.repair` gets the last word on the
decision.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from tf_placeto.placers.common import EdgeTiming, edge_timing, fits, repair, roomiest_device
from tf_placeto.placers.objectives import crossing_costs_us
from tf_placeto.placers.problem import PlacementProblem


class Schedule:
    """Devices' timelines, channels and memory, and the groups whose inputs are scheduled."""

    def __init__(self, problem: PlacementProblem, timing: Optional[EdgeTiming] = None):
        """timing: edge_timing(problem), where the caller has it already."""
        self.problem = problem
        self.pipelined = problem.objective == "throughput"
        n_groups, n_devices = problem.n_groups, problem.n_devices
        self.timing = timing or edge_timing(problem)
        self.device_of = np.full(n_groups, -1, np.int64)
        self.start = np.zeros(n_groups)
        self.free_at = np.zeros(n_devices)
        self.channel_free_at = np.zeros((n_devices, n_devices))
        self.load = np.zeros(n_devices)
        self.last_on = np.full(n_devices, -1, np.int64)
        self.in_edges = [[] for _ in range(n_groups)]   # by data ready time, once ready
        self.outputs = [[] for _ in range(n_groups)]
        for e, (a, b) in enumerate(zip(problem.edge_src, problem.edge_dst)):
            self.in_edges[b].append(e)
            self.outputs[a].append(int(b))
        self.feedback = [[] for _ in range(n_groups)]   # (feedback edge, the other end)
        for e, (a, b) in enumerate(zip(problem.feedback_src, problem.feedback_dst)):
            self.feedback[a].append((e, int(b)))
            self.feedback[b].append((e, int(a)))
        self.waiting = np.array([len(e) for e in self.in_edges], np.int64)
        self.ready = self.waiting == 0
        self.tasks_used = {0}
        self._arrivals = {}      # group -> _arrival(group), until the next assign

    def task_cost(self) -> np.ndarray:
        """Per device, what using it adds to the step: its task's per-step cost if the step
        does not use that task yet (never for task 0, the session's own)."""
        simulation = self.problem.simulation
        new = ~np.isin(simulation.device_task, list(self.tasks_used))
        return np.where(new, simulation.remote_task_us, 0.0)

    def offers(self, groups) -> tuple:
        """(start times, allowed) for `groups` x devices, allowed per the memory rule."""
        groups = np.atleast_1d(groups)
        if self.pipelined:
            start = np.repeat(self.free_at[None, :], len(groups), axis=0)
        else:
            arrival = np.array([self._arrival(g)[0] for g in groups])
            start = np.maximum(arrival.reshape(len(groups), -1), self.free_at[None, :])
        usable = fits(self.problem, groups, self.load)
        for row in np.flatnonzero(~usable.any(axis=1)):
            usable[row, roomiest_device(self.problem, groups[row], self.load)] = True
        return start, usable

    def occupies(self, groups) -> np.ndarray:
        """(len(groups), n_devices): how long each group keeps each device busy: its compute
        and its inputs' crossings into it (one step: their copies at this end and the remote
        extra; pipelined: its placed inputs' and feedback partners' whole crossings)."""
        groups = np.atleast_1d(groups)
        busy = self.problem.compute_us[groups].copy()
        for row, g in enumerate(groups):
            if self.pipelined:
                for _, here, _ in self._crossings(g):
                    busy[row] += here
            else:
                busy[row] += self._arrival(g)[2]
        return busy

    def _crossings(self, group: int):
        """Pipelined: for each input or feedback edge of `group` whose other end is placed,
        (that end's device, per device of `group` what the crossing adds to `group`'s device,
        and what it adds to that end's): each end its copy, the receiver its remote extra too
        (objectives.crossing_costs_us)."""
        problem = self.problem
        devices = np.arange(problem.n_devices)
        ends = [(problem.edge_src[e], problem.edge_bytes[e], problem.edge_extra_us[e], True)
                for e in self.in_edges[group]]
        ends += [(other, problem.feedback_bytes[e], problem.feedback_extra_us[e],
                  problem.feedback_dst[e] == group) for e, other in self.feedback[group]]
        for other, nbytes, extra, receives in ends:
            src = self.device_of[other]
            if src < 0:
                continue
            if receives:
                cost = crossing_costs_us(problem, nbytes, extra, src, devices)
                yield src, cost.receiver_us, cost.sender_us
            else:
                cost = crossing_costs_us(problem, nbytes, extra, devices, src)
                yield src, cost.sender_us, cost.receiver_us

    def assign(self, group: int, device: int, start: float, finish: float) -> None:
        """Put `group` on `device` from `start` to `finish` (start + occupies there)."""
        if not self.ready[group]:
            raise ValueError(f"group {group} scheduled before its inputs")
        if self.pipelined:
            for src, _, there in self._crossings(group):
                self.free_at[src] += there[device]
        else:
            _, channels, _, sent = self._arrival(group)
            for src, channel_free_at in channels.items():
                if src != device:
                    self.channel_free_at[src, device] = channel_free_at[device]
                    self.free_at[src] += sent[src][device]
        self._arrivals.clear()
        self.tasks_used.add(int(self.problem.simulation.device_task[device]))
        self.ready[group] = False
        self.device_of[group] = device
        self.start[group] = start
        self.free_at[device] = finish
        self.load[device] += self.problem.memory_bytes[group]
        self.last_on[device] = group
        for successor in self.outputs[group]:
            self.waiting[successor] -= 1
            if self.waiting[successor] == 0:
                self.in_edges[successor].sort(key=self._data_ready)
                self.ready[successor] = True

    def _data_ready(self, edge: int) -> float:
        """When the edge's data may start to travel: its producer's start + the edge's lag."""
        return self.start[self.problem.edge_src[edge]] + self.timing.lag_us[edge]

    def _arrival(self, group: int) -> tuple:
        """Sending the group's inputs in data-ready order, per device of the group: (when all
        of them can be at its door, {source device: its channels' new free times}, the time
        their receiving takes the group's device (copies, remote extra), {source device: the
        time their sending takes it})."""
        if group in self._arrivals:
            return self._arrivals[group]
        problem = self.problem
        devices = np.arange(problem.n_devices)
        arrival = np.zeros(problem.n_devices)
        received = np.zeros(problem.n_devices)
        channels, sent = {}, {}
        for e in self.in_edges[group]:
            src = self.device_of[problem.edge_src[e]]
            ready = self._data_ready(e)
            begin = np.maximum(ready, channels.get(src, self.channel_free_at[src]))
            copy = self.timing.copy_us(problem, e, src)
            receiving = copy + np.where(devices != src, problem.edge_extra_us[e], 0.0)
            done = begin + self.timing.transfer_us(problem, e, src) - receiving
            done[src] = ready
            channels[src] = done
            np.maximum(arrival, done, out=arrival)
            received += receiving
            sent[src] = sent.get(src, 0.0) + copy
        self._arrivals[group] = arrival, channels, received, sent
        return self._arrivals[group]

    def result(self) -> tuple:
        decision, moved = repair(self.problem, self.device_of)
        tasks_us = (len(self.tasks_used) - 1) * self.problem.simulation.remote_task_us
        return decision, {"estimated_step_us": float(self.free_at.max(initial=0.0)) + tasks_us,
                          "moved_by_repair": moved}


def for_the_objective(problem: PlacementProblem, build: Callable) -> tuple:
    """build(problem) -> (decision, info), for the problem's objective: under throughput the
    steady-state schedule and the one-step one, the faster simulated stream kept (module
    doc)."""
    if problem.objective == "latency":
        return build(problem)
    schedules = {"steady state": build(problem),
                 "one step": build(problem.with_objective("latency"))}
    kept = min(schedules, key=lambda name: problem.evaluate(schedules[name][0]).us_per_step)
    decision, info = schedules[kept]
    return decision, {**info, "schedule": kept}


def earliest_start_first(problem: PlacementProblem,
                         favourite_child: Optional[np.ndarray] = None) -> tuple:
    """ETF (favourite_child None) or SCT (favourite_child[g]: g's favourite, -1 for none),
    for the problem's objective (for_the_objective).

    Ties: earliest finish, then lowest group id, then lowest device index. Pipelined
    (module doc): earliest finish first, then earliest start.
    """
    return for_the_objective(problem, lambda p: _earliest_start_first(p, favourite_child))


def _earliest_start_first(problem: PlacementProblem, favourite_child) -> tuple:
    schedule = Schedule(problem)
    while schedule.ready.any():
        ready = np.flatnonzero(schedule.ready)
        start, usable = schedule.offers(ready)
        if favourite_child is not None:
            usable &= ~_held_for_favourites(schedule, ready, start, usable, favourite_child)
        start = np.where(usable, start, np.inf)
        finish = start + schedule.occupies(ready)
        cost = schedule.task_cost()[None, :]
        keys = ((start + cost).ravel(), (finish + cost).ravel())
        keys = keys if schedule.pipelined else keys[::-1]
        best = np.lexsort(keys)[0]
        row, device = divmod(int(best), problem.n_devices)
        schedule.assign(ready[row], device, start[row, device], finish[row, device])
    return schedule.result()


def earliest_finish_by_priority(problem: PlacementProblem, priority: np.ndarray) -> tuple:
    """Repeatedly the ready group of highest priority (ties: lowest id) to the device where it
    finishes earliest (ties: lowest index); for the problem's objective (for_the_objective)."""
    return for_the_objective(problem, lambda p: _earliest_finish_by_priority(p, priority))


def _earliest_finish_by_priority(problem: PlacementProblem, priority: np.ndarray) -> tuple:
    schedule = Schedule(problem)
    while schedule.ready.any():
        ready = np.flatnonzero(schedule.ready)
        group = int(ready[np.argmax(priority[ready])])
        start, usable = schedule.offers(group)
        finish = np.where(usable[0], start[0] + schedule.occupies(group)[0], np.inf)
        device = int(np.argmin(finish + schedule.task_cost()))
        schedule.assign(group, device, start[0, device], finish[device])
    return schedule.result()


def _held_for_favourites(schedule: Schedule, ready, start, usable, favourite_child):
    """(ready x devices) bool: offers a device declines while it waits for a favourite child.

    A device waits when its last group's favourite child is ready and starts earliest there;
    it still takes a group that is urgent, one that could start nowhere later than here.
    """
    held = np.zeros_like(usable)
    row_of = {int(g): row for row, g in enumerate(ready)}
    latest = np.where(usable, start, -np.inf).max(axis=1)
    for device, last in enumerate(schedule.last_on):
        child = favourite_child[last] if last >= 0 else -1
        row = row_of.get(int(child))
        if row is None or not usable[row, device]:
            continue
        if start[row, device] > np.where(usable[row], start[row], np.inf).min():
            continue
        held[:, device] = start[:, device] < latest
        held[row, device] = False
    return held
