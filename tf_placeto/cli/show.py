"""`tf-placeto show`: a placement's simulated step per device, as a table, chart or trace."""

from __future__ import annotations

import json

import pandas as pd

from tf_placeto import api, plots
from tf_placeto.cli import cost_graph
from tf_placeto.cli.common import (EXIT_OK, cache_argument, runtime_arguments, source_arguments,
                                   source_of, target_of)
from tf_placeto.frontend import check_output_file, check_output_folder
from tf_placeto.graph.sources import source_path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("show",
                                   help="a placement's simulated step, devices and schedule")
    source_arguments(parser)
    runtime_arguments(parser)
    parser.add_argument("--placement", metavar="FILE.json",
                        help="the placement to show (default: the devices written in SOURCE)")
    parser.add_argument("--gantt", metavar="FILE.png",
                        help="draw the simulated schedule: a row per device, transfers below")
    parser.add_argument("--trace", metavar="FILE.json",
                        help="write the simulated schedule as a Chrome trace (ui.perfetto.dev): "
                             "a process per device, transfers on their own rows")
    parser.add_argument("--tensorboard", metavar="LOGDIR",
                        help="write the placed op graph as a TensorBoard log (Graphs view, "
                             "Color: Device)")
    cache_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if cost_graph.is_cost_graph(args):
        return cost_graph.show(args)
    source = [source_path(args.source)]
    if args.gantt:
        plots.check_picture_path(args.gantt, "--gantt", keep_out_of=source)
    if args.trace:
        check_output_file(args.trace, "--trace", keep_out_of=source)
    if args.tensorboard:
        check_output_folder(args.tensorboard, "--tensorboard", keep_out_of=source)
    simulation = api.simulate(source_of(args), args.placement, target_of(args),
                              schedule=bool(args.gantt or args.trace))
    result = simulation.result
    ops_on = simulation.ops_per_device()
    summary = {"source": args.source, "placement": args.placement or "as written",
               "predicted_step_s": result.step_time_s, "status": result.status,
               "devices": [{"device": d, "ops": ops_on[d], "busy_s": result.busy_s[d],
                            "peak_memory_bytes": result.peak_memory_bytes[d]}
                           for d in simulation.devices]}
    if args.gantt:
        plots.gantt(result.schedule, args.gantt, title=f"{args.source}: {summary['placement']}")
        summary["gantt"] = args.gantt
    if args.trace:
        summary["trace"] = simulation.save_trace(args.trace)
    if args.tensorboard:
        summary["tensorboard"] = plots.tensorboard_graph(simulation.graph, simulation.op_devices,
                                                         args.tensorboard)
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    print(f"{args.source} ({summary['placement']}): predicted step "
          f"{result.step_time_s * 1e3:.1f} ms, {result.status}")
    frame = pd.DataFrame(summary["devices"])
    frame["busy (ms)"] = frame.pop("busy_s") * 1e3
    frame["peak MiB"] = frame.pop("peak_memory_bytes") / 2**20
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if args.gantt:
        print(f"wrote the schedule: {args.gantt}")
    if args.trace:
        print(f"wrote the trace: {args.trace} (open in ui.perfetto.dev)")
    if args.tensorboard:
        print(f"wrote the graph for TensorBoard: tensorboard --logdir {args.tensorboard}")
    return EXIT_OK
