"""The fit itself: the calibration (tf_placeto.measure.costs.calibration) under which the
simulator best predicts observed real steps, and how well it predicts runs it did not see.

Least squares on log(simulated / real) (streams predicted by the simulator's stream mode), net
of how loaded the machine was in each session of runs timed together (_SessionLoad), robust
to a few wild runs (soft L1), with a light pull towards the profile's own link measurement so
that parameters the runs do not tell apart stay where the profile put them. Real streams fit
what one step at a time does not show, the work of a step that floats to whichever processor
is free (calibration.py), and nothing else: fitted beside the one-step runs for every
parameter, they ranked real streams worse (docs/design/measuring.md, "Streams in the fit";
`measure.bench_stream --fit-streams` compares). Its quality is measured on placements it was
not fitted on (k-fold cross-validation): the rank correlation and the median relative error of
the held-out predictions, beside the same figures of the uncalibrated simulator. Which runs
to fit on, and when, is fitting.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
from scipy import optimize, stats

from tf_placeto.devices import DeviceSet
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.measure.costs.messages import task_messages
from tf_placeto.measure.evaluation.measurer import simulation_problem
from tf_placeto.measure.simulator import simulate
from tf_placeto.measure.simulator.stream import Stream, floating_seconds_per_step_us

FOLDS = 4
MIN_OBSERVATIONS = 4         # fewer: no fit (the simulator stays uncalibrated)
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


class Predictor:
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
    return fit_with(Predictor(graph, cost_model, devices, directory), observations, start,
                    iterations)


def fit_with(predictor: Predictor, observations, start, iterations) -> Calibration:
    """`fit` with a Predictor made before (a refit and its held-out check share one). The
    one-step runs fit the parameters (all runs where fewer than MIN_OBSERVATIONS are
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


def _fit_floating(predictor: Predictor, streams, calibration: Calibration) -> Calibration:
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


def _fit_once(predictor: Predictor, observations, start, iterations) -> Calibration:
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
    return held_out_with(Predictor(graph, cost_model, devices), observations, folds, seed,
                         iterations)


def held_out_with(predictor: Predictor, observations, folds: int = FOLDS, seed: int = 0,
                  iterations: int = FIT_ITERATIONS) -> dict:
    """`held_out` with a Predictor made before."""
    real = np.array([o.step_s for o in observations])
    placements, in_flight = _placements(observations), _in_flight(observations)
    fold_of = np.random.default_rng(seed).permutation(len(observations)) % folds
    predicted = np.empty(len(observations))
    for fold in range(folds):
        train = [o for o, f in zip(observations, fold_of) if f != fold]
        test = [p for p, f in zip(placements, fold_of) if f == fold]
        predicted[fold_of == fold] = predictor.predict(
            fit_with(predictor, train, None, iterations), test,
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
