"""The Python entry points: import a graph, group it, apply a placement, profile, measure,
simulate and place.

Each is the same code path as the matching `tf-placeto` command. What travels together is a
value object: the model and which of its graphs (graph.sources.Source), where it runs
(settings.Target), how the placers search (settings.Search), how real runs are timed
(measure.evaluation.interleaved.Timing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Mapping, Optional, Sequence, Union

from tf_placeto import methods, pipeline
from tf_placeto.devices import DeviceSet
from tf_placeto.errors import InputError
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS, GroupGraph, group_ops
from tf_placeto.graph.importer import import_source
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import Source, load_source
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.costs.costmodel import Link, graph_profile_directory
from tf_placeto.measure.evaluation.interleaved import Timing, measure_interleaved
from tf_placeto.measure.evaluation.measurer import MeasureResult, SimulatedMeasurer
from tf_placeto.measure.profiling.profiler import Profile
from tf_placeto.measure.profiling.profiler import (cached_profile, measure_profile,
                                               profile as profile_graph)
from tf_placeto.measure.evaluation.trace import simulated_trace, write_trace, write_traces
from tf_placeto.pipeline import Outcome, summary_of
from tf_placeto.placement import Placement
from tf_placeto.rewrite import (check_output_path, check_placement_path, placed_proto,
                                write_placed)
from tf_placeto.settings import Search, Target


def import_graph(source, *example_args) -> OpGraph:
    """The op graph of `source`, with function bodies inlined.

    source: a SavedModel directory, a GraphDef/MetaGraphDef file (.pb or .pbtxt),
    "examples:NAME", a tf.function (traced with `example_args`), a ConcreteFunction, a
    GraphDef or a MetaGraphDef; or a Source that also names a SavedModel's signature and
    MetaGraph tag set (default: serving_default, or the only one; "serve", or the only one).
    """
    return import_source(source, *example_args)


def group(graph: OpGraph, max_groups: int = DEFAULT_MAX_GROUPS, op_work=None) -> GroupGraph:
    """Colocation-safe groups of `graph`, at most `max_groups`, as an acyclic group graph."""
    return group_ops(graph, max_groups=max_groups, op_work=op_work)


@dataclasses.dataclass
class ApplyResult:
    placement: Placement      # every op whose device was written, colocation groups whole
    proto: Any                # the placed SavedModel / MetaGraphDef / GraphDef proto
    out: Optional[str]        # where it was written, if anywhere


def apply_placement(source: Union[str, Source, OpGraph, Any], placement: Union[str, Mapping],
                    out: Optional[str] = None, *, devices: Union[None, str, DeviceSet] = None,
                    overwrite: bool = False) -> ApplyResult:
    """Write `placement` into a copy of `source`; the source itself is never modified.

    placement: {op name: device} or the path of such a JSON file. devices: the devices it may
    use (default: this machine's, with the CPU splittable into logical CPUs). out: where to
    write the placed copy, in the source's own kind (SavedModel stays SavedModel); without it
    only the placed proto is returned.
    """
    graph = source if isinstance(source, OpGraph) else None
    loaded = graph.source if graph is not None else load_source(source)
    if out is not None:
        check_output_path(loaded.path, out, overwrite)
    if graph is None:
        graph = import_source(loaded)
    if isinstance(placement, str):
        placement = Placement.from_json(placement)
    elif not isinstance(placement, Placement):
        placement = Placement(placement)
    if not isinstance(devices, DeviceSet):
        devices = DeviceSet.parse(devices)
    full = placement.validate(graph, devices)
    proto = placed_proto(graph.source, graph, full)
    if out is not None:
        write_placed(graph.source, proto, out, overwrite=overwrite)
    return ApplyResult(placement=full, proto=proto, out=out)


def profile(source, target: Optional[Target] = None, *, runs: int = 5,
            calibration_runs: int = fitting.CALIBRATION_PLACEMENTS) -> Profile:
    """The cost model of `source` on `target` (default: this machine's devices): from the
    target's cache, or measured now with `runs` traced runs and stored there, then the
    simulator calibrated on `calibration_runs` placements timed for real (0: not
    calibrated)."""
    target = target or Target()
    graph = import_graph(source)
    found = cached_profile(graph, *target.planned(), target.cache)
    if found is not None:
        return found                    # a cached answer starts no workers
    with target.open() as runtime:
        return measure_profile(graph, runtime, cache=target.cache, runs=runs,
                               calibration_runs=calibration_runs)


def calibration_report(calibration) -> str:
    """In words, how the simulator of a profile (Profile.model.calibration; None: not
    calibrated) was fitted to real runs, and how well it predicts those it was not fitted on."""
    if calibration is None:
        return "simulator: not calibrated (no real runs of placements yet)"
    lines = [f"simulator calibrated on {calibration.observations} real runs: "
             f"{calibration.describe()}"]
    quality = calibration.quality
    if quality:
        lines += fitting.quality_lines(quality)
    return "\n".join(lines)


def measure_steps(source, placements: Sequence[Union[None, str, Mapping]] = (None,),
                  labels: Optional[Sequence[str]] = None, target: Optional[Target] = None, *,
                  simulate: bool = False, timing: Optional[Timing] = None,
                  trace: Optional[str] = None) -> list:
    """Step times of `source` under each placement (None: as written; a dict or a JSON
    file of op -> device), as MeasureResults, on `target` (default: this machine's devices).
    For real, the placements are timed in turns by the rules of `timing`
    (tf_placeto.measure.evaluation.interleaved): each median has an interval, each placement
    its ratio to the first and the placements it cannot be told apart from. With `simulate`,
    predicted from the profile (made first if none is cached). Every placement is checked
    before any long work. trace: a directory that gets one step of each placement as Chrome
    trace JSON, <label>.json (real: a traced run; simulated: its schedule). A stream
    (timing.stream K > 0) runs K steps at once, as a server answers concurrent requests (for
    real: threads over one session per placement), and each figure is seconds per step once
    the stream is full, 1 / steps per second (MeasureResult.stream)."""
    target, timing = target or Target(), timing or Timing()
    if timing.stream and trace:
        raise InputError("a trace shows one step: leave out the stream to write traces")
    with _checked_on_runtime(source, placements, target) as (
            graph, placements, runtime, device_set):
        if simulate:
            model = profile_graph(graph, runtime, cache=target.cache).model
            results = SimulatedMeasurer.from_profile(graph, model, device_set,
                                                     schedule=bool(trace), stream=timing.stream
                                                     ).evaluate(placements, labels=labels)
        else:
            directory = graph_profile_directory(graph, runtime.device_names,
                                                runtime.fingerprint, target.cache)
            results = measure_interleaved(graph, runtime, placements, labels,
                                          journal_dir=directory, **timing.keywords())
            fitting.record(directory, graph, device_set, placements, results, "measure")
    if trace:
        write_traces(results, trace, graph, device_set.names)
    return results


@contextlib.contextmanager
def _checked_on_runtime(source, placements: Sequence[Union[None, str, Mapping]],
                        target: Target):
    """(graph, placements, runtime, its DeviceSet): the source imported, each placement (None:
    as written; a dict or a JSON file) read and checked against the graph and the devices
    before any long work, on the target's runtime (open while the block runs)."""
    placements = [Placement.from_json(p) if isinstance(p, str)
                  else None if p is None else Placement(p) for p in placements]
    graph = import_graph(source)
    named = {device for p in placements if p for device in p.values()}
    with target.open(named=named) as runtime:
        device_set = DeviceSet.from_strings(runtime.device_names)
        for placement in placements:
            if placement:
                placement.validate(graph, device_set)
        yield graph, placements, runtime, device_set


@dataclasses.dataclass
class Simulation:
    """One placement's simulated step (`result`, with its schedule if asked for) and the
    device of every op of `graph`."""

    graph: OpGraph
    result: MeasureResult
    devices: list             # the devices, in order
    op_devices: list          # device of each op of graph, in graph order

    def ops_per_device(self) -> dict:
        counts = dict.fromkeys(self.devices, 0)
        for device in self.op_devices:
            counts[device] += 1
        return counts

    def save_trace(self, path: str) -> str:
        """The simulated schedule (simulate(..., schedule=True)) as a Chrome trace at
        `path`, named as a real run's trace is (measure_steps(trace=...)), to lay beside it."""
        return write_trace(simulated_trace(self.result.schedule, self.devices, self.graph), path)


def simulate(source, placement: Union[None, str, Mapping] = None,
             target: Optional[Target] = None, *, schedule: bool = False) -> Simulation:
    """The predicted step of `source` under `placement` (None: the devices written in it),
    from its profile on `target` (default: this machine's devices; made first if none is
    cached)."""
    target = target or Target()
    with _checked_on_runtime(source, [placement], target) as (
            graph, [placement], runtime, device_set):
        model = profile_graph(graph, runtime, cache=target.cache).model
    measurer = SimulatedMeasurer.from_profile(graph, model, device_set, schedule=schedule)
    [result] = measurer.evaluate([placement], labels=["placed" if placement else "as written"])
    return Simulation(graph, result, device_set.names,
                      [device_set.names[d] for d in measurer.device_indices(placement)])


@dataclasses.dataclass
class PlaceResult:
    """What `place` found: the placement (None when measured and nothing was faster than the
    graph as written), and the step before and after (predicted, measured)."""

    source: str
    outcome: Outcome
    out: Optional[str]
    placement_file: Optional[str]
    link: Optional[Link] = None         # the simulated devices' link, None: the measured ones

    @property
    def placement(self) -> Optional[Placement]:
        return self.outcome.placement

    @property
    def predicted(self) -> list:
        return self.outcome.predicted

    @property
    def measured(self) -> Optional[list]:
        """[as written, as written out] real results, or None."""
        return self.outcome.measured_before_after

    def summary(self) -> dict:
        """A JSON-ready description (what `tf-placeto place --json` prints): with a real
        measurement, every candidate measured with its interval, and which one won; the
        devices placed on, their count and `link` (None: the profile's measured links, their
        median between simulated devices; else the link asked for, as numbers); what caps
        any placement's gain (pipeline.Outcome.limits: `bound_saving`, the most of the step
        any placement can save by the profile's bound, and on a cluster `split_cost_s` and
        `message_cost_s`, what the calibration charges a step per task and per message)."""
        outcome = self.outcome
        info = {k: v.item() if hasattr(v, "item") else v for k, v in outcome.decided.info.items()
                if isinstance(v, (int, float, str, bool)) or hasattr(v, "item")}
        summary = {"source": self.source, "method": outcome.decided.method,
                   "objective": outcome.problem.objective,
                   "in_flight": outcome.problem.steps_in_flight or None,
                   "devices": outcome.problem.device_names,
                   "device_count": outcome.problem.n_devices,
                   "link": None if self.link is None else dataclasses.asdict(self.link),
                   "ops": len(outcome.workload.graph), "groups": len(outcome.workload.groups),
                   "decide_s": outcome.decided.decide_s, "out": self.out,
                   "placement": self.placement_file, "written": outcome.placement is not None,
                   **info, **summary_of(outcome.predicted, "predicted"),
                   **summary_of(outcome.measured_before_after, "measured"), **outcome.limits}
        if outcome.measured:
            summary["measured_candidates"] = [_measured_json(r) for r in outcome.measured]
            if outcome.confirmed:     # the fastest candidate, measured again
                summary["measured_again"] = [_measured_json(r) for r in outcome.confirmed]
            summary["winner"] = (None if outcome.winner is None
                                 else outcome.measured[1 + outcome.winner].label)
        summary["verdict"] = outcome.verdict
        return summary


def _measured_json(result) -> dict:
    """One measured placement: its median with interval, and its ratio to the graph as
    written with interval."""
    interval, ratio = result.interval or {}, result.ratio_to_first or {}
    return {"label": result.label, "status": result.status, "reason": result.reason,
            "runs": result.runs, "median_s": result.step_time_s,
            "low_s": interval.get("low"), "high_s": interval.get("high"),
            "ratio_low": ratio.get("low"), "ratio_median": ratio.get("median"),
            "ratio_high": ratio.get("high")}


def place(source, method: str = "auto", target: Optional[Target] = None,
          search: Optional[Search] = None, *, measure: str = "real",
          n_devices: Optional[int] = None, link: Optional[str] = None, out: Optional[str] = None,
          placement_out: Optional[str] = None, overwrite: bool = False) -> PlaceResult:
    """Find a placement of `source` on `target` and, optionally, write it.

    source: a path, "examples:NAME", or a Source naming a SavedModel's signature and tag set.
    target: where it runs (default: this machine's devices), its memory per device and the
    cache of its profiles (settings.Target); the graph is profiled there (cached). method:
    "auto" (the shipped Placeto policy fine-tuned briefly and the algorithmic placers, best
    simulated step wins) or a name of tf_placeto.methods.names(). search: the groups, the
    seed, the objective ("latency", or "throughput" with steps in flight: what the placers
    optimise, the simulator predicts and the real runs time) and the placers' options
    (settings.Search). measure: "real" times the step as written and the best few candidates
    for real, in turns, and writes a placement only if it is faster than the graph as written
    beyond the noise (otherwise nothing is written, and `placement` is None); "simulate" only
    predicts, and writes the best simulated placement that puts some op elsewhere than the
    graph as written. n_devices: place on this many simulated devices like the profiled ones
    instead (compare_sources' counts); link: simulate the devices joined by this link instead
    of the measured one ("[machine:]LAT_US:BYTES_PER_US[:COPY]" or "k80", as `--link` and
    compare_sources take it). Both describe devices nothing runs on, so they need "simulate"
    and no `out` (a model placed on them could not run here; `placement_out` writes the
    placement). out: write the placed copy of SOURCE there; its placement goes beside it
    as OUT.placement.json unless `placement_out` names another file, and is written first.
    Both paths are checked before any work (rewrite.check_output_path,
    rewrite.check_placement_path); `overwrite` replaces only what tf-placeto writes.
    Progress goes to the "tf_placeto" logger.
    """
    if measure not in ("real", "simulate"):
        raise InputError(f"measure must be 'real' or 'simulate', not {measure!r}")
    methods.spec(method)
    link = _simulated_devices(n_devices, link, measure, out)
    source = Source.of(source)
    if out is not None:
        check_output_path(source.path, out, overwrite)
    if out is not None or placement_out is not None:
        placement_out = placement_out or f"{out.rstrip(os.sep)}.placement.json"
        check_placement_path(placement_out, source.path, overwrite, out)
    outcome = pipeline.run(source, target, method, search, measure=measure == "real",
                           n_devices=n_devices, link=link)
    if outcome.placement is None:
        out = placement_out = None
    if placement_out is not None:       # first: the search's result survives a failing OUT
        outcome.placement.to_json(placement_out)
    if out is not None:
        apply_placement(outcome.workload.graph, outcome.placement, out, devices=outcome.devices,
                        overwrite=overwrite)
    return PlaceResult(source=str(source), outcome=outcome, out=out,
                       placement_file=placement_out, link=link)


def _simulated_devices(n_devices: Optional[int], link: Optional[str], measure: str,
                       out: Optional[str]) -> Optional[Link]:
    """The parsed link, once `place`'s simulated devices are known to be asked for where they
    can serve: a count of at least 1, only simulated, no model written for them."""
    if n_devices is not None and (isinstance(n_devices, bool) or not isinstance(n_devices, int)
                                  or n_devices < 1):
        raise InputError(f"n_devices must be a whole number of at least 1, not {n_devices!r}")
    link = Link.parse(link) if link else None
    if n_devices is None and link is None:
        return None
    what = "--counts and --link (n_devices, link) describe simulated devices, which"
    if measure != "simulate":
        raise InputError(f"{what} nothing measures: pass --simulate (measure='simulate')")
    if out is not None:
        raise InputError(f"{what} this runtime may not have: leave out --out "
                         "(--placement-out writes the placement)")
    return link
