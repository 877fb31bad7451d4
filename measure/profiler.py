"""Profile a graph on a runtime: traced real runs -> a CostModel, cached on disk.

Compute costs come from runs with every op on one device of each type, with Grappler on as in
any real run: what a placement moves is what TensorFlow really executes. Link costs come from
timed chains of transfers between each pair of devices, fitted as latency + bytes / bandwidth.
A second call with the same graph, batch, devices and TensorFlow version finds the cache.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
import time
from typing import Callable, Optional

import numpy as np
import pandas as pd

from measure import step_stats
from measure.costmodel import CostModel, new_meta, profile_key
from measure.runner import OK, ModelRunner
from measure.runtime import Runtime
from tf_placeto.cache import cache_dir
from tf_placeto.errors import PlacetoError
from tf_placeto.graph.colocation import colocation_sets
from tf_placeto.graph.op_graph import OpGraph

# Transfer sizes for link calibration: from latency-bound to bandwidth-bound (float32 count).
LINK_ELEMENTS = (256, 16_384, 262_144, 2_097_152)
LINK_HOPS = 4


@dataclasses.dataclass
class Profile:
    model: CostModel
    directory: str
    cached: bool


def profile(graph: OpGraph, runtime: Runtime, cache: Optional[str] = None, runs: int = 5,
            warmup: int = 2, say: Callable[[str], None] = lambda message: None) -> Profile:
    """The cost model of `graph` on `runtime`: from the cache, or measured now and stored."""
    key, parts = profile_key(graph, runtime.device_names)
    directory = os.path.join(cache or cache_dir("profiles"), key)
    cached = CostModel.load(directory)
    if cached is not None:
        say(f"found a profile in the cache: {directory}")
        return Profile(cached, directory, cached=True)
    runner = ModelRunner(graph)
    tables, step_us = [], {}
    for device_type in runtime.device_types:
        device = next(d for d in runtime.device_names if runtime.device_type(d) == device_type)
        say(f"profiling on {device}: {warmup} warm-up, {runs} timed and {runs} traced runs")
        table, step_us[device_type] = _op_costs(graph, runner, runtime, device, runs, warmup)
        tables.append(table)
    links = calibrate_links(runtime, say=say)
    model = CostModel(ops=pd.concat(tables, ignore_index=True), links=links,
                      meta=new_meta(key, parts, runs=runs, warmup=warmup,
                                    runtime=runtime.describe(), step_us=step_us))
    model.save(directory)
    say(f"stored the profile in {directory}")
    return Profile(model, directory, cached=False)


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
                raise PlacetoError(f"ops {names} have no kernel for any device of the runtime "
                                   f"(kernels for: {', '.join(sorted(allowed))})")
        placement.update({graph.ops[i].name: target for i in members})
    return placement


def _colocation(graph):
    sets = colocation_sets(graph)
    return sets.members, sets.device_types


def _op_costs(graph, runner, runtime, device, runs, warmup) -> tuple:
    """(per-op table, median untraced step time in us) with everything on `device`."""
    result = runner.run(runtime, single_device_placement(graph, runtime, device),
                        warmup=warmup, repeats=runs, traced=runs)
    if result.status != OK:
        raise PlacetoError(f"profiling on {device} failed: {result.reason}")
    times = step_stats.node_times_us(result.traces)
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
        })
    return pd.DataFrame(rows), statistics.median(result.step_times_s) * 1e6


def calibrate_links(runtime: Runtime, runs: int = 3,
                    say: Callable[[str], None] = lambda message: None) -> pd.DataFrame:
    """Latency and bandwidth of each ordered device pair, from timed transfer chains.

    A chain bounces a tensor between two devices LINK_HOPS times; the same chain on one
    device is the baseline. (cross - same) / hops is one transfer's time, fitted over sizes
    as latency + bytes / bandwidth. Both directions of a pair get the fit of the chain,
    which crosses the link both ways.
    """
    rows = []
    for a, b in itertools.combinations(runtime.device_names, 2):
        say(f"timing transfers between {a} and {b}")
        sizes, seconds = [], []
        for elements in LINK_ELEMENTS:
            cross = _time_chain(runtime, a, b, elements, runs)
            same = _time_chain(runtime, a, a, elements, runs)
            sizes.append(elements * 4)
            seconds.append(max(cross - same, 0.0) / LINK_HOPS)
        slope, intercept = np.polyfit(np.array(sizes, float), np.array(seconds) * 1e6, 1)
        latency_us = max(float(intercept), 0.0)
        bytes_per_us = 1.0 / slope if slope > 0 else float("inf")
        for src, dst in ((a, b), (b, a)):
            rows.append({"src": src, "dst": dst, "latency_us": latency_us,
                         "bytes_per_us": bytes_per_us})
    return pd.DataFrame(rows, columns=["src", "dst", "latency_us", "bytes_per_us"])


def _time_chain(runtime: Runtime, a: str, b: str, elements: int, runs: int) -> float:
    """Median wall time of one run of a tensor bouncing between `a` and `b`."""
    import tensorflow as tf

    with tf.Graph().as_default() as graph:
        with tf.device(a):
            value = tf.random.uniform([elements])     # not foldable: computed every run
        for hop in range(LINK_HOPS):
            with tf.device(b if hop % 2 == 0 else a):
                value = tf.negative(value)
        with tf.device(a):
            fetch = tf.reduce_sum(value)
        with tf.compat.v1.Session(runtime.target, graph=graph,
                                  config=runtime.session_config()) as session:
            session.run(fetch)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                session.run(fetch)
                times.append(time.perf_counter() - start)
    return statistics.median(times)
