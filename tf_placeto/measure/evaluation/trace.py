"""One step as Chrome trace JSON ("traceEvents"): simulated from a schedule, or traced for real.

Both kinds name things alike so that a simulated and a real step open side by side in
ui.perfetto.dev or chrome://tracing: one process per device, named as placements name it
(`/device:CPU:1`, `/job:worker/replica:0/task:1/device:CPU:0`) and numbered in the order of
the device set; slices named after the graph's ops; times in microseconds from the step's start.
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional, Sequence

import pandas as pd

from tf_placeto.files import write_atomically
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.measure.runtimes.step_stats import split_device

# Timeline's process of a device's ops; its other processes (allocators, tensors) stay empty
# without show_memory.
_COMPUTE = " Compute"
# Rows of a simulated device: its ops, its share of copying tensors, then a row per link out.
_OPS_TID, _COPIES_TID, _FIRST_LINK_TID = 0, 1, 2


def simulated_trace(schedule: pd.DataFrame, devices: Sequence[str], graph: OpGraph) -> dict:
    """The simulator's schedule (`simulate(..., schedule=True)`): per device a row of ops, a row
    of copies and a row for the transfers on each link leaving it."""
    types = {op.name: op.type for op in graph.ops}
    pid = {device: index for index, device in enumerate(devices)}
    threads, events = {}, []
    for row in schedule.itertuples(index=False):
        if row.kind == "transfer":
            source, target = row.device.split("->")
            where = (pid[source], _FIRST_LINK_TID + pid[target])
            threads[where] = f"transfers to {target}"
            args = {"tensor": row.name, "bytes": int(row.bytes)}
        elif row.kind == "op":
            where = (pid[row.device], _OPS_TID)
            threads[where] = "ops"
            args = {"name": row.name, "op": types[row.name], "output_bytes": int(row.bytes)}
        elif row.kind == "task":         # after the task's last op: on its ops' row
            where = (pid[row.device], _OPS_TID)
            threads[where] = "ops"
            args = {"fitted": "per step, per remote task (calibration)"}
        else:
            where = (pid[row.device], _COPIES_TID)
            threads[where] = "copies"
            args = {"bytes": int(row.bytes)}
        events.append({"ph": "X", "cat": row.kind, "name": row.name, "pid": where[0],
                       "tid": where[1], "ts": float(row.start_us),
                       "dur": float(row.end_us - row.start_us), "args": args})
    return _trace(events, dict(enumerate(devices)), threads)


def traced_trace(run_metadata, devices: Sequence[str]) -> dict:
    """A fully traced run (RunMetadata) through TensorFlow's own Timeline, its op slices renamed
    after their node (Timeline names them by op type) and its processes after their device."""
    from tensorflow.python.client import timeline  # heavy: TensorFlow

    stats = type(run_metadata.step_stats)()
    stats.CopyFrom(run_metadata.step_stats)          # Timeline writes its lanes into the stats
    events = json.loads(timeline.Timeline(stats).generate_chrome_trace_format())["traceEvents"]
    names = {e["pid"]: _device_name(e["args"]["name"][:-len(_COMPUTE)]) for e in events
             if e["name"] == "process_name" and e["args"]["name"].endswith(_COMPUTE)}
    order = list(devices) + sorted(set(names.values()) - set(devices))
    pid = {tf_pid: order.index(name) for tf_pid, name in names.items()}
    kept = [e for e in events if e["ph"] != "M" and e["pid"] in pid]
    start = min((e["ts"] for e in kept), default=0)
    for event in kept:
        event["pid"] = pid[event["pid"]]
        event["ts"] -= start
        if event.get("cat") == "Op":
            event["name"] = event["args"]["name"]
    return _trace(kept, {pid[tf_pid]: name for tf_pid, name in names.items()}, {})


def write_trace(trace: dict, path: str) -> str:
    """Write one trace as JSON, whole or not at all; the path, for the caller to report."""
    write_atomically(path, lambda file: json.dump(trace, file))
    return path


def write_traces(results: Sequence, directory: str, graph: OpGraph,
                 devices: Sequence[str]) -> list:
    """DIRECTORY/<label>.json for each MeasureResult with a schedule or a traced run (a failed
    run has neither); the paths written."""
    paths, taken = [], set()
    for result in results:
        trace = _result_trace(result, graph, devices)
        if trace is None:
            continue
        name = _file_stem(result.label)
        stem, copy = name, 1
        while stem in taken:
            copy += 1
            stem = f"{name}-{copy}"
        taken.add(stem)
        paths.append(write_trace(trace, os.path.join(directory, f"{stem}.json")))
    return paths


def _result_trace(result, graph: OpGraph, devices: Sequence[str]) -> Optional[dict]:
    if result.schedule is not None:
        return simulated_trace(result.schedule, devices, graph)
    if result.trace is not None:
        return traced_trace(result.trace, devices)
    return None


def _file_stem(label: str) -> str:
    """'runs/best.json' -> 'best', 'as written' -> 'as_written'."""
    stem = os.path.basename(label)
    stem = stem[:-len(".json")] if stem.endswith(".json") else stem
    return re.sub(r"[^\w.-]+", "_", stem).strip("_") or "placement"


def _device_name(tf_device: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:1' -> '/device:CPU:1', a stream kept after."""
    return "".join(split_device(tf_device))


def _trace(events: list, processes: dict, threads: dict) -> dict:
    """Events with their processes and threads named, processes sorted by pid."""
    metadata = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}
                for pid, name in sorted(processes.items())]
    metadata += [{"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
                 for pid in sorted(processes)]
    metadata += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
                 for (pid, tid), name in sorted(threads.items())]
    return {"traceEvents": metadata + events, "displayTimeUnit": "ms"}
