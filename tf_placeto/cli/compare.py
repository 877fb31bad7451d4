"""`tf-placeto compare`: every placement method on graphs and device counts, the scoreboard."""

from __future__ import annotations

from tf_placeto import choices, cost_graphs, plots
from tf_placeto.cli import cost_graph
from tf_placeto.cli.common import (check_placing, count, device_count, link_argument,
                                   measured_something, placing_arguments, runtime_arguments,
                                   search_of, target_of)
from tf_placeto.compare import compare_sources, printable
from tf_placeto.frontend import check_output_file, progress, write_atomically
from tf_placeto.graph.sources import source_path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="every placement method on graphs and device counts: the scoreboard")
    parser.add_argument("graphs", metavar="GRAPH", nargs="+",
                        help="SOURCEs to compare on (examples:NAME, SavedModel directories; "
                             "or cost graphs, .json in Tarnawski et al.'s format)")
    parser.add_argument("--counts", metavar="N", type=device_count, nargs="+",
                        help="device counts to place on (default: as many as the runtime "
                             "has); with --simulate, any counts: devices like the profiled "
                             "ones")
    parser.add_argument("--simulate", action="store_true",
                        help="simulate every placement from the profile (default: measure each "
                             "for real on the cluster)")
    runtime_arguments(parser, default="local:2: two worker processes on this machine, "
                                      "one core each")
    link_argument(parser)
    parser.add_argument("--methods", metavar="M,M,...",
                        help="methods to compare (default all): " + "; ".join(
                            f"{spec.name}: {spec.help}" for spec in choices.method_specs())
                        + "; on cost graphs: " + ", ".join(
                            name + (" (only if named)" if spec.opt_in else "")
                            for name, spec in cost_graphs.METHODS.items()))
    placing_arguments(parser)
    parser.add_argument("--repeats", type=count(1), default=5, metavar="N",
                        help="timed runs per real measurement (default 5)")
    parser.add_argument("--measure-best", type=count(1), default=None, metavar="N",
                        help="measure for real only the N best predicted placements and the "
                             "single device (default: all)")
    parser.add_argument("--experts", metavar="DIR",
                        help="cost graphs: Tarnawski et al.'s human-experts/ folder; a row "
                             "\"experts\" scores the experts' split of each graph that has one "
                             "there (a layer graph's own, else its inference graph's)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON records")
    parser.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the table")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if cost_graph.is_cost_graph(args):
        return cost_graph.compare(args)
    check_placing(args)
    sources = [source_path(graph) for graph in args.graphs]
    if args.csv:
        check_output_file(args.csv, "--csv", keep_out_of=sources)
    if args.plot:
        plots.check_picture_path(args.plot, "--plot", keep_out_of=sources)
    compared = args.methods.split(",") if args.methods else choices.method_names()
    with progress(total=len(args.graphs) * len(args.counts or [None]) * len(compared),
                  unit="placement", leave=False) as bar:
        def advanced(message):
            bar.set_description(message[:60])
            if "for real" not in message:
                bar.update(1)
        table = compare_sources(args.graphs, compared, target_of(args), search_of(args),
                                counts=args.counts, simulate=args.simulate,
                                repeats=args.repeats, measure_best=args.measure_best,
                                link=args.link, progress=advanced)
    if args.csv:
        write_atomically(args.csv, lambda file: table.to_csv(file, index=False))
    if args.plot:
        plots.comparison_plot(table, args.plot)
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(printable(table))
        if args.memory_per_device is not None:
            print(f"\nmemory limit: {choices.describe_memory_limit(args.memory_per_device)}")
        for path, what in ((args.csv, "table"), (args.plot, "plot")):
            if path:
                print(f"wrote the {what}: {path}")
    return measured_something(table["status"])
