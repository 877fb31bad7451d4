"""Event-driven step-time simulator: the cheap stand-in for a real run that placers learn from.

A real run of a placed graph takes seconds; a placer needs thousands of trials. The simulator
replays one training step from per-op costs, tensor sizes and link speeds, in about a
millisecond, and reports the step time, each device's busy time and its peak memory.

The model is Placeto's (../shared/REFERENCE.md, "Their simulator") with its gaps closed:
- each device runs one op at a time; ready ops wait FIFO by the time they became ready (ties by
  op index); an op is ready when every input tensor is on its device and every control
  predecessor has finished; `op_overhead_us` is part of each op's busy time, so its outputs
  appear after it;
- a tensor consumed on another device is sent once per destination device; each ordered device
  pair is a channel carrying one transfer at a time, FIFO by the time the tensor became
  available (ties by tensor); a transfer takes latency + bytes / bandwidth;
- where the devices' own processors copy the bytes (CPU workers talking gRPC: the sender
  serializes, the receiver deserializes), a share s of bytes / bandwidth is a copy task on the
  sender's queue before the wire and another on the receiver's queue after it, and the wire
  takes latency + (1 - 2s) bytes / bandwidth: alone, a transfer still takes its measured time,
  but it competes with the ops of both devices. s = 0 (a DMA engine): the wire does it all;
- an op with an input from another device takes `remote_extra_us` more: some kernels are
  slower when their inputs travel (oneDNN's MaxPoolGrad loses the workspace its forward op
  left on its own device and recomputes it);
- memory: the persistent bytes (weights) of the ops on a device count for the whole step; an
  output is allocated at its op's start and freed when its last local consumer has finished and
  its last outgoing transfer has completed (no consumer: at its op's end); a received copy is
  allocated at its transfer's start and freed when its last consumer on that device ends;
- devices may be of different types, with a cost column per type;
- the step ends when the last op or transfer ends.

Events are handled in time order. All events at one instant are handled (finishing ops and
transfers, freeing memory, waking consumers) before any device or channel starts new work at
that instant, so frees precede allocations at equal times and the FIFO order sees every op that
became ready then. Work that takes zero time still passes through the queues: it ends at the
same instant, in a later round, so what it wakes queues behind what was started in the round
before (causal order).

`SimulationProblem` turns a graph into flat arrays (CSR adjacency) once; `simulate` runs the
compiled loop (numba) for one placement.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

import numba
import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# Ops that hold a variable for the whole step. A Placeholder of dtype resource is a variable
# captured by a tf.function; it counts only if a ReadVariableOp or its attrs give a size.
_VARIABLE_OP_TYPES = ("VarHandleOp", "VariableV2", "Variable")


@dataclasses.dataclass
class SimulationProblem:
    """Everything the simulator needs, as arrays, compiled once per (graph, costs, devices)."""

    op_names: list                 # n_ops
    compute_us: np.ndarray         # float64 (n_ops, n_device_types): compute time per device type
    device_type_of: np.ndarray     # int64 (n_devices,): index into compute_us's columns
    device_names: list             # n_devices
    tensor_producer: np.ndarray    # int64 (n_tensors,): op that produces each tensor
    tensor_bytes: np.ndarray       # int64 (n_tensors,)
    edge_tensor: np.ndarray        # int64 (n_edges,): data edge = tensor -> consumer op
    edge_consumer: np.ndarray      # int64 (n_edges,)
    control_src: np.ndarray        # int64 (n_control,)
    control_dst: np.ndarray        # int64 (n_control,)
    persistent_bytes: np.ndarray   # int64 (n_ops,): held on the op's device for the whole step
    link_latency_us: np.ndarray    # float64 (n_devices, n_devices), diagonal 0
    link_bytes_per_us: np.ndarray  # float64 (n_devices, n_devices), diagonal inf
    memory_capacity: np.ndarray    # float64 (n_devices,), np.inf = unknown/unlimited
    op_overhead_us: float = 0.0    # fixed gap after each op on a device
    remote_extra_us: Optional[np.ndarray] = None  # like compute_us: more when an input travels
    link_copy_share: Optional[np.ndarray] = None  # float64 (n_devices, n_devices) in [0, 0.5]
    tensor_names: Optional[list] = None  # for schedules; default "producer:k"

    def __post_init__(self):
        self.compute_us = np.asarray(self.compute_us, dtype=np.float64)
        if self.compute_us.ndim == 1:
            self.compute_us = self.compute_us[:, None]
        if self.remote_extra_us is None:
            self.remote_extra_us = np.zeros_like(self.compute_us)
        self.remote_extra_us = np.asarray(self.remote_extra_us, dtype=np.float64).reshape(
            self.compute_us.shape[0], -1)
        self.device_type_of = np.asarray(self.device_type_of, dtype=np.int64)
        for name in ("tensor_producer", "tensor_bytes", "edge_tensor", "edge_consumer",
                     "control_src", "control_dst", "persistent_bytes"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.int64).reshape(-1))
        self.link_latency_us = np.asarray(self.link_latency_us, dtype=np.float64)
        self.link_bytes_per_us = np.asarray(self.link_bytes_per_us, dtype=np.float64)
        self.memory_capacity = np.asarray(self.memory_capacity, dtype=np.float64).reshape(-1)
        if self.link_copy_share is None:
            self.link_copy_share = np.zeros_like(self.link_latency_us)
        self.link_copy_share = np.asarray(self.link_copy_share, dtype=np.float64)
        self.op_overhead_us = float(self.op_overhead_us)
        self._validate()
        if self.tensor_names is None:
            self.tensor_names = _default_tensor_names(self.op_names, self.tensor_producer)
        self._build_adjacency()

    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    @classmethod
    def from_op_graph(cls, graph, compute_us, device_names, device_type_of, link_latency_us,
                      link_bytes_per_us, memory_capacity=None, persistent_bytes=None,
                      op_overhead_us=0.0, link_copy_share=0.0,
                      remote_extra_us=None) -> "SimulationProblem":
        """One tensor per op output; edges and sizes from the graph.

        `compute_us` and `remote_extra_us` are (n_ops,) or (n_ops, n_device_types);
        `device_type_of` may be None (one type). Link arguments are scalars (every pair of
        distinct devices alike) or matrices.
        `persistent_bytes` defaults to each variable's size on the op that holds it.
        """
        n_devices = len(device_names)
        tensor_of = {}
        tensor_producer, tensor_bytes, tensor_names = [], [], []
        for op in graph.ops:
            for slot, info in enumerate(op.outputs):
                tensor_of[(op.index, slot)] = len(tensor_producer)
                tensor_producer.append(op.index)
                tensor_bytes.append(info.nbytes or 0)
                tensor_names.append(f"{op.name}:{slot}")
        edge_tensor = [tensor_of[(e.src, e.src_slot)] for e in graph.data_edges]
        edge_consumer = [e.dst for e in graph.data_edges]
        control = np.asarray(graph.control_edges, dtype=np.int64).reshape(-1, 2)
        if device_type_of is None:
            device_type_of = np.zeros(n_devices, dtype=np.int64)
        if memory_capacity is None:
            memory_capacity = np.full(n_devices, np.inf)
        if persistent_bytes is None:
            persistent_bytes = variable_bytes(graph)
        return cls(
            op_names=[op.name for op in graph.ops],
            compute_us=compute_us,
            device_type_of=device_type_of,
            device_names=list(device_names),
            tensor_producer=tensor_producer,
            tensor_bytes=tensor_bytes,
            edge_tensor=edge_tensor,
            edge_consumer=edge_consumer,
            control_src=control[:, 0],
            control_dst=control[:, 1],
            persistent_bytes=persistent_bytes,
            link_latency_us=link_matrix(link_latency_us, n_devices, diagonal=0.0),
            link_bytes_per_us=link_matrix(link_bytes_per_us, n_devices, diagonal=np.inf),
            memory_capacity=memory_capacity,
            op_overhead_us=op_overhead_us,
            remote_extra_us=remote_extra_us,
            link_copy_share=link_matrix(link_copy_share, n_devices, diagonal=0.0),
            tensor_names=tensor_names,
        )

    def _validate(self) -> None:
        n_ops, n_devices, n_tensors = self.n_ops, self.n_devices, len(self.tensor_producer)
        checks = [
            (self.compute_us.shape[0] == n_ops, "compute_us needs one row per op"),
            (np.all(self.compute_us >= 0), "compute_us must be >= 0"),
            (self.remote_extra_us.shape == self.compute_us.shape
             and np.all(self.remote_extra_us >= 0),
             "remote_extra_us must be >= 0, shaped like compute_us"),
            (self.device_type_of.shape == (n_devices,),
             "device_type_of needs one entry per device"),
            (np.all((self.device_type_of >= 0) & (self.device_type_of < self.compute_us.shape[1])),
             "device_type_of must index compute_us's columns"),
            (self.tensor_bytes.shape == (n_tensors,), "tensor_bytes needs one entry per tensor"),
            (np.all((self.tensor_producer >= 0) & (self.tensor_producer < n_ops)),
             "tensor_producer must name ops"),
            (self.edge_consumer.shape == self.edge_tensor.shape, "edge arrays differ in length"),
            (np.all((self.edge_tensor >= 0) & (self.edge_tensor < n_tensors)),
             "edge_tensor must name tensors"),
            (np.all((self.edge_consumer >= 0) & (self.edge_consumer < n_ops)),
             "edge_consumer must name ops"),
            (self.control_src.shape == self.control_dst.shape, "control arrays differ in length"),
            (np.all((self.control_src >= 0) & (self.control_src < n_ops)
                    & (self.control_dst >= 0) & (self.control_dst < n_ops)),
             "control edges must name ops"),
            (self.persistent_bytes.shape == (n_ops,), "persistent_bytes needs one entry per op"),
            (self.link_latency_us.shape == (n_devices, n_devices)
             and self.link_bytes_per_us.shape == (n_devices, n_devices),
             "link matrices must be (n_devices, n_devices)"),
            (np.all(self.link_latency_us >= 0) and np.all(self.link_bytes_per_us > 0),
             "link latencies must be >= 0 and bandwidths > 0"),
            (self.link_copy_share.shape == (n_devices, n_devices)
             and np.all((self.link_copy_share >= 0) & (self.link_copy_share <= 0.5)),
             "link copy shares must be an (n_devices, n_devices) matrix in [0, 0.5]"),
            (self.memory_capacity.shape == (n_devices,),
             "memory_capacity needs one entry per device"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def _build_adjacency(self) -> None:
        """CSR lists the compiled loop walks: tensor -> edges, op -> input edges, outputs,
        control successors; plus each op's count of predecessors and a topological order."""
        n_ops, n_tensors = self.n_ops, len(self.tensor_producer)
        self._tensor_edge_ptr, self._tensor_edges = _csr(self.edge_tensor, n_tensors)
        self._op_in_ptr, self._op_in_edges = _csr(self.edge_consumer, n_ops)
        self._op_out_ptr, self._op_out_tensors = _csr(self.tensor_producer, n_ops)
        self._control_ptr, order = _csr(self.control_src, n_ops)
        self._control_succ = self.control_dst[order]
        self._n_preds = (np.bincount(self.edge_consumer, minlength=n_ops)
                         + np.bincount(self.control_dst, minlength=n_ops)).astype(np.int64)
        self._topological_order = _topological_order(
            self._tensor_edge_ptr, self._tensor_edges, self.edge_consumer, self._op_out_ptr,
            self._op_out_tensors, self._control_ptr, self._control_succ, self._n_preds)
        if len(self._topological_order) != n_ops:
            raise ValueError("the graph has a cycle: some ops would never become ready")


