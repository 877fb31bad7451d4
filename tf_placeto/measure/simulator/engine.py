"""The compiled event loop (numba): one placement's step from the problem's arrays and the
transfers that transfers.plan made of the placement.

Min-heaps live in flat arrays: heap h occupies keys[base[h]:base[h] + size[h]]; entries are
ordered by (time, id), which is what makes every queue FIFO with deterministic ties.

The event loop's helpers are inlined into it (numba's `inline="always"`): called, each
passed its arrays with their reference counts, which slowed every simulation
(docs/results/speed.md, "Decision time").
"""

from __future__ import annotations

import numba
import numpy as np

# A device runs its ready copies (a send's serialization, a receive's) before its ready ops:
# the queue key of a copy is its ready time minus this. TensorFlow serves a peer's
# RecvTensor call on threads of its own as soon as the tensor exists, beside the ops already
# running, so a send does not wait behind the ops queued before it. Queued behind them, on
# the branches model, the simulator ranked last the split that ran fastest (task 0 slices
# the input for task 1's chains and sends them before its own matmuls); with copies first it
# ranks it first (docs/results/simulator.md, "Copies first").
COPIES_FIRST_US = 1e12


@numba.njit(cache=True, inline="always")
def _heap_push(times, ids, base, size, time, ident):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        pt, pi = times[base + parent], ids[base + parent]
        if time < pt or (time == pt and ident < pi):
            times[base + i], ids[base + i] = pt, pi
            i = parent
        else:
            break
    times[base + i] = time
    ids[base + i] = ident


