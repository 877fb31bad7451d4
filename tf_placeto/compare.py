"""The scoreboard: every placer on every graph and device count, simulated or measured.

One row per (graph, devices, method): the step time (simulated from the profile, or the median
of real runs with their spread; under the throughput objective, the seconds per step of a
stream of steps in flight, simulated or real), the simulator's prediction beside it, the lower
bound, the ratio to the best feasible method and to the bound, how long the placer took to
decide, whether the placer follows the objective, and whether the placement fits in memory.
One row per (graph, devices) names the lower bound itself.

The table is checked before it is returned: a simulated step time below the lower bound would
be a bug in the simulator or the bound, so it raises instead of being printed.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from tf_placeto import methods as placement_methods
from tf_placeto.devices import DeviceSet
from tf_placeto.errors import InputError, PlacetoError
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.measurer import RealMeasurer
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.placers.objectives import MODEL_SCORES
from tf_placeto.placers.problem import IN_FLIGHT
from tf_placeto.settings import Search, Target
from tf_placeto.workload import MemoryLimit, Workload, load_workload

COLUMNS = ["graph", "devices", "method", "status", "step_s", "spread_s", "runs", "predicted_s",
           "lower_bound_s", "vs_best", "vs_lower_bound", "decide_s", "peak_memory_bytes",
           "memory_limit_bytes", "objective_s", "vs_optimal", "evaluations",
           "evaluations_to_5pct", "follows_objective", "reason"]
EXACT = "optimal"
LOWER_BOUND = "lower bound"


@dataclasses.dataclass
class RealRuns:
    """Measure each placement for real on `runtime` (its devices are the devices compared)."""

    runtime: Runtime
    repeats: int = 5
    warmup: int = 1
    timeout_s: float = 600.0
    best: Optional[int] = None  # measure only this many, the best predicted (and "single")


def compare(workloads: Sequence[Workload], device_counts: Sequence[Optional[int]],
            methods: Sequence[str], memory: Optional[MemoryLimit] = None,
            real: Optional[RealRuns] = None, seed: int = 0,
            progress: Callable[[str], None] = lambda message: None,
            options: Optional[dict] = None, link=None, objective: str = "latency",
            in_flight: int = IN_FLIGHT) -> pd.DataFrame:
    """The comparison table (see module doc). A device count of None: the profiled devices.
    options: placer options by their names (methods.options(): budget, ...); link: simulate
    devices joined by this tf_placeto.measure.costs.costmodel.Link instead of the measured links.
    objective: what the placers optimise and the table ranks by: "latency" (one step) or
    "throughput" (seconds per step with `in_flight` steps at once).

    table.attrs["group_devices"]: {(graph, devices, method): the decision, a device index per
    group}, so that a caller can write a placement out without deciding it again."""
    rows, decided = [], {}
    for workload in workloads:
        for count in device_counts:
            problem = workload.problem(count, memory, link).with_objective(objective,
                                                                          in_flight)
            rows += _rows_for(workload, problem, methods, real, seed, progress, options,
                              decided)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["group_devices"] = decided
    table.attrs["objective"] = objective
    table.attrs["in_flight"] = in_flight if objective == "throughput" else None
    _rank(table)
    _check_honest(table, simulated=real is None)
    return table


def compare_sources(graphs: Sequence, methods: Optional[Sequence[str]] = None,
                    target: Optional[Target] = None, search: Optional[Search] = None, *,
                    counts: Optional[Sequence[int]] = None, simulate: bool = False,
                    repeats: int = 5, measure_best: Optional[int] = None,
                    link: Optional[str] = None,
                    progress: Callable[[str], None] = lambda message: None) -> pd.DataFrame:
    """`compare` from sources (paths, or graph.sources.Source), as `tf-placeto compare` runs
    it: on `target` (neither devices nor a cluster: local:2, two worker processes), every
    graph profiled there (cached), every method (default all) under `search` on every device
    count (default: the runtime's; others need `simulate`, with devices like the profiled
    ones, joined by `link` if given)."""
    target, search = (target or Target()).or_cluster("local:2"), search or Search()
    methods = list(methods or placement_methods.names())
    for method in methods:
        placement_methods.spec(method)
    link = Link.parse(link) if link else None
    if link is not None and not simulate:
        raise InputError("--link describes simulated devices: pass --simulate")
    counts = list(counts or [None])
    if not simulate:                    # refused before a cluster starts, as the rest
        planned = len(target.planned()[0])
        if any(c not in (None, planned) for c in counts):
            raise InputError(f"measuring for real uses the runtime's {planned} devices: pass "
                             "--simulate for other device counts")
    with target.open() as runtime:
        workloads = [load_workload(graph, runtime, max_groups=search.max_groups,
                                   cache=target.cache) for graph in graphs]
        real = None if simulate else RealRuns(runtime, repeats=repeats, best=measure_best)
        return compare(workloads, counts, methods, memory=target.memory, real=real,
                       seed=search.seed, progress=progress, options=dict(search.options),
                       link=link, objective=search.objective, in_flight=search.in_flight)


def _rows_for(workload, problem, methods, real, seed, progress, options, decided) -> list:
    bound_s = problem.lower_bound_us() / 1e6
    limit = float(problem.capacity_bytes.max())
    base = {"graph": workload.name, "devices": problem.n_devices, "lower_bound_s": bound_s,
            "memory_limit_bytes": limit if np.isfinite(limit) else np.nan}
    rows = [{**base, "method": LOWER_BOUND, "status": "bound", "step_s": bound_s,
             "predicted_s": bound_s}]
    decisions = []
    for method in methods:
        progress(f"{workload.name} on {problem.n_devices} devices: {method}")
        try:
            decision = workload.decide(method, problem, seed=seed, options=options)
        except PlacetoError as error:       # a placer that cannot serve this problem says why
            rows.append({**base, "method": method, "status": "failed", "reason": str(error)})
            continue
        scored = problem.evaluate(decision.group_devices)
        decisions.append(decision)
        decided[(workload.name, problem.n_devices, method)] = decision.group_devices
        rows.append({**base, "method": method, "decide_s": decision.decide_s,
                     "follows_objective":
                         problem.objective in placement_methods.spec(method).objectives,
                     "evaluations": decision.info.get("evaluations"),
                     "evaluations_to_5pct": decision.info.get("evaluations_to_5pct"),
                     "predicted_s": scored.us_per_step / 1e6,
                     "status": "ok" if scored.feasible else "infeasible",
                     "step_s": scored.us_per_step / 1e6, "spread_s": 0.0, "runs": 0,
                     "peak_memory_bytes": float(scored.peak_memory_bytes.max()),
                     "reason": "" if scored.feasible else "exceeds the memory limit"})
    placed = [row for row in rows[1:] if row["status"] != "failed"]
    _against_the_optimum(problem, decisions, placed)
    if real is not None:
        _measure_for_real(workload, problem, decisions, placed, real, progress)
    return rows


def _against_the_optimum(problem, decisions, rows) -> None:
    """With the exact placer among the methods: every decision's value under the objective it
    optimised (objective_s) and its ratio to the exact one's (vs_optimal), whose row says how
    far from the proven optimum that one may still be (its gap)."""
    exact = next((d for d in decisions if d.method == EXACT), None)
    if exact is None or not exact.info.get("objective_us"):
        return
    score = MODEL_SCORES[exact.info["objective"]]
    for decided, row in zip(decisions, rows):
        value = score(problem, decided.group_devices)
        row.update(objective_s=value / 1e6, vs_optimal=value / exact.info["objective_us"])
        if decided is exact and exact.info.get("gap") is not None:
            row["reason"] = f"{exact.info['objective']} objective, proven gap " \
                            f"{exact.info['gap']:.1%}"


def _measure_for_real(workload, problem, decisions, rows, real: RealRuns, progress) -> None:
    """Real step times of the chosen decisions, one after another (latency); under the
    throughput objective, streams of the problem's steps in flight, in turns."""
    chosen = _to_measure(rows, real.best)
    measured = []                           # (decision, its row, its placement)
    for decided, row in zip(decisions, rows):
        if row["method"] in chosen:
            measured.append((decided, row, problem.placement(decided.group_devices)))
        else:
            row.update(step_s=np.nan, spread_s=np.nan, reason=(
                f"not measured: not among the {real.best} best predicted"))
    placements = [placement for _, _, placement in measured]
    labels = [decided.method for decided, _, _ in measured]
    progress(f"{workload.name}: measuring {', '.join(labels)} for real")
    if problem.steps_in_flight:
        results = measure_interleaved(workload.graph, real.runtime, placements, labels,
                                      repeats=real.repeats, warmup=real.warmup,
                                      timeout_s=real.timeout_s, trace=False,
                                      stream=problem.steps_in_flight)
    else:
        results = RealMeasurer(workload.graph, real.runtime, results_dir=workload.profile_dir,
                               repeats=real.repeats, warmup=real.warmup,
                               timeout_s=real.timeout_s).evaluate(placements, labels=labels)
    for (_, row, _), result in zip(measured, results):
        row.update(status=result.status, step_s=result.step_time_s, spread_s=result.spread_s,
                   runs=result.runs, reason=result.reason,
                   peak_memory_bytes=float(max(result.peak_memory_bytes.values(),
                                               default=np.nan)))
    # One session: the placements of one comparison are timed one after another, together.
    fitting.record(workload.profile_dir, workload.graph,
                   DeviceSet.from_strings(real.runtime.device_names), placements, results,
                   "compare")


