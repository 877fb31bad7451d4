"""The placement MDP (episode.py) as a TF-Agents environment over PlacementProblems.

Several problems (graphs, device counts) may share one environment: each episode takes the
next, in an order shuffled with the seed, so environments made with one seed stay in step (a
batch of them runs parallel episodes of one problem). The best placement any episode reached
is kept per problem, for placers that search with a learned policy.

This module loads TF-Agents when it is imported; the light modules import it inside functions.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import require_tf_agents, specs
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import RESTARTS

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

from tf_agents.environments import py_environment
from tf_agents.trajectories import time_step as ts


class PlacementEnvironment(py_environment.PyEnvironment):
    """Episodes of the problems in turn, each from its restart (starts.RESTARTS)."""

    def __init__(self, problems: Sequence[PlacementProblem], seed: int = 0,
                 restart: str = "fixed", initial: Sequence = None):
        """initial: per problem, its fixed start placement or None (random)."""
        if restart not in RESTARTS:
            raise ValueError(f"restart must be one of {RESTARTS}, not {restart!r}")
        super().__init__(handle_auto_reset=True)
        problems = [problems] if isinstance(problems, PlacementProblem) else list(problems)
        if not problems:
            raise ValueError("an environment needs at least one problem")
        self.views = [GraphView(p, i) for p, i in zip(problems,
                                                      initial or [None] * len(problems))]
        self.best = [(np.inf, None) for _ in problems]   # per problem: (objective, devices)
        self.restart = restart
        self.last = [None] * len(problems)    # per problem: its last episode's placement
        self._rng = np.random.default_rng(seed)
        self._pool = list(range(len(problems)))
        self._order = []
        self._observation_spec = specs.observation_spec()
        self._action_spec = specs.action_spec()

    def observation_spec(self):
        return self._observation_spec

    def action_spec(self):
        return self._action_spec

    def draw_from(self, indices: Optional[Sequence[int]] = None) -> None:
        """From the next episode on, take only the problems at `indices` (None: all); the
        order drawn so far goes on where the choice does not change."""
        pool = list(range(len(self.views))) if indices is None else [int(i) for i in indices]
        if pool != self._pool:
            self._pool, self._order = pool, []

    def _reset(self):
        if not self._order:
            self._order = list(self._rng.permutation(self._pool))
        self.index = int(self._order.pop())
        previous = self.last[self.index] if self.restart == "previous" else None
        self.episode = Episode(self.views[self.index], previous)   # None: the fixed one
        self._remember()
        return ts.restart(self.episode.observation())

    def _step(self, action):
        reward = np.float32(self.episode.move(int(np.asarray(action).reshape(()))))
        self._remember()
        if self.episode.done:
            self.last[self.index] = self.episode.devices
            return ts.termination(self.episode.observation(), reward)
        return ts.transition(self.episode.observation(), reward, discount=np.float32(1.0))

    def _remember(self):
        if self.episode.best[0] < self.best[self.index][0]:
            self.best[self.index] = self.episode.best
