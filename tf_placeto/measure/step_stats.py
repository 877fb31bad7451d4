"""Reading TensorFlow's step stats: which device ran each node, for how long, with what memory.

Step stats of a fully traced run are TensorFlow's own record of execution, the ground truth
both for "the ops ran where they were placed" and for the profiler's per-op costs. Nodes are
named as Grappler left them: function bodies inlined (named by call path), some chains fused
into one kernel named after one member, a few nodes added (_Send/_Recv, folded constants).
"""

from __future__ import annotations

import collections

import numpy as np

from tf_placeto.devices import canonical_device


def node_devices(run_metadata) -> dict:
    """{traced node name: canonical device it ran on}."""
    devices = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        device = _device(dev_stats)
        for node in dev_stats.node_stats:
            devices[node.node_name] = device
    return devices


def node_times_us(traces) -> dict:
    """{traced node name: median compute time in microseconds over the traced runs}."""
    samples = collections.defaultdict(list)
    for metadata in traces:
        for dev_stats in metadata.step_stats.dev_stats:
            for node in dev_stats.node_stats:
                samples[node.node_name].append(
                    (node.op_end_rel_nanos - node.op_start_rel_nanos) / 1000.0)
    return {name: float(np.median(values)) for name, values in samples.items()}


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


def _device(dev_stats) -> str:
    return canonical_device(dev_stats.device.split(":stream")[0])
