"""Profiled operator graphs in the JSON format of Tarnawski et al. (NeurIPS 2020), and the
experts' splits that go with them.

Their instances (msr-fiddle/dnn-partitioning) give each node its time on a CPU and on an
accelerator, its memory on an accelerator, whether an accelerator can run it and its colour
class (same class: same device); each edge the time to move its source's output between an
accelerator and CPU memory. The exact contiguous placer (placers/contiguous/) reads them as a
`CostGraph`; keeping the numbers as arrays lets its accounting and its DP stay vectorised.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Optional

import numpy as np

from tf_placeto.errors import SourceError

# A bound on what is read: their largest instance is 0.6 MiB.
MAX_FILE_BYTES = 256 * 2**20
_TOP_FIELDS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")
_NODE_NUMBERS = ("cpuLatency", "fpgaLatency")
# Their readers compare the costs of one node's edges to this tolerance (dp.cpp, ip.py).
_COST_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True, eq=False)
class CostGraph:
    """One instance: per-node arrays in file order, edges as index arrays, the devices.

    Devices are numbered as the placers here number them: accelerators 0..k-1, then the CPUs
    k..k+max_cpus-1. `color_class` is renumbered 0..C-1; a node without one has its own.
    """

    node_ids: np.ndarray            # int64: the file's ids
    names: tuple                    # the file's names ("" where it has none)
    cpu_latency: np.ndarray         # float64
    accel_latency: np.ndarray       # float64: the file's fpgaLatency
    supported: np.ndarray           # bool: may run on an accelerator
    size: np.ndarray                # float64: bytes on an accelerator
    is_backward: np.ndarray         # bool
    color_class: np.ndarray         # int64
    edge_src: np.ndarray            # int64 node indices
    edge_dst: np.ndarray            # int64 node indices
    output_cost: np.ndarray         # float64: moving the node's output (0 without edges)
    max_accelerators: int
    max_cpus: int
    memory_per_accelerator: float
    topological_order: np.ndarray   # int64 node indices
    source: str = ""

    @property
    def n_nodes(self) -> int:
        return int(self.node_ids.shape[0])

    @property
    def n_devices(self) -> int:
        return self.max_accelerators + self.max_cpus

    def index_of(self) -> dict:
        """The file's node id -> node index."""
        return {int(node_id): i for i, node_id in enumerate(self.node_ids)}


def is_cost_graph_file(path) -> bool:
    """Whether `path` is a JSON file whose top level has their `nodes`, `edges` and
    `maxFPGAs`: how a SOURCE in their format is told from a graph of TensorFlow's."""
    path = os.fspath(path)
    if not path.endswith(".json") or not os.path.isfile(path):
        return False
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return False
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if '"maxFPGAs"' not in text:        # most JSON files stop here, unparsed
            return False
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and all(key in data for key in ("nodes", "edges", "maxFPGAs"))


def read_cost_graph(path) -> CostGraph:
    """The instance in the JSON file at `path`; a SourceError says what is wrong with it."""
    return parse_cost_graph(_read_json(path), source=os.fspath(path))


