"""The placement MDP of Placeto, one episode at a time, without TF-Agents.

An episode visits every group once, in topological order (group ids are one), and each step's
action is the device for the group being visited; it starts where starts.py says. An episode's
return is how much faster its last placement is than its start. Every move is judged at op
level by the simulator: the reward is the drop in the objective (objective.py) over the
episode's first objective, which makes rewards comparable between graphs. Beside it, the
groups visited so far are list-scheduled where the episode put them (candidates.py): that is
what the observation's device rows come from.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.policy.candidates import Candidates
from tf_placeto.policy.observation import GraphView


class Episode:
    """One pass over a problem's groups from a start placement (default: the view's fixed
    one), move by move."""

    def __init__(self, view: GraphView, start: np.ndarray = None):
        self.view = view
        if start is None:
            self.devices, self.value, self.result = (view.start.copy(), view.start_objective,
                                                     view.start_result)
        else:
            self.devices = np.asarray(start, np.int64).copy()
            self.value, self.result = view.objective(self.devices)
        self.start = self.devices.copy()
        self.position = 0
        self.first = self.value
        self.best = (self.value, self.devices.copy())     # the best placement it went through
        self.candidates = Candidates(view.problem, view.scales)
        self._rows = self.candidates.rows(0, self.devices)

    @property
    def done(self) -> bool:
        return self.position == self.view.problem.n_groups

    def observation(self) -> dict:
        return self.view.observation(self.devices, self.position, self.result, self._rows)

    def move(self, device: int) -> float:
        """Put the current group on `device` (ignored where it has no kernel or no device);
        the reward: the drop in the objective over the episode's first objective."""
        problem = self.view.problem
        if 0 <= device < problem.n_devices and problem.allowed[self.position, device]:
            self.devices[self.position] = device
        self.candidates.place(self.position, int(self.devices[self.position]))
        value, self.result = self.view.objective(self.devices)
        self.view.moves.append(value)
        reward = (self.value - value) / self.first
        self.value = value
        self.position += 1
        if value < self.best[0]:
            self.best = (value, self.devices.copy())
        if not self.done:      # the last observation keeps the last group's rows
            self._rows = self.candidates.rows(self.position, self.devices)
        return reward