def _to_measure(rows, best: Optional[int]) -> set:
    """Methods worth real runs: all, or the `best` fastest predicted feasible ones plus the
    single device, the reference any placement has to beat."""
    if best is None:
        return {row["method"] for row in rows}
    feasible = sorted((row["predicted_s"], row["method"]) for row in rows
                      if row["status"] == "ok")
    return {method for _, method in feasible[:best]} | {"single"}


def _rank(table: pd.DataFrame) -> None:
    """vs_best: step time over the best feasible method's; vs_lower_bound: over the bound."""
    methods = table["method"] != LOWER_BOUND
    feasible = methods & (table["status"] == "ok")
    best = table[feasible].groupby(["graph", "devices"])["step_s"].min()
    keys = list(zip(table["graph"], table["devices"]))
    table["vs_best"] = [step / best.get(key, np.nan) for step, key in zip(table["step_s"], keys)]
    table["vs_lower_bound"] = table["step_s"] / table["lower_bound_s"]


def _check_honest(table: pd.DataFrame, simulated: bool) -> None:
    if not simulated:
        return
    below = table[(table["method"] != LOWER_BOUND)
                  & (table["predicted_s"] < table["lower_bound_s"] * (1 - 1e-9))]
    if len(below):
        row = below.iloc[0]
        raise AssertionError(f"{row['method']} on {row['graph']} ({row['devices']} devices) "
                             f"simulates below the lower bound: {row['predicted_s']} s < "
                             f"{row['lower_bound_s']} s")


