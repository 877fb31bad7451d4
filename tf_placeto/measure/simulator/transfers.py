"""What a placement sends (numba): the transfers the event loop (engine.py) replays, and what
each costs.

One transfer per tensor and device that reads it away from its producer, however many of its
ops read it there; the session runs on device 0, so a feed op placed in another task first
receives its tensor from there, and a fetched tensor made in another task is sent there. A
transfer's copy share of its bytes is a copy task on each end's processor; the rest, and the
latency, is the wire's. replay.py calls `plan`, then engine.run: numba caches each compiled
function by its own file, and one compiled into another would not see edits to it.
"""

from __future__ import annotations

import numba
import numpy as np

from tf_placeto.measure.simulator.arrays import SimulationProblem


def plan(problem: SimulationProblem, placement: np.ndarray) -> tuple:
    """The transfers of `placement` (int64 device indices), as engine.run takes them:
    (n_transfers, the transfer each edge reads or -1, each transfer's tensor, source,
    destination and feed op (or -1), its readers, each tensor's holders, each op's inputs that
    travel and the predecessors it waits for, each tensor's transfer to the session (or -1),
    each transfer's copy and wire times, and the tasks each device and each channel will
    queue)."""
    return _plan(placement, problem.tensor_producer, problem.tensor_bytes,
                 problem.edge_consumer, problem._tensor_edge_ptr, problem._tensor_edges,
                 problem._op_out_ptr, problem._op_out_tensors, problem._n_preds,
                 problem.link_latency_us, problem.link_bytes_per_us, problem.link_copy_share,
                 problem.link_copy_us, problem.device_task, problem.feed_ops, problem.fetched)


@numba.njit(cache=True, nogil=True)     # without the GIL: placements simulate in threads
def _plan(placement, tensor_producer, tensor_bytes, edge_consumer, tensor_edge_ptr, tensor_edges,
          op_out_ptr, op_out_tensors, n_preds, link_latency_us, link_bytes_per_us,
          link_copy_share, link_copy_us, device_task, feed_ops, fetched):
    n_ops = placement.shape[0]
    n_devices = device_task.shape[0]
    n_channels = n_devices * n_devices
    n_tensors = tensor_producer.shape[0]
    n_edges = edge_consumer.shape[0]
    capacity = n_edges + feed_ops.shape[0] + np.sum(fetched)

    # Transfers of this placement: one per (tensor, device with a consumer but not the producer),
    # one per fetched tensor made outside the session's task, one per feed placed outside it.
    edge_transfer = np.full(n_edges, -1, np.int64)    # -1: the edge reads the local tensor
    transfer_tensor = np.empty(capacity, np.int64)
    transfer_src = np.empty(capacity, np.int64)
    transfer_dst = np.empty(capacity, np.int64)
    transfer_feeds = np.full(capacity, -1, np.int64)  # the feed op it brings its tensor, or -1
    transfer_readers = np.zeros(capacity, np.int64)   # edges that have yet to read the copy
    tensor_holds = np.zeros(n_tensors, np.int64)      # local readers + transfers yet to finish
    transfer_to = np.full(n_devices, -1, np.int64)
    reads_remote = np.zeros(n_ops, np.int64)          # inputs of the op that travel to it
    waiting_for = n_preds.copy()
    tensor_fetch = np.full(n_tensors, -1, np.int64)   # its transfer to the session, or -1
    n_transfers = 0
    for f in feed_ops:
        if device_task[placement[f]] != device_task[0] and op_out_ptr[f + 1] > op_out_ptr[f]:
            transfer_tensor[n_transfers] = op_out_tensors[op_out_ptr[f]]
            transfer_src[n_transfers] = 0
            transfer_dst[n_transfers] = placement[f]
            transfer_feeds[n_transfers] = f
            waiting_for[f] += 1
            n_transfers += 1
    for t in range(n_tensors):
        src = placement[tensor_producer[t]]
        if fetched[t] and device_task[src] != device_task[0]:
            transfer_to[0] = n_transfers               # a transfer with no reader: the fetch
            tensor_fetch[t] = n_transfers
            transfer_tensor[n_transfers] = t
            transfer_src[n_transfers] = src
            transfer_dst[n_transfers] = 0
            tensor_holds[t] += 1
            n_transfers += 1
        for k in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
            e = tensor_edges[k]
            dst = placement[edge_consumer[e]]
            if dst == src:
                tensor_holds[t] += 1
                continue
            reads_remote[edge_consumer[e]] += 1
            if transfer_to[dst] < 0:
                transfer_to[dst] = n_transfers
                transfer_tensor[n_transfers] = t
                transfer_src[n_transfers] = src
                transfer_dst[n_transfers] = dst
                tensor_holds[t] += 1
                n_transfers += 1
            edge_transfer[e] = transfer_to[dst]
            transfer_readers[transfer_to[dst]] += 1
        for k in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
            transfer_to[placement[edge_consumer[tensor_edges[k]]]] = -1
        transfer_to[0] = -1
    copy_us = np.zeros(n_transfers, np.float64)       # each of its two copy tasks
    wire_us = np.zeros(n_transfers, np.float64)
    per_device = np.bincount(placement, minlength=n_devices)
    per_channel = np.zeros(n_channels, np.int64)
    for tr in range(n_transfers):
        t = transfer_tensor[tr]
        src = transfer_src[tr]
        dst = transfer_dst[tr]
        share = link_copy_share[src, dst]
        copy_us[tr] = (link_copy_us[src, dst]
                       + share * tensor_bytes[t] / link_bytes_per_us[src, dst])
        wire_us[tr] = (link_latency_us[src, dst]
                       + (1.0 - 2.0 * share) * tensor_bytes[t] / link_bytes_per_us[src, dst])
        per_channel[src * n_devices + dst] += 1
        if copy_us[tr] > 0:
            per_device[src] += 1
            per_device[dst] += 1
    return (n_transfers, edge_transfer, transfer_tensor, transfer_src, transfer_dst,
            transfer_feeds, transfer_readers, tensor_holds, reads_remote, waiting_for,
            tensor_fetch, copy_us, wire_us, per_device, per_channel)