def parse_cost_graph(data, source: str = "<cost graph>") -> CostGraph:
    """The instance that `data` (their JSON, already parsed) describes."""
    if not isinstance(data, dict):
        raise SourceError(f"{source}: not a cost graph (the top level is not a JSON object)")
    missing = [key for key in _TOP_FIELDS if key not in data]
    if missing:
        raise SourceError(f"{source}: not a cost graph, it lacks {', '.join(missing)}")
    max_accelerators = _count(data["maxFPGAs"], "maxFPGAs", source)
    max_cpus = _count(data["maxCPUs"], "maxCPUs", source)
    memory = _number(data["maxSizePerFPGA"], "maxSizePerFPGA", source)
    nodes, edges = data["nodes"], data["edges"]
    if not isinstance(nodes, list) or not nodes:
        raise SourceError(f"{source}: 'nodes' must be a non-empty list")
    if not isinstance(edges, list):
        raise SourceError(f"{source}: 'edges' must be a list")

    n = len(nodes)
    ids = np.empty(n, np.int64)
    names, classes = [], []
    numbers = {key: np.zeros(n) for key in (*_NODE_NUMBERS, "size")}
    flags = {key: np.zeros(n, bool) for key in ("supportedOnFpga", "isBackwardNode")}
    index = {}
    for i, node in enumerate(nodes):
        where = f"{source}: node {i}"
        if not isinstance(node, dict):
            raise SourceError(f"{where} is not a JSON object")
        for key in ("id", *_NODE_NUMBERS, *flags):
            if key not in node:
                raise SourceError(f"{where} has no {key!r}")
        ids[i] = _integer(node["id"], f"node {i}'s id", source)
        where = f"{source}: node {ids[i]}"
        if ids[i] in index:
            raise SourceError(f"{where} appears twice")
        index[int(ids[i])] = i
        for key in numbers:
            numbers[key][i] = _number(node.get(key, 0.0), f"node {ids[i]}'s {key}", source)
        for key in flags:
            if node[key] not in (0, 1):       # True and False are 1 and 0
                raise SourceError(f"{where}: {key} must be true, false, 0 or 1")
            flags[key][i] = bool(node[key])
        color = node.get("colorClass")
        classes.append(("own", i) if color is None else
                       ("file", _integer(color, f"node {ids[i]}'s colorClass", source)))
        names.append(str(node.get("name", "")))

    src = np.empty(len(edges), np.int64)
    dst = np.empty(len(edges), np.int64)
    output_cost = np.zeros(n)
    has_cost = np.zeros(n, bool)
    for k, edge in enumerate(edges):
        if not isinstance(edge, dict) or any(key not in edge for key in
                                             ("sourceId", "destId", "cost")):
            raise SourceError(f"{source}: edge {k} needs sourceId, destId and cost")
        for end, key in ((src, "sourceId"), (dst, "destId")):
            node_id = _integer(edge[key], f"edge {k}'s {key}", source)
            if node_id not in index:
                raise SourceError(f"{source}: edge {k} names node {node_id}, which is not "
                                  "among the nodes")
            end[k] = index[node_id]
        if src[k] == dst[k]:
            raise SourceError(f"{source}: edge {k} is a self-loop on node {ids[src[k]]}")
        cost = _number(edge["cost"], f"edge {k}'s cost", source)
        u = src[k]
        if has_cost[u] and abs(output_cost[u] - cost) > _COST_TOLERANCE:
            raise SourceError(f"{source}: node {ids[u]}'s edges cost {output_cost[u]} and "
                              f"{cost}; the output of one node costs one amount to move")
        output_cost[u], has_cost[u] = cost, True

    labels = {key: label for label, key in enumerate(dict.fromkeys(classes))}
    return CostGraph(
        node_ids=ids, names=tuple(names), cpu_latency=numbers["cpuLatency"],
        accel_latency=numbers["fpgaLatency"], supported=flags["supportedOnFpga"],
        size=numbers["size"], is_backward=flags["isBackwardNode"],
        color_class=np.array([labels[key] for key in classes], np.int64),
        edge_src=src, edge_dst=dst, output_cost=output_cost,
        max_accelerators=max_accelerators, max_cpus=max_cpus, memory_per_accelerator=memory,
        topological_order=_topological_order(ids, src, dst, source), source=source)


def device_names(graph: CostGraph) -> list:
    """The accelerators as /device:GPU:k, then the CPUs as /device:CPU:j."""
    return ([f"/device:GPU:{k}" for k in range(graph.max_accelerators)]
            + [f"/device:CPU:{j}" for j in range(graph.max_cpus)])


def node_names(graph: CostGraph) -> list:
    """The names a placement file uses: the file's names where they are all given and
    distinct, else the node ids."""
    names = list(graph.names)
    if all(names) and len(set(names)) == len(names):
        return names
    return [str(int(node_id)) for node_id in graph.node_ids]


def expert_file(experts, path) -> Optional[pathlib.Path]:
    """The experts' split of the graph in `path` in their folder `experts` (human-experts/),
    if any: its own (STEM_expert.json), else its inference graph's (a training graph's
    backward nodes then follow their colour class: read_expert_split).

    Their experts split the layer graphs, whose names their operator graphs share
    (resnet50_inference): a graph in a folder named OperatorGraphs has none.
    """
    path = pathlib.Path(path)
    if path.parent.name == "OperatorGraphs":
        return None
    for stem in dict.fromkeys((path.stem, path.stem.replace("_training", "_inference"))):
        candidate = pathlib.Path(experts) / f"{stem}_expert.json"
        if candidate.is_file():
            return candidate
    return None