@dataclasses.dataclass
class SimulationResult:
    step_time_us: float
    busy_us: np.ndarray            # (n_devices,)
    peak_memory_bytes: np.ndarray  # (n_devices,)
    feasible: bool                 # every peak <= capacity
    memory_excess_bytes: float     # sum over devices of max(0, peak - capacity)
    # When asked: kind ('op'|'transfer'|'copy'), name, device (transfers: "src->dst"),
    # start_us, end_us, bytes; ordered by start.
    schedule: Optional[pd.DataFrame] = None
    op_start_us: Optional[np.ndarray] = None    # (n_ops,): when each op started


def simulate(problem: SimulationProblem, placement: np.ndarray,
             schedule: bool = False) -> SimulationResult:
    """Replay one step with each op on `placement[op]` (device indices)."""
    placement = np.asarray(placement)
    if placement.shape != (problem.n_ops,) or not np.issubdtype(placement.dtype, np.integer):
        raise ValueError(f"placement must be {problem.n_ops} integer device indices")
    placement = placement.astype(np.int64, copy=False)
    if problem.n_ops and (placement.min() < 0 or placement.max() >= problem.n_devices):
        raise ValueError(f"placement indices must lie in [0, {problem.n_devices})")
    (op_start, op_end, transfer_tensor, transfer_dst, transfer_start, transfer_end,
     copy_start, copy_end, busy, peak) = _simulate_compiled(
        placement, problem.compute_us, problem.remote_extra_us, problem.device_type_of,
        problem.op_overhead_us, problem.tensor_producer, problem.tensor_bytes,
        problem.edge_tensor, problem.edge_consumer,
        problem._tensor_edge_ptr, problem._tensor_edges, problem._op_in_ptr,
        problem._op_in_edges, problem._op_out_ptr, problem._op_out_tensors,
        problem._control_ptr, problem._control_succ, problem._n_preds,
        problem.persistent_bytes, problem.link_latency_us, problem.link_bytes_per_us,
        problem.link_copy_share)
    step = max(op_end.max(initial=0.0), transfer_end.max(initial=0.0),
               copy_end.max(initial=0.0))
    excess = np.maximum(peak - problem.memory_capacity, 0.0)
    result = SimulationResult(step_time_us=float(step), busy_us=busy,
                              peak_memory_bytes=peak.astype(np.int64),
                              feasible=bool(np.all(excess == 0)),
                              memory_excess_bytes=float(excess.sum()), op_start_us=op_start)
    if schedule:
        result.schedule = _schedule_frame(problem, placement, op_start, op_end, transfer_tensor,
                                          transfer_dst, transfer_start, transfer_end,
                                          copy_start, copy_end)
    return result


