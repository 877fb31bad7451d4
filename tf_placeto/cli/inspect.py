"""`tf-placeto inspect`: ops, edges, colocation groups and groups of a graph."""

from __future__ import annotations

import json
import sys

import pandas as pd

from tf_placeto import api
from tf_placeto.cli import cost_graph
from tf_placeto.cli.common import EXIT_OK, count, source_arguments, source_of
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("inspect", help="ops, edges, colocation groups and groups")
    source_arguments(parser)
    parser.add_argument("--max-groups", type=count(1), default=DEFAULT_MAX_GROUPS, metavar="N",
                        help=f"merge into at most N groups (default {DEFAULT_MAX_GROUPS})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if cost_graph.is_cost_graph(args):
        return cost_graph.inspect(args)
    graph = api.import_graph(source_of(args))
    groups = api.group(graph, max_groups=args.max_groups)
    if args.json:
        json.dump(_as_json(graph, groups), sys.stdout)
        sys.stdout.write("\n")
    else:
        _print(graph, groups, args.max_groups)
    return EXIT_OK


def _group_rows(groups) -> list:
    work = groups.work
    rows = []
    for g in range(len(groups)):
        types = groups.device_types(g)
        rows.append({"id": g, "ops": groups.op_names(g), "work": float(work[g]),
                     "device_types": sorted(types) if types is not None else None})
    return rows


def _as_json(graph, groups) -> dict:
    colocation = groups.colocation
    return {
        "source": graph.source.describe(),
        **groups.summary(),
        "groups": _group_rows(groups),
        "group_edges": [[a, b, n] for (a, b), n in sorted(groups.edges.items())],
        "feedback_edges": [[a, b, n] for (a, b), n in sorted(groups.feedback_edges.items())],
        "colocation_groups": [
            {"id": k, "ops": [graph.ops[i].name for i in colocation.members[s]],
             "rules": colocation.reasons[s]}
            for k, s in enumerate(colocation.multi_op_sets())],
    }


def _print(graph, groups, max_groups: int) -> None:
    s = groups.summary()
    print(f"source: {graph.source.describe()}")
    print(f"ops: {s['num_ops']}   data edges: {s['num_edges']}   "
          f"control edges: {s['num_control_edges']}")
    print(f"colocation groups: {s['num_colocation_groups']} "
          "(sets of ops TensorFlow requires on one device)")
    print(f"groups: {s['num_groups']} (at most {max_groups}), group edges: "
          f"{s['num_group_edges']}, feedback edges forced by colocation: "
          f"{s['num_feedback_edges']}")
    print(f"largest group: {s['largest_group_ops']} ops; estimated work max/mean: "
          f"{s['work_imbalance']:.2f}")
    table = pd.DataFrame([{
        "group": row["id"], "ops": len(row["ops"]), "work (GFLOP)": row["work"] / 1e9,
        "kernels": ",".join(row["device_types"]) if row["device_types"] else "any",
        "first op": row["ops"][0]} for row in _group_rows(groups)])
    with pd.option_context("display.max_colwidth", 70, "display.width", 160):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
