"""A runtime's links, timed: latency and bandwidth of each pair of devices, from chains of
transfers, kept once per runtime in the cache (every graph profiled on it starts from them).

Timed apart from any graph because a link belongs to the runtime; what a busy step really gets
of it is fitted later, to real runs of each graph (regression.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import time
from typing import Optional

import numpy as np
import pandas as pd

from tf_placeto.cache import cache_dir
from tf_placeto.errors import first_line
from tf_placeto.files import FileLock, write_atomically
from tf_placeto.measure.costs.costmodel import (LINK_COLUMNS, LINK_NUMBERS, PROFILER_VERSION,
                                                UNREADABLE, check_links, read_table,
                                                write_table)
from tf_placeto.measure.runtimes.runtime import Runtime

log = logging.getLogger(__name__)

# Transfer sizes for link calibration: from latency-bound to bandwidth-bound (float32 count).
LINK_ELEMENTS = (256, 16_384, 262_144, 2_097_152)
LINK_HOPS = 4


def runtime_links(runtime: Runtime, cache: Optional[str] = None) -> pd.DataFrame:
    """calibrate_links, done once per runtime (its devices and fingerprint): links belong to
    the runtime, not to a graph, so every graph profiled on it shares them (a copy: profiles
    fit their own). Kept as links/KEY.csv and its record (costmodel.write_table), KEY.json,
    written last; timed under a lock of their own, so that two processes never time one
    runtime's links at once."""
    key = hashlib.sha256(json.dumps([runtime.device_names, runtime.fingerprint,
                                     PROFILER_VERSION], sort_keys=True).encode()).hexdigest()[:20]
    folder = os.path.join(cache or cache_dir("profiles"), "links")
    path = os.path.join(folder, f"{key}.csv")
    with FileLock(os.path.join(folder, f".{key}.lock"), "the links another process is timing"):
        links = _stored_links(path, runtime.device_names)
        if links is None:
            links = calibrate_links(runtime)
            record = {**write_table(path, links), "devices": runtime.device_names,
                      "runtime": runtime.fingerprint}
            write_atomically(_record_path(path), lambda file: json.dump(record, file, indent=1),
                             private=True)
    return links


def _stored_links(path: str, device_names) -> Optional[pd.DataFrame]:
    """The links stored at `path` if they match their record and cover every ordered pair of
    `device_names`; None without a record. A damaged one is named in one line and removed."""
    record_path = _record_path(path)
    if not os.path.isfile(record_path):
        return None
    try:
        with open(record_path, encoding="utf-8") as file:
            record = json.load(file)
        links = read_table(path, LINK_COLUMNS[:4], LINK_NUMBERS, record)
        check_links(links, device_names)
    except UNREADABLE as error:
        log.warning(f"the cached link calibration at {path} is damaged ({first_line(error)}); "
                    "timing the links again")
        for damaged in (record_path, path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(damaged)
        return None
    log.info(f"found the link calibration of these devices: {path}")
    return links


def _record_path(path: str) -> str:
    return f"{os.path.splitext(path)[0]}.json"


def calibrate_links(runtime: Runtime, runs: int = 5) -> pd.DataFrame:
    """Latency and bandwidth of each ordered device pair, from timed transfer chains.

    A chain bounces a tensor between two devices LINK_HOPS times; the same chain on one
    device is the baseline. (cross - same) / hops is one transfer's time, fitted over sizes
    as latency + bytes / bandwidth. Both directions of a pair get the fit of the chain,
    which crosses the link both ways. The copy share is left at 0: the calibration
    (regression.py) fits it, and what a busy step really gets of the link, to real runs of
    the graph itself.
    """
    rows = []
    for a, b in itertools.combinations(runtime.device_names, 2):
        log.info(f"timing transfers between {a} and {b}")
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
                         "bytes_per_us": bytes_per_us, "copy_share": 0.0})
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def _time_chain(runtime: Runtime, a: str, b: str, elements: int, runs: int) -> float:
    """Fastest wall time of one run of a tensor bouncing between `a` and `b` (the fastest:
    other work on the machine only ever adds time)."""
    import tensorflow as tf  # heavy: loaded when links are timed

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
    return min(times)


def _plain_session(runtime: Runtime, graph):
    """A session that runs the graph as built. Grappler would fold a calibration chain into
    one op on one device (a unary-op composition, a cancelled Neg(Neg(x))), and no tensor
    would travel."""
    import tensorflow as tf  # heavy: loaded when links are timed

    config = runtime.session_config()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return tf.compat.v1.Session(runtime.target, graph=graph, config=config)
