"""Running one placer: the decision, timed, checked against the hard rules, re-planned where
a memory limit needs it (the placer's spec says whether it may be)."""

from __future__ import annotations

import dataclasses
import time
from typing import Optional

import numpy as np

from tf_placeto.placers.common import decision_and_info, memory_repair
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec


@dataclasses.dataclass
class PlacerResult:
    method: str
    group_devices: np.ndarray     # device index per group
    decide_s: float               # wall time the placer took to decide
    info: dict = dataclasses.field(default_factory=dict)
    # method auto: every candidate's own result, best simulated first (measured for real
    # beside the winner, since the simulator can be wrong)
    candidates: list = dataclasses.field(default_factory=list)


# Under a memory limit, a placer whose decision the simulator finds over the limit plans again
# against a smaller budget: its memory model (linear, without received copies or the tensors
# that parallel work keeps alive) is then made to leave that much room.
MEMORY_MARGINS = (1.0, 0.85, 0.7, 0.55, 0.4)


def place(spec: PlacerSpec, problem: PlacementProblem, seed: int = 0,
          **keywords) -> PlacerResult:
    """Run the placer of `spec` on `problem`; the result obeys every kernel and colocation rule.

    With finite device memory, the decision is simulated, and when it does not fit the placer
    is run again on a budget of MEMORY_MARGINS of the capacity (the time of every try counts);
    `info["memory_margin"]` says which budget it took. If none fits, the plan that exceeds the
    limit least stands, or, where `common.memory_repair` makes it fit by moving groups one
    by one, the repaired plan (`info["memory_moves"]` says how many moved).
    A placer whose spec's memory is "simulates" (it judges its placements' memory in the
    simulator already) or "one_device" (one device is what it means) runs once. A time
    limit (the `time_limit` keyword, or the spec's time_limit_s) bounds all tries together;
    the repair's simulations are bounded by their own count.
    """
    limited = bool(np.isfinite(problem.capacity_bytes).any())
    retry = limited and spec.memory == "replans"
    start = time.perf_counter()
    tries = []                          # (memory excess, decision, info)
    for margin in MEMORY_MARGINS if retry else (1.0,):
        budget = problem if margin == 1.0 else problem.with_capacity(
            problem.capacity_bytes * margin)
        left = _time_left(spec, keywords, start)
        decided = spec.place(budget, seed=seed,
                             **(keywords if left is None else dict(keywords, time_limit=left)))
        group_devices, info = decision_and_info(decided)
        group_devices = problem.check(group_devices)
        excess = problem.simulate(group_devices).memory_excess_bytes if retry else 0.0
        tries.append((excess, group_devices, dict(info, memory_margin=margin)))
        left = _time_left(spec, keywords, start)
        if excess == 0.0 or (left is not None and left <= 0):
            break
    excess, group_devices, info = min(tries, key=lambda attempt: attempt[0])
    repaired = memory_repair(problem, group_devices) if excess > 0 else None
    if repaired is not None:
        group_devices, info["memory_moves"] = repaired
    elapsed = time.perf_counter() - start
    if not limited:
        info.pop("memory_margin")
    return PlacerResult(spec.name, group_devices, elapsed, info)


def _time_left(spec: PlacerSpec, keywords: dict, start: float) -> Optional[float]:
    """Seconds left since `start` of the placer's time limit (its `time_limit` keyword, else
    its spec's time_limit_s); None for a placer without one."""
    limit = keywords.get("time_limit", spec.time_limit_s)
    return None if limit is None else limit - (time.perf_counter() - start)
