"""The placement MDP of Placeto as a TF-Agents environment over PlacementProblems.

An episode visits every group once, in topological order (group ids are one), and each step's
action is the device for the group being visited. Its start is one of Placeto's two: a fixed
placement (`restart="fixed"`: a random one, unless an initial placement is given, such as the
fast placers' best decision, `fast_start`), or the last placement of the environment's previous
episode of that problem (`restart="previous"`; the first from the fixed one), so that episodes
go on improving one placement instead of repairing the same one again. An episode's return is
how much faster its last placement is than its start. Every move is judged at op level by the
simulator: the reward is the drop in the objective (step time, plus a penalty for memory beyond
the devices' capacity) over the episode's first objective, which makes rewards comparable
between graphs.

Several problems (graphs, device counts) may share one environment: each episode takes the
next, in an order shuffled with the seed, so environments made with one seed stay in step (a
batch of them runs parallel episodes of one problem). The best placement any episode reached
is kept per problem, for placers that search with a learned policy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tf_placeto.errors import PlacetoError
from tf_placeto.placers.common import fast_decisions, mean_compute_us
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import require_tf_agents, specs


class GraphView:
    """What observations of one problem share: padded structure and scaled static features."""

    def __init__(self, problem: PlacementProblem, initial: np.ndarray = None):
        """initial: the fixed start placement (device per group); default: a random one."""
        check_size(problem)
        n = problem.n_groups
        self.problem = problem
        self.adjacency = np.zeros((specs.MAX_GROUPS, specs.MAX_GROUPS), np.uint8)
        self.adjacency[problem.edge_src, problem.edge_dst] = 1
        self.ancestors = _ancestors(self.adjacency[:n, :n].astype(bool))   # [i, j]: j before i
        compute = mean_compute_us(problem)
        sent = np.bincount(problem.edge_src, weights=problem.edge_bytes, minlength=n)
        self.static = np.zeros((specs.MAX_GROUPS, 3), np.float32)
        for column, values in enumerate((compute, sent, problem.memory_bytes)):
            self.static[:n, column] = values / max(float(np.max(values)), 1e-12)
        self.node_mask = np.zeros(specs.MAX_GROUPS, np.float32)
        self.node_mask[:n] = 1.0
        self.objective = Objective(problem)
        self.start = (start_placement(problem) if initial is None
                      else problem.check(np.asarray(initial, np.int64)))
        self.start_objective, self.start_result = self.objective(self.start)
        self.moves = []           # the objective after each move of every episode, in order

    def observation(self, group_devices, position: int, result) -> dict:
        problem, n = self.problem, self.problem.n_groups
        current = min(position, n - 1)
        features = np.zeros((specs.MAX_GROUPS, specs.NUM_FEATURES), np.float32)
        features[:, :3] = self.static
        start = np.full(n, np.inf)
        np.minimum.at(start, problem.groups.group_of, result.op_start_us)
        features[:n, specs.START] = (start - start[current]) / max(result.step_time_us, 1e-9)
        features[:n, specs.VISITED] = np.arange(n) < position
        features[current, specs.CURRENT] = 1.0
        features[np.arange(n), specs.DEVICE_ONE_HOT + group_devices] = 1.0
        device_mask = np.zeros(specs.MAX_DEVICES, np.float32)
        device_mask[:problem.n_devices] = problem.allowed[current]
        ancestors = np.zeros(specs.MAX_GROUPS, np.float32)
        descendants = np.zeros(specs.MAX_GROUPS, np.float32)
        ancestors[:n] = self.ancestors[current]
        descendants[:n] = self.ancestors[:, current]
        return {"features": features, "node_mask": self.node_mask, "adjacency": self.adjacency,
                "ancestors": ancestors, "descendants": descendants, "device_mask": device_mask}


def check_size(problem: PlacementProblem) -> None:
    """Refuse a problem larger than the observations' padding."""
    n, d = problem.n_groups, problem.n_devices
    if n > specs.MAX_GROUPS or d > specs.MAX_DEVICES:
        raise PlacetoError(f"the policy places at most {specs.MAX_GROUPS} groups on "
                           f"{specs.MAX_DEVICES} devices; this problem has {n} groups on {d}: "
                           f"group the graph with max_groups={specs.MAX_GROUPS}")


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


