"""The one pipeline behind every surface that places a graph.

    source -> workload (import, group, profile) -> decisions -> the best few and the graph as
    written measured for real, in turns -> the fastest measured again in new sessions -> the
    placement kept only if faster beyond the noise both times

`tf_placeto.place()` and the `tf-placeto place` command write the kept placement into a copy
of the source; `tf_placeto.optimize()` runs it around the caller's tf.function. Under the
throughput objective every step above is about a stream of steps in flight: the decisions,
the prediction and the real measurement (each round a stream, seconds per step once full).
Both run these steps here, in this order, so that what one surface decides the other decides
too. The simulator ranks the decisions but does not have the last word: on models it was not
tuned on it has predicted gains for placements that ran several times slower.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping, Optional

import numpy as np

from tf_placeto.devices import DeviceSet, canonical_device
from tf_placeto.errors import DeviceError
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.measurer import (SimulatedMeasurer, device_indices,
                                                    written_indices)
from tf_placeto.measure.evaluation.noise import CONFIDENCE, rounds_for
from tf_placeto.measure.runtimes.runner import OK
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.placement import Placement
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.run import PlacerResult
from tf_placeto.settings import Search, Target
from tf_placeto.workload import Workload, load_workload

log = logging.getLogger(__name__)

LABELS = ("as written", "placed")
# The placements `run` measures for real beside the graph as written: the best few by
# simulation, each from a different placer, so that one mispredicted placer cannot lose it all;
# then, up to MAX_MEASURED_CANDIDATES, those the simulator cannot tell from the best: simulated
# within SIMULATOR_ERROR of it, the median error the calibrated simulator is held to on split
# placements (docs/results/simulator.md, "The benchmark and its targets").
MEASURED_CANDIDATES = 3
MAX_MEASURED_CANDIDATES = 5
SIMULATOR_ERROR = 0.15
MEASURE_BUDGET_S = 60.0
# The fastest candidate is measured again in this many sets of new sessions, their rounds
# pooled: one session of a split can run slower than another for as long as it is open (up
# to 1 in 5 of the branches model's), and one such session alone kept a split that ran 0.73x
# in place's turns from being written (docs/results/sessions.md, "The second measurement in
# three sets of new sessions").
CONFIRM_SESSIONS = 3
# A calibrated charge under this is none: the fit leaves unused parameters near 0, not at it.
NO_CHARGE_US = 1.0


@dataclasses.dataclass
class Outcome:
    """What the pipeline found for one source on one runtime.

    `placement` is what a surface should write: the candidate measured faster than the graph
    as written beyond the noise, or, without a real measurement, the best simulated one when
    it changes something. It is None otherwise: the graph stays as written.
    """

    workload: Workload
    problem: PlacementProblem
    decided: PlacerResult
    placement: Optional[Placement]      # every op of the graph -> its device, or None
    predicted: list                     # [as written, placed] simulated MeasureResults
    measured: Optional[list] = None     # real MeasureResults: as written, then each candidate
    candidates: list = dataclasses.field(default_factory=list)   # PlacerResults measured
    # the fastest candidate (index into candidates) measured again against the graph as
    # written, in new sessions: [as written, that candidate] real MeasureResults
    again: Optional[int] = None
    confirmed: Optional[list] = None
    winner: Optional[int] = None        # index into candidates of the placement chosen
    verdict: str = ""                   # one line: what won, or why nothing did
    # what caps any placement's gain (_limits): the JSON summary's bound_saving and, on a
    # cluster, split_cost_s and message_cost_s
    limits: dict = dataclasses.field(default_factory=dict)

    @property
    def devices(self) -> DeviceSet:
        """The devices of the problem."""
        return DeviceSet.from_strings(self.problem.device_names)

    @property
    def measured_before_after(self) -> Optional[list]:
        """[as written, what is written] real results (the same twice when nothing won)."""
        if not self.measured:
            return None
        after = self.measured[0] if self.winner is None else self.measured[1 + self.winner]
        return [self.measured[0], after]


def run(source, target: Optional[Target] = None, method: str = "auto",
        search: Optional[Search] = None, *, measure: bool = True,
        pins: Optional[Mapping[str, str]] = None, n_devices: Optional[int] = None,
        link: Optional[Link] = None, measure_budget_s: float = MEASURE_BUDGET_S) -> Outcome:
    """Place `source` (a path, or a graph.sources.Source) with `method` on the devices of
    `target` (default: this machine's), or on simulated devices like them (Workload.problem:
    `n_devices` of them, default as many, joined by `link` if given instead of the measured
    links), and predict the step as written and as placed. With `measure`, the best few
    decisions by simulation (method auto: from different placers) and the graph as
    written are timed for real, in turns (tf_placeto.measure.evaluation.interleaved), and a
    decision is kept only if it is faster than the graph as written beyond the noise: the
    whole 95% interval of its round-by-round ratio lies under 1. That takes at least six rounds
    (noise.rounds_for), which run even when `measure_budget_s` has passed. The fastest such
    candidate (or, where the rounds cannot tell it from one simulated faster, that one:
    _faster_beyond_noise) is then measured again against the graph as written, in
    CONFIRM_SESSIONS sets of new sessions, and kept only if it wins again over their pooled
    rounds: one session of a graph can run faster than another of the same graph for as
    long as it is open (docs/results/sessions.md, "One session is one draw"), which no
    interval over the rounds of one session sees.

    search: the groups, seed, objective and placer options (settings.Search); under the
    throughput objective the placers optimise, the simulator predicts and the real runs time
    a stream of steps in flight. pins: {op name: device} for ops that must stay where they
    are (a tf.function's variables live on their caller's devices).
    """
    target, search = target or Target(), search or Search()
    with target.open() as runtime:
        workload = load_workload(source, runtime, max_groups=search.max_groups,
                                 cache=target.cache)
        problem = workload.problem(n_devices, target.memory, link).with_objective(
            search.objective, search.in_flight)
        if pins:
            problem = _pinned(problem, workload, pins)
        return _placed(workload, problem, runtime, method, search, measure, measure_budget_s)


def _placed(workload: Workload, problem: PlacementProblem, runtime: Runtime, method: str,
            search: Search, measure: bool, measure_budget_s: float) -> Outcome:
    """The outcome of placing `problem` on `runtime` (see `run`)."""
    log.info("placing %d groups on %d devices with %s", len(workload.groups),
             problem.n_devices, method)
    decided = workload.decide(method, problem, seed=search.seed, options=dict(search.options))
    placed = [(decision, Placement(problem.placement(decision.group_devices)))
              for decision in _distinct(decided.candidates or [decided])]
    changing = [pair for pair in placed if _changes_something(workload, problem, pair[1])]
    evaluated = [problem.evaluate(decision.group_devices)
                 for decision, _ in changing[:MAX_MEASURED_CANDIDATES]]
    chosen = _to_measure(changing, [e.us_per_step if e.feasible else np.inf for e in evaluated])
    candidates = [decision for decision, _ in chosen]
    placements = [placement for _, placement in chosen]
    # without a measurement, the best simulated decision is written; where it is the graph
    # as written (method auto found nothing faster), a worse one that changes something is not
    best_changes = bool(changing) and changing[0][0] is placed[0][0]
    outcome = Outcome(workload, problem, decided, placements[0] if best_changes else None,
                      predicted=[], candidates=candidates)
    if measure:
        log.info("measuring the graph as written and %d candidate placements for real, in "
                 "turns", len(candidates))
        outcome.measured = _measure(workload, problem, runtime, [None, *placements],
                                    ["as written", *(c.method for c in candidates)],
                                    measure_budget_s)
        _record(workload, runtime, [None, *placements], outcome.measured)
        best = outcome.again = _faster_beyond_noise(outcome.measured[1:])
        if best is not None:
            log.info("measuring %s again against the graph as written, in new sessions",
                     candidates[best].method)
            outcome.confirmed = _measure(workload, problem, runtime, [None, placements[best]],
                                         ["as written", f"{candidates[best].method}, again"],
                                         measure_budget_s, sessions=CONFIRM_SESSIONS)
            _record(workload, runtime, [None, placements[best]], outcome.confirmed)
            if _faster_beyond_noise(outcome.confirmed[1:]) is not None:
                outcome.winner = best
        outcome.placement = None if outcome.winner is None else placements[outcome.winner]
    measurer = SimulatedMeasurer(workload.graph, outcome.devices, problem.simulation,
                                 stream=problem.steps_in_flight, cost_model=workload.cost_model)
    if outcome.placement is None:          # kept as written: predicted before = after
        outcome.predicted = measurer.evaluate([None], [LABELS[0]]) * 2
    else:
        outcome.predicted = measurer.evaluate([None, outcome.placement], list(LABELS))
    outcome.limits = _limits(problem, outcome.predicted[0])
    # the surfaces say it, once
    outcome.verdict = _timed_as(problem) + (_verdict(outcome) if measure
                                            else _predicted_verdict(outcome))
    if outcome.placement is None:
        outcome.verdict += _why_nothing_helps(outcome)
    return outcome


def _timed_as(problem: PlacementProblem) -> str:
    """How a verdict's figures were taken, as its first words ('' for one step at a time)."""
    in_flight = problem.steps_in_flight
    return f"throughput, {in_flight} steps in flight: " if in_flight else ""


