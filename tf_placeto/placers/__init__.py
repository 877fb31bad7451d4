"""Placers: a PlacementProblem in, one device per group out. One module per placer.

`place(method, problem)` runs the placer named `method`, times the decision and checks it
against the hard rules; `names()` lists the methods, which is where the command line's
`--method` choices come from. A placer module exports

    place(problem: PlacementProblem, *, seed: int = 0, **options) -> np.ndarray | (np.ndarray, dict)

returning a device index per group (and optionally facts about the decision for reports).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from typing import Optional

import numpy as np

from tf_placeto.errors import PlacetoError
from tf_placeto.placers.common import decision_and_info, memory_repair
from tf_placeto.placers.problem import PlacementProblem

# method name -> module under tf_placeto.placers; the order is the order of reports.
_MODULES = {
    "single": "single",
    "expert": "expert",
    "round_robin": "round_robin",
    "random": "random_devices",
    "metis": "metis",
    "m_topo": "m_topo",
    "m_etf": "m_etf",
    "m_sct": "m_sct",
    "heft": "heft",
    "optimal": "optimal",
    "rnn": "rnn",
    "placeto": "placeto",
}


@dataclasses.dataclass
class PlacerResult:
    method: str
    group_devices: np.ndarray     # device index per group
    decide_s: float               # wall time the placer took to decide
    info: dict = dataclasses.field(default_factory=dict)


def names() -> list:
    return list(_MODULES)


# Under a memory limit, a placer whose decision the simulator finds over the limit plans again
# against a smaller budget: its memory model (linear, without received copies or the tensors
# that parallel work keeps alive) is then made to leave that much room.
MEMORY_MARGINS = (1.0, 0.85, 0.7, 0.55, 0.4)


def place(method: str, problem: PlacementProblem, seed: int = 0, **options) -> PlacerResult:
    """Run one placer on `problem`; the result obeys every kernel and colocation rule.

    With finite device memory, the decision is simulated, and when it does not fit the placer
    is run again on a budget of MEMORY_MARGINS of the capacity (the time of every try counts);
    `info["memory_margin"]` says which budget it took. If none fits, the plan that exceeds the
    limit least stands, or, where `common.memory_repair` makes it fit by moving groups one
    by one, the repaired plan (`info["memory_moves"]` says how many moved).
    A placer whose module sets SIMULATES_MEMORY (it judges its placements' memory in the
    simulator already) or SPLITS = False (one device is what it means) runs once. A time
    limit (the `time_limit` option, or the module's TIME_LIMIT_S) bounds all tries together;
    the repair's simulations are bounded by their own count.
    """
    if method not in _MODULES:
        raise PlacetoError(f"unknown placement method {method!r}; methods: {', '.join(names())}")
    module = importlib.import_module(f"tf_placeto.placers.{_MODULES[method]}")
    limited = bool(np.isfinite(problem.capacity_bytes).any())
    retry = limited and not getattr(module, "SIMULATES_MEMORY", False) \
        and getattr(module, "SPLITS", True)
    start = time.perf_counter()
    tries = []                          # (memory excess, decision, info)
    for margin in MEMORY_MARGINS if retry else (1.0,):
        budget = problem if margin == 1.0 else problem.with_capacity(
            problem.capacity_bytes * margin)
        left = _time_left(module, options, start)
        decided = module.place(budget, seed=seed,
                               **(options if left is None else dict(options, time_limit=left)))
        group_devices, info = decision_and_info(decided)
        group_devices = problem.check(group_devices)
        excess = problem.simulate(group_devices).memory_excess_bytes if retry else 0.0
        tries.append((excess, group_devices, dict(info, memory_margin=margin)))
        left = _time_left(module, options, start)
        if excess == 0.0 or (left is not None and left <= 0):
            break
    excess, group_devices, info = min(tries, key=lambda attempt: attempt[0])
    repaired = memory_repair(problem, group_devices) if excess > 0 else None
    if repaired is not None:
        group_devices, info["memory_moves"] = repaired
    elapsed = time.perf_counter() - start
    if not limited:
        info.pop("memory_margin")
    return PlacerResult(method, group_devices, elapsed, info)


def _time_left(module, options: dict, start: float) -> Optional[float]:
    """Seconds left since `start` of the placer's time limit (its `time_limit` option, else
    its module's TIME_LIMIT_S); None for a placer without one."""
    limit = options.get("time_limit", getattr(module, "TIME_LIMIT_S", None))
    return None if limit is None else limit - (time.perf_counter() - start)
