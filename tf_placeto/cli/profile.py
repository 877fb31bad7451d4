"""`tf-placeto profile`: run a graph traced, store its cost model and calibrate the simulator."""

from __future__ import annotations

import json

from tf_placeto import api, choices
from tf_placeto.cli.common import (EXIT_OK, cache_argument, count, runtime_arguments,
                                   source_arguments, source_of, target_of)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("profile", help="run SOURCE traced and store its cost model")
    source_arguments(parser)
    runtime_arguments(parser)
    parser.add_argument("--runs", type=count(1), default=5, metavar="N",
                        help="traced runs whose median is each op's cost (default 5)")
    parser.add_argument("--calibrate", type=count(0),
                        default=choices.CALIBRATION_PLACEMENTS, metavar="N",
                        help="then, on two or more devices, time N diverse placements for "
                             "real and fit the simulator to them (default "
                             f"{choices.CALIBRATION_PLACEMENTS}; 0: skip); refitted later "
                             "with every real measurement of the graph")
    cache_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    result = api.profile(source_of(args), target_of(args), runs=args.runs,
                         calibration_runs=args.calibrate)
    summary = {"directory": result.directory, "cached": result.cached,
               **result.model.summary()}
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    ops = result.model.ops
    print(f"profile {summary['key']} ({'found in the cache' if result.cached else 'measured now'})"
          f": {result.directory}")
    print(f"ops: {summary['ops']}, of which {summary['traced_ops']} ran under their own name "
          "(the rest were folded or fused by Grappler)")
    for device_type, ms in summary["compute_ms_per_device_type"].items():
        print(f"total compute on {device_type}: {ms:.1f} ms")
    top = ops.sort_values("compute_us", ascending=False).head(10)
    print(top[["op", "device_type", "compute_us", "output_bytes"]].to_string(index=False))
    if len(result.model.links):
        print(result.model.links.to_string(index=False))
    for kind, slowdown in sorted(summary["remote_input_slowdowns"].items()):
        print(f"{kind} takes {slowdown:.1f}x as long with an input from another device")
    print(api.calibration_report(result.model.calibration))
    return EXIT_OK
