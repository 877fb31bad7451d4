"""HEFT (Topcuoglu et al.): groups by upward rank, each to the device where it finishes first.

Upward rank: the longest remaining path from the group's start, communication included: its
mean compute over allowed devices, or through a successor s, the edge's lag (how soon s may
start after it, common.EdgeTiming) + mean transfer time + rank(s). With lags a successor can
outrank its producer, so groups go by decreasing rank among the ready ones (ties by id; with
whole-group precedence this is exactly HEFT's sorted list), each to the allowed device with
memory room where it would finish earliest, appended after that device's last group (not
insertion-based: the simulator's devices run work in ready order, so an idle gap filled on
paper is not filled in the replay; see list_scheduling).
"""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.common import edge_timing, mean_compute_us
from tf_placeto.placers.list_scheduling import earliest_finish_by_priority
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (ties are broken by id)."""
    rank = upward_rank(problem)
    decision, info = earliest_finish_by_priority(problem, rank)
    return decision, {**info, "critical_path_us": float(rank.max(initial=0.0))}


def upward_rank(problem: PlacementProblem) -> np.ndarray:
    """Per group, the longest remaining path from its start (see the module doc)."""
    rank = mean_compute_us(problem)
    timing = edge_timing(problem)
    via_edge = timing.lag_us + timing.mean_transfer_us(problem)
    # By decreasing source: a successor (larger id) has all its own edges counted already.
    for e in np.argsort(-problem.edge_src, kind="stable"):
        src, dst = problem.edge_src[e], problem.edge_dst[e]
        rank[src] = max(rank[src], via_edge[e] + rank[dst])
    return rank


PLACER = PlacerSpec(
    "heft", place, "HEFT: by upward rank, each group to the device where it finishes first",
    order=90, fast=True, auto=True, objectives=OBJECTIVES)
