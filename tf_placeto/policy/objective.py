"""The learned placers' objective, and the single-device placement that scales it."""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.single import all_on


class Objective:
    """What the learned placers minimise: the simulated step time plus a penalty for memory
    beyond the devices' capacity (shared, so that Placeto and the RNN planner compare)."""

    def __init__(self, problem: PlacementProblem):
        self.problem = problem
        single = problem.simulate(single_device(problem))
        # A memory excess of one single-device peak costs as much as one single-device step.
        self.penalty_us_per_byte = single.step_time_us / max(problem.single_device_peak_bytes, 1)
        self.single_us = self.value(single)

    def __call__(self, group_devices: np.ndarray):
        """(objective in us, simulation) of one placement."""
        result = self.problem.simulate(group_devices)
        return self.value(result), result

    def value(self, result) -> float:
        """The objective in us of a simulation of the problem."""
        return result.step_time_us + self.penalty_us_per_byte * result.memory_excess_bytes


def _best_single(problem: PlacementProblem) -> int:
    """The device every group can run on that simulates fastest (0 if none can take all)."""
    whole = np.flatnonzero(problem.allowed.all(axis=0))
    if len(whole) == 0:
        return 0
    steps = [problem.simulate(np.full(problem.n_groups, d)).step_time_us for d in whole]
    return int(whole[int(np.argmin(steps))])


def single_device(problem: PlacementProblem) -> np.ndarray:
    """Every group on the best single device, or on its first allowed device."""
    return all_on(problem, _best_single(problem))