def feasible(problem: SimulationProblem, placement: np.ndarray) -> bool:
    """Whether every device's peak memory fits its capacity under this placement."""
    return simulate(problem, placement).feasible


def lower_bound_us(problem: SimulationProblem, n_devices: Optional[int] = None) -> float:
    """No placement on these devices can beat this step time.

    max(critical path with each op on its fastest device type present, total fastest work /
    n_devices, largest single op). Communication is left out so that it stays a true bound;
    the per-op overhead is kept, since every op pays it.
    """
    n_devices = problem.n_devices if n_devices is None else n_devices
    if problem.n_ops == 0:
        return 0.0
    types = np.unique(problem.device_type_of)
    fastest = problem.compute_us[:, types].min(axis=1) + problem.op_overhead_us
    critical_path = _longest_path(
        fastest, problem._topological_order, problem._tensor_edge_ptr, problem._tensor_edges,
        problem.edge_consumer, problem._op_out_ptr, problem._op_out_tensors,
        problem._control_ptr, problem._control_succ)
    return float(max(critical_path, fastest.sum() / n_devices, fastest.max()))


def variable_bytes(graph) -> np.ndarray:
    """Bytes each op holds for the whole step: a variable's size on the op that owns it.

    The size is the largest ReadVariableOp output that reads the handle (the shapes TensorFlow
    recorded), else the `shape` and `dtype` attrs of the handle's NodeDef.
    """
    read_bytes = {}
    for e in graph.data_edges:
        reader = graph.ops[e.dst]
        if reader.type == "ReadVariableOp":
            nbytes = reader.outputs[0].nbytes or 0
            read_bytes[e.src] = max(read_bytes.get(e.src, 0), nbytes)
    sizes = np.zeros(len(graph.ops), dtype=np.int64)
    for op in graph.ops:
        holds_variable = op.type in _VARIABLE_OP_TYPES or (
            op.type == "Placeholder" and op.outputs and op.outputs[0].dtype == "resource")
        if not holds_variable:
            continue
        if op.index in read_bytes:
            sizes[op.index] = read_bytes[op.index]
        elif "shape" in op.node_def.attr and "dtype" in op.node_def.attr:
            sizes[op.index] = _attr_bytes(op.node_def)
    return sizes