def _measure(workload: Workload, problem: PlacementProblem, runtime: Runtime,
             placements: list, labels: list, budget_s: float, sessions: int = 1) -> list:
    """Real results of `placements` timed in turns, in `sessions` sets of sessions of their
    own, for at least the rounds a 95% interval needs; streams under the throughput
    objective."""
    return measure_interleaved(workload.graph, runtime, placements, labels, budget_s=budget_s,
                               min_rounds=rounds_for(CONFIDENCE), trace=False,
                               journal_dir=workload.profile_dir,
                               stream=problem.steps_in_flight, sessions=sessions)


def _record(workload: Workload, runtime: Runtime, placements: list, results: list) -> None:
    """Log real results for the simulator's fit (tf_placeto.measure.profiling.fitting)."""
    fitting.record(workload.profile_dir, workload.graph,
                   DeviceSet.from_strings(runtime.device_names), placements, results, "place")


def _to_measure(ranked: list, simulated_us: list) -> list:
    """Of `ranked` (best simulated first), the first MEASURED_CANDIDATES, and after them,
    up to MAX_MEASURED_CANDIDATES in all, those whose `simulated_us` (of the first
    MAX_MEASURED_CANDIDATES; inf: over a device's memory, never added) lie within
    SIMULATOR_ERROR of the best: on the branches model the simulator's order of close splits
    was not the real one (docs/results/real-wins.md, "Candidates the simulator cannot
    rank")."""
    best = min(simulated_us, default=np.inf)
    return [item for k, (item, step) in enumerate(zip(ranked, simulated_us))
            if k < MEASURED_CANDIDATES
            or (np.isfinite(step) and step <= best * (1 + SIMULATOR_ERROR))]


