"""The simulator's input: a graph, its costs and its devices as flat arrays, built once.

The compiled loop walks CSR lists (tensor -> edges, op -> inputs, outputs, control successors)
instead of Python objects, so one placement costs a millisecond, not a graph traversal.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numba
import numpy as np

from tf_placeto.graph.outputs import shape_tuple, tensor_info

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
    remote_input_us: Optional[np.ndarray] = None  # (n_ops,): more per input that travels (a
    #                                               loop's messages, every iteration)
    link_copy_share: Optional[np.ndarray] = None  # float64 (n_devices, n_devices) in [0, 0.5]
    link_copy_us: Optional[np.ndarray] = None     # float64 (n_devices, n_devices): fixed time of
    #                                               each copy task, at the sender and receiver
    device_task: Optional[np.ndarray] = None      # int64 (n_devices,): the process of each device
    remote_task_us: float = 0.0    # per step, per task other than task 0 (the session's) used
    task_message_us: float = 0.0   # per step, per transfer between tasks: a message's cost
    #                                beyond its wire time (the rendezvous, its RecvTensor call)
    floating_us: float = 0.0       # streams only: per step, work on whichever device's
    floating_message_us: float = 0.0   # processor is free, and more per message (stream.py)
    feed_ops: Optional[np.ndarray] = None       # int64: ops whose outputs the session feeds;
    #                                             placed outside device 0's task, they first
    #                                             receive their tensor from device 0
    fetch_tensors: Optional[np.ndarray] = None  # int64: tensors the session fetches; made
    #                                             outside device 0's task, they travel to it
    tensor_names: Optional[list] = None  # for schedules; default "producer:k"

    def __post_init__(self):
        self.compute_us = np.asarray(self.compute_us, dtype=np.float64)
        if self.compute_us.ndim == 1:
            self.compute_us = self.compute_us[:, None]
        if self.remote_extra_us is None:
            self.remote_extra_us = np.zeros_like(self.compute_us)
        self.remote_extra_us = np.asarray(self.remote_extra_us, dtype=np.float64).reshape(
            self.compute_us.shape[0], -1)
        if self.remote_input_us is None:
            self.remote_input_us = np.zeros(self.compute_us.shape[0])
        self.remote_input_us = np.asarray(self.remote_input_us, dtype=np.float64).reshape(-1)
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
        if self.link_copy_us is None:
            self.link_copy_us = np.zeros_like(self.link_latency_us)
        self.link_copy_us = np.asarray(self.link_copy_us, dtype=np.float64)
        if self.device_task is None:
            self.device_task = np.zeros(len(self.device_names), dtype=np.int64)
        self.device_task = np.asarray(self.device_task, dtype=np.int64).reshape(-1)
        self.remote_task_us = float(self.remote_task_us)
        self.task_message_us = float(self.task_message_us)
        self.floating_us = float(self.floating_us)
        self.floating_message_us = float(self.floating_message_us)
        self.feed_ops = np.asarray([] if self.feed_ops is None else self.feed_ops,
                                   dtype=np.int64).reshape(-1)
        self.fetch_tensors = np.asarray([] if self.fetch_tensors is None else self.fetch_tensors,
                                        dtype=np.int64).reshape(-1)
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
                      remote_extra_us=None, device_task=None) -> "SimulationProblem":
        """One tensor per op output; edges and sizes from the graph; the graph's feeds and
        fetches are the session's.

        `compute_us` and `remote_extra_us` are (n_ops,) or (n_ops, n_device_types);
        `device_type_of` may be None (one type). Link arguments are scalars (every pair of
        distinct devices alike) or matrices.
        `persistent_bytes` defaults to each variable's size on the op that holds it.
        `device_task`: the process of each device (default: all in one).
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
            device_task=device_task,
            tensor_names=tensor_names,
            feed_ops=graph.feed_ops,
            fetch_tensors=[tensor_of[output] for output in graph.fetch_outputs
                           if output in tensor_of],
        )

    def _validate(self) -> None:
        n_ops, n_devices, n_tensors = self.n_ops, self.n_devices, len(self.tensor_producer)
        checks = [
            (self.compute_us.shape[0] == n_ops, "compute_us needs one row per op"),
            (np.all(self.compute_us >= 0), "compute_us must be >= 0"),
            (self.remote_extra_us.shape == self.compute_us.shape
             and np.all(self.remote_extra_us >= 0),
             "remote_extra_us must be >= 0, shaped like compute_us"),
            (self.remote_input_us.shape == (n_ops,) and np.all(self.remote_input_us >= 0),
             "remote_input_us must be >= 0, one entry per op"),
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
            (self.link_copy_us.shape == (n_devices, n_devices)
             and np.all(self.link_copy_us >= 0),
             "link copy times must be an (n_devices, n_devices) matrix >= 0"),
            (self.device_task.shape == (n_devices,), "device_task needs one entry per device"),
            (self.remote_task_us >= 0, "remote_task_us must be >= 0"),
            (self.task_message_us >= 0, "task_message_us must be >= 0"),
            (self.floating_us >= 0 and self.floating_message_us >= 0,
             "floating_us and floating_message_us must be >= 0"),
            (np.all((self.feed_ops >= 0) & (self.feed_ops < n_ops)), "feed_ops must name ops"),
            (np.all((self.fetch_tensors >= 0) & (self.fetch_tensors < n_tensors)),
             "fetch_tensors must name tensors"),
            (self.memory_capacity.shape == (n_devices,),
             "memory_capacity needs one entry per device"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def _build_adjacency(self) -> None:
        """CSR lists the compiled loop walks: tensor -> edges, op -> input edges, outputs,
        control successors; plus each op's count of predecessors, a topological order and
        the mask of fetched tensors."""
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
        self.fetched = np.zeros(n_tensors, np.bool_)
        self.fetched[self.fetch_tensors] = True


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
    from tensorflow.python.framework import dtypes  # heavy: only for sizes no read recorded

    info = tensor_info(dtypes.as_dtype(node_def.attr["dtype"].type),
                       shape_tuple(node_def.attr["shape"].shape))
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
