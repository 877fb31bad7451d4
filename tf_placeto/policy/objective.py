"""The learned placers' objective, and the single-device placement that scales it."""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers import single


class Objective:
    """What the learned placers minimise: the simulated step time plus a penalty for memory
    beyond the devices' capacity (shared, so that Placeto and the RNN planner compare)."""

    def __init__(self, problem: PlacementProblem):
        self.problem = problem
        alone = problem.simulate(single_device(problem))
        # A memory excess of one single-device peak costs as much as one single-device step.
        self.penalty_us_per_byte = alone.step_time_us / max(problem.single_device_peak_bytes, 1)
        self.single_us = self.value(alone)

    def __call__(self, group_devices: np.ndarray):
        """(objective in us, simulation) of one placement."""
        result = self.problem.simulate(group_devices)
        return self.value(result), result

    def value(self, result) -> float:
        """The objective in us of a simulation of the problem."""
        return result.step_time_us + self.penalty_us_per_byte * result.memory_excess_bytes


def single_device(problem: PlacementProblem) -> np.ndarray:
    """Every group on the device the single placer picks (tf_placeto.placers.single)."""
    return single.place(problem)[0]
