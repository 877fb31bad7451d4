"""Fitting the simulator's calibration (tf_placeto.measure.costs.calibration) to real step times.

Every real measurement of a graph on a runtime is an observation: a placement (the device of
each op) and its median step, or, for a stream of K steps in flight, its seconds per step
once full. They go to an append-only log beside the profile (OBSERVATIONS_FILE), from the
profile's own calibration runs (`calibrate`: diverse placements timed in turns) and from
every later measurement (`measure`, `place`, `compare`, `optimize()`), so the fit improves
with use (`refresh` refits when the log has grown).

The fit chooses the calibration's parameters that make the simulated steps closest to the
real ones (streams predicted by the simulator's stream mode): least squares on
log(simulated / real), net of how loaded the machine was in each session of runs timed
together (_SessionLoad), robust to a few wild runs (soft L1), with a light pull towards the
profile's own link measurement so that parameters the runs do not tell apart stay where the
profile put them. Real streams fit what one step at a time does not show, the work of a
step that floats to whichever processor is free (calibration.py), and nothing else: fitted
beside the one-step runs for every parameter, they ranked real streams worse
(docs/design/measuring.md, "Streams in the fit"; `measure.bench_stream --fit-streams` compares). Its quality is
measured on placements it was not fitted on (k-fold cross-validation): the rank correlation
and the median relative error of the held-out predictions, beside the same figures of the
uncalibrated simulator.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import uuid
from typing import Optional, Sequence

import numpy as np
from scipy import optimize, stats

from tf_placeto.cache import entry_lock
from tf_placeto.devices import DeviceSet
from tf_placeto.files import append_records, read_records
from tf_placeto.graph.grouping import GroupGraph
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.measurer import (device_indices, simulation_problem,
                                                    written_indices)
from tf_placeto.measure.costs.messages import task_messages
from tf_placeto.measure.runtimes.runner import OK
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.measure.simulator import simulate
from tf_placeto.measure.simulator.stream import (Stream, floating_seconds_per_step_us,
                                                 stream_steps)

log = logging.getLogger(__name__)

OBSERVATIONS_FILE = "observations.jsonl"
CALIBRATION_PLACEMENTS = 16
CALIBRATION_ROUNDS = 7       # at most, each placement once a round (fewer when the budget ends)
FOLDS = 4
MIN_OBSERVATIONS = 4         # fewer: no fit (the simulator stays uncalibrated)
MIN_HELD_OUT = 8             # fewer: no held-out figures
RECENT_OBSERVATIONS = 64     # a refit uses the latest runs only: the fit's time stays bounded
STREAM_OPS_PER_FIT = 3_200_000  # and the latest streams up to this many unrolled ops in all
#                                (31 streams of 4 of the 6,391-op NMT, each simulated once a fit)
FIT_ITERATIONS = 40          # least-squares steps (each simulates every run ~8 times: the
#                              numerical Jacobian is not counted by scipy's max_nfev)
# Fitted parameters: (name, unit the optimizer steps in, lower, upper bound in that unit).
# bytes_per_us is fitted as its inverse (time per byte, linear in the step) relative to the
# profile's; latency relative to the profile's.
_PARAMETERS = (("compute_scale", 1.0, 0.25, 4.0), ("remote_task_us", 1000.0, 0.0, 100.0),
               ("copy_us", 100.0, 0.0, 100.0), ("iteration_us", 1000.0, 0.0, 100.0),
               ("message_us", 100.0, 0.0, 100.0),
               ("latency", 1.0, 0.0, 20.0), ("time_per_byte", 1.0, 0.01, 100.0),
               ("copy_share", 0.5, 0.0, 1.0))
# The streams' own parameters (calibration.py), searched on a grid: a step's figure is flat in
# them until the floating work outgrows the devices' schedule, where a gradient sees nothing.
FLOATING_STEPS = 81          # floating_us from 0 to FLOATING_MAX_STEPS x the median real step
FLOATING_MAX_STEPS = 4.0
FLOATING_MESSAGE_US = np.arange(0.0, 501.0, 12.5)
PRIOR_WEIGHT = 0.03          # pull of each parameter towards its start, against one run's log error


@dataclasses.dataclass
class Observation:
    assignment: list             # device index of each op (graph order) in the runtime's devices
    step_s: float                # real median step
    label: str = ""
    origin: str = ""             # what measured it: profile, measure, place, compare or train
    session: str = ""            # runs timed in turns together share one (none: logged before)
    in_flight: int = 0           # a stream's steps in flight (step_s: per step, once full)


def record(directory: Optional[str], graph: OpGraph, devices: DeviceSet, placements,
           results, origin: str) -> int:
    """Append the real, successful `results` of `placements` (None: as written) to the log in
    `directory`, streams with their steps in flight; returns how many. They are written
    whole, on a line of their own (files.append_records): a killed run tears at most the
    last, which `read` skips."""
    if directory is None:
        return 0
    written = written_indices(graph, devices)
    session = uuid.uuid4().hex[:12]
    records = [dataclasses.asdict(Observation(
        device_indices(graph, devices, placement, written).tolist(),
        float(result.step_time_s), result.label, origin, session, int(result.stream or 0)))
        for placement, result in zip(placements, results)
        if result.status == OK and not result.simulated and np.isfinite(result.step_time_s)]
    append_records(os.path.join(directory, OBSERVATIONS_FILE), records)
    return len(records)


def read(directory: str, n_ops: int, n_devices: Optional[int] = None) -> list:
    """The observations logged in `directory` for a graph of `n_ops` ops (on `n_devices`
    devices, where given). Lines that are not observations (torn by a killed run, damaged)
    are skipped, named in one line and dropped from the log (files.read_records)."""
    observations = [Observation(**record) for record in
                    read_records(os.path.join(directory, OBSERVATIONS_FILE), _an_observation)]
    return [o for o in observations if len(o.assignment) == n_ops
            and (n_devices is None or max(o.assignment, default=0) < n_devices)]


def _an_observation(record: dict) -> bool:
    """Whether a line of the log is an Observation as `record` writes one."""
    observation = Observation(**record)
    return (all(type(device) is int and device >= 0 for device in observation.assignment)
            and type(observation.step_s) in (int, float) and math.isfinite(observation.step_s)
            and observation.step_s > 0 and type(observation.in_flight) is int
            and observation.in_flight >= 0
            and all(isinstance(text, str) for text in (observation.label, observation.origin,
                                                       observation.session)))


class _Predictor:
    """Simulated steps (seconds) of observed placements under any calibration; a fit
    simulates every observation hundreds of times, so their placements are arrays once, and
    TensorFlow's messages of each are counted once (kept in `directory`, the profile's)."""

    def __init__(self, graph: OpGraph, cost_model: CostModel, devices: DeviceSet,
                 directory: Optional[str] = None):
        self.base = simulation_problem(graph, cost_model, devices, calibrated=False)
        self.executions = cost_model.executions(graph)
        off = ~np.eye(self.base.n_devices, dtype=bool)
        self.latency_us = float(np.median(self.base.link_latency_us[off])) if off.any() else 0.0
        self.bytes_per_us = float(np.median(self.base.link_bytes_per_us[off])) \
            if off.any() else np.inf
        self.copy_share = float(np.median(self.base.link_copy_share[off])) if off.any() else 0.0
        self.messages = task_messages(graph, devices.names, cost_model, directory)

    def predict(self, calibration: Optional[Calibration], placements,
                in_flight: Sequence[int] = ()) -> np.ndarray:
        """placements: device index arrays (`_placements(observations)`); in_flight: each
        one's steps in flight (0, or none given: one step), as the observations' figures."""
        problem, results, messages, flows = self._simulated(calibration, placements, in_flight)
        steps = np.array([r.step_time_us for r in results])
        if calibration is not None:
            steps += calibration.message_us * (messages - [r.task_transfers for r in results])
        for i, flow in flows.items():
            steps[i] = 1e6 / flow.steps_per_s
        return steps / 1e6

    def stream_parts(self, calibration: Calibration, placements, in_flight) -> tuple:
        """Per stream (in_flight > 0 each), what its seconds per step are made of under
        `calibration` (simulator.stream.floating_seconds_per_step_us, less the floating
        work): (schedule_us, work_us, messages, n_devices) arrays."""
        problem, _, messages, flows = self._simulated(calibration, placements, in_flight)
        return tuple(np.array(column, float) for column in zip(*[
            (flow.schedule_us, flow.work_us, messages[i], problem.n_devices)
            for i, flow in sorted(flows.items())]))

    def _simulated(self, calibration: Optional[Calibration], placements, in_flight) -> tuple:
        """(problem, one-step results, messages between tasks of each step, {index: stream
        result} of the streams among them) under `calibration`; the messages are TensorFlow's
        count where it is made (calibrated), else the simulator's transfers."""
        problem = self.base if calibration is None else calibration.apply(
            self.base, self.executions)
        results = [simulate(problem, p) for p in placements]
        transfers = [r.task_transfers for r in results]
        messages = self.messages.sent(placements, transfers) \
            if self.messages is not None and calibration is not None \
            else np.asarray(transfers, float)
        streams, flows = {}, {}
        for i, k in enumerate(in_flight):
            if k:
                if k not in streams:
                    streams[k] = Stream(problem, k)     # unrolled once per call
                flows[i] = streams[k].simulate(placements[i], int(messages[i]))
        return problem, results, messages, flows

    def start(self) -> Calibration:
        """The profile as it stands: its links, nothing more."""
        return Calibration(latency_us=self.latency_us, bytes_per_us=self.bytes_per_us,
                           copy_share=self.copy_share)

    def to_vector(self, calibration: Calibration) -> np.ndarray:
        values = {**dataclasses.asdict(calibration),
                  "latency": (calibration.latency_us or 0.0) / max(self.latency_us, 1.0),
                  "time_per_byte": self.bytes_per_us / (calibration.bytes_per_us or np.inf)
                  if np.isfinite(self.bytes_per_us) else 1.0}
        return np.array([np.clip(values[name] / unit, low, high)
                         for name, unit, low, high in _PARAMETERS])

    def from_vector(self, x: np.ndarray) -> Calibration:
        values = {name: value * unit for (name, unit, _, _), value in zip(_PARAMETERS, x)}
        bytes_per_us = self.bytes_per_us / max(values.pop("time_per_byte"), 1e-9)
        latency = values.pop("latency") * max(self.latency_us, 1.0)
        return Calibration(**values, latency_us=latency, bytes_per_us=bytes_per_us)


