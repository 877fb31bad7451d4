"""What the policy sees of a problem: its structure, scaled features, the current group, and
each device's row for it.

Observations follow specs.py; GraphView computes once what all observations of one problem
share (edges, ancestors, static features, the fixed start and its objective). Nothing is
padded: a problem of any size is seen as it is.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import specs
from tf_placeto.policy.candidates import CandidateScales
from tf_placeto.policy.objective import Objective
from tf_placeto.policy.starts import start_placement


class GraphView:
    """What observations of one problem share: structure and scaled static features."""

    def __init__(self, problem: PlacementProblem, initial: np.ndarray = None):
        """initial: the fixed start placement (device per group); default: a random one."""
        n = problem.n_groups
        self.problem = problem
        self.edges = np.stack([problem.edge_src, problem.edge_dst], axis=1).astype(np.int32)
        self.ancestors = _ancestors(problem)           # [i, j]: j comes before i
        self.scales = CandidateScales(problem)
        sent = np.bincount(problem.edge_src, weights=problem.edge_bytes, minlength=n)
        self.static = np.zeros((n, 3), np.float32)
        for column, values in enumerate((self.scales.group_us, sent, problem.memory_bytes)):
            self.static[:, column] = values / max(float(np.max(values, initial=0.0)), 1e-12)
        self.objective = Objective(problem)
        self.start = (start_placement(problem) if initial is None
                      else problem.check(np.asarray(initial, np.int64)))
        self.start_objective, self.start_result = self.objective(self.start)
        self.moves = []      # the objective of every placement its episodes simulated, in order

    def observation(self, group_devices, position: int, result, candidates) -> dict:
        """The observation while group `position` is placed (the last group once all are):
        `candidates` are that group's device rows (candidates.Candidates.rows)."""
        problem, n = self.problem, self.problem.n_groups
        current = min(position, n - 1)
        features = np.zeros((n, specs.NUM_FEATURES), np.float32)
        features[:, :3] = self.static
        start = np.full(n, np.inf)
        np.minimum.at(start, problem.groups.group_of, result.op_start_us)
        features[:, specs.START] = (start - start[current]) / max(result.step_time_us, 1e-9)
        features[:, specs.VISITED] = np.arange(n) < position
        features[current, specs.CURRENT] = 1.0
        return {"features": features, "edges": self.edges,
                "ancestors": self.ancestors[current].astype(np.float32),
                "descendants": self.ancestors[:, current].astype(np.float32),
                "group_device": np.asarray(group_devices, np.int32),
                "candidates": candidates,
                "device_mask": problem.allowed[current].astype(np.float32)}


def _ancestors(problem: PlacementProblem) -> np.ndarray:
    """[i, j] True when j comes before i on some path (ids are a topological order)."""
    n = problem.n_groups
    ancestors = np.zeros((n, n), bool)
    for i, parents in enumerate(problem.predecessors()):
        if parents:
            ancestors[i, parents] = True
            ancestors[i] |= ancestors[parents].any(axis=0)
    return ancestors
