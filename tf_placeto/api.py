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