def _placements(observations) -> list:
    return [np.asarray(o.assignment, np.int64) for o in observations]


def _in_flight(observations) -> list:
    return [o.in_flight for o in observations]


def fit(graph: OpGraph, cost_model: CostModel, devices: DeviceSet, observations: Sequence,
        start: Optional[Calibration] = None, iterations: int = FIT_ITERATIONS,
        directory: Optional[str] = None) -> Calibration:
    """The calibration under which the simulator best predicts `observations` (no held-out
    figures: see `held_out`). directory: the profile's, whose counts of TensorFlow's
    messages are reused (messages.py)."""
    if len(observations) < MIN_OBSERVATIONS:
        raise ValueError(f"a fit needs at least {MIN_OBSERVATIONS} real runs, "
                         f"not {len(observations)}")
    return _fit(_Predictor(graph, cost_model, devices, directory), observations, start,
                iterations)


def _fit(predictor: _Predictor, observations, start, iterations) -> Calibration:
    """The one-step runs fit the parameters (all runs where fewer than MIN_OBSERVATIONS are
    one-step), then the streams alone fit their own, the floating work (_fit_floating):
    fitted beside the one-step runs for every parameter, streams moved the one-step ones and
    ranked real streams worse (docs/results/throughput.md, "Streams fitted for every
    parameter")."""
    one_step = [o for o in observations if not o.in_flight]
    streams = [o for o in observations if o.in_flight]
    fitted = _fit_once(predictor, one_step if len(one_step) >= MIN_OBSERVATIONS
                       else observations, start, iterations)
    if streams:
        fitted = _fit_floating(predictor, streams, fitted)
    return dataclasses.replace(fitted, observations=len(observations))


