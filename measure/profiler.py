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
from measure.costmodel import LINK_COLUMNS, CostModel, new_meta, profile_key
from measure.runner import OK, ModelRunner
from measure.runtime import Runtime
from tf_placeto.cache import cache_dir
from tf_placeto.errors import PlacetoError
from tf_placeto.graph.colocation import colocation_sets
from tf_placeto.graph.op_graph import OpGraph

# Transfer sizes for link calibration: from latency-bound to bandwidth-bound (float32 count).
LINK_ELEMENTS = (256, 16_384, 262_144, 2_097_152)
LINK_HOPS = 4
# Copy-share calibration: 8 tensors of 8 MiB arrive while a chain of 256x256 matmuls runs.
COPY_TENSORS, COPY_ELEMENTS, COPY_MATMUL = 8, 2_097_152, 256


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
    """Latency, bandwidth and copy share of each ordered device pair, from timed transfers.

    A chain bounces a tensor between two devices LINK_HOPS times; the same chain on one
    device is the baseline. (cross - same) / hops is one transfer's time, fitted over sizes
    as latency + bytes / bandwidth. Both directions of a pair get the fit of the chain,
    which crosses the link both ways, and the copy share measured into the second device.
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
        share = copy_share(runtime, a, b, bytes_per_us, runs)
        for src, dst in ((a, b), (b, a)):
            rows.append({"src": src, "dst": dst, "latency_us": latency_us,
                         "bytes_per_us": bytes_per_us, "copy_share": share})
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def copy_share(runtime: Runtime, sender: str, receiver: str, bytes_per_us: float,
               runs: int = 3) -> float:
    """The part of bytes / bandwidth that the receiver's processor spends copying a transfer.

    A chain of matmuls runs on the receiver alone, then again while COPY_TENSORS tensors arrive
    from the sender: the traced time of the chain's ops grows by what the copies took from them
    (on a CPU worker, gRPC deserializes on the same core). The chain is sized to outlast the
    transfers. The sender's share (serializing) is taken to be the same.
    """
    if not np.isfinite(bytes_per_us):
        return 0.0
    transfer_us = COPY_TENSORS * COPY_ELEMENTS * 4 / bytes_per_us
    per_matmul_us = _chain_op_us(runtime, sender, receiver, 20, False, runs) / 20
    matmuls = int(min(np.ceil(2 * transfer_us / max(per_matmul_us, 1.0)), 5000))
    alone = _chain_op_us(runtime, sender, receiver, matmuls, False, runs)
    copying = _chain_op_us(runtime, sender, receiver, matmuls, True, runs)
    return float(np.clip((copying - alone) / transfer_us, 0.0, 0.5))


def _chain_op_us(runtime, sender, receiver, matmuls, with_transfers, runs) -> float:
    """Median over traced runs of the summed run time of the receiver's chain ops."""
    import tensorflow as tf

    with tf.Graph().as_default() as graph:
        with tf.device(receiver), tf.name_scope("chain"):
            weights = tf.random.normal((COPY_MATMUL, COPY_MATMUL), stddev=COPY_MATMUL ** -0.5)
            value = weights
            for _ in range(matmuls):
                value = tf.matmul(value, weights)
            fetches = [tf.reduce_sum(value)]
        for k in range(COPY_TENSORS if with_transfers else 0):
            with tf.device(sender):
                sent = tf.random.uniform([COPY_ELEMENTS], seed=k)
            with tf.device(receiver):
                fetches.append(tf.reduce_sum(sent))
        with _plain_session(runtime, graph) as session:
            session.run(fetches)
            totals = []
            for _ in range(runs):
                metadata = tf.compat.v1.RunMetadata()
                session.run(fetches, options=tf.compat.v1.RunOptions(
                    trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
                times = step_stats.node_times_us([metadata])
                totals.append(sum(t for name, t in times.items() if name.startswith("chain/")))
    return statistics.median(totals)


def _time_chain(runtime: Runtime, a: str, b: str, elements: int, runs: int) -> float:
    """Median wall time of one run of a tensor bouncing between `a` and `b`."""
    import tensorflow as tf

    with tf.Graph().as_default() as graph:
        with tf.device(a):
            value = tf.random.uniform([elements])     # not foldable: computed every run
        for hop in range(LINK_HOPS):
            with tf.device(b if hop % 2 == 0 else a):
                value = tf.sin(value)
        with tf.device(a):
            fetch = tf.reduce_sum(value)
        with _plain_session(runtime, graph) as session:
            session.run(fetch)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                session.run(fetch)
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def _plain_session(runtime: Runtime, graph):
    """A session that runs the graph as built. Grappler would fold a calibration chain into
    one op on one device (a unary-op composition, a cancelled Neg(Neg(x))), and no tensor
    would travel."""
    import tensorflow as tf

    config = runtime.session_config()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return tf.compat.v1.Session(runtime.target, graph=graph, config=config)
