"""The Python entry points: import a graph, group it, apply a placement.

Each is the same code path as the matching `tf-placeto` command.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Union

from tf_placeto.devices import DeviceSet
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS, GroupGraph, group_ops
from tf_placeto.graph.importer import import_graph_def
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import load_source
from tf_placeto.placement import Placement
from tf_placeto.rewrite import check_output_path, placed_proto, write_placed


def import_graph(source, *example_args, signature: Optional[str] = None) -> OpGraph:
    """The op graph of `source`, with function bodies inlined.

    source: a SavedModel directory, a GraphDef/MetaGraphDef file (.pb or .pbtxt),
    "examples:NAME", a tf.function (traced with `example_args`), a ConcreteFunction, a
    GraphDef or a MetaGraphDef. signature: which SavedModel signature (default:
    serving_default, or the only one).
    """
    loaded = load_source(source, *example_args, signature=signature)
    return import_graph_def(loaded.graph_def, loaded.fetches, source=loaded)


def group(graph: OpGraph, max_groups: int = DEFAULT_MAX_GROUPS, op_work=None) -> GroupGraph:
    """Colocation-safe groups of `graph`, at most `max_groups`, as an acyclic group graph."""
    return group_ops(graph, max_groups=max_groups, op_work=op_work)


@dataclasses.dataclass
class ApplyResult:
    placement: Placement      # every op whose device was written, colocation groups whole
    proto: Any                # the placed SavedModel / MetaGraphDef / GraphDef proto
    out: Optional[str]        # where it was written, if anywhere


def apply_placement(source: Union[str, OpGraph, Any], placement: Union[str, Mapping],
                    out: Optional[str] = None, *, devices: Union[None, str, DeviceSet] = None,
                    signature: Optional[str] = None, overwrite: bool = False) -> ApplyResult:
    """Write `placement` into a copy of `source`; the source itself is never modified.

    placement: {op name: device} or the path of such a JSON file. devices: the devices it may
    use (default: this machine's, with the CPU splittable into logical CPUs). out: where to
    write the placed copy, in the source's own kind (SavedModel stays SavedModel); without it
    only the placed proto is returned.
    """
    graph = source if isinstance(source, OpGraph) else None
    loaded = graph.source if graph is not None else load_source(source, signature=signature)
    if out is not None:
        check_output_path(loaded.path, out, overwrite)
    if graph is None:
        graph = import_graph_def(loaded.graph_def, loaded.fetches, source=loaded)
    if isinstance(placement, str):
        placement = Placement.from_json(placement)
    elif not isinstance(placement, Placement):
        placement = Placement(placement)
    if not isinstance(devices, DeviceSet):
        devices = DeviceSet.parse(devices)
    full = placement.validate(graph, devices)
    proto = placed_proto(graph.source, graph, full)
    if out is not None:
        write_placed(graph.source, proto, out, overwrite=overwrite)
    return ApplyResult(placement=full, proto=proto, out=out)


@dataclasses.dataclass
class PlaceResult:
    """What `place` found: the placement, and the step before and after (predicted, measured)."""

    source: str
    method: str
    placement: Placement
    devices: list
    groups: int
    decide_s: float
    info: dict
    predicted: list             # [as written, placed] MeasureResults from the simulator
    measured: Optional[list]    # [as written, placed] real MeasureResults, or None
    out: Optional[str]
    placement_file: Optional[str]

    def summary(self) -> dict:
        """A JSON-ready description (what `tf-placeto place --json` prints)."""
        summary = {"source": self.source, "method": self.method, "devices": self.devices,
                   "groups": self.groups, "decide_s": self.decide_s,
                   "out": self.out, "placement": self.placement_file,
                   **{k: v.item() if hasattr(v, "item") else v for k, v in self.info.items()
                      if isinstance(v, (int, float, str, bool)) or hasattr(v, "item")}}
        for kind, results in (("predicted", self.predicted), ("measured", self.measured)):
            if results:
                before, after = results
                summary.update({f"{kind}_before_s": before.step_time_s,
                                f"{kind}_after_s": after.step_time_s,
                                f"{kind}_spread_s": [before.spread_s, after.spread_s],
                                f"{kind}_status": after.status})
        return summary


def place(source, method: str = "auto", *, devices: Optional[str] = None,
          cluster: Optional[str] = None, max_groups: int = DEFAULT_MAX_GROUPS,
          memory_per_device: Optional[str] = None, seed: int = 0, measure: str = "real",
          policy: Optional[str] = None, budget: Optional[int] = None,
          placer_options: Optional[dict] = None, out: Optional[str] = None,
          placement_out: Optional[str] = None,
          overwrite: bool = False, signature: Optional[str] = None,
          cache: Optional[str] = None, say=lambda message: None) -> PlaceResult:
    """Find a placement of `source` on the devices present and, optionally, write it.

    devices / cluster: where it runs (see `tf-placeto measure --help`); the graph is profiled
    there (cached). method: "auto" (the shipped Placeto policy fine-tuned briefly and the
    algorithmic placers, best simulated step wins) or a name of tf_placeto.placers.names().
    measure: "real" times the
    step as written and as placed on those devices; "simulate" only predicts both. out: write
    the placed copy of SOURCE there; its placement goes beside it as OUT.placement.json unless
    `placement_out` names another file. policy, budget: for method "placeto", the trained
    policy (default: the shipped one) and the iterations of fine-tuning (default 0: zero-shot;
    with "auto", workload.AUTO_BUDGET).
    placer_options: the other placers' options (workload.PLACER_OPTIONS: start, rnn_budget,
    time_limit, objective).
    """
    from tf_placeto.measure.measurer import RealMeasurer, SimulatedMeasurer
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto.errors import PlacetoError
    from tf_placeto.workload import MemoryLimit, load_workload

    if measure not in ("real", "simulate"):
        raise PlacetoError(f"measure must be 'real' or 'simulate', not {measure!r}")
    memory = MemoryLimit.parse(memory_per_device)
    if out is not None:
        check_output_path(load_source(source, signature=signature).path, out, overwrite)
    with open_runtime(devices, cluster) as runtime:
        workload = load_workload(source, runtime, max_groups=max_groups, signature=signature,
                                 cache=cache, say=say)
        problem = workload.problem(memory=memory)
        say(f"placing {len(workload.groups)} groups on {problem.n_devices} devices with {method}")
        decided = workload.decide(method, problem, seed=seed,
                                  options={"policy": policy, "budget": budget,
                                           **(placer_options or {})}, say=say)
        placement = Placement(problem.placement(decided.group_devices))
        device_set = DeviceSet.from_strings(runtime.device_names)
        capacity = dict(zip(problem.device_names, problem.capacity_bytes))
        predicted = SimulatedMeasurer(workload.graph, workload.cost_model, device_set,
                                      memory_capacity=capacity).evaluate(
            [None, placement], ["as written", "placed"])
        measured = None
        if measure == "real":
            say("measuring the step as written and as placed, for real")
            measured = RealMeasurer(workload.graph, runtime, results_dir=workload.profile_dir
                                    ).evaluate([None, placement], ["as written", "placed"])
    if out is not None:
        apply_placement(workload.graph, placement, out, devices=device_set, overwrite=overwrite)
        placement_out = placement_out or f"{out.rstrip('/')}.placement.json"
    if placement_out is not None:
        placement.to_json(placement_out)
    return PlaceResult(source=str(source), method=method, placement=placement,
                       devices=problem.device_names, groups=len(workload.groups),
                       decide_s=decided.decide_s, info=decided.info, predicted=predicted,
                       measured=measured, out=out, placement_file=placement_out)
