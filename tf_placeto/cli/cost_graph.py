"""`inspect`, `place`, `compare` and `show` when SOURCE is a cost graph (Tarnawski et al.'s
JSON format, tf_placeto/cost_graphs.py): nothing runs, every figure is computed from the file."""

from __future__ import annotations

import json
import sys

import pandas as pd

from tf_placeto import cost_graphs
from tf_placeto.cli.common import EXIT_OK, placer_options
from tf_placeto.errors import InputError
from tf_placeto.frontend import check_output_file, write_atomically

# What a TensorFlow graph needs and a cost graph has of its own: its devices and memory.
_NOT_FOR_COST_GRAPHS = {"devices": "--devices", "cluster": "--cluster",
                        "memory_per_device": "--memory-per-device",
                        "signature": "--signature", "tag_set": "--tag-set",
                        "placement_out": "--placement-out", "stream": "--stream",
                        "counts": "--counts", "link": "--link"}


def is_cost_graph(args) -> bool:
    """Whether the command's SOURCE (or every graph of compare) is a cost graph; refuses a
    mix of both kinds, the flags a cost graph has no use for and those only it has."""
    sources = getattr(args, "graphs", None) or [args.source]
    kinds = {cost_graphs.is_cost_graph(source) for source in sources}
    if kinds == {True, False}:
        raise InputError("compare cost graphs and TensorFlow graphs apart: a cost graph is "
                         "scored by its own accounting, not profiled")
    if kinds != {True}:
        if getattr(args, "experts", None):
            raise InputError("--experts reads Tarnawski et al.'s experts' splits of cost "
                             "graphs; on a TensorFlow graph the expert is a method: "
                             "--methods expert")
        return False
    given = [flag for name, flag in _NOT_FOR_COST_GRAPHS.items() if getattr(args, name, None)]
    if given:
        raise InputError(f"a cost graph names its own devices and memory (maxFPGAs, maxCPUs, "
                         f"maxSizePerFPGA): {', '.join(given)} has no use there")
    return True


def inspect(args) -> int:
    summary = cost_graphs.summary(args.source)
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    print(f"source: cost graph {args.source}")
    print(f"nodes: {summary['nodes']}   edges: {summary['edges']}   colour classes: "
          f"{summary['colour_classes']}   backward nodes: {summary['backward_nodes']}")
    print(f"devices: {summary['accelerators']} accelerators of "
          f"{summary['memory_per_accelerator']:.6g} bytes, {summary['cpus']} CPUs; "
          f"{summary['unsupported_nodes']} nodes run only on a CPU")
    print(f"total time: {summary['accelerator_time']:.6g} on an accelerator, "
          f"{summary['cpu_time']:.6g} on a CPU")
    return EXIT_OK


def place(args) -> int:
    method = args.method if args.method != "auto" else (
        cost_graphs.DP if args.objective == cost_graphs.THROUGHPUT else cost_graphs.OPTIMAL)
    result = cost_graphs.place(args.source, method, args.objective, out=args.out,
                               overwrite=args.overwrite, seed=args.seed,
                               options=placer_options(args), **_time_limit(args))
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    print(f"{method} split {args.source} over {len(result.devices)} devices in "
          f"{result.decide_s:.2f} s (computed from the file, nothing run)")
    _print_result(summary)
    if result.out:
        print(f"wrote the placement: {result.out}")
    return EXIT_OK


def show(args) -> int:
    if not args.placement:
        raise InputError("a cost graph holds no devices: give the split with --placement")
    if args.gantt or args.trace or args.tensorboard:
        raise InputError("a cost graph has loads, not a schedule: --gantt, --trace and "
                         "--tensorboard draw a TensorFlow graph's")
    summary = cost_graphs.show(args.source, args.placement).summary()
    if args.json:
        print(json.dumps(summary))
    else:
        _print_result(summary)
    return EXIT_OK


def compare(args) -> int:
    if args.plot:
        raise InputError("--plot draws the scoreboard of TensorFlow graphs; a cost graph's "
                         "table is printed, and written with --csv")
    if args.csv:
        check_output_file(args.csv, "--csv", keep_out_of=args.graphs)
    methods = args.methods.split(",") if args.methods else None
    table = cost_graphs.compare(args.graphs, methods, args.objective, **_time_limit(args),
                                progress=lambda message: print(f"tf-placeto: {message}",
                                                               file=sys.stderr),
                                experts_folder=args.experts, seed=args.seed,
                                options=placer_options(args))
    if args.csv:
        write_atomically(args.csv, lambda file: table.to_csv(file, index=False))
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
        if args.csv:
            print(f"wrote the table: {args.csv}")
    return EXIT_OK


def _time_limit(args) -> dict:
    """--time-limit where given; else the programs' own on a cost graph (a minute, the
    issue's and the benchmark's)."""
    return {} if args.time_limit is None else {"time_limit_s": args.time_limit}


def _print_result(summary: dict) -> None:
    print(f"max-load (time per sample, throughput): {_figure(summary['max_load'])}; "
          f"latency of one sample: {_figure(summary['latency'])}")
    if summary.get("gap") is not None:
        print(f"proven gap to the optimum: {summary['gap']:.2%}")
    if summary["reason"]:
        print(f"infeasible: {summary['reason']}")
    elif summary["no_latency"]:
        print(f"no latency: {summary['no_latency']}")
    if summary["loads"]:
        print(pd.Series(summary["loads"], name="load").to_string())


def _figure(value) -> str:
    return "-" if value is None else f"{value:.6g}"
