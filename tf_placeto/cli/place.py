"""`tf-placeto place`: find a placement, measure it against the graph as written, write it."""

from __future__ import annotations

import json

import pandas as pd

from tf_placeto import api, cost_graphs
from tf_placeto.cli import cost_graph
from tf_placeto.cli.common import (EXIT_OK, OVERWRITE_HELP, check_placing, device_count,
                                   link_argument, placing_arguments, runtime_arguments,
                                   search_of, source_arguments, source_of, target_of)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("place", help="find a placement with one method, write it")
    source_arguments(parser)
    runtime_arguments(parser)
    placing_arguments(parser)
    parser.add_argument("--method", default="auto", metavar="NAME",
                        help="placement method: auto (default: the shipped Placeto policy "
                             "fine-tuned briefly and the algorithmic placers, best simulated "
                             "step wins) or one of `tf-placeto compare --help`; on a cost "
                             "graph: dp (auto under throughput), optimal (auto under "
                             "latency), or " + ", ".join(
                                 name for name in cost_graphs.METHODS
                                 if name not in (cost_graphs.DP, cost_graphs.OPTIMAL)))
    parser.add_argument("--out", metavar="OUT",
                        help="write SOURCE with the placement applied here (same kind as "
                             "SOURCE); not with --counts or --link")
    parser.add_argument("--placement-out", metavar="FILE.json",
                        help="write the placement (op -> device) here "
                             "(default: OUT.placement.json)")
    parser.add_argument("--simulate", action="store_true",
                        help="predict the before/after step times instead of measuring "
                             "them; needed by --counts and --link")
    parser.add_argument("--counts", metavar="N", type=device_count,
                        help="with --simulate: place on N simulated devices like the profiled "
                             "ones (default: the runtime's devices)")
    link_argument(parser)
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if cost_graph.is_cost_graph(args):
        return cost_graph.place(args)
    check_placing(args)
    result = api.place(source_of(args), args.method, target_of(args), search_of(args),
                       measure="simulate" if args.simulate else "real",
                       n_devices=args.counts, link=args.link, out=args.out,
                       placement_out=args.placement_out, overwrite=args.overwrite)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    simulated = " simulated" if args.counts or args.link else ""
    link = f", joined by the link {args.link}" if args.link else ""
    print(f"{args.method} placed {summary['groups']} groups of {args.source} on "
          f"{summary['device_count']}{simulated} devices{link} in {summary['decide_s']:.2f} s")
    if "measured_candidates" in summary:
        _print_candidates(summary["measured_candidates"], summary["winner"])
    per_step = "step" if summary["in_flight"] is None else \
        f"time per step, {summary['in_flight']} in flight"
    for kind in ("predicted", "measured"):
        if f"{kind}_after_s" in summary:
            status = summary[f"{kind}_status"]
            print(f"{kind} {per_step}: {summary[f'{kind}_before_s'] * 1e3:.1f} ms as written -> "
                  f"{summary[f'{kind}_after_s'] * 1e3:.1f} ms "
                  + ("placed" if summary["written"] else "(kept as written)")
                  + (" (medians)" if kind == "measured" else "")
                  + ("" if status == "ok" else f" ({status})"))
    print(summary["verdict"])
    for key, what in (("out", "placed model"), ("placement", "placement")):
        if summary.get(key):
            print(f"wrote the {what}: {summary[key]}")
    return EXIT_OK


def _print_candidates(candidates: list, winner) -> None:
    """The placements measured for real, in turns: medians, intervals, ratios, the winner."""
    rows = [{"placement": c["label"], "status": c["status"], "runs": c["runs"],
             "median (ms)": c["median_s"] * 1e3,
             "95% interval (ms)": f"{c['low_s'] * 1e3:.2f} .. {c['high_s'] * 1e3:.2f}"
             if c["low_s"] is not None else "-",
             "x as written (95%)": f"{c['ratio_median']:.3f} ({c['ratio_low']:.3f} .. "
                                   f"{c['ratio_high']:.3f})" if c["ratio_median"] else "-",
             "": "<- written" if c["label"] == winner else c["reason"][:60]}
            for c in candidates]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