def _fit_floating(predictor: _Predictor, streams, calibration: Calibration) -> Calibration:
    """`calibration` with the floating work per step and per message (simulator.stream) that
    best predicts the real `streams`, by the fit's loss, on a grid (FLOATING_*): each
    stream's schedule is simulated once, as the floating work only bounds it from below."""
    parts = predictor.stream_parts(calibration, _placements(streams), _in_flight(streams))
    real = np.log([o.step_s * 1e6 for o in streams])
    load = _SessionLoad(streams)
    per_step = np.linspace(0.0, FLOATING_MAX_STEPS * float(np.exp(np.median(real))),
                           FLOATING_STEPS)
    best = (np.inf, 0.0, 0.0)
    for floating_us in per_step:
        for message_us in FLOATING_MESSAGE_US:
            predicted = floating_seconds_per_step_us(*parts, floating_us, message_us)
            errors = load.remove(np.log(predicted) - real) / 0.1
            loss = float(np.sum(2 * (np.sqrt(1 + errors ** 2) - 1)))    # soft L1, as least
            if loss < best[0] - 1e-9:                                    # squares has it
                best = (loss, floating_us, message_us)
    return dataclasses.replace(calibration, floating_us=float(best[1]),
                               floating_message_us=float(best[2]))


def _fit_once(predictor: _Predictor, observations, start, iterations) -> Calibration:
    real = np.log([o.step_s for o in observations])
    placements, in_flight = _placements(observations), _in_flight(observations)
    prior = predictor.to_vector(predictor.start())
    x0 = predictor.to_vector(start or predictor.start())
    load = _SessionLoad(observations)

    def residuals(x):
        simulated = np.log(np.maximum(predictor.predict(predictor.from_vector(x),
                                                        placements, in_flight), 1e-9))
        return np.concatenate([load.remove(simulated - real), PRIOR_WEIGHT * (x - prior)])

    bounds = ([low for *_, low, _ in _PARAMETERS], [high for *_, high in _PARAMETERS])
    solution = optimize.least_squares(residuals, x0, bounds=bounds, loss="soft_l1",
                                      f_scale=0.1, diff_step=0.05, max_nfev=iterations)
    return dataclasses.replace(predictor.from_vector(solution.x),
                               observations=len(observations))