def link_matrix(value, n_devices: int, diagonal: float) -> np.ndarray:
    """A scalar for every pair of distinct devices, or a full matrix; the diagonal is set."""
    matrix = np.array(np.broadcast_to(np.asarray(value, dtype=np.float64),
                                      (n_devices, n_devices)))
    np.fill_diagonal(matrix, diagonal)
    return matrix


def _attr_bytes(node_def) -> int:
    from tensorflow.python.framework import dtypes

    from tf_placeto.graph.importer import _shape_tuple, _tensor_info

    info = _tensor_info(dtypes.as_dtype(node_def.attr["dtype"].type),
                        _shape_tuple(node_def.attr["shape"].shape))
    return info.nbytes or 0


def _default_tensor_names(op_names, tensor_producer) -> list:
    seen = {}
    names = []
    for producer in tensor_producer:
        slot = seen.get(producer, 0)
        seen[producer] = slot + 1
        names.append(f"{op_names[producer]}:{slot}")
    return names


def _csr(keys: np.ndarray, n_rows: int):
    """Row pointers and the item order grouping items by key (stable: item order kept)."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_rows), out=ptr[1:])
    return ptr, order


def _schedule_frame(problem, placement, op_start, op_end, transfer_tensor, transfer_dst,
                    transfer_start, transfer_end, copy_start, copy_end):
    """Ops and copy tasks on their devices, transfers on their links ("src->dst")."""
    import pandas as pd

    op_bytes = np.bincount(problem.tensor_producer, weights=problem.tensor_bytes,
                           minlength=problem.n_ops).astype(np.int64)
    names = np.asarray(problem.device_names, dtype=object)
    src = placement[problem.tensor_producer[transfer_tensor]]
    tensor_names = np.asarray(problem.tensor_names, dtype=object)[transfer_tensor]
    nbytes = problem.tensor_bytes[transfer_tensor]
    ops = pd.DataFrame({"kind": "op", "name": problem.op_names, "device": names[placement],
                        "start_us": op_start, "end_us": op_end, "bytes": op_bytes})
    transfers = pd.DataFrame({
        "kind": "transfer", "name": tensor_names,
        "device": [f"{s}->{d}" for s, d in zip(names[src], names[transfer_dst])],
        "start_us": transfer_start, "end_us": transfer_end, "bytes": nbytes})
    copied = np.flatnonzero(copy_end[0::2] > copy_start[0::2])
    copies = pd.DataFrame({
        "kind": "copy",
        "name": np.concatenate([["send " + n for n in tensor_names[copied]],
                                ["receive " + n for n in tensor_names[copied]]]),
        "device": np.concatenate([names[src[copied]], names[transfer_dst[copied]]]),
        "start_us": np.concatenate([copy_start[0::2][copied], copy_start[1::2][copied]]),
        "end_us": np.concatenate([copy_end[0::2][copied], copy_end[1::2][copied]]),
        "bytes": np.concatenate([nbytes[copied], nbytes[copied]])})
    frame = pd.concat([ops, transfers, copies], ignore_index=True)
    return frame.sort_values(["start_us", "end_us"], kind="stable", ignore_index=True)


# ---- compiled core ------------------------------------------------------------------------
# Min-heaps live in flat arrays: heap h occupies keys[base[h]:base[h] + size[h]]; entries are
# ordered by (time, id), which is what makes every queue FIFO with deterministic ties.


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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



@numba.njit(cache=True)
def _mark(flags, stack, n, item):
    """Put `item` on a stack of things to revisit, once; return the stack's new size."""
    if not flags[item]:
        flags[item] = True
        stack[n] = item
        n += 1
    return n


