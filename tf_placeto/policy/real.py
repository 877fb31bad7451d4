"""Training's last, optional stage: episodes whose returns are measured for real.

The simulator is only as right as its calibration (a split it predicts fast can run slow).
So after the simulated iterations, `tf-placeto train --real-steps N` fine-tunes the
policy on problems whose devices are the runtime's own: every iteration measures the
episodes' start and the placements they ended on, in turns (measure.interleaved, each in a
session of its own), and sets each episode's return to its real speed-up, (start - end) /
start. The moves keep their simulated rewards, which share out the credit within an episode;
the last move's reward takes the difference, so the return from the first move is the real
one. Every real step time goes into the profile's log of real runs (measure.fitting, origin
"train"), which the next calibration fits on, and into training.json's row.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from tf_placeto.devices import DeviceSet
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.noise import CONFIDENCE, rounds_for
from tf_placeto.measure.runtimes.runner import OK

MEASURE_BUDGET_S = 30.0       # per iteration, once every placement has run its rounds


@dataclasses.dataclass(frozen=True)
class MeasuredGraph:
    """What measuring a training problem's placements needs: its graph, and the profile
    directory whose log of real runs they join (None: not logged)."""
    graph: OpGraph
    profile_dir: Optional[str] = None


class RealSteps:
    """Real step times of the placements of the problems in `graphs` (problem index ->
    MeasuredGraph), each of which is on the devices of `runtime`."""

    def __init__(self, runtime, graphs: Mapping[int, MeasuredGraph],
                 budget_s: float = MEASURE_BUDGET_S):
        if not graphs:
            raise ValueError("real steps need at least one problem on the runtime's devices")
        self.runtime, self.graphs, self.budget_s = runtime, dict(graphs), budget_s

    @property
    def problems(self) -> list:
        """The indices of the problems that can be measured."""
        return sorted(self.graphs)

    def seconds(self, index: int, problem, decisions: Sequence[np.ndarray]) -> np.ndarray:
        """The real median step of each decision (device per group) of problem `index`, timed
        in turns; NaN for one that failed. Each distinct decision is measured once."""
        measured = self.graphs[index]
        keys = [tuple(int(d) for d in decision) for decision in decisions]
        distinct = list(dict.fromkeys(keys))
        placements = [problem.placement(np.array(key)) for key in distinct]
        results = measure_interleaved(measured.graph, self.runtime, placements,
                                      [f"training placement {k}" for k in range(len(distinct))],
                                      budget_s=self.budget_s, min_rounds=rounds_for(CONFIDENCE),
                                      trace=False)
        fitting.record(measured.profile_dir, measured.graph,
                       DeviceSet.from_strings(self.runtime.device_names), placements, results,
                       "train")
        step = {key: (r.step_time_s if r.status == OK else np.nan)
                for key, r in zip(distinct, results)}
        return np.array([step[key] for key in keys], dtype=float)


def real_rewards(rewards: np.ndarray, start_s: np.ndarray, end_s: np.ndarray) -> tuple:
    """(rewards [episodes, moves] whose return from the first move is each episode's real
    speed-up (start - end) / start, the real returns). An episode whose start or end failed
    to run keeps its simulated rewards and return."""
    rewards = np.array(rewards, dtype=float)
    simulated = rewards.sum(axis=1)
    real = (start_s - end_s) / start_s
    known = np.isfinite(real)
    rewards[known, -1] += real[known] - simulated[known]
    return rewards, np.where(known, real, simulated)
