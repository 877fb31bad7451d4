"""Hard colocation: the sets of ops TensorFlow requires on one device.

Three rules, each enforced by TensorFlow's placer, so a placement that breaks one fails there:
- `_class: loc:@name` attributes ask for colocation with the named op;
- a resource (or ref) tensor lives on its producer's device, so its producer and every
  consumer share a device (a variable with the ops that read and update it);
- ops that create the same shared resource (VarHandleOps with one `shared_name`) make one
  resource on one device;
- an op may only run on a device type with a kernel for it: a set may only go where every
  member has a kernel (types from the kernel registry).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tf_placeto.graph.kernels import kernel_device_types
from tf_placeto.graph.op_graph import OpGraph

_HANDLE_DTYPES = ("resource",)


class UnionFind:
    """Disjoint sets over 0..n-1; the smallest member is each set's representative."""

    def __init__(self, n: int):
        self.parent = np.arange(n)

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return int(root)

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def labels(self) -> np.ndarray:
        """Dense set ids, numbered in order of each set's smallest member."""
        roots = np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64)
        _, dense = np.unique(roots, return_inverse=True)
        return dense


@dataclasses.dataclass
class ColocationSets:
    set_of: np.ndarray               # op index -> set id
    members: list                    # set id -> sorted op indices
    reasons: list                    # set id -> sorted rule names that joined it
    device_types: list               # set id -> frozenset of allowed types, None = any

    def __len__(self) -> int:
        return len(self.members)

    def multi_op_sets(self) -> list:
        return [s for s, ops in enumerate(self.members) if len(ops) > 1]


def colocation_sets(graph: OpGraph) -> ColocationSets:
    uf = UnionFind(len(graph.ops))
    joined_by: dict = {}

    def join(a: int, b: int, rule: str) -> None:
        uf.union(a, b)
        joined_by.setdefault(a, set()).add(rule)
        joined_by.setdefault(b, set()).add(rule)

    for op in graph.ops:
        if "_class" not in op.node_def.attr:
            continue
        prefix = op.scope.prefix if op.scope is not None else ""
        for value in op.node_def.attr["_class"].list.s:
            text = value.decode()
            if text.startswith("loc:@") and prefix + text[5:] in graph:
                join(op.index, graph.index(prefix + text[5:]), "_class")
    creators: dict = {}
    for op in graph.ops:
        attr = op.node_def.attr
        if "shared_name" in attr and attr["shared_name"].s and any(
                t.dtype in _HANDLE_DTYPES for t in op.outputs):
            key = (op.type, attr["container"].s if "container" in attr else b"", attr["shared_name"].s)
            if key in creators:
                join(creators[key], op.index, "shared_name")
            creators.setdefault(key, op.index)
    for edge in graph.data_edges:
        dtype = graph.ops[edge.src].outputs[edge.src_slot].dtype
        if dtype in _HANDLE_DTYPES or dtype.endswith("_ref"):
            join(edge.src, edge.dst, "resource")

    set_of = uf.labels()
    members = [[] for _ in range(int(set_of.max()) + 1 if len(set_of) else 0)]
    for i, s in enumerate(set_of):
        members[s].append(i)
    reasons = [sorted(set().union(*(joined_by.get(i, set()) for i in ops))) for ops in members]
    device_types = [_common_device_types(graph, ops) for ops in members]
    return ColocationSets(set_of=set_of, members=members, reasons=reasons,
                          device_types=device_types)


def _common_device_types(graph: OpGraph, ops: list) -> Optional[frozenset]:
    allowed = None
    for i in ops:
        types = kernel_device_types(graph.ops[i].node_def)
        if types is not None:
            allowed = types if allowed is None else allowed & types
    return allowed