@numba.njit(cache=True)
def _wake(task, d, now, ready_time, ready_task, device_base, ready_size, device_dirty,
          dirty_devices, n_dirty_devices):
    """Queue a task that is ready now on device d; return the new count of devices to revisit."""
    _heap_push(ready_time, ready_task, device_base[d], ready_size[d], now, task)
    ready_size[d] += 1
    return _mark(device_dirty, dirty_devices, n_dirty_devices, d)


@numba.njit(cache=True)
def _simulate_compiled(placement, compute_us, remote_extra_us, device_type_of, op_overhead_us,
                       tensor_producer, tensor_bytes, edge_tensor, edge_consumer,
                       tensor_edge_ptr, tensor_edges, op_in_ptr, op_in_edges,
                       op_out_ptr, op_out_tensors, control_ptr, control_succ, n_preds,
                       persistent_bytes, link_latency_us, link_bytes_per_us, link_copy_share):
    """The event loop. Device tasks are ops (ids < n_ops) and copies: n_ops + 2 tr sends tensor
    of transfer tr, n_ops + 2 tr + 1 receives it; events are device tasks ending and, with ids
    from n_tasks on, transfers leaving the wire."""
    n_ops = placement.shape[0]
    n_devices = device_type_of.shape[0]
    n_channels = n_devices * n_devices
    n_tensors = tensor_producer.shape[0]
    n_edges = edge_consumer.shape[0]

    # Transfers of this placement: one per (tensor, device with a consumer but not the producer).
    edge_transfer = np.full(n_edges, -1, np.int64)    # -1: the edge reads the local tensor
    transfer_tensor = np.empty(n_edges, np.int64)
    transfer_dst = np.empty(n_edges, np.int64)
    transfer_readers = np.zeros(n_edges, np.int64)    # edges that have yet to read the copy
    tensor_holds = np.zeros(n_tensors, np.int64)      # local readers + transfers yet to finish
    transfer_to = np.full(n_devices, -1, np.int64)
    reads_remote = np.zeros(n_ops, np.bool_)         # an input of the op travels to it
    n_transfers = 0
    for t in range(n_tensors):
        src = placement[tensor_producer[t]]
        for k in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
            e = tensor_edges[k]
            dst = placement[edge_consumer[e]]
            if dst == src:
                tensor_holds[t] += 1
                continue
            reads_remote[edge_consumer[e]] = True
            if transfer_to[dst] < 0:
                transfer_to[dst] = n_transfers
                transfer_tensor[n_transfers] = t
                transfer_dst[n_transfers] = dst
                tensor_holds[t] += 1
                n_transfers += 1
            edge_transfer[e] = transfer_to[dst]
            transfer_readers[transfer_to[dst]] += 1
        for k in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
            transfer_to[placement[edge_consumer[tensor_edges[k]]]] = -1
    n_tasks = n_ops + 2 * n_transfers
    copy_us = np.zeros(n_transfers, np.float64)       # each of its two copy tasks
    wire_us = np.zeros(n_transfers, np.float64)
    per_device = np.bincount(placement, minlength=n_devices)
    per_channel = np.zeros(n_channels, np.int64)
    for tr in range(n_transfers):
        t = transfer_tensor[tr]
        src = placement[tensor_producer[t]]
        dst = transfer_dst[tr]
        share = link_copy_share[src, dst]
        copy_us[tr] = share * tensor_bytes[t] / link_bytes_per_us[src, dst]
        wire_us[tr] = (link_latency_us[src, dst]
                       + (1.0 - 2.0 * share) * tensor_bytes[t] / link_bytes_per_us[src, dst])
        per_channel[src * n_devices + dst] += 1
        if share > 0:
            per_device[src] += 1
            per_device[dst] += 1

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
    waiting_for = n_preds.copy()

    now = 0.0
    for op in range(n_ops):
        if waiting_for[op] == 0:
            n_dirty_devices = _wake(op, placement[op], now, ready_time, ready_task, device_base,
                                    ready_size, device_dirty, dirty_devices, n_dirty_devices)

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
                if reads_remote[task]:
                    duration += remote_extra_us[task, device_type_of[d]]
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
                    placement[tensor_producer[transfer_tensor[(ident - n_ops) // 2]]]
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
                            transfer_queued[tr] = True
                            if copy_us[tr] > 0:
                                n_dirty_devices = _wake(
                                    n_ops + 2 * tr, d, now, ready_time, ready_task, device_base,
                                    ready_size, device_dirty, dirty_devices, n_dirty_devices)
                            else:
                                n_dirty_channels = _queue_transfer(
                                    tr, d * n_devices + transfer_dst[tr], now, queued_time,
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
                src = placement[tensor_producer[t]]
                c = src * n_devices + transfer_dst[tr]
                channel_busy[c] = False
                n_dirty_channels = _mark(channel_dirty, dirty_channels, n_dirty_channels, c)
                tensor_holds[t] -= 1
                if tensor_holds[t] == 0:
                    memory[src] -= tensor_bytes[t]
                if copy_us[tr] > 0:
                    n_dirty_devices = _wake(n_ops + 2 * tr + 1, transfer_dst[tr], now,
                                            ready_time, ready_task, device_base, ready_size,
                                            device_dirty, dirty_devices, n_dirty_devices)
                else:
                    n_dirty_devices = _deliver(tr, now, placement, tensor_edge_ptr, tensor_edges,
                                               edge_transfer, edge_consumer, transfer_tensor,
                                               waiting_for, ready_time, ready_task, device_base,
                                               ready_size, device_dirty, dirty_devices,
                                               n_dirty_devices)
            else:                             # deserialized: the consumers may run
                n_dirty_devices = _deliver((ident - n_ops) // 2, now, placement,
                                           tensor_edge_ptr, tensor_edges, edge_transfer,
                                           edge_consumer, transfer_tensor, waiting_for,
                                           ready_time, ready_task, device_base, ready_size,
                                           device_dirty, dirty_devices, n_dirty_devices)
    return (op_start, op_end, transfer_tensor[:n_transfers].copy(),
            transfer_dst[:n_transfers].copy(), transfer_start, transfer_end, copy_start,
            copy_end, busy, peak)


@numba.njit(cache=True)
def _queue_transfer(tr, channel, now, queued_time, queued_transfer, channel_base, queued_size,
                    channel_dirty, dirty_channels, n_dirty_channels):
    """Queue a transfer on its channel; return the new count of channels to revisit."""
    _heap_push(queued_time, queued_transfer, channel_base[channel], queued_size[channel], now, tr)
    queued_size[channel] += 1
    return _mark(channel_dirty, dirty_channels, n_dirty_channels, channel)


@numba.njit(cache=True)
def _deliver(tr, now, placement, tensor_edge_ptr, tensor_edges, edge_transfer, edge_consumer,
             transfer_tensor, waiting_for, ready_time, ready_task, device_base, ready_size,
             device_dirty, dirty_devices, n_dirty_devices):
    """A received tensor is usable: wake the consumers it completes."""
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


@numba.njit(cache=True)
def _topological_order(tensor_edge_ptr, tensor_edges, edge_consumer, op_out_ptr,
                       op_out_tensors, control_ptr, control_succ, n_preds):
    """Kahn's order over data and control edges; shorter than n_ops when there is a cycle."""
    n_ops = n_preds.shape[0]
    waiting_for = n_preds.copy()
    order = np.empty(n_ops, np.int64)
    n_ordered = 0
    for op in range(n_ops):
        if waiting_for[op] == 0:
            order[n_ordered] = op
            n_ordered += 1
    head = 0
    while head < n_ordered:
        op = order[head]
        head += 1
        for k in range(op_out_ptr[op], op_out_ptr[op + 1]):
            t = op_out_tensors[k]
            for j in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
                consumer = edge_consumer[tensor_edges[j]]
                waiting_for[consumer] -= 1
                if waiting_for[consumer] == 0:
                    order[n_ordered] = consumer
                    n_ordered += 1
        for k in range(control_ptr[op], control_ptr[op + 1]):
            successor = control_succ[k]
            waiting_for[successor] -= 1
            if waiting_for[successor] == 0:
                order[n_ordered] = successor
                n_ordered += 1
    return order[:n_ordered].copy()


@numba.njit(cache=True)
def _longest_path(cost, order, tensor_edge_ptr, tensor_edges, edge_consumer, op_out_ptr,
                  op_out_tensors, control_ptr, control_succ):
    """Length of the costliest chain of ops through data and control edges."""
    earliest_start = np.zeros(cost.shape[0], np.float64)
    longest = 0.0
    for op in order:
        finish = earliest_start[op] + cost[op]
        longest = max(longest, finish)
        for k in range(op_out_ptr[op], op_out_ptr[op + 1]):
            t = op_out_tensors[k]
            for j in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
                consumer = edge_consumer[tensor_edges[j]]
                earliest_start[consumer] = max(earliest_start[consumer], finish)
        for k in range(control_ptr[op], control_ptr[op + 1]):
            successor = control_succ[k]
            earliest_start[successor] = max(earliest_start[successor], finish)
    return longest
