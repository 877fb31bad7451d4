"""The op graph: every op a step really runs, with data and control edges.

This is what the rest of the project works on. Op names are flat: an op inside a function body
is named by the call path that reaches it (`StatefulPartitionedCall/StatefulPartitionedCall/
model/conv2d/Conv2D`), which is also the name TensorFlow's step stats give it after Grappler
inlines the functions.
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from typing import Any, Optional

import numpy as np
import pandas as pd

# The name scopes TensorFlow gives a gradient's ops: tf.GradientTape's, and tf.gradients'
# ("gradients", then "gradients_1", ... for later calls in one graph).
_GRADIENT_SCOPE = re.compile(r"(^|/)(gradient_tape|gradients(_\d+)?)/")


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One output of an op: dtype name, static shape (None dims unknown) and size."""

    dtype: str
    shape: Optional[tuple]
    nbytes: Optional[int]


@dataclasses.dataclass
class FunctionInstance:
    """One call of a FunctionDef whose body was inlined into the op graph.

    The same FunctionDef may be called from several places; each call is its own instance,
    so that write-back can give each its own devices when a placement asks for it.
    """

    function_name: str
    prefix: str                      # flat-name prefix of the body ops, ends with "/"
    parent: Optional["FunctionInstance"]
    call_node: str                   # name of the call NodeDef inside the parent scope
    children: list = dataclasses.field(default_factory=list)
    ops: list = dataclasses.field(default_factory=list)   # op indices directly in this body

    def subtree_ops(self):
        """Indices of the ops in this body and in the bodies it calls."""
        yield from self.ops
        for child in self.children:
            yield from child.subtree_ops()


@dataclasses.dataclass
class Op:
    """One op of the flattened graph."""

    index: int
    name: str
    type: str
    requested_device: str
    node_def: Any                    # the NodeDef as it stands in the source (read-only)
    scope: Optional[FunctionInstance]  # None: a node of the top-level graph
    outputs: list                    # [TensorInfo]

    @property
    def local_name(self) -> str:
        """The NodeDef's own name inside its graph or function body."""
        return self.node_def.name

    @property
    def output_bytes(self) -> int:
        return sum(t.nbytes or 0 for t in self.outputs)


@dataclasses.dataclass(frozen=True)
class DataEdge:
    src: int
    src_slot: int
    dst: int
    dst_slot: int


