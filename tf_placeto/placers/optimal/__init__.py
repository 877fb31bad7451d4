"""The exact placer: the best decision under an objective of placers.objectives, and its proof.

Two exact methods, after Tarnawski et al. (NeurIPS 2020):
- dynamic programming over the ideals (down-sets) of the group DAG, for throughput: the stages
  of a pipeline, in order, are the differences of a chain of ideals, so the best pipeline that
  ends in ideal J on a set of devices is the best, over ideals I inside J and devices d of the
  set, of the best pipeline ending in I on the others and stage J \\ I on d. Exact where the
  links are alike (a stage's transfers then cost the same whoever is at the other end) and
  the ideals are few: their number grows with the graph's width, not its size;
- a mixed integer program otherwise, and always for latency, whose best decision need not be a
  pipeline: HiGHS through its own interface, highspy (scipy.optimize.milp where highspy is
  absent). The best fast decision is its start, and its incumbent and bound show on the
  progress bar. Under a time limit it returns the best decision found and the lower bound it
  proved.

Both obey the kernel rules and keep each device's modelled memory (problem.memory_bytes, the
linear model) within its capacity; where nothing fits, the answer is the start that goes least
past it. The decisions of the fast placers (common.fast_decisions) bound the program from
above, and stand where it finds nothing better in time or ties with them (both methods): the
answer is never worse than theirs.
dp.py holds the dynamic program, milp.py the integer program, which program.py builds and
solves, model.py what both see alike.

info (JSON-ready): objective, objective_us (the decision's score; None for inf: a throughput
decision that is no pipeline), bound_us (proven lower bound on the optimum; None where no
decision fits the memory model), gap ((objective_us - bound_us) / objective_us, None without a
bound), solver ("dp" or "milp"), interface (the milp's: "highspy" or "scipy"),
proven_optimal (gap <= PROVEN_GAP), time_limit_s, incumbent (what found the decision: the
solver or one of the fast placers).
"""

import time
from typing import Optional

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.log import ticking
from tf_placeto.placers.common import fast_decisions
from tf_placeto.placers.objectives import MODEL_SCORES
from tf_placeto.placers.optimal import dp, milp
from tf_placeto.placers.optimal.model import fits_memory, memory_excess_bytes
from tf_placeto.placers.optimal.program import INTERFACES
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem, check_objective
from tf_placeto.placers.registry import Option, PlacerSpec

SOLVERS = ("auto", "dp", "milp")
TIME_LIMIT_S = 30.0       # for the whole decision, unless the caller gives one
PROVEN_GAP = 1e-5         # a gap that counts as proven optimal: HiGHS's own, and its tolerances


def place(problem: PlacementProblem, *, seed: int = 0, objective: Optional[str] = None,
          time_limit: Optional[float] = TIME_LIMIT_S, solver: str = "auto",
          interface: str = "auto") -> tuple:
    """seed: unused (deterministic). objective: "latency" or "throughput" (default: the
    problem's), each solved on its model (placers.objectives). time_limit: seconds
    for the whole decision, None for no limit. solver: "auto" (the dynamic program where it
    applies), "dp" or "milp". interface: HiGHS through "highspy" or "scipy"; "auto": highspy
    where it is installed."""
    began = time.monotonic()
    objective = objective or problem.objective
    check_objective(objective)
    if solver not in SOLVERS:
        raise InputError(f"unknown solver {solver!r}; solvers: {', '.join(SOLVERS)}")
    if interface not in ("auto", *INTERFACES):
        raise InputError(f"unknown solver interface {interface!r}; interfaces: auto, "
                         f"{', '.join(INTERFACES)}")
    score = MODEL_SCORES[objective]
    members = dp.pipeline_ideals(problem) \
        if objective == "throughput" and solver != "milp" else None
    if solver == "dp" and members is None:
        raise InputError("the dynamic program solves throughput on devices joined by alike "
                         f"links, with at most {dp.DP_MAX_IDEALS} ideals; use the milp "
                         "solver")
    if members is not None:
        solved, interface, found = "dp", None, dp.best_pipeline(problem, members)
        # a tie goes to a fast placer, as after the integer program
        candidates = fast_decisions(problem) + ([("dp", found)] if found is not None else [])
        bound = score(problem, found) if found is not None else None
    else:
        solved, candidates = "milp", fast_decisions(problem)
        left = None if time_limit is None else max(
            time_limit - (time.monotonic() - began), 0)
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
    if bound is None or not np.isfinite(value) or not fits_memory(problem, decision):
        gap = None
    else:
        gap = float(max(value - bound, 0.0) / value) if value > 0 else 0.0
    return decision, {"objective": objective,
                      "objective_us": float(value) if np.isfinite(value) else None,
                      "bound_us": None if bound is None else float(bound), "gap": gap,
                      "solver": solved, "interface": interface,
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
