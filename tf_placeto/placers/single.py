"""Everything on one device: the baseline every placement must beat to be worth its links.

The device is the one with the best simulated step time among those that have a kernel for
every group and hold the whole graph's modelled memory; when none qualifies, the fastest one
(the decision is then infeasible, and the comparison says so). A group without a kernel on the
chosen device goes to the first device that has one.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (the choice is deterministic)."""
    footprint = problem.memory_bytes.sum()
    best = None
    for device in range(problem.n_devices):
        decision = all_on(problem, device)
        qualifies = bool(problem.allowed[:, device].all()
                         and footprint <= problem.capacity_bytes[device])
        key = (not qualifies, problem.simulate(decision).step_time_us)
        if best is None or key < best[0]:
            best = (key, device, decision)
    (unqualified, step_us), device, decision = best
    return decision, {"device": problem.device_names[device], "fits": not unqualified,
                      "simulated_step_us": step_us}


def all_on(problem: PlacementProblem, device: int) -> np.ndarray:
    """Every group on `device`, except those without a kernel there: their first allowed one."""
    allowed = problem.allowed
    return np.where(allowed[:, device], device, np.argmax(allowed, axis=1)).astype(np.int64)


PLACER = PlacerSpec(
    "single", place, "everything on the fastest device that holds the graph",
    order=10, fast=True, auto=True,
    memory="one_device")       # one device is what it means: never re-planned for memory
