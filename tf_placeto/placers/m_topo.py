"""m-TOPO (Baechi): fill the devices one after another in topological order.

Each device takes the next groups until its modelled memory would pass (total memory / n
devices) + the largest group (or its capacity, if smaller), then the next device starts. Cheap
and memory-balanced, blind to parallelism and to communication: Baechi's weakest placer in
step time, the one that always finds room when room is spread evenly. A group without a kernel
on the device being filled, or that fits nowhere along the way, goes to the allowed device with
the most room left; `common.repair` then moves groups off any device left over capacity.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.common import fits, repair, roomiest_device
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (the walk is deterministic)."""
    memory = problem.memory_bytes
    n = problem.n_devices
    budget = memory.sum() / n + memory.max(initial=0.0)
    limit = np.minimum(problem.capacity_bytes, budget)
    load = np.zeros(n)
    decision = np.zeros(problem.n_groups, np.int64)
    current = 0
    for g in range(problem.n_groups):
        while current < n - 1 and load[current] + memory[g] > limit[current]:
            current += 1
        decision[g] = current if fits(problem, g, load)[0][current] \
            else roomiest_device(problem, g, load)
        load[decision[g]] += memory[g]
    decision, moved = repair(problem, decision)
    return decision, {"budget_bytes": float(budget), "moved_by_repair": moved}


PLACER = PlacerSpec(
    "m_topo", place, "m-TOPO (Baechi): fill the devices one after another in topological order",
    order=60, fast=True, auto=True)