class _SessionLoad:
    """How loaded the machine was in each session of runs, taken out of a fit's errors.

    A shared machine runs a whole session (placements timed in turns) faster or slower than
    another: its load scales every step alike. Left in, a session of split placements timed
    on a busy machine reads as splitting being dear. So each session's mean log error,
    less the mean over all runs, is its load, and a run's error is counted net of it: the
    parameters are fitted to differences within sessions, their level to all runs. Runs
    logged without a session keep their error whole.
    """

    def __init__(self, observations):
        names = [o.session for o in observations]
        known = sorted({name for name in names if name})
        self.session = np.array([known.index(n) if n else len(known) for n in names])
        self.sessions = len(known)

    def remove(self, errors: np.ndarray) -> np.ndarray:
        if self.sessions == 0:
            return errors
        counts = np.bincount(self.session, minlength=self.sessions + 1)
        means = np.bincount(self.session, errors, self.sessions + 1) / np.maximum(counts, 1)
        load = np.append(means[:-1] - errors.mean(), 0.0)
        return errors - load[self.session]


def accuracy(predicted, real) -> dict:
    """Rank correlation (Spearman) and median relative error of predictions."""
    predicted, real = np.asarray(predicted), np.asarray(real)
    rho = float(stats.spearmanr(predicted, real).statistic) if len(real) > 2 else float("nan")
    return {"spearman": rho, "median_error": float(np.median(np.abs(predicted / real - 1)))}


def held_out(graph: OpGraph, cost_model: CostModel, devices: DeviceSet, observations,
             folds: int = FOLDS, seed: int = 0, iterations: int = FIT_ITERATIONS) -> dict:
    """How well the fit predicts runs it did not see: each fold is predicted by a fit to the
    others. {"calibrated": accuracy, "uncalibrated": accuracy, "runs": n, "folds": k}, the
    accuracies over the one-step runs; where streams were logged beside them, "streams" holds
    theirs ({"calibrated", "uncalibrated", "runs"}): a stream's seconds per step and a
    step's time are different quantities, and one rank correlation over both would mostly
    rank the kinds."""
    return _held_out(_Predictor(graph, cost_model, devices), observations, folds, seed,
                     iterations)