def _changes_something(workload: Workload, problem: PlacementProblem,
                       placement: Placement) -> bool:
    """Whether `placement` puts some op elsewhere than the graph as written runs it. One that
    changes nothing cannot be faster: a gain measured for it is noise (bench_real_wins met
    four, x0.90-0.95 in turns, whose written copies were no faster measured again), so it
    is not measured or written."""
    devices = DeviceSet.from_strings(problem.device_names)
    written = written_indices(workload.graph, devices)
    return not np.array_equal(device_indices(workload.graph, devices, placement, written),
                              written)


def _distinct(decisions: list) -> list:
    """The decisions in their order (method auto ranks its candidates by simulated step,
    feasible first), each placement once."""
    seen, distinct = set(), []
    for decision in decisions:
        key = tuple(int(device) for device in decision.group_devices)
        if key not in seen:
            seen.add(key)
            distinct.append(decision)
    return distinct


def _faster_beyond_noise(results: list) -> Optional[int]:
    """The index of the result to keep among those whose ratio to the graph as written has
    its whole interval under 1 with the full confidence (a placement that failed after a
    few rounds has too few for it); None if there is none. That is the one with the
    smallest median ratio, unless the rounds cannot tell it from others of them (their
    ratio's interval holds 1): then the first of those, the results being in simulated
    order, so the simulator decides what the measurement cannot. On the branches model
    hill_climb's split and m_topo's, 5% apart in the simulator, tied in `place`'s turns, and
    the smaller median picked m_topo's in 3 of 6 runs; re-measured apart, m_topo's ran at
    0.73x to 0.79x and hill_climb's at 0.63x to 0.71x (docs/results/hill-climbing.md,
    "Chain moves in the climb")."""
    faster = [(r.ratio_to_first["median"], index) for index, r in enumerate(results)
              if r.status == OK and r.ratio_to_first and r.ratio_to_first["high"] < 1.0
              and r.ratio_to_first["confidence"] >= CONFIDENCE]
    if not faster:
        return None
    fastest = min(faster)[1]
    return min(index for _, index in faster
               if index == fastest or results[index].label in results[fastest].indistinct_from)


def _verdict(outcome: Outcome) -> str:
    """One line: what won, or why nothing did."""
    as_written, *measured = outcome.measured
    if outcome.winner is not None:
        won = measured[outcome.winner]
        return (f"{won.label} is faster than the graph as written: {_ratio(won)} its step, "
                f"and {_ratio(outcome.confirmed[1])} measured again in new sessions")
    if outcome.again is not None:
        first, again = measured[outcome.again], outcome.confirmed[1]
        return (f"{first.label} was faster than the graph as written in turns "
                f"({_ratio(first)}) but not when measured again in new sessions "
                f"({_ratio(again)}): the graph stays as written")
    if as_written.status != OK:
        return f"the graph as written did not run ({as_written.reason}): nothing to compare"
    if not outcome.candidates:
        return ("every candidate runs each op where the graph as written does: the graph "
                "stays as written")
    ratios = [r for r in measured if r.status == OK and r.ratio_to_first]
    if not ratios:
        return "no candidate placement ran: the graph stays as written"
    best = min(ratios, key=lambda r: r.ratio_to_first["median"])
    return (f"no placement was faster than the graph as written beyond the noise (best: "
            f"{best.label}, {_ratio(best)}): the graph stays as written")


