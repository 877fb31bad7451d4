"""A compact cost profile: what placing one graph needs, in one small file, without the model.

Training and benchmarks over many graphs need each graph's placement problem for any number
of devices and any link, not its SavedModel, its profile nor a runtime (TensorFlow only parses
the device names). This file keeps what
`Workload.problem` builds them from: the op graph's skeleton (op names and types, tensors
and their sizes, data and control edges, what the session feeds and fetches), its groups
(with their colocation sets and kernel rules), the per-op costs of every profiled device
type, what each op holds for the whole step, and the profile's links, devices and
calibration. `problem(n_devices, link)` states the PlacementProblem as a workload would, on
devices "like the profiled ones" (CostModel.with_more_devices).

Format: one compressed NumPy archive (.npz, read with allow_pickle=False: numbers and text
only), whose `meta` entry is a JSON object: FORMAT and VERSION, the graph's name and family,
op and group counts, the profiled devices and device types, the links, the calibration, the
runtime's fingerprint, TensorFlow's version and the date, plus what the caller adds.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import time
import zipfile
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from tf_placeto.devices import DeviceSet, parse_device
from tf_placeto.errors import InputError, first_line
from tf_placeto.files import write_atomically
from tf_placeto.graph.colocation import ColocationSets
from tf_placeto.graph.grouping import GroupGraph
from tf_placeto.graph.op_graph import DataEdge, Op, OpGraph, TensorInfo
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.costs.costmodel import OP_COLUMNS, CostModel, Link
from tf_placeto.measure.evaluation.measurer import simulation_problem
from tf_placeto.measure.simulator import SimulationProblem
from tf_placeto.placers.problem import PlacementProblem

FORMAT = "tf_placeto compact cost profile"
VERSION = 1
SUFFIX = ".npz"
# The archive's arrays: per op, per tensor, per data edge, per control edge, per group edge.
ARRAYS = ("op_names", "op_types", "compute_us", "remote_extra_us", "executions",
          "persistent_bytes", "op_work", "group_of", "colocation_set_of", "tensor_producer",
          "tensor_bytes", "tensor_dtypes", "edge_tensor", "edge_consumer", "edge_input_slot",
          "control_src", "control_dst", "feed_ops", "fetch_tensors", "group_edges",
          "group_edge_bytes", "feedback_edges", "feedback_edge_bytes")
# What a calibration fits to the runtime rather than to the graph's ops (calibration.py):
# what on_tasks carries from a cluster's profile to another graph's.
RUNTIME_COSTS = ("remote_task_us", "copy_us", "iteration_us", "message_us", "floating_us",
                 "floating_message_us", "latency_us", "bytes_per_us", "copy_share")


@dataclasses.dataclass
class CompactProfile:
    meta: dict        # JSON: see the module's doc
    arrays: dict      # ARRAYS -> np.ndarray

    @classmethod
    def of(cls, groups: GroupGraph, cost_model: CostModel, **meta) -> "CompactProfile":
        """The compact profile of `groups` (over their op graph) under `cost_model`; `meta`:
        what to record beside it (name, family, ...)."""
        graph = groups.op_graph
        profiled = list(cost_model.meta["devices"])
        simulation = simulation_problem(graph, cost_model, DeviceSet.from_strings(profiled),
                                        calibrated=False)
        types = cost_model.device_types
        calibration = cost_model.calibration
        edges, feedback = sorted(groups.edges.items()), sorted(groups.feedback_edges.items())
        arrays = {
            "op_names": np.array(simulation.op_names, dtype=str),
            "op_types": np.array([op.type for op in graph.ops], dtype=str),
            "compute_us": cost_model.compute_us(graph, types),
            "remote_extra_us": cost_model.remote_extra_us(graph, types),
            "executions": cost_model.executions(graph),
            "persistent_bytes": simulation.persistent_bytes,
            "op_work": groups.op_work,
            "group_of": groups.group_of,
            "colocation_set_of": groups.colocation.set_of,
            "tensor_producer": simulation.tensor_producer,
            "tensor_bytes": simulation.tensor_bytes,
            "tensor_dtypes": np.array([info.dtype for op in graph.ops for info in op.outputs],
                                      dtype=str),
            "edge_tensor": simulation.edge_tensor,
            "edge_consumer": simulation.edge_consumer,
            "edge_input_slot": np.array([e.dst_slot for e in graph.data_edges], np.int64),
            "control_src": simulation.control_src,
            "control_dst": simulation.control_dst,
            "feed_ops": simulation.feed_ops,
            "fetch_tensors": simulation.fetch_tensors,
            "group_edges": np.array([edge for edge, _ in edges], np.int64).reshape(-1, 2),
            "group_edge_bytes": np.array([n for _, n in edges], np.int64),
            "feedback_edges": np.array([edge for edge, _ in feedback], np.int64).reshape(-1, 2),
            "feedback_edge_bytes": np.array([n for _, n in feedback], np.int64),
        }
        profile = {key: value for key, value in cost_model.meta.items() if key != "tables"}
        return cls(meta={
            "format": FORMAT, "version": VERSION, **meta, "ops": len(graph.ops),
            "groups": len(groups), "devices": profiled, "device_types": types,
            "op_overhead_us": {t: cost_model.op_overhead_us(t) for t in types},
            "links": cost_model.links.to_dict(orient="records"),
            "calibration": calibration.to_json() if calibration is not None else None,
            "colocation": {"device_types": [None if t is None else sorted(t)
                                            for t in groups.colocation.device_types],
                           "reasons": groups.colocation.reasons},
            "profile": profile, "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
            arrays=arrays)

    def save(self, path: str) -> None:
        """Write the archive whole or not at all (files.write_atomically)."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.array(json.dumps(self.meta, sort_keys=True)),
                            **self.arrays)
        write_atomically(path, lambda file: file.write(buffer.getvalue()), binary=True)

    @classmethod
    def load(cls, path: str) -> "CompactProfile":
        """The compact profile at `path`; InputError naming the file when it is not one (not
        an archive, damaged, of another format or version, arrays missing)."""
        try:
            with np.load(path, allow_pickle=False) as archive:
                meta = json.loads(str(archive["meta"]))
                if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                    raise ValueError(f"its meta does not say {FORMAT!r}")
                if meta.get("version") != VERSION:
                    raise ValueError(f"it is of version {meta.get('version')}, this "
                                     f"tf_placeto reads version {VERSION}: build it again")
                missing = [name for name in ARRAYS if name not in archive.files]
                if missing:
                    raise ValueError(f"it lacks {', '.join(missing)}")
                arrays = {name: archive[name] for name in ARRAYS}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            raise InputError(f"{path} is not a compact cost profile: {first_line(error)}") \
                from None
        if len(arrays["op_names"]) != meta.get("ops") or \
                arrays["compute_us"].shape != (meta["ops"], len(meta["device_types"])):
            raise InputError(f"{path} is not a compact cost profile: its arrays do not hold "
                             f"{meta.get('ops')} ops")
        return cls(meta=meta, arrays=arrays)

    @property
    def name(self) -> str:
        return self.meta.get("name", "")

    @property
    def family(self) -> str:
        return self.meta.get("family", "")

    @functools.cached_property
    def op_graph(self) -> OpGraph:
        """The op graph's skeleton: names, types, outputs (dtype and size; shapes and NodeDefs
        are not kept), edges and fetches; enough for groups, features and the simulator."""
        a = self.arrays
        producer, slot = a["tensor_producer"], _slots(a["tensor_producer"])
        outputs = [[] for _ in a["op_names"]]
        for op, dtype, nbytes in zip(producer.tolist(), a["tensor_dtypes"].tolist(),
                                     a["tensor_bytes"].tolist()):
            outputs[op].append(TensorInfo(dtype, None, nbytes))
        ops = [Op(index=i, name=name, type=kind, requested_device="", node_def=None, scope=None,
                  outputs=outputs[i])
               for i, (name, kind) in enumerate(zip(a["op_names"].tolist(),
                                                    a["op_types"].tolist()))]
        edges = [DataEdge(int(producer[t]), int(slot[t]), int(dst), int(k)) for t, dst, k in
                 zip(a["edge_tensor"], a["edge_consumer"], a["edge_input_slot"])]
        graph = OpGraph(ops, edges, list(zip(a["control_src"].tolist(),
                                             a["control_dst"].tolist())), [])
        graph.fetch_outputs = [(int(producer[t]), int(slot[t])) for t in a["fetch_tensors"]]
        return graph

    @functools.cached_property
    def groups(self) -> GroupGraph:
        a, colocation = self.arrays, self.meta["colocation"]
        set_of, group_of = a["colocation_set_of"], a["group_of"]
        return GroupGraph(
            op_graph=self.op_graph,
            colocation=ColocationSets(
                set_of=set_of, members=_members(set_of, len(colocation["reasons"])),
                reasons=colocation["reasons"],
                device_types=[None if t is None else frozenset(t)
                              for t in colocation["device_types"]]),
            group_of=group_of, groups=_members(group_of, self.meta["groups"]),
            edges=dict(zip(map(tuple, a["group_edges"].tolist()),
                           a["group_edge_bytes"].tolist())),
            feedback_edges=dict(zip(map(tuple, a["feedback_edges"].tolist()),
                                    a["feedback_edge_bytes"].tolist())),
            op_work=a["op_work"])

    def cost_model(self) -> CostModel:
        """The profile's links, devices and calibration; its per-op costs are the arrays'."""
        calibration = self.meta["calibration"]
        return CostModel(ops=pd.DataFrame(columns=[*OP_COLUMNS, "remote_extra_us"]),
                         links=pd.DataFrame(self.meta["links"]), meta=self.meta["profile"],
                         calibration=None if calibration is None else Calibration(
                             **calibration))

    def problem(self, n_devices: Optional[int] = None, link: Optional[Link] = None,
                slowdown: Optional[Sequence[float]] = None) -> PlacementProblem:
        """The placement problem on the profiled devices, or on `n_devices` simulated ones
        linked by `link` (default: the measured links), as Workload.problem states it.
        slowdown: per device, how many times longer than the profiled device it takes to run
        each op (heterogeneous devices; default: all as profiled)."""
        model = self.cost_model()
        names = list(self.meta["devices"])
        if n_devices is not None or link is not None:
            names, model = model.with_more_devices(n_devices or len(names), link)
        slowdown = np.ones(len(names)) if slowdown is None else np.asarray(slowdown, float)
        if slowdown.shape != (len(names),) or not (slowdown > 0).all():
            raise ValueError(f"slowdown: one positive factor per device ({len(names)}), not "
                             f"{slowdown.tolist()}")
        return PlacementProblem.from_simulation(self.groups,
                                                self._simulation(names, model, slowdown))

    def on_tasks(self, cluster: dict) -> "CompactProfile":
        """This profile as if made on a cluster's tasks: `cluster` (what a cluster's profile
        measured of its runtime: its "devices", "links" and "calibration", as
        corpus_problems.CLUSTER_RUNTIME keeps them) replaces the devices, the links and the
        calibration's costs of the runtime; the ops' times and their scale stay this
        profile's."""
        own = self.meta["calibration"] or {}
        runtime = {key: value for key, value in cluster["calibration"].items()
                   if key in RUNTIME_COSTS}
        devices = list(cluster["devices"])
        return CompactProfile(meta={**self.meta, "devices": devices,
                                    "profile": {**self.meta["profile"], "devices": devices},
                                    "links": list(cluster["links"]),
                                    "calibration": {**own, **runtime}}, arrays=self.arrays)

    def _simulation(self, names: list, model: CostModel, slowdown: np.ndarray
                    ) -> SimulationProblem:
        """What measurer.simulation_problem makes of the live graph and `model` on `names`,
        each device's op times multiplied by its `slowdown`."""
        a = self.arrays
        devices = [parse_device(name) for name in names]     # simulated: need not exist here
        kinds = list(dict.fromkeys(zip((d.device_type for d in devices), slowdown.tolist())))
        columns = [self.meta["device_types"].index(t) for t, _ in kinds]
        factors = np.array([factor for _, factor in kinds])
        latency, bandwidth, copy_share = model.link_arrays(names)
        tasks = list(dict.fromkeys(d.task_name for d in devices))
        remote = (a["remote_extra_us"][:, columns] * factors if "remote_extra_us" in model.ops
                  else None)
        first_type = devices[0].device_type
        simulation = SimulationProblem(
            op_names=a["op_names"].tolist(), compute_us=a["compute_us"][:, columns] * factors,
            device_type_of=np.array([kinds.index((d.device_type, float(factor)))
                                     for d, factor in zip(devices, slowdown)]),
            device_names=names, tensor_producer=a["tensor_producer"],
            tensor_bytes=a["tensor_bytes"], edge_tensor=a["edge_tensor"],
            edge_consumer=a["edge_consumer"], control_src=a["control_src"],
            control_dst=a["control_dst"], persistent_bytes=a["persistent_bytes"],
            link_latency_us=latency, link_bytes_per_us=bandwidth, link_copy_share=copy_share,
            memory_capacity=np.full(len(names), np.inf),
            op_overhead_us=self.meta["op_overhead_us"][first_type], remote_extra_us=remote,
            device_task=[tasks.index(d.task_name) for d in devices],
            feed_ops=a["feed_ops"], fetch_tensors=a["fetch_tensors"])
        calibration = model.calibration
        return simulation if calibration is None else calibration.apply(simulation,
                                                                        a["executions"])


def _slots(producer: np.ndarray) -> np.ndarray:
    """Each tensor's output slot: its rank among its producer's tensors (kept in op order)."""
    return pd.Series(producer).groupby(producer).cumcount().to_numpy()


def _members(label_of: np.ndarray, count: int) -> list:
    """[sorted indices labelled k for k < count]."""
    order = np.argsort(label_of, kind="stable")
    bounds = np.searchsorted(label_of[order], np.arange(count + 1))
    return [order[bounds[k]:bounds[k + 1]].tolist() for k in range(count)]