def _ancestors(adjacency: np.ndarray) -> np.ndarray:
    """[i, j] True when j comes before i on some path (ids are a topological order)."""
    n = len(adjacency)
    ancestors = np.zeros((n, n), bool)
    for i in range(n):
        parents = np.flatnonzero(adjacency[:, i])
        if len(parents):
            ancestors[i, parents] = True
            ancestors[i] |= ancestors[parents].any(axis=0)
    return ancestors


def _best_single(problem: PlacementProblem) -> int:
    """The device every group can run on that simulates fastest (0 if none can take all)."""
    whole = np.flatnonzero(problem.allowed.all(axis=0))
    if len(whole) == 0:
        return 0
    steps = [problem.simulate(np.full(problem.n_groups, d)).step_time_us for d in whole]
    return int(whole[int(np.argmin(steps))])


def single_device(problem: PlacementProblem) -> np.ndarray:
    """Every group on the best single device, or on its first allowed device."""
    best = _best_single(problem)
    allowed = problem.allowed
    return np.where(allowed[:, best], best, allowed.argmax(axis=1)).astype(np.int64)


def start_placement(problem: PlacementProblem, seed: int = 0) -> np.ndarray:
    """Placeto's fixed random start: each group on a device drawn among those it may use.

    From one device, a single move mostly adds a transfer before parallel work can pay for it,
    and a policy learns to stay put; from a random placement every move can repair something.
    """
    rng = np.random.default_rng(seed)
    allowed = problem.allowed
    draws = rng.random(allowed.shape) * allowed
    return draws.argmax(axis=1).astype(np.int64)


RESTARTS = ("fixed", "previous")


def fast_start(problem: PlacementProblem) -> tuple:
    """(name, device per group, objective of each): the decision of the fast placers
    (placers.common.FAST_PLACERS) with the best objective, a start the policy can improve,
    its devices named in the order the groups first use them where they are alike."""
    objective = Objective(problem)
    decisions = fast_decisions(problem)
    values = [objective(devices)[0] for _, devices in decisions]
    name, devices = decisions[int(np.argmin(values))]
    return name, problem.canonical(devices), values


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
        self.position = 0
        self.first = self.value
        self.best = (self.value, self.devices.copy())     # the best placement it went through

    @property
    def done(self) -> bool:
        return self.position == self.view.problem.n_groups

    def observation(self) -> dict:
        return self.view.observation(self.devices, self.position, self.result)

    def move(self, device: int) -> float:
        """Put the current group on `device` (ignored where it has no kernel or no device);
        the reward: the drop in the objective over the episode's first objective."""
        problem = self.view.problem
        if device < problem.n_devices and problem.allowed[self.position, device]:
            self.devices[self.position] = device
        value, self.result = self.view.objective(self.devices)
        self.view.moves.append(value)
        reward = (self.value - value) / self.first
        self.value = value
        self.position += 1
        if value < self.best[0]:
            self.best = (value, self.devices.copy())
        return reward


class PlacementEnvironment:
    """Factory for the TF-Agents PyEnvironment (tf-agents is imported only when one is made)."""

    def __new__(cls, problems: Sequence[PlacementProblem], seed: int = 0,
                restart: str = "fixed", initial: Sequence = None):
        """initial: per problem, its fixed start placement or None (random)."""
        if restart not in RESTARTS:
            raise ValueError(f"restart must be one of {RESTARTS}, not {restart!r}")
        return _environment_class()(problems, seed, restart, initial)


_CLASS = None


def _environment_class():
    """Defined on first use: tf_agents needs legacy Keras, set up before TensorFlow loads."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    require_tf_agents()
    from tf_agents.environments import py_environment
    from tf_agents.trajectories import time_step as ts

    class _PlacementEnvironment(py_environment.PyEnvironment):
        def __init__(self, problems, seed, restart, initial):
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
            self._order = []
            self._observation_spec = specs.observation_spec()
            self._action_spec = specs.action_spec()

        def observation_spec(self):
            return self._observation_spec

        def action_spec(self):
            return self._action_spec

        def _reset(self):
            if not self._order:
                self._order = list(self._rng.permutation(len(self.views)))
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

    _CLASS = _PlacementEnvironment
    return _CLASS
