"""The log of real runs that the simulator's calibration (tf_placeto.measure.costs.calibration)
is fitted to, and when it is fitted.

Every real measurement of a graph on a runtime is an observation: a placement (the device of
each op) and its median step, or, for a stream of K steps in flight, its seconds per step
once full. They go to an append-only log beside the profile (OBSERVATIONS_FILE), from the
profile's own calibration runs (`calibrate`: diverse placements timed in turns) and from
every later measurement (`measure`, `place`, `compare`, `optimize()`), so the fit improves
with use (`refresh` refits when the log has grown, on its latest runs: `fitted_on`). The fit
itself, and its held-out figures, are regression.py's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import uuid
from typing import Optional, Sequence

import numpy as np

from tf_placeto.cache import entry_lock
from tf_placeto.devices import DeviceSet
from tf_placeto.graph.grouping import GroupGraph
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.measurer import device_indices, written_indices
from tf_placeto.measure.profiling.regression import (FIT_ITERATIONS, MIN_OBSERVATIONS,
                                                     Predictor, fit_with, held_out_with)
from tf_placeto.measure.runtimes.runner import OK
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.measure.simulator.stream import stream_steps
from tf_placeto.records import append_records, read_records

log = logging.getLogger(__name__)

OBSERVATIONS_FILE = "observations.jsonl"
CALIBRATION_PLACEMENTS = 16
CALIBRATION_ROUNDS = 7       # at most, each placement once a round (fewer when the budget ends)
MIN_HELD_OUT = 8             # fewer: no held-out figures
RECENT_OBSERVATIONS = 64     # a refit uses the latest runs only: the fit's time stays bounded
STREAM_OPS_PER_FIT = 3_200_000  # and the latest streams up to this many unrolled ops in all
#                                (31 streams of 4 of the 6,391-op NMT, each simulated once a fit)


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
    whole, on a line of their own (records.append_records): a killed run tears at most the
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
    are skipped, named in one line and dropped from the log (records.read_records)."""
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

    The held-out check (regression.FOLDS fits more; one fit on 40 runs of the Inception-V3 training
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
    predictor = Predictor(graph, cost_model, devices, directory)
    calibration = fit_with(predictor, observations, current, FIT_ITERATIONS)
    measured = current is not None and bool(current.quality)
    checked = (force or not measured) and len(observations) >= MIN_HELD_OUT
    quality = held_out_with(predictor, observations) if checked else (
        current.quality if current is not None else {})
    calibration = dataclasses.replace(calibration, quality=quality, observations=len(logged))
    calibration.save(directory)
    cost_model.calibration = calibration
    if checked:
        for line in quality_lines(quality):
            log.info(f"simulator fitted on {quality['runs']} real runs: {line}")
    return calibration


def quality_lines(quality: dict) -> list:
    """The held-out figures of `regression.held_out` in words, a line per kind of run."""
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
