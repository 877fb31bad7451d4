"""Round robin: contiguous slices of the topological order dealt to the devices in turn.

The groups (ids are a topological order) are cut into 2 chunks per device of equal compute
(averaged over allowed devices), and chunk c goes to device c mod n: every device gets an
early and a late part of the step, a pipeline-like split that ignores the graph's shape, which
is what makes it a baseline. Group by group, a device without the group's kernel or without
modelled memory room for it is skipped for the next one in turn that has both; when none has,
the allowed device with the most room takes it, and `common.repair` moves groups off any
device left over capacity.
"""

from __future__ import annotations

import numpy as np

from tf_placeto.graph.grouping import contiguous_chunks
from tf_placeto.placers.common import fits, mean_compute_us, repair, roomiest_device
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec

CHUNKS_PER_DEVICE = 2


def place(problem: PlacementProblem, *, seed: int = 0) -> tuple:
    """seed: unused (the deal is deterministic)."""
    n = problem.n_devices
    weight = mean_compute_us(problem)
    if weight.sum() <= 0:
        weight = np.ones(problem.n_groups)
    chunk_of = contiguous_chunks(weight, CHUNKS_PER_DEVICE * n)
    load = np.zeros(n)
    decision = np.zeros(problem.n_groups, np.int64)
    for g in range(problem.n_groups):
        in_turn = (chunk_of[g] + np.arange(n)) % n
        usable = in_turn[fits(problem, g, load)[0][in_turn]]
        decision[g] = usable[0] if len(usable) else roomiest_device(problem, g, load)
        load[decision[g]] += problem.memory_bytes[g]
    decision, moved = repair(problem, decision)
    return decision, {"chunks": int(chunk_of.max(initial=-1)) + 1, "moved_by_repair": moved}


PLACER = PlacerSpec(
    "round_robin", place, "slices of the topological order dealt to the devices in turn",
    order=30, fast=True)
