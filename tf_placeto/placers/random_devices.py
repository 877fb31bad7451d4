"""Random placement: the floor any placer must clear; seeded, so a run can be repeated.

Groups in id order each draw a device uniformly among those with their kernel and modelled
memory room left; when no device has room, the allowed device with the most room takes it,
and `common.repair` moves groups off any device left over capacity.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.placers.common import fits, repair, roomiest_device
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    load = np.zeros(problem.n_devices)
    decision = np.zeros(problem.n_groups, np.int64)
    for g in range(problem.n_groups):
        usable = np.flatnonzero(fits(problem, g, load)[0])
        decision[g] = rng.choice(usable) if len(usable) else roomiest_device(problem, g, load)
        load[decision[g]] += problem.memory_bytes[g]
    decision, moved = repair(problem, decision)
    return decision, {"moved_by_repair": moved}


PLACER = PlacerSpec(
    "random", place, "a seeded random device per group: the floor to clear",
    order=40)
