"""Reading TensorFlow's step stats: which device ran each node, for how long, with what memory.

Step stats of a fully traced run are TensorFlow's own record of execution, the ground truth
both for "the ops ran where they were placed" and for the profiler's per-op costs. Nodes are
named as Grappler left them: function bodies inlined (named by call path), some chains fused
into one kernel named after one member, a few nodes added (_Send/_Recv, folded constants).
"""

from __future__ import annotations

import collections
import re

import numpy as np

from tf_placeto.devices import canonical_device
from tf_placeto.graph.importer import called_functions
from tf_placeto.graph.op_graph import OpGraph

_WAITING_OPS = {"_Recv", "_HostRecv"}
_TF_DEVICE = re.compile(r"^(.*?/device:[^/:]+:\d+)(.*)$")


def node_devices(run_metadata) -> dict:
    """{traced node name: canonical device it ran on}."""
    devices = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        device = _device(dev_stats)
        for node in dev_stats.node_stats:
            devices[node.node_name] = device
    return devices


def op_times_us(traces, graph: OpGraph) -> tuple:
    """({op name: median over the traced runs of its time in one step}, {op name: most times
    one of its nodes ran in one step}).

    A node that runs several times in a step (in a loop) counts every run. Nodes that lowered
    control flow and atomic calls left behind (`WHILE/body/_23/while/MatMul`) count for the
    op that calls their function, whose own node is gone: the step's time in a loop is the
    loop op's, and its executions are the loop's iterations. Other traced nodes keep their own
    names (the graph's ops, Grappler's fused and added nodes).
    """
    owner = _function_owner(graph)
    runs, executions = [], collections.Counter()
    for metadata in traces:
        times, counts = collections.Counter(), collections.Counter()
        for dev_stats in metadata.step_stats.dev_stats:
            for node, share_us in zip(dev_stats.node_stats, busy_shares_us(dev_stats.node_stats)):
                name = owner(node.node_name)
                times[name] += share_us
                counts[node.node_name] += 1
                executions[name] = max(executions[name], counts[node.node_name])
        runs.append(times)
    names = set().union(*runs) if runs else set()
    return ({name: float(np.median([run.get(name, 0.0) for run in runs])) for name in names},
            dict(executions))


def busy_shares_us(node_stats) -> np.ndarray:
    """Each node's share of its device's busy time, in microseconds: where k nodes ran at once,
    each is charged 1/k of that time.

    The simulator runs one op at a time per device, so a device's costs must add up to its busy
    time. A worker of a local cluster runs several op threads on one core: ops that overlap
    there share the core, and their wall times would count it k times. Nodes that wait
    rather than compute (receives) are charged their wall time and share nothing.
    """
    starts = np.array([n.all_start_nanos + n.op_start_rel_nanos for n in node_stats], float)
    ends = np.array([n.all_start_nanos + n.op_end_rel_nanos for n in node_stats], float)
    waits = np.array([_waits(n) for n in node_stats], bool)
    shares = (ends - starts) / 1000.0
    busy = ~waits & (ends > starts)
    if busy.sum() < 2:
        return shares
    points = np.unique(np.concatenate([starts[busy], ends[busy]]))
    running = (np.searchsorted(np.sort(starts[busy]), points[:-1], side="right")
               - np.searchsorted(np.sort(ends[busy]), points[:-1], side="right"))
    share_of_segment = np.diff(points) / np.maximum(running, 1)
    charged = np.concatenate([[0.0], np.cumsum(share_of_segment)])   # charged up to each point
    shares[busy] = (charged[np.searchsorted(points, ends[busy])]
                    - charged[np.searchsorted(points, starts[busy])]) / 1000.0
    return shares


def _waits(node) -> bool:
    """A receive: its time is spent waiting for a tensor, not on the core."""
    op_type = node.timeline_label.partition(" = ")[2].partition("(")[0]
    return node.node_name == "RecvTensor" or op_type in _WAITING_OPS


def _function_owner(graph: OpGraph):
    """node name -> the name of the graph op whose function ran it (itself if none)."""
    callers = {op.name for op in graph.ops if called_functions(op.node_def)}

    def owner(name: str) -> str:
        parts = name.split("/")
        for end in range(len(parts) - 1, 0, -1):
            prefix = "/".join(parts[:end])
            if prefix in callers:
                return prefix
        return name

    return owner


def node_output_bytes(run_metadata) -> dict:
    """{traced node name: bytes its outputs allocated}."""
    sizes = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        for node in dev_stats.node_stats:
            sizes[node.node_name] = sum(
                out.tensor_description.allocation_description.requested_bytes
                for out in node.output)
    return sizes


def peak_memory_bytes(run_metadata) -> dict:
    """{device: peak bytes} as the allocators report it in the step stats.

    GPU (BFC) allocators report their true peak; CPU allocators only report what each op
    allocated, so on CPUs this is the largest per-op peak, a lower bound of the device's.
    """
    peaks = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        device = _device(dev_stats)
        for node in dev_stats.node_stats:
            for used in node.memory:
                peak = max(used.peak_bytes, used.allocator_bytes_in_use)
                peaks[device] = max(peaks.get(device, 0), peak)
    return peaks


def split_device(tf_device: str) -> tuple:
    """(canonical device, what follows it) of a device as step stats name it, perhaps with a
    GPU stream after it: '/job:localhost/replica:0/task:0/device:GPU:0/stream:3' ->
    ('/device:GPU:0', '/stream:3'). Not a device: (the name, '')."""
    match = _TF_DEVICE.match(tf_device)
    return (canonical_device(match[1]), match[2]) if match else (tf_device, "")


def _device(dev_stats) -> str:
    return split_device(dev_stats.device)[0]
