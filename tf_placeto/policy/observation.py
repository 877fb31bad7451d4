"""What the policy sees of a problem: padded structure, scaled features, the current group.

Observations follow specs.py; GraphView computes once what all observations of one problem
share (adjacency, ancestors, static features, the fixed start and its objective).
"""

from __future__ import annotations

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.placers.common import mean_compute_us
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import specs
from tf_placeto.policy.objective import Objective
from tf_placeto.policy.starts import start_placement


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
        raise InputError(f"the policy places at most {specs.MAX_GROUPS} groups on "
                         f"{specs.MAX_DEVICES} devices; this problem has {n} groups on {d}: "
                         f"group the graph with max_groups={specs.MAX_GROUPS}")


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
