"""What both exact methods see alike: the memory model's verdict on a decision, every edge
of the group graph, and whether the links are alike."""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem


def fits_memory(problem: PlacementProblem, group_devices) -> bool:
    return memory_excess_bytes(problem, group_devices) == 0


def memory_excess_bytes(problem: PlacementProblem, group_devices) -> float:
    """How far the fullest device goes past its capacity in the memory model (0: fits)."""
    excess = problem.device_loads(group_devices) - problem.capacity_bytes
    return float(max(excess.max(initial=0.0), 0.0))


def all_edges(problem: PlacementProblem) -> tuple:
    """(src, dst, bytes, extra_us) of the forward edges, then the feedback edges."""
    return (np.concatenate([problem.edge_src, problem.feedback_src]),
            np.concatenate([problem.edge_dst, problem.feedback_dst]),
            np.concatenate([problem.edge_bytes, problem.feedback_bytes]),
            np.concatenate([problem.edge_extra_us, problem.feedback_extra_us]))