def _held_out(predictor: _Predictor, observations, folds: int = FOLDS, seed: int = 0,
              iterations: int = FIT_ITERATIONS) -> dict:
    real = np.array([o.step_s for o in observations])
    placements, in_flight = _placements(observations), _in_flight(observations)
    fold_of = np.random.default_rng(seed).permutation(len(observations)) % folds
    predicted = np.empty(len(observations))
    for fold in range(folds):
        train = [o for o, f in zip(observations, fold_of) if f != fold]
        test = [p for p, f in zip(placements, fold_of) if f == fold]
        predicted[fold_of == fold] = predictor.predict(
            _fit(predictor, train, None, iterations), test,
            [k for k, f in zip(in_flight, fold_of) if f == fold])
    uncalibrated = predictor.predict(None, placements, in_flight)
    streams = np.array(in_flight, bool)
    kinds = {kind: np.flatnonzero(mask) for kind, mask in (("one step", ~streams),
                                                          ("streams", streams)) if mask.any()}

    def scored(rows: np.ndarray) -> dict:
        return {"calibrated": accuracy(predicted[rows], real[rows]),
                "uncalibrated": accuracy(uncalibrated[rows], real[rows]), "runs": len(rows)}

    main = kinds.get("one step", kinds.get("streams"))
    quality = {**scored(main), "runs": len(observations), "folds": folds}
    if len(kinds) == 2:
        quality["streams"] = scored(kinds["streams"])
    return quality


def calibration_placements(groupings: Sequence[GroupGraph], devices: Sequence[str],
                           count: int = CALIBRATION_PLACEMENTS, seed: int = 0,
                           decided: Sequence = ()) -> list:
    """[(label, {op: device})]: every op on each device, contiguous splits of the first
    grouping at 25/50/75% of its work, the `decided` ones (label, placement), then random
    placements over each grouping in turn, leaning to the first or the last device by a
    random amount: diverse in how much is split and how finely. No placement twice."""
    groups = groupings[0]
    work = groups.work
    done = (work.cumsum() - work / 2) / max(work.sum(), 1e-12)
    choices = [(f"all on {d}", groups.placement_for([d] * len(groups))) for d in devices]
    if len(devices) > 1:
        for fraction in (0.25, 0.5, 0.75):
            cut = [devices[0] if x < fraction else devices[-1] for x in done]
            choices.append((f"split at {fraction:.0%} of the work", groups.placement_for(cut)))
    choices += list(decided)
    rng = np.random.default_rng(seed)
    seen = {tuple(sorted(placement.items())) for _, placement in choices}
    for attempt in range(20 * count):
        if len(choices) >= count or len(devices) < 2:
            break
        grouping = groupings[attempt % len(groupings)]
        lean = rng.uniform(0.1, 0.9)
        picks = [devices[int(rng.random() > lean)] if len(devices) == 2
                 else devices[rng.integers(len(devices))] for _ in range(len(grouping))]
        placement = grouping.placement_for(picks)
        key = tuple(sorted(placement.items()))
        if key not in seen:
            seen.add(key)
            choices.append((f"random #{len(choices)} ({len(grouping)} groups)", placement))
    return choices[:count]


def calibrate(graph: OpGraph, cost_model: CostModel, runtime: Runtime, directory: str,
              placements: Sequence, budget_s: float = 60.0) -> Optional[Calibration]:
    """Time `placements` ([(label, placement)]) for real in turns (at most CALIBRATION_ROUNDS
    rounds, fewer once `budget_s` has passed), log them, fit, and set the fit (with its
    held-out figures) on `cost_model`; None if too few ran."""
    devices = DeviceSet.from_strings(runtime.device_names)
    labels = [label for label, _ in placements]
    chosen = [placement for _, placement in placements]
    log.info(f"timing {len(chosen)} placements in turns to calibrate the simulator")
    results = measure_interleaved(graph, runtime, chosen, labels, repeats="auto",
                                  budget_s=budget_s, max_rounds=CALIBRATION_ROUNDS, trace=False,
                                  journal_dir=directory)
    for result in results:
        if result.status != OK:
            log.warning(f"calibration run {result.label!r} failed: {result.reason}")
    record(directory, graph, devices, chosen, results, "profile")
    return refresh(graph, cost_model, devices, directory, force=True)