def read_expert_split(path, graph: CostGraph) -> np.ndarray:
    """The split in an experts' file (their `fpgas` and `cpus` lists of node ids) as one
    device index per node of `graph`.

    A node the file leaves out goes where the rest of its colour class is, as their dp.cpp
    does: the experts split only the forward pass of a training graph.
    """
    source = os.fspath(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("fpgas"), list) \
            or not isinstance(data.get("cpus"), list):
        raise SourceError(f"{source}: not a split, it needs lists 'fpgas' and 'cpus'")
    if len(data["fpgas"]) > graph.max_accelerators or len(data["cpus"]) > graph.max_cpus:
        raise SourceError(f"{source}: uses {len(data['fpgas'])} accelerators and "
                          f"{len(data['cpus'])} CPUs, the graph has {graph.max_accelerators} "
                          f"and {graph.max_cpus}")
    index = graph.index_of()
    assignment = np.full(graph.n_nodes, -1, np.int64)
    devices = [(d, m) for d, m in enumerate(data["fpgas"])] + \
              [(graph.max_accelerators + d, m) for d, m in enumerate(data["cpus"])]
    for device, machine in devices:
        if not isinstance(machine, dict) or not isinstance(machine.get("nodes"), list):
            raise SourceError(f"{source}: each device needs a list 'nodes'")
        for node_id in machine["nodes"]:
            i = index.get(_integer(node_id, "a node id", source))
            if i is None:
                raise SourceError(f"{source}: node {node_id} is not in {graph.source}")
            if assignment[i] >= 0:
                raise SourceError(f"{source}: node {node_id} is on two devices")
            assignment[i] = device
    for i in np.flatnonzero(assignment < 0):
        mates = assignment[graph.color_class == graph.color_class[i]]
        known = set(mates[mates >= 0].tolist())
        if len(known) != 1:
            raise SourceError(f"{source}: node {graph.node_ids[i]} is not placed, and its "
                              f"colour class is on {len(known) or 'no'} devices")
        assignment[i] = known.pop()
    return assignment


def _read_json(path):
    path = os.fspath(path)
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        raise SourceError(f"{path}: not a file (a pipe, socket or device)")
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise SourceError(f"{path}: more than {MAX_FILE_BYTES // 2**20} MiB")
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as exc:
        raise SourceError(f"{path}: no such file") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot read it ({exc.strerror})") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise SourceError(f"{path}: not valid JSON ({exc})") from exc


def _integer(value, what: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(f"{source}: {what} must be an integer, not {value!r}")
    return value


def _count(value, what: str, source: str) -> int:
    value = _integer(value, what, source)
    if value < 0:
        raise SourceError(f"{source}: {what} must be at least 0, not {value}")
    return value


def _number(value, what: str, source: str) -> float:
    """A finite number >= 0: the DP's bounds rely on loads that only grow with a set."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise SourceError(f"{source}: {what} must be a finite number >= 0, not {value!r}")
    return float(value)


def topological_order(n: int, src, dst) -> np.ndarray:
    """Kahn's order of nodes 0..n-1 under the edges src -> dst, smallest ready node first;
    shorter than n where the edges form a cycle."""
    order_by_src = np.argsort(src, kind="stable")
    succ_ptr = np.searchsorted(src[order_by_src], np.arange(n + 1))
    succ = dst[order_by_src]
    indegree = np.bincount(dst, minlength=n)
    ready = list(np.flatnonzero(indegree == 0)[::-1])
    order = []
    while ready:
        u = ready.pop()
        order.append(u)
        for v in succ[succ_ptr[u]:succ_ptr[u + 1]]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return np.array(order, np.int64)


def _topological_order(ids, src, dst, source: str) -> np.ndarray:
    """topological_order of the file's nodes; a cycle is a SourceError."""
    order = topological_order(ids.shape[0], src, dst)
    if len(order) < ids.shape[0]:
        placed = np.zeros(ids.shape[0], bool)
        placed[order] = True
        stuck = ids[np.flatnonzero(~placed)[:5]].tolist()
        raise SourceError(f"{source}: the edges form a cycle (through some of nodes {stuck})")
    return order
