"""Profile a graph on a runtime: traced real runs -> a CostModel, cached on disk.

Compute costs come from runs with every op on one device of each type, with Grappler on as in
any real run: what a placement moves is what TensorFlow really executes; ops that run the same
kernel on the same shapes get one cost, their mean (same_kernel_means). Link costs come from
timed chains of transfers between each pair of devices, fitted as latency + bytes / bandwidth
(link_timing.py). Kernels that slow down when their inputs come from another device are found
on a run with every op on a random one of two devices. Then diverse placements run for real,
and the simulator is fitted to them (tf_placeto.measure.profiling.fitting): what splitting the
step costs beyond the per-op costs and the link.
A second call with the same graph, batch and runtime (its devices and fingerprint) finds the
cache. A graph is profiled under its cache entry's lock (cache.entry_lock): a second process
that wants it meanwhile waits, then takes the profile the first one stored.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Optional

import numpy as np
import pandas as pd

from tf_placeto.cache import entry_lock
from tf_placeto.devices import DeviceSet
from tf_placeto.errors import InputError, MeasurementError
from tf_placeto.graph.colocation import colocation_sets
from tf_placeto.graph.grouping import group_ops
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.log import progress
from tf_placeto.measure.costs.costmodel import (CostModel, graph_profile_directory, new_meta,
                                                profile_directory, profile_key)
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.profiling.link_timing import runtime_links
from tf_placeto.measure.runtimes import step_stats
from tf_placeto.measure.runtimes.runner import OK, ModelRunner, StepRuns
from tf_placeto.measure.runtimes.runtime import Runtime

log = logging.getLogger(__name__)

# The calibration's random placements alternate between the default grouping and this one.
CALIBRATION_COARSE_GROUPS = 8
# An op type is slower with inputs from another device when, on the run with ops on random
# devices, its ops with such inputs took at least this many times their profiled cost (beyond
# what every op there took more) and that added at least this share of the single-device step.
REMOTE_SLOWDOWN_MIN = 2.0
REMOTE_STEP_SHARE_MIN = 0.01


@dataclasses.dataclass
class Profile:
    model: CostModel
    directory: str
    cached: bool


def profile(graph: OpGraph, runtime: Runtime, cache: Optional[str] = None, runs: int = 5,
            warmup: int = 2, calibration_runs: int = fitting.CALIBRATION_PLACEMENTS,
            calibration_budget_s: float = 60.0) -> Profile:
    """The cost model of `graph` on `runtime`: from the cache, or measured now and stored.

    On two or more devices, `calibration_runs` diverse placements are then timed for real
    (in turns, for up to `calibration_budget_s`) and the simulator is fitted to them
    (tf_placeto.measure.profiling.fitting); 0 times none. A cached profile is (re)fitted whenever
    real runs of the graph have been logged since its fit, by measure, place or optimize().
    """
    found = cached_profile(graph, runtime.device_names, runtime.fingerprint, cache)
    if found is not None:
        return found
    return measure_profile(graph, runtime, cache, runs, warmup, calibration_runs,
                           calibration_budget_s)


def measure_profile(graph: OpGraph, runtime: Runtime, cache: Optional[str] = None,
                    runs: int = 5, warmup: int = 2,
                    calibration_runs: int = fitting.CALIBRATION_PLACEMENTS,
                    calibration_budget_s: float = 60.0) -> Profile:
    """`profile` of a graph the cache did not have: measured now and stored, under the cache
    entry's lock. A process that waited for the lock takes the profile that the one holding
    it stored. The calibration placements are timed only when the entry's log holds fewer
    real runs than `calibration_runs`: a profile made again (it was damaged) fits the runs
    logged before."""
    key, parts = profile_key(graph, runtime.device_names, runtime.fingerprint)
    directory = profile_directory(key, cache)
    with entry_lock(directory, f"the profile of this graph on {runtime.describe()}"):
        found = _cached_at(graph, runtime.device_names, directory)
        if found is not None:
            return found
        model = _measured_model(graph, runtime, key, parts, cache, runs, warmup)
        model.save(directory)
        devices = DeviceSet.from_strings(runtime.device_names)
        logged = fitting.read(directory, len(graph.ops), len(devices))
        if len(model.links) and calibration_runs > len(logged):
            groupings = [group_ops(graph),
                         group_ops(graph, max_groups=CALIBRATION_COARSE_GROUPS)]
            placements = fitting.calibration_placements(groupings, runtime.device_names,
                                                        calibration_runs)
            fitting.calibrate(graph, model, runtime, directory, placements,
                              calibration_budget_s)
        else:
            fitting.refresh(graph, model, devices, directory)
    log.info(f"stored the profile in {directory}")
    return Profile(model, directory, cached=False)


def _measured_model(graph: OpGraph, runtime: Runtime, key: str, parts: dict,
                    cache: Optional[str], runs: int, warmup: int) -> CostModel:
    """The cost model of `graph` on `runtime`, measured now: op costs on one device of each
    type, the runtime's links, the kernels slower with remote inputs."""
    runner = ModelRunner(graph, inline_every_call=True)   # every op traced under its name
    tables, step_us = [], {}
    for device_type in runtime.device_types:
        device = next(d for d in runtime.device_names if runtime.device_type(d) == device_type)
        log.info(f"profiling on {device}: {warmup} warm-up, {runs} timed and {runs} traced runs")
        table, step_us[device_type] = _op_costs(graph, runner, runtime, device, runs, warmup)
        tables.append(table)
    links = runtime_links(runtime, cache)
    model = CostModel(ops=pd.concat(tables, ignore_index=True), links=links,
                      meta=new_meta(key, parts, runs=runs, warmup=warmup,
                                    runtime=runtime.describe(), step_us=step_us))
    if len(links):
        fit_remote_inputs(graph, model, runner, runtime)
    return model