@numba.njit(cache=True, inline="always")
def _heap_pop(times, ids, base, size):
    """Remove the smallest entry of a heap holding `size` entries; return its id."""
    top = ids[base]
    size -= 1
    time, ident = times[base + size], ids[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        ct, ci = times[base + child], ids[base + child]
        if child + 1 < size:
            rt, ri = times[base + child + 1], ids[base + child + 1]
            if rt < ct or (rt == ct and ri < ci):
                child += 1
                ct, ci = rt, ri
        if ct < time or (ct == time and ci < ident):
            times[base + i], ids[base + i] = ct, ci
            i = child
        else:
            break
    times[base + i] = time
    ids[base + i] = ident
    return top


@numba.njit(cache=True, inline="always")
def _mark(flags, stack, n, item):
    """Put `item` on a stack of things to revisit, once; return the stack's new size."""
    if not flags[item]:
        flags[item] = True
        stack[n] = item
        n += 1
    return n


@numba.njit(cache=True, inline="always")
def _wake(task, d, now, ready_time, ready_task, device_base, ready_size, device_dirty,
          dirty_devices, n_dirty_devices):
    """Queue a task that is ready now on device d; return the new count of devices to revisit."""
    _heap_push(ready_time, ready_task, device_base[d], ready_size[d], now, task)
    ready_size[d] += 1
    return _mark(device_dirty, dirty_devices, n_dirty_devices, d)


@numba.njit(cache=True, nogil=True)     # without the GIL: placements simulate in threads
def run(placement, compute_us, remote_extra_us, remote_input_us, device_type_of, op_overhead_us,
        tensor_bytes, edge_tensor, edge_consumer, tensor_edge_ptr, tensor_edges, op_in_ptr,
        op_in_edges, op_out_ptr, op_out_tensors, control_ptr, control_succ, persistent_bytes,
        transfers):
    """The event loop, over the transfers transfers.plan made of this placement. Device tasks
    are ops (ids < n_ops) and copies: n_ops + 2 tr sends tensor of transfer tr, n_ops + 2 tr + 1
    receives it; events are device tasks ending and, with ids from n_tasks on, transfers
    leaving the wire."""
    (n_transfers, edge_transfer, transfer_tensor, transfer_src, transfer_dst, transfer_feeds,
     transfer_readers, tensor_holds, reads_remote, waiting_for, tensor_fetch, copy_us, wire_us,
     per_device, per_channel) = transfers
    n_ops = placement.shape[0]
    n_devices = device_type_of.shape[0]
    n_channels = n_devices * n_devices
    n_tasks = n_ops + 2 * n_transfers

    # Queues: a ready heap per device, a heap per channel, one heap of running work's ends.
    device_base = np.zeros(n_devices, np.int64)
    device_base[1:] = np.cumsum(per_device)[:-1]
    channel_base = np.zeros(n_channels, np.int64)
    channel_base[1:] = np.cumsum(per_channel)[:-1]
    ready_time = np.empty(per_device.sum(), np.float64)
    ready_task = np.empty(per_device.sum(), np.int64)
    ready_size = np.zeros(n_devices, np.int64)
    queued_time = np.empty(n_transfers, np.float64)
    queued_transfer = np.empty(n_transfers, np.int64)
    queued_size = np.zeros(n_channels, np.int64)
    transfer_queued = np.zeros(n_transfers, np.bool_)
    event_time = np.empty(n_devices + n_channels, np.float64)
    event_id = np.empty(n_devices + n_channels, np.int64)
    n_events = 0
    device_busy = np.zeros(n_devices, np.bool_)
    channel_busy = np.zeros(n_channels, np.bool_)
    # Devices and channels that may have to start work at the current instant.
    dirty_devices = np.empty(n_devices, np.int64)
    device_dirty = np.zeros(n_devices, np.bool_)
    n_dirty_devices = 0
    dirty_channels = np.empty(n_channels, np.int64)
    channel_dirty = np.zeros(n_channels, np.bool_)
    n_dirty_channels = 0

    memory = np.zeros(n_devices, np.float64)
    for op in range(n_ops):
        memory[placement[op]] += persistent_bytes[op]
    peak = memory.copy()
    busy = np.zeros(n_devices, np.float64)
    op_start = np.zeros(n_ops, np.float64)
    op_end = np.zeros(n_ops, np.float64)
    transfer_start = np.zeros(n_transfers, np.float64)
    transfer_end = np.zeros(n_transfers, np.float64)
    copy_start = np.zeros(2 * n_transfers, np.float64)
    copy_end = np.zeros(2 * n_transfers, np.float64)

    now = 0.0
    for op in range(n_ops):
        if waiting_for[op] == 0:
            n_dirty_devices = _wake(op, placement[op], now, ready_time, ready_task, device_base,
                                    ready_size, device_dirty, dirty_devices, n_dirty_devices)
    for tr in range(n_transfers):
        if transfer_feeds[tr] >= 0:                    # the session sends the feeds at once
            n_dirty_devices, n_dirty_channels = _send(
                tr, 0, now, n_ops, n_devices, copy_us, transfer_dst, transfer_queued,
                ready_time, ready_task, device_base, ready_size, device_dirty, dirty_devices,
                n_dirty_devices, queued_time, queued_transfer, channel_base, queued_size,
                channel_dirty, dirty_channels, n_dirty_channels)

    while True:
        # Idle devices and channels with something queued start it now.
        for k in range(n_dirty_devices):
            d = dirty_devices[k]
            device_dirty[d] = False
            if device_busy[d] or ready_size[d] == 0:
                continue
            task = _heap_pop(ready_time, ready_task, device_base[d], ready_size[d])
            ready_size[d] -= 1
            if task < n_ops:
                duration = compute_us[task, device_type_of[d]] + op_overhead_us
                if reads_remote[task] > 0:
                    duration += (remote_extra_us[task, device_type_of[d]]
                                 + remote_input_us[task] * reads_remote[task])
                op_start[task] = now
                op_end[task] = now + duration
                for j in range(op_out_ptr[task], op_out_ptr[task + 1]):
                    memory[d] += tensor_bytes[op_out_tensors[j]]
                peak[d] = max(peak[d], memory[d])
            else:
                duration = copy_us[(task - n_ops) // 2]
                copy_start[task - n_ops] = now
                copy_end[task - n_ops] = now + duration
            busy[d] += duration
            device_busy[d] = True
            _heap_push(event_time, event_id, 0, n_events, now + duration, task)
            n_events += 1
        n_dirty_devices = 0
        for k in range(n_dirty_channels):
            c = dirty_channels[k]
            channel_dirty[c] = False
            if channel_busy[c] or queued_size[c] == 0:
                continue
            tr = _heap_pop(queued_time, queued_transfer, channel_base[c], queued_size[c])
            queued_size[c] -= 1
            dst = transfer_dst[tr]
            transfer_start[tr] = now
            transfer_end[tr] = now + wire_us[tr]
            channel_busy[c] = True
            if transfer_feeds[tr] < 0:        # a feed is allocated by its op, as it starts
                memory[dst] += tensor_bytes[transfer_tensor[tr]]
                peak[dst] = max(peak[dst], memory[dst])
            _heap_push(event_time, event_id, 0, n_events, now + wire_us[tr], n_tasks + tr)
            n_events += 1
        n_dirty_channels = 0

        if n_events == 0:
            break
        # Everything that ends at the next instant ends before anything starts then.
        now = event_time[0]
        while n_events > 0 and event_time[0] == now:
            ident = _heap_pop(event_time, event_id, 0, n_events)
            n_events -= 1
            if ident < n_tasks:               # a device is free again
                d = placement[ident] if ident < n_ops else (
                    transfer_src[(ident - n_ops) // 2]
                    if (ident - n_ops) % 2 == 0 else transfer_dst[(ident - n_ops) // 2])
                device_busy[d] = False
                n_dirty_devices = _mark(device_dirty, dirty_devices, n_dirty_devices, d)
            if ident < n_ops:
                op = ident
                for k in range(op_in_ptr[op], op_in_ptr[op + 1]):
                    e = op_in_edges[k]
                    t = edge_tensor[e]
                    tr = edge_transfer[e]
                    if tr < 0:
                        tensor_holds[t] -= 1
                        if tensor_holds[t] == 0:
                            memory[d] -= tensor_bytes[t]
                    else:
                        transfer_readers[tr] -= 1
                        if transfer_readers[tr] == 0:
                            memory[d] -= tensor_bytes[t]
                for k in range(op_out_ptr[op], op_out_ptr[op + 1]):
                    t = op_out_tensors[k]
                    if tensor_holds[t] == 0:
                        memory[d] -= tensor_bytes[t]
                    for j in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
                        e = tensor_edges[j]
                        tr = edge_transfer[e]
                        if tr < 0:
                            waiting_for[edge_consumer[e]] -= 1
                            if waiting_for[edge_consumer[e]] == 0:
                                n_dirty_devices = _wake(
                                    edge_consumer[e], placement[edge_consumer[e]], now,
                                    ready_time, ready_task, device_base, ready_size,
                                    device_dirty, dirty_devices, n_dirty_devices)
                        elif not transfer_queued[tr]:
                            n_dirty_devices, n_dirty_channels = _send(
                                tr, d, now, n_ops, n_devices, copy_us, transfer_dst,
                                transfer_queued, ready_time, ready_task, device_base,
                                ready_size, device_dirty, dirty_devices, n_dirty_devices,
                                queued_time, queued_transfer, channel_base, queued_size,
                                channel_dirty, dirty_channels, n_dirty_channels)
                    tr = tensor_fetch[t]
                    if tr >= 0 and not transfer_queued[tr]:
                        n_dirty_devices, n_dirty_channels = _send(
                            tr, d, now, n_ops, n_devices, copy_us, transfer_dst,
                            transfer_queued, ready_time, ready_task, device_base, ready_size,
                            device_dirty, dirty_devices, n_dirty_devices, queued_time,
                            queued_transfer, channel_base, queued_size, channel_dirty,
                            dirty_channels, n_dirty_channels)
                for k in range(control_ptr[op], control_ptr[op + 1]):
                    successor = control_succ[k]
                    waiting_for[successor] -= 1
                    if waiting_for[successor] == 0:
                        n_dirty_devices = _wake(successor, placement[successor], now,
                                                ready_time, ready_task, device_base, ready_size,
                                                device_dirty, dirty_devices, n_dirty_devices)
            elif ident < n_tasks and (ident - n_ops) % 2 == 0:    # serialized: onto the wire
                tr = (ident - n_ops) // 2
                n_dirty_channels = _queue_transfer(
                    tr, d * n_devices + transfer_dst[tr], now, queued_time, queued_transfer,
                    channel_base, queued_size, channel_dirty, dirty_channels, n_dirty_channels)
            elif ident >= n_tasks:            # off the wire: the sender's copy may go
                tr = ident - n_tasks
                t = transfer_tensor[tr]
                src = transfer_src[tr]
                c = src * n_devices + transfer_dst[tr]
                channel_busy[c] = False
                n_dirty_channels = _mark(channel_dirty, dirty_channels, n_dirty_channels, c)
                if transfer_feeds[tr] < 0:    # the session holds a feed, not the device
                    tensor_holds[t] -= 1
                    if tensor_holds[t] == 0:
                        memory[src] -= tensor_bytes[t]
                if copy_us[tr] > 0:
                    n_dirty_devices = _wake(n_ops + 2 * tr + 1, transfer_dst[tr],
                                            now - COPIES_FIRST_US, ready_time, ready_task,
                                            device_base, ready_size, device_dirty,
                                            dirty_devices, n_dirty_devices)
                else:
                    n_dirty_devices = _deliver(tr, now, placement, tensor_edge_ptr, tensor_edges,
                                               edge_transfer, edge_consumer, transfer_tensor,
                                               transfer_feeds, waiting_for, ready_time,
                                               ready_task, device_base, ready_size,
                                               device_dirty, dirty_devices, n_dirty_devices)
            else:                             # deserialized: the consumers may run
                n_dirty_devices = _deliver((ident - n_ops) // 2, now, placement,
                                           tensor_edge_ptr, tensor_edges, edge_transfer,
                                           edge_consumer, transfer_tensor, transfer_feeds,
                                           waiting_for, ready_time, ready_task, device_base,
                                           ready_size, device_dirty, dirty_devices,
                                           n_dirty_devices)
    return (op_start, op_end, transfer_tensor[:n_transfers].copy(),
            transfer_src[:n_transfers].copy(), transfer_dst[:n_transfers].copy(),
            transfer_start, transfer_end, copy_start, copy_end, busy, peak)


@numba.njit(cache=True, inline="always")
def _queue_transfer(tr, channel, now, queued_time, queued_transfer, channel_base, queued_size,
                    channel_dirty, dirty_channels, n_dirty_channels):
    """Queue a transfer on its channel; return the new count of channels to revisit."""
    _heap_push(queued_time, queued_transfer, channel_base[channel], queued_size[channel], now, tr)
    queued_size[channel] += 1
    return _mark(channel_dirty, dirty_channels, n_dirty_channels, channel)


@numba.njit(cache=True, inline="always")
def _send(tr, src, now, n_ops, n_devices, copy_us, transfer_dst, transfer_queued, ready_time,
          ready_task, device_base, ready_size, device_dirty, dirty_devices, n_dirty_devices,
          queued_time, queued_transfer, channel_base, queued_size, channel_dirty,
          dirty_channels, n_dirty_channels):
    """Start transfer tr from device src: its sender's copy task, or the wire when it has
    none; returns the new counts of devices and channels to revisit."""
    transfer_queued[tr] = True
    if copy_us[tr] > 0:
        n_dirty_devices = _wake(n_ops + 2 * tr, src, now - COPIES_FIRST_US, ready_time,
                                ready_task, device_base, ready_size, device_dirty,
                                dirty_devices, n_dirty_devices)
    else:
        n_dirty_channels = _queue_transfer(
            tr, src * n_devices + transfer_dst[tr], now, queued_time, queued_transfer,
            channel_base, queued_size, channel_dirty, dirty_channels, n_dirty_channels)
    return n_dirty_devices, n_dirty_channels


@numba.njit(cache=True, inline="always")
def _deliver(tr, now, placement, tensor_edge_ptr, tensor_edges, edge_transfer, edge_consumer,
             transfer_tensor, transfer_feeds, waiting_for, ready_time, ready_task, device_base,
             ready_size, device_dirty, dirty_devices, n_dirty_devices):
    """A received tensor is usable: wake the consumers it completes (for a feed, its op)."""
    f = transfer_feeds[tr]
    if f >= 0:
        waiting_for[f] -= 1
        if waiting_for[f] == 0:
            n_dirty_devices = _wake(f, placement[f], now, ready_time, ready_task, device_base,
                                    ready_size, device_dirty, dirty_devices, n_dirty_devices)
        return n_dirty_devices
    t = transfer_tensor[tr]
    for j in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
        e = tensor_edges[j]
        if edge_transfer[e] == tr:
            consumer = edge_consumer[e]
            waiting_for[consumer] -= 1
            if waiting_for[consumer] == 0:
                n_dirty_devices = _wake(consumer, placement[consumer], now, ready_time,
                                        ready_task, device_base, ready_size, device_dirty,
                                        dirty_devices, n_dirty_devices)
    return n_dirty_devices