def fitted_on(logged: list) -> list:
    """What a fit takes of the log: the latest RECENT_OBSERVATIONS one-step runs, then the
    latest streams whose unrolled ops (ops x steps of each) come to at most
    STREAM_OPS_PER_FIT (a stream costs its fit as much as all its steps), so streams never
    push one-step runs out. Of each, only runs timed in a known session once there are
    enough of them: a run logged without one cannot be counted net of its load."""
    def latest(runs):
        in_sessions = [o for o in runs if o.session]
        return in_sessions if len(in_sessions) >= MIN_OBSERVATIONS else runs

    streams, kept, ops = latest([o for o in logged if o.in_flight]), [], 0
    for stream in reversed(streams):
        ops += len(stream.assignment) * stream_steps(stream.in_flight)
        if ops > STREAM_OPS_PER_FIT:
            break
        kept.insert(0, stream)
    return latest([o for o in logged if not o.in_flight])[-RECENT_OBSERVATIONS:] + kept


def refresh(graph: OpGraph, cost_model: CostModel, devices: DeviceSet, directory: str,
            force: bool = False) -> Optional[Calibration]:
    """Refit when the log holds runs the calibration has not seen (or `force`), store the fit
    beside the profile and set it on `cost_model`; the calibration in use either way.

    The held-out check (FOLDS fits more; one fit on 40 runs of the Inception-V3 training
    step takes about 7 s) runs when forced, as `calibrate` does, and when the calibration
    has no figures yet (a first fit from logged runs, or one after a new version dropped the
    stored fit); any other refit on a command's way in keeps the quality last measured,
    whose `runs` says on what. A fit holds the cache entry's lock, and one that waited for
    it takes the calibration another process has just fitted on these runs."""
    logged = read(directory, len(graph.ops), len(devices))
    current = cost_model.calibration
    if len(logged) < MIN_OBSERVATIONS or (
            not force and current is not None and current.observations >= len(logged)):
        return current
    with entry_lock(directory, "another fit of this profile's calibration"):
        stored = Calibration.load(directory)
        if not force and stored is not None and stored.observations >= len(logged):
            cost_model.calibration = stored
            return stored
        return _refit(graph, cost_model, devices, directory, logged, force)


def _refit(graph: OpGraph, cost_model: CostModel, devices: DeviceSet, directory: str,
           logged: list, force: bool) -> Calibration:
    """refresh's fit on the runs `logged`, stored and set on `cost_model`."""
    current = cost_model.calibration
    observations = fitted_on(logged)
    log.info(f"fitting the simulator to {len(observations)} real runs")
    predictor = _Predictor(graph, cost_model, devices, directory)
    calibration = _fit(predictor, observations, current, FIT_ITERATIONS)
    measured = current is not None and bool(current.quality)
    checked = (force or not measured) and len(observations) >= MIN_HELD_OUT
    quality = _held_out(predictor, observations) if checked else (
        current.quality if current is not None else {})
    calibration = dataclasses.replace(calibration, quality=quality, observations=len(logged))
    calibration.save(directory)
    cost_model.calibration = calibration
    if checked:
        for line in quality_lines(quality):
            log.info(f"simulator fitted on {quality['runs']} real runs: {line}")
    return calibration


def quality_lines(quality: dict) -> list:
    """The held-out figures of `held_out` in words, a line per kind of run."""
    steps = "single steps" if quality.get("streams") else "runs"
    lines = []
    for kind, figures in ((steps, quality), ("streams", quality.get("streams"))):
        if figures:
            after, before = figures["calibrated"], figures["uncalibrated"]
            lines.append(
                f"on {kind} it was not fitted on ({quality['folds']}-fold): Spearman "
                f"{after['spearman']:.2f}, median error {after['median_error']:.0%} "
                f"(uncalibrated: {before['spearman']:.2f}, {before['median_error']:.0%})")
    return lines
