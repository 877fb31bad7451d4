"""m-ETF (Baechi): earliest-time-first list scheduling under memory limits.

Repeatedly the (ready group, device) pair that can start earliest, counting the transfer of
its inputs from other devices, among devices with the group's kernel and modelled memory room
(see list_scheduling). Greedy for parallelism: a wide graph spreads, a chain stays put.
"""

from __future__ import annotations

from tf_placeto.placers.list_scheduling import earliest_start_first
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (ties are broken by id)."""
    return earliest_start_first(problem)


PLACER = PlacerSpec(
    "m_etf", place, "m-ETF (Baechi): earliest-time-first list scheduling under memory limits",
    order=70, fast=True, auto=True, objectives=OBJECTIVES)