def _predicted_verdict(outcome: Outcome) -> str:
    """One line for a run that only simulated: the best predicted placement, when it changes
    something, is kept whatever the simulator says of the graph as written (the user asked
    for that method's placement), and the line says how the two compare."""
    if outcome.placement is None:
        return ("simulated only, nothing measured: the best placement found runs each op "
                "where the graph as written does, so the graph stays as written")
    before, after = outcome.predicted
    if after.status != OK:
        return (f"simulated only, nothing measured: the best placement found does not fit "
                f"({after.reason}); it is kept as asked")
    ratio = after.step_time_s / before.step_time_s
    return (f"simulated only, nothing measured: the best placement found is kept, predicted "
            f"{ratio:.3f}x the step as written"
            + ("" if ratio < 1 else " (no faster: measured for real, the graph would stay as "
                                   "written)"))


def _limits(problem: PlacementProblem, as_written) -> dict:
    """What caps the gain of any placement, from the profile. bound_saving: the most of the
    simulated step as written (`as_written`) that any placement on the problem's devices can
    save, by the lower bound under its objective (PlacementProblem.lower_bound_us). Where the
    devices are in several tasks and the calibration charges for it (NO_CHARGE_US),
    split_cost_s and message_cost_s: what the simulator charges a step per task besides the
    session's and per message between tasks (one step at a time: after its last op, where
    nothing overlaps it)."""
    limits = {}
    if np.isfinite(as_written.step_time_s) and as_written.step_time_s > 0:
        bound_s = problem.lower_bound_us() / 1e6
        # the simulator may end a step within rounding under the bound (compare._check_honest)
        limits["bound_saving"] = max(0.0, 1.0 - bound_s / float(as_written.step_time_s))
    simulation = problem.simulation
    if len(np.unique(simulation.device_task)) > 1 and simulation.remote_task_us >= NO_CHARGE_US:
        limits["split_cost_s"] = float(simulation.remote_task_us) / 1e6
        limits["message_cost_s"] = float(simulation.task_message_us) / 1e6
    return limits


def _why_nothing_helps(outcome: Outcome) -> str:
    """A second sentence for a verdict that keeps the graph as written: what the profile
    says any placement could gain (outcome.limits), against the step as written (measured
    if it was); nothing when the graph as written did not run."""
    as_written = outcome.measured[0] if outcome.measured else outcome.predicted[0]
    if as_written.status != OK:
        return ""
    limits, reasons = outcome.limits, []
    if "bound_saving" in limits:
        saving = limits["bound_saving"]
        most = f"more than {saving:.0%}" if saving >= 0.01 else "even 1%"
        reasons.append(f"the profile's bound: no placement on these {outcome.problem.n_devices}"
                       f" devices can save {most} of the step")
    if "split_cost_s" in limits:
        messages = (f", and each message between tasks {_ms(limits['message_cost_s'])} more"
                    if limits["message_cost_s"] * 1e6 >= NO_CHARGE_US else "")
        reasons.append(f"involving a second task costs {_ms(limits['split_cost_s'])} per step"
                       f"{messages} (calibrated), against a {_ms(as_written.step_time_s)} "
                       f"step")
    if not reasons:
        return ""
    sentence = "; ".join(reasons)
    return f". {sentence[0].upper()}{sentence[1:]}"


def _ms(seconds: float) -> str:
    """A per-step cost as people read it: 3.1 ms, 150 us."""
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} us"


def _ratio(result) -> str:
    """A result's step over the graph as written's with its interval, or why it has none."""
    if result.status != OK or not result.ratio_to_first:
        return f"{result.status}: {result.reason}"
    ratio = result.ratio_to_first
    return f"{ratio['median']:.3f}x ({ratio['low']:.3f} .. {ratio['high']:.3f})"


def _pinned(problem: PlacementProblem, workload: Workload, pins: Mapping[str, str]):
    """Hold each pinned op's group on its device."""
    device_of_group = {}
    for op_name, device in pins.items():
        device = canonical_device(device)
        if device not in problem.device_names:
            raise DeviceError(f"{op_name} must stay on {device}, which is not among the "
                              f"devices {', '.join(problem.device_names)}")
        group = int(workload.groups.group_of[workload.graph.index(op_name)])
        device_of_group[group] = problem.device_names.index(device)
    return problem.with_pins(device_of_group)


def summary_of(results: Optional[list], kind: str) -> dict:
    """JSON-ready before/after figures of [as written, placed] results, keyed by `kind`."""
    if not results:
        return {}
    before, after = results
    return {f"{kind}_before_s": before.step_time_s, f"{kind}_after_s": after.step_time_s,
            f"{kind}_spread_s": [before.spread_s, after.spread_s],
            f"{kind}_status": after.status}