def cached_profile(graph: OpGraph, device_names, fingerprint: dict,
                   cache: Optional[str] = None) -> Optional[Profile]:
    """The profile of `graph` on these devices of the runtime of `fingerprint` from the cache
    (refitted when real runs were logged since), or None; runs nothing, so it needs no
    runtime (planned_runtime gives what to look it up by)."""
    return _cached_at(graph, device_names,
                      graph_profile_directory(graph, device_names, fingerprint, cache))


def _cached_at(graph: OpGraph, device_names, directory: str) -> Optional[Profile]:
    """cached_profile of the entry at `directory`, whose key the caller has made (hashing a
    graph copies and serializes it: once per profile() is enough)."""
    cached = CostModel.load(directory)
    if cached is None:
        return None
    log.info(f"found a profile in the cache: {directory}")
    fitting.refresh(graph, cached, DeviceSet.from_strings(device_names), directory)
    return Profile(cached, directory, cached=True)


def single_device_placement(graph: OpGraph, runtime: Runtime, device: str) -> dict:
    """Every op on `device`, except colocation groups with no kernel for its type, which go
    to the first device whose type they can run on."""
    placement = {}
    for members, allowed in zip(*_colocation(graph)):
        target = device
        if allowed is not None and runtime.device_type(device) not in allowed:
            target = next((d for d in runtime.device_names
                           if runtime.device_type(d) in allowed), None)
            if target is None:
                names = ", ".join(graph.ops[i].name for i in members[:3])
                raise InputError(f"ops {names} have no kernel for any device of the runtime "
                                 f"(kernels for: {', '.join(sorted(allowed))})")
        placement.update({graph.ops[i].name: target for i in members})
    return placement


def _runs(runner: ModelRunner, runtime: Runtime, placement: dict, what: str, warmup: int,
          repeats: int, traced: int) -> StepRuns:
    """runner.run with a progress bar over its runs; a run that fails fails the profile."""
    with progress(total=warmup + repeats + traced, desc=what, unit="run", leave=False) as bar:
        result = runner.run(runtime, placement, warmup=warmup, repeats=repeats, traced=traced,
                            on_run=bar.update)
    if result.status != OK:
        raise MeasurementError(f"{what} failed: {result.reason}")
    return result


def _colocation(graph):
    sets = colocation_sets(graph)
    return sets.members, sets.device_types


def _op_costs(graph, runner, runtime, device, runs, warmup) -> tuple:
    """(per-op table, fastest untraced step time in us) with everything on `device`.

    The fastest step, not the median: other work on a shared machine only ever adds time, and
    the step time only serves to find the per-op overhead beyond the traced op times.
    """
    result = _runs(runner, runtime, single_device_placement(graph, runtime, device),
                   f"profiling on {device}", warmup=warmup, repeats=runs, traced=runs)
    times, executions = step_stats.op_times_us(result.traces, graph)
    times = same_kernel_means(graph, times, executions)
    sizes = step_stats.node_output_bytes(result.traces[-1])
    rows = []
    for op in graph.ops:
        traced = op.name in times
        rows.append({
            "op": op.name,
            "device_type": runtime.device_type(device),
            "compute_us": times.get(op.name, 0.0),
            "output_bytes": sizes.get(op.name, op.output_bytes) if traced else op.output_bytes,
            "traced": traced,
            "executions": executions.get(op.name, 1),
        })
    return pd.DataFrame(rows), min(result.step_times_s) * 1e6


