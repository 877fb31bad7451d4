"""The memory model's verdict on a decision, as the exact placer sees it."""

from __future__ import annotations


from tf_placeto.placers.problem import PlacementProblem


def fits_memory(problem: PlacementProblem, group_devices) -> bool:
    return memory_excess_bytes(problem, group_devices) == 0


def memory_excess_bytes(problem: PlacementProblem, group_devices) -> float:
    """How far the fullest device goes past its capacity in the memory model (0: fits)."""
    excess = problem.device_loads(group_devices) - problem.capacity_bytes
    return float(max(excess.max(initial=0.0), 0.0))