class OpGraph:
    """Ops and edges of one step, plus where each op came from (for write-back)."""

    def __init__(self, ops: list, data_edges: list, control_edges: list,
                 instances: list, source: Any = None):
        self.ops = ops
        self.data_edges = data_edges
        self.control_edges = control_edges          # [(src, dst)]
        self.loop_back_edges = []                   # TF1 NextIteration -> Merge, not in the DAG
        self.fetch_outputs = []                     # [(op, slot)] the caller fetches
        self.instances = instances                  # [FunctionInstance], top-level calls first
        self.source = source
        self._by_name = {op.name: op.index for op in ops}

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return (f"OpGraph({len(self.ops)} ops, {len(self.data_edges)} data edges, "
                f"{len(self.control_edges)} control edges)")

    def index(self, name: str) -> int:
        return self._by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def op(self, name: str) -> Op:
        return self.ops[self._by_name[name]]

    @property
    def feed_ops(self) -> list:
        """The ops whose values the caller feeds: top-level Placeholders other than captured
        resources (a tf.function's variables)."""
        return [op.index for op in self.ops if op.type == "Placeholder" and op.scope is None
                and not (op.outputs and op.outputs[0].dtype == "resource")]

    def edge_bytes(self, edge: DataEdge) -> int:
        return self.ops[edge.src].outputs[edge.src_slot].nbytes or 0

    def successors(self) -> list:
        """For each op, the ops that depend on it (data or control), deduplicated, ordered."""
        succ = [set() for _ in self.ops]
        for e in self.data_edges:
            succ[e.src].add(e.dst)
        for src, dst in self.control_edges:
            succ[src].add(dst)
        return [sorted(s) for s in succ]

    def predecessors(self) -> list:
        pred = [set() for _ in self.ops]
        for e in self.data_edges:
            pred[e.dst].add(e.src)
        for src, dst in self.control_edges:
            pred[dst].add(src)
        return [sorted(p) for p in pred]

    def backward_mask(self) -> np.ndarray:
        """Per op, whether it is part of a training step's backward pass: an op in a
        gradient's name scope, or one that depends on such an op (the optimizer's updates, the
        step's last ops). Tarnawski et al.'s pipeline keeps these with the forward layer they
        differentiate; all False in a graph without gradients."""
        backward = np.zeros(len(self.ops), dtype=bool)
        stack = [op.index for op in self.ops if _GRADIENT_SCOPE.search(op.name)]
        successors = self.successors() if stack else []
        while stack:
            op = stack.pop()
            if not backward[op]:
                backward[op] = True
                stack.extend(successors[op])
        return backward

    def demand_order(self) -> np.ndarray:
        """A topological order that emits each op just before its first consumer needs it.

        Walking back from the sinks, depth first, keeps chains together and puts weights and
        constants next to the layer that reads them; grouping cuts this order into pieces.
        Returns the position of each op in the order.
        """
        pred = self.predecessors()
        has_succ = np.zeros(len(self.ops), dtype=bool)
        for e in self.data_edges:
            has_succ[e.src] = True
        for src, _ in self.control_edges:
            has_succ[src] = True
        position = np.full(len(self.ops), -1, dtype=np.int64)
        next_position = 0
        state = np.zeros(len(self.ops), dtype=np.int8)  # 0 new, 1 on stack, 2 emitted
        roots = [i for i in range(len(self.ops)) if not has_succ[i]]
        for root in roots:
            stack = [(root, 0)]
            state[root] = 1
            while stack:
                node, k = stack[-1]
                inputs = pred[node]
                while k < len(inputs) and state[inputs[k]] != 0:
                    if state[inputs[k]] == 1:
                        raise ValueError(f"the graph has a cycle through {self.ops[node].name}")
                    k += 1
                if k < len(inputs):
                    stack[-1] = (node, k + 1)
                    child = inputs[k]
                    state[child] = 1
                    stack.append((child, 0))
                else:
                    stack.pop()
                    state[node] = 2
                    position[node] = next_position
                    next_position += 1
        if next_position != len(self.ops):
            raise ValueError("the graph has a cycle (some ops never become ready)")
        return position

    def topological_order(self) -> list:
        """Kahn's order, ties broken by op index: deterministic for the same graph."""
        succ = self.successors()
        indegree = np.zeros(len(self.ops), dtype=np.int64)
        for targets in succ:
            for t in targets:
                indegree[t] += 1
        ready = [i for i in range(len(self.ops)) if indegree[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            node = heapq.heappop(ready)
            order.append(node)
            for t in succ[node]:
                indegree[t] -= 1
                if indegree[t] == 0:
                    heapq.heappush(ready, t)
        if len(order) != len(self.ops):
            raise ValueError("the graph has a cycle")
        return order

    def input_tensors(self) -> list:
        """For each op, {input slot: TensorInfo} of the tensors it reads."""
        inputs = [{} for _ in self.ops]
        for e in self.data_edges:
            inputs[e.dst][e.dst_slot] = self.ops[e.src].outputs[e.src_slot]
        return inputs

    def kernel_signatures(self) -> list:
        """For each op, what decides its kernel's time: its type, its attributes other than
        those TensorFlow adds itself (`_`-prefixed), and the dtypes and shapes of its inputs
        in order and of its outputs; None where a shape is not fully known.

        Ops with equal signatures run the same kernel on the same data sizes, so they should
        cost the same (the profiler pools their traced times).
        """
        signatures = []
        for op, by_slot in zip(self.ops, self.input_tensors()):
            inputs = [by_slot[slot] for slot in sorted(by_slot)]
            if any(t.shape is None or None in t.shape for t in inputs + op.outputs):
                signatures.append(None)
                continue
            attrs = tuple(sorted((key, value.SerializeToString(deterministic=True))
                                 for key, value in op.node_def.attr.items()
                                 if not key.startswith("_")))
            signatures.append((op.type, attrs, tuple((t.dtype, t.shape) for t in inputs),
                               tuple((t.dtype, t.shape) for t in op.outputs)))
        return signatures

    def to_dataframe(self):
        """One row per op: name, type, requested device, output bytes, in/out degree."""
        indeg = np.zeros(len(self.ops), dtype=np.int64)
        outdeg = np.zeros(len(self.ops), dtype=np.int64)
        for e in self.data_edges:
            indeg[e.dst] += 1
            outdeg[e.src] += 1
        return pd.DataFrame({
            "name": [op.name for op in self.ops],
            "type": [op.type for op in self.ops],
            "requested_device": [op.requested_device for op in self.ops],
            "output_bytes": [op.output_bytes for op in self.ops],
            "inputs": indeg,
            "consumers": outdeg,
        })
