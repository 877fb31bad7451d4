"""Where the policy's episodes start: Placeto's fixed random placement, the fast placers'
best decision (a start the policy can improve), or every group on the single best device.

An episode starts from a fixed placement (`restart="fixed"`: a random one, unless an initial
placement is given, such as `fast_start`), or from the last placement of the previous episode
of that problem (`restart="previous"`; the first from the fixed one), so that episodes go on
improving one placement instead of repairing the same one again.
"""

from __future__ import annotations

import time

import numpy as np

from tf_placeto.placers import hill_climb, optimal
from tf_placeto.placers.common import fast_decisions
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy.objective import Objective, single_device


def start_placement(problem: PlacementProblem, seed: int = 0) -> np.ndarray:
    """Placeto's fixed random start: each group on a device drawn among those it may use.

    From one device, a single move mostly adds a transfer before parallel work can pay for it,
    and a policy learns to stay put; from a random placement every move can repair something.
    """
    rng = np.random.default_rng(seed)
    allowed = problem.allowed
    draws = rng.random(allowed.shape) * allowed
    return draws.argmax(axis=1).astype(np.int64)


RESTARTS = ("fixed", "previous")


def fast_start(problem: PlacementProblem) -> tuple:
    """(name, device per group, objective of each): the decision of the fast placers
    (placers.common.fast_placers) with the best objective, a start the policy can improve,
    its devices named in the order the groups first use them where they are alike."""
    objective = Objective(problem)
    decisions = fast_decisions(problem)
    values = [objective(devices)[0] for _, devices in decisions]
    name, devices = decisions[int(np.argmin(values))]
    return name, problem.canonical(devices), values


# after which iterations training's `keep_imitating` teaches the problem's lesson again:
# where the greedy episode ends behind it, or wherever the lesson is on one device
IMITATE_WHERE = ("behind", "one-device")


def best_known(problem: PlacementProblem, exact_seconds: float = 0.0,
               climb_seconds: float = 0.0, fast: tuple = None) -> tuple:
    """(name, device per group): the best decision known for `problem`, which imitation
    teaches: the fast placers' best (fast_start); with `climb_seconds` (0: not asked), that
    decision climbed in the simulator for up to so many seconds (placers/hill_climb.py), where
    the climb made it faster; with `exact_seconds` (0: not asked), the exact placer's decision
    where it proves that decision optimal on its model and the decision also simulates faster
    than the others. The exact placer's model is not the simulator, so its proof alone does
    not make its decision the better lesson. fast: fast_start(problem), where the caller has
    it."""
    objective = Objective(problem)
    name, devices, values = fast or fast_start(problem)
    best = min(values)
    if climb_seconds > 0:
        climbed, _ = hill_climb.climb(problem, devices, time.monotonic() + climb_seconds)
        value = objective(climbed)[0]
        if value < best:
            name, devices, best = "hill_climb", problem.canonical(climbed), value
    if exact_seconds > 0:
        decision, info = optimal.place(problem, time_limit=exact_seconds)
        if info["proven_optimal"] and objective(decision)[0] < best:
            return "optimal", problem.canonical(decision)
    return name, devices


START_KINDS = ("fast", "random", "single")


def initial_placement(problem: PlacementProblem, kind: str) -> tuple:
    """(name of the start, device per group or None for Placeto's random one, objective of
    each placement tried to choose it) for a start of `kind`, one of START_KINDS: "fast"
    (fast_start), "random", or "single" (every group on the device the single placer picks,
    where a policy must find the split itself)."""
    if kind == "fast":
        return fast_start(problem)
    if kind == "single":
        devices = single_device(problem)
        return "single", devices, [Objective(problem)(devices)[0]]
    if kind == "random":
        return "random", None, []
    raise ValueError(f"start must be one of {', '.join(START_KINDS)}, not {kind!r}")