def printable(table: pd.DataFrame) -> str:
    """The table as people read it: milliseconds, ratios, MiB."""
    in_flight = table.attrs.get("in_flight")
    per_step = "" if in_flight is None else f" per step, {in_flight} in flight"
    shown = pd.DataFrame({
        "graph": table["graph"], "devices": table["devices"], "method": table["method"],
        f"step (ms){per_step}": table["step_s"] * 1e3,
        "spread (ms)": table["spread_s"] * 1e3,
        "predicted (ms)": table["predicted_s"] * 1e3,
        "x best": table["vs_best"], "x bound": table["vs_lower_bound"],
        "decide (s)": table["decide_s"],
        "peak MiB": table["peak_memory_bytes"] / 2**20,
        "x optimal": table["vs_optimal"],
        "evals to 5%": table["evaluations_to_5pct"],
        "follows objective": table["follows_objective"].map({True: "yes", False: "no"}),
        "status": table["status"],
    })
    if in_flight is None:             # under latency every placer that optimises follows it
        shown = shown.drop(columns=["follows objective"])
    shown = shown.drop(columns=[c for c in ("x optimal", "evals to 5%") if shown[c].isna().all()])
    if (table["runs"].fillna(0) == 0).all():
        shown = shown.drop(columns=["spread (ms)", "predicted (ms)"])
    with pd.option_context("display.width", 200, "display.max_rows", None):
        return shown.to_string(index=False, na_rep="", float_format=lambda v: f"{v:.3f}")
