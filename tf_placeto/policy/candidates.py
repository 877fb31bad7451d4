"""What each device would mean for the group being placed: the policy's per-device view.

An episode visits the groups in topological order, so the groups visited so far form the
prefix a list scheduler (placers/list_scheduling.py, the engine HEFT and m-ETF share) would
have scheduled: each on the device the episode chose, as early as its inputs and its device
allow. For the group being placed, every device then gets the same questions answered: when
could it start and finish there, how far is that behind the best device, when is the device
free, how much work and memory does it hold, how many of the group's bytes and parents stay
there, and would the step pay for one more worker task. Beside the list schedule's answers, the
op-level simulator's: how the whole step would change with the group there (the episode
simulates each device, episode.py; what list schedulers and GiPH/DOPPLER call decisive). The
network scores the devices with one set of weights from these rows, so the devices need no
fixed number or order. Under the throughput objective the schedule is the
stream's steady state, as the list schedulers' is. Features are listed in specs.py.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from tf_placeto.placers.common import edge_timing, link_bytes, mean_compute_us
from tf_placeto.placers.list_scheduling import Schedule
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import specs


class Candidates:
    """The list schedule of an episode's visited groups, and the rows it gives each device."""

    def __init__(self, problem: PlacementProblem, shared: "CandidateScales" = None):
        self.problem = problem
        self.scales = shared or CandidateScales(problem)
        self.schedule = Schedule(problem, self.scales.timing)
        self.work_us = np.zeros(problem.n_devices)
        self._offer = (-1, None, None)      # (group, start, run per device): rows' for place

    def _offered(self, group: int) -> tuple:
        """(start, run) per device for `group`, computed once for its rows and its place."""
        if self._offer[0] != group:
            start, _ = self.schedule.offers(group)
            self._offer = (group, start[0], self.schedule.occupies(group)[0])
        return self._offer[1:]

    def rows(self, group: int, group_devices: np.ndarray) -> np.ndarray:
        """(n_devices, NUM_CANDIDATE_FEATURES) for `group` in the placement `group_devices`
        (visited groups where the episode put them, the others where they sit now)."""
        problem, scales = self.problem, self.scales
        start, run = self._offered(group)
        allowed = problem.allowed[group]
        finish = np.where(allowed, start + run, np.inf)
        best = finish[allowed].min() if allowed.any() else 0.0
        rows = np.zeros((problem.n_devices, specs.NUM_CANDIDATE_FEATURES), np.float32)
        total = scales.total_us
        rows[:, specs.CAN_START] = start / total
        rows[:, specs.WOULD_FINISH] = np.where(allowed, finish, 0.0) / total
        own = max(scales.group_us[group], 1e-9)
        rows[:, specs.BEHIND_BEST] = np.log1p(np.where(allowed, finish - best, 0.0) / own)
        rows[:, specs.FREE_AT] = self.schedule.free_at / total
        rows[:, specs.RUN_TIME] = np.log1p(np.where(allowed, run, 0.0) / scales.mean_group_us)
        rows[:, specs.DEVICE_WORK] = self.work_us / total
        capacity = problem.capacity_bytes
        held = self.schedule.load + problem.memory_bytes[group]
        rows[:, specs.MEMORY_USE] = np.where(np.isfinite(capacity),
                                             held / np.maximum(capacity, 1.0), 0.0)
        neighbours, nbytes = scales.neighbours(group)
        if nbytes.sum() > 0:
            rows[:, specs.BYTES_KEPT] = np.bincount(group_devices[neighbours], weights=nbytes,
                                                    minlength=problem.n_devices) / nbytes.sum()
        rows[group_devices[group], specs.SITS_THERE] = 1.0
        parents = scales.parents[group]
        if len(parents):
            rows[:, specs.PARENTS_THERE] = np.bincount(
                group_devices[parents], minlength=problem.n_devices) / len(parents)
        task = scales.device_task
        unpaid = (task != 0) & ~np.isin(task, task[self.schedule.device_of[:group]])
        rows[:, specs.TASK_COST] = unpaid * scales.remote_task_us / total
        rows[:, specs.CROSSING] = np.log1p(scales.crossing_us(group, group_devices) / own)
        return rows

    def place(self, group: int, device: int) -> None:
        """Schedule `group` on `device` (its inputs are scheduled: groups come in order)."""
        start, run = self._offered(group)
        self.schedule.assign(group, device, start[device], start[device] + run[device])
        self.work_us[device] += self.problem.compute_us[group, device]


def add_simulated(rows: np.ndarray, values: np.ndarray, now: float, own_us: float) -> None:
    """Fill the simulator's columns of `rows` from `values`, the objective with the group on
    each device (inf where it may not go), against `now`, the objective as placed; in the
    group's own run times (`own_us`), signed and log-scaled as the schedule's times are."""
    allowed = np.isfinite(values)      # where the group sits now is always among them
    own = max(own_us, 1e-9)
    rows[:, specs.STEP_CHANGE] = np.where(allowed, np.arcsinh((values - now) / own), 0.0)
    best = values[allowed].min()
    rows[:, specs.STEP_BEHIND_BEST] = np.where(allowed, np.log1p((values - best) / own), 0.0)


class CandidateScales:
    """What every episode of one problem shares: time scales, neighbours and their bytes."""

    def __init__(self, problem: PlacementProblem):
        self.group_us = mean_compute_us(problem)
        self.total_us = max(float(self.group_us.sum()), 1e-9)
        self.mean_group_us = self.total_us / max(problem.n_groups, 1)
        self._links = link_bytes(problem)
        self.parents = [np.asarray(p, np.int64) for p in problem.predecessors()]
        self.timing = edge_timing(problem)
        self.device_task = problem.simulation.device_task
        self.remote_task_us = problem.simulation.remote_task_us
        self.problem = problem
        self._edges = problem.all_edges()
        src, dst = self._edges[:2]
        ids = np.arange(len(src))
        incidence = scipy.sparse.csr_matrix(      # group x edge: 1 where the group is an end
            (np.ones(2 * len(ids)), (np.concatenate([src, dst]), np.tile(ids, 2))),
            shape=(problem.n_groups, len(ids)))
        incidence.sum_duplicates()          # canonical: each row's edges once, in order
        self._incident = np.split(incidence.indices, incidence.indptr[1:-1])

    def crossing_us(self, group: int, group_devices: np.ndarray) -> np.ndarray:
        """Per device: what the group's edges would cost to cross with the group there and
        the others where they sit (PlacementProblem.crossing_us, summed over the edges)."""
        src, dst, nbytes, extra = self._edges
        edges = self._incident[group]
        out = src[edges] == group
        other = group_devices[np.where(out, dst[edges], src[edges])][None, :]
        here = np.arange(self.problem.n_devices)[:, None]
        sender, receiver = np.where(out, here, other), np.where(out, other, here)
        return self.problem.crossing_us(nbytes[edges], extra[edges], sender, receiver).sum(axis=1)

    def neighbours(self, group: int) -> tuple:
        """(groups that exchange data with `group`, the bytes exchanged with each)."""
        row = self._links[group]
        return row.indices, row.data
