"""The papers' human expert: whole layers on their own devices, or everything on one.

Rules are (regex, layer index) pairs, searched in each op name, the first match winning. Of L
layers (L = largest index + 1), layer k goes to device floor(k * n_devices / L). A group goes
where most of its matched ops' compute goes (each op weighted by its run time averaged over the
device types, op overhead included; by op count when that weighs nothing); unmatched ops follow
their group. A group with no matched op at all follows the group before it in topological
order (the first ones: the first matched group), so gradient and optimizer groups stay with the
layer they come after. The decision then passes `common.repair` (kernels, memory).

Without rules (Inception-V3, NASNet: "one GPU"), it is the `single` placer.
"""

from __future__ import annotations

import re

import numpy as np

from tf_placeto.placers import single
from tf_placeto.placers.common import repair
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


def place(problem: PlacementProblem, *, seed: int = 0, layers=()) -> tuple:
    """layers: [(regex, layer index)], e.g. [("lstm_1", 1), ("attention", 2)]. seed: unused."""
    rules = [(re.compile(pattern), int(layer)) for pattern, layer in layers]
    if not rules:
        return single.place(problem, seed=seed)
    n_layers = max(layer for _, layer in rules) + 1
    votes, counts = _votes(problem, rules, n_layers)
    voted = counts.sum(axis=1) > 0
    if not voted.any():
        return single.place(problem, seed=seed)
    chosen = np.where(votes.max(axis=1) > 0, votes.argmax(axis=1), counts.argmax(axis=1))
    # Unvoted groups take the decision of the last voted group before them (else the first).
    last_voted = np.maximum.accumulate(np.where(voted, np.arange(problem.n_groups), -1))
    source = np.where(last_voted >= 0, last_voted, np.flatnonzero(voted)[0])
    decision, moved = repair(problem, chosen[source])
    return decision, {"layers": n_layers, "matched_groups": int(voted.sum()),
                      "moved_by_repair": moved}


def _votes(problem: PlacementProblem, rules, n_layers: int) -> tuple:
    """(compute, op count) per (group, device) from the ops the rules match."""
    simulation = problem.simulation
    op_time = (simulation.compute_us[:, simulation.device_type_of].mean(axis=1)
               + simulation.op_overhead_us)
    votes = np.zeros((problem.n_groups, problem.n_devices))
    counts = np.zeros_like(votes)
    for op, name in enumerate(simulation.op_names):
        layer = next((k for pattern, k in rules if pattern.search(name)), None)
        if layer is None:
            continue
        g, device = problem.groups.group_of[op], layer * problem.n_devices // n_layers
        votes[g, device] += op_time[op]
        counts[g, device] += 1
    return votes, counts


PLACER = PlacerSpec(
    "expert", place, "the papers' human expert: whole layers on their own devices",
    order=20, auto=True, workload=("layers",))
