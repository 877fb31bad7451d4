"""The exact placer: the best decision under an objective of placers.objectives, and its proof.

A mixed integer program of either objective, after Tarnawski et al. (NeurIPS 2020): HiGHS
through its own interface, highspy (scipy.optimize.milp where highspy is absent). The best fast
decision is its start, and its incumbent and bound show on the progress bar. Under a time
limit it returns the best decision found and the lower bound it proved.

It obeys the kernel rules and keeps each device's modelled memory (problem.memory_bytes, the
linear model) within its capacity; where nothing fits, the answer is the start that goes least
past it. The decisions of the fast placers (common.fast_decisions) bound the program from
above, and stand where it finds nothing better in time or ties with them: the answer is never
worse than theirs. milp.py holds the integer program, which program.py builds and solves;
model.py, the memory model's verdict.

info (JSON-ready): objective, objective_us (the decision's score), bound_us (proven lower bound
on the optimum; None where no decision fits the memory model), gap ((objective_us - bound_us) /
objective_us, None without a bound), interface ("highspy" or "scipy"), proven_optimal (gap <=
PROVEN_GAP), time_limit_s, incumbent (what found the decision: the solver or one of the fast
placers).
"""

import time
from typing import Optional

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.log import ticking
from tf_placeto.placers.common import fast_decisions
from tf_placeto.placers.objectives import MODEL_SCORES
from tf_placeto.placers.optimal import milp
from tf_placeto.placers.optimal.model import fits_memory, memory_excess_bytes
from tf_placeto.placers.optimal.program import INTERFACES
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem, check_objective
from tf_placeto.placers.registry import Option, PlacerSpec

TIME_LIMIT_S = 30.0       # for the whole decision, unless the caller gives one
PROVEN_GAP = 1e-5         # a gap that counts as proven optimal: HiGHS's own, and its tolerances


def place(problem: PlacementProblem, *, seed: int = 0, objective: Optional[str] = None,
          time_limit: Optional[float] = TIME_LIMIT_S, interface: str = "auto") -> tuple:
    """seed: unused (deterministic). objective: "latency" or "throughput" (default: the
    problem's), each solved on its model (placers.objectives). time_limit: seconds for the
    whole decision, None for no limit. interface: HiGHS through "highspy" or "scipy"; "auto":
    highspy where it is installed."""
    began = time.monotonic()
    objective = objective or problem.objective
    check_objective(objective)
    if interface not in ("auto", *INTERFACES):
        raise InputError(f"unknown solver interface {interface!r}; interfaces: auto, "
                         f"{', '.join(INTERFACES)}")
    score = MODEL_SCORES[objective]
    candidates = fast_decisions(problem)
    left = None if time_limit is None else max(time_limit - (time.monotonic() - began), 0)
    with ticking(left, "exact placer: integer program") as bar:
        found, bound, interface = milp.solve(
            problem, objective, candidates, left,
            interface=None if interface == "auto" else interface,
            progress=lambda incumbent, bound: bar.set_postfix_str(
                _search_state(incumbent, bound), refresh=False))
    # after the starts: a tie goes to the fast placer whose decision the search began at
    candidates = candidates + ([("milp", found)] if found is not None else [])
    name, decision, value = min(
        ((name, d, score(problem, d)) for name, d in candidates),
        key=lambda c: (memory_excess_bytes(problem, c[1]), c[2]))
    if bound is None or not fits_memory(problem, decision):
        gap = None
    else:
        gap = float(max(value - bound, 0.0) / value) if value > 0 else 0.0
    return decision, {"objective": objective, "objective_us": float(value),
                      "bound_us": None if bound is None else float(bound), "gap": gap,
                      "interface": interface,
                      "proven_optimal": gap is not None and gap <= PROVEN_GAP,
                      "time_limit_s": time_limit, "incumbent": name}


def _search_state(incumbent_us: float, bound_us: float) -> str:
    """The integer program's search in a few words, for its progress bar."""
    if not np.isfinite(incumbent_us):
        return f"bound {bound_us / 1e3:.2f} ms"
    gap = max(incumbent_us - bound_us, 0.0) / incumbent_us if incumbent_us > 0 else 0.0
    return f"best {incumbent_us / 1e3:.2f} ms, bound {bound_us / 1e3:.2f} ms, gap {gap:.1%}"


PLACER = PlacerSpec(
    "optimal", place, "the exact placer: the best decision under an objective, and its proof",
    order=100, time_limit_s=TIME_LIMIT_S, objectives=OBJECTIVES, options=(
        Option("--time-limit", "time_limit", float, TIME_LIMIT_S, metavar="S", above=0,
               quick=2.0, help="seconds the exact placer may search; it returns its best "
                               "placement and the proven gap"),))
