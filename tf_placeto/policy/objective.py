"""The learned placers' objective, and the single-device placement that scales it."""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers import single


class Objective:
    """What the learned placers minimise: the problem's objective in the simulator (the step,
    or the seconds per step of a stream: PlacementProblem.evaluate) plus a penalty for memory
    beyond the devices' capacity (shared, so that Placeto and the RNN planner compare)."""

    def __init__(self, problem: PlacementProblem):
        self.problem = problem
        alone = single_device(problem)
        # A memory excess of one single-device peak costs as much as one single-device step.
        self.penalty_us_per_byte = (problem.simulate(alone).step_time_us
                                    / max(problem.single_device_peak_bytes, 1))
        self.single_us = self(alone)[0]

    def __call__(self, group_devices: np.ndarray):
        """(objective in us, one-step simulation) of one placement: the simulation's schedule
        is what the policy observes, whichever the objective."""
        result = self.problem.simulate(group_devices)
        if self.problem.objective == "latency":
            scored = result.step_time_us, result.memory_excess_bytes
        else:
            evaluation = self.problem.evaluate(group_devices)
            scored = evaluation.us_per_step, evaluation.memory_excess_bytes
        return scored[0] + self.penalty_us_per_byte * scored[1], result


def single_device(problem: PlacementProblem) -> np.ndarray:
    """Every group on the device the single placer picks (tf_placeto.placers.single)."""
    return single.place(problem)[0]