def same_kernel_means(graph: OpGraph, times: dict, executions: dict) -> dict:
    """`times` ({traced name: us per step}) with each graph op's time replaced by the mean over
    the traced ops of its kernel signature (OpGraph.kernel_signatures) that run as many times.

    Ops that overlap on a worker's core are each charged 1/k of the shared time
    (step_stats.busy_shares_us), but the OS does not share the core evenly: the 16 identical
    matmuls of the branches model were charged 0.6 ms to 8.5 ms, and the simulator ranked its
    split placements by that noise. The mean keeps each device's total.
    """
    same_kernel = collections.defaultdict(list)
    for op, signature in zip(graph.ops, graph.kernel_signatures()):
        if signature is not None and op.name in times:
            same_kernel[signature, executions.get(op.name, 1)].append(op.name)
    pooled = dict(times)
    for names in same_kernel.values():
        pooled.update(dict.fromkeys(names, float(np.mean([times[name] for name in names]))))
    return pooled


def remote_input_ops(graph: OpGraph, placement: dict) -> np.ndarray:
    """(n_ops,) bool: the op reads a tensor produced on another device under `placement`."""
    remote = np.zeros(len(graph.ops), dtype=bool)
    for edge in graph.data_edges:
        if placement[graph.ops[edge.src].name] != placement[graph.ops[edge.dst].name]:
            remote[edge.dst] = True
    return remote


def remote_slowdowns(table: pd.DataFrame, single_step_us: float) -> dict:
    """{op type: slowdown} of the types whose kernels are slower with remote inputs.

    `table`: one row per op that ran, with type, remote (an input came from another device),
    profiled_us (alone on one device) and run_us (on the split run). Every op of a split run
    takes somewhat more (the other threads of a busy worker: gRPC copying, more ops), so each
    op is measured against its profiled cost times that general factor, found on the ops whose
    inputs were all local; a type counts when its remote ops took REMOTE_SLOWDOWN_MIN times
    that and the extra is worth REMOTE_STEP_SHARE_MIN of the step.
    """
    local = table[~table["remote"]]
    general = local["run_us"].sum() / max(local["profiled_us"].sum(), 1e-9)
    remote = table[table["remote"]].assign(expected_us=lambda t: t["profiled_us"] * general)
    per_type = remote.groupby("type")[["run_us", "expected_us"]].sum()
    slowdown = per_type["run_us"] / per_type["expected_us"].clip(lower=1e-9)
    extra = per_type["run_us"] - per_type["expected_us"]
    kept = (slowdown >= REMOTE_SLOWDOWN_MIN) & (extra >= REMOTE_STEP_SHARE_MIN * single_step_us)
    return {kind: float(slowdown[kind]) for kind in per_type.index[kept]}


def fit_remote_inputs(graph: OpGraph, model: CostModel, runner: ModelRunner, runtime: Runtime,
                      runs: int = 3, seed: int = 0) -> None:
    """Find the kernels that are slower when an input comes from another device (in place).

    Every op (with what it must be colocated with) goes to a random one of the first two
    devices, so about half of them read a tensor from the other one, and the step runs traced.
    Each slow type found (`remote_slowdowns`) sets remote_extra_us = (slowdown - 1) *
    compute_us on all ops of that type; what was found goes to meta["remote_inputs"]. Nothing
    is fitted when the two devices differ in type.
    """
    pair = runtime.device_names[:2]
    device_type = runtime.device_type(pair[0])
    if runtime.device_type(pair[1]) != device_type:
        return
    log.info(f"timing the graph with each op on a random one of {pair[0]} and {pair[1]}")
    members = _colocation(graph)[0]
    picks = np.random.default_rng(seed).integers(0, 2, len(members))
    placement = {graph.ops[i].name: pair[pick] for together, pick in zip(members, picks)
                 for i in together}
    result = _runs(runner, runtime, placement, "profiling remote inputs", warmup=1, repeats=0,
                   traced=runs)
    run_us, _ = step_stats.op_times_us(result.traces, graph)
    remote = remote_input_ops(graph, placement)
    ops = model.ops[model.ops["device_type"] == device_type].set_index("op")
    table = pd.DataFrame([
        {"type": op.type, "remote": remote[op.index], "run_us": run_us[op.name],
         "profiled_us": ops.at[op.name, "compute_us"]}
        for op in graph.ops
        if op.name in run_us and op.name in ops.index and ops.at[op.name, "traced"]])
    slowdowns = remote_slowdowns(table, model.meta["step_us"][device_type]) if len(table) else {}
    types = pd.Series({op.name: op.type for op in graph.ops})
    rows = model.ops["device_type"] == device_type
    factor = model.ops.loc[rows, "op"].map(types).map(slowdowns).fillna(1.0)
    model.ops["remote_extra_us"] = 0.0
    model.ops.loc[rows, "remote_extra_us"] = (factor - 1.0) * model.ops.loc[rows, "compute_us"]
    model.meta["remote_inputs"] = {"placement": f"each op on a random one of {pair[0]} and "
                                                f"{pair[1]}", "slowdowns": slowdowns}
    if slowdowns:
        log.info("slower with inputs from another device: " + ", ".join(
            f"{kind} {factor:.1f}x" for kind, factor in sorted(slowdowns.items())))
