"""The `tf-placeto` command: parse, call the Python API, print.

Exit codes: 0 done; 1 something failed while working (the line says what, and where the full
log is); 2 bad input or usage (one line on stderr, nothing written); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tf_placeto import _quiet

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other bad input."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _source_arguments(parser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a SavedModel directory, a GraphDef or MetaGraphDef file "
                             "(.pb binary, .pbtxt text), or examples:NAME")
    parser.add_argument("--signature", metavar="NAME",
                        help="SavedModel signature (default: serving_default, or the only one)")


def _runtime_arguments(parser) -> None:
    parser.add_argument("--devices", metavar="SPEC",
                        help="devices in this process: a count (of GPUs, else logical CPUs) or "
                             "comma-separated device names")
    parser.add_argument("--cluster", metavar="SPEC",
                        help="local:N (N worker processes on this machine, one core each), a "
                             "ClusterSpec JSON (text or file), or TF_CONFIG")


def _placing_arguments(parser) -> None:
    from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS

    parser.add_argument("--max-groups", type=int, default=DEFAULT_MAX_GROUPS, metavar="N",
                        help=f"place at most N groups (default {DEFAULT_MAX_GROUPS})")
    parser.add_argument("--memory-per-device", metavar="BYTES|FRACTION",
                        help="memory limit of each device: bytes (2GiB, 500MB) or a fraction of "
                             "the graph's single-device peak (0.6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of randomised methods")
    parser.add_argument("--policy", metavar="DIR",
                        help="placeto: a policy trained with `tf-placeto train` (default: the "
                             "one shipped with the package)")
    parser.add_argument("--budget", type=int, default=None, metavar="N",
                        help="placeto: iterations of fine-tuning on the graph (default 0: one "
                             "greedy episode, zero-shot; 10 within method auto)")
    parser.add_argument("--start", choices=("fast", "random"), default=None,
                        help="placeto: where its episodes start: fast (default), the best "
                             "decision of the fast placers, which the policy improves; random, "
                             "the Placeto paper's random placement")
    parser.add_argument("--rnn-budget", type=int, default=None, metavar="N",
                        help="rnn: placements the RNN planner evaluates (default 400)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help="optimal: seconds the exact placer may search (default 30); it "
                             "returns its best placement and the proven gap")
    parser.add_argument("--objective", choices=["latency", "throughput"], default=None,
                        help="optimal: the step's makespan (default) or pipelined throughput")
    parser.add_argument("--cache", metavar="DIR",
                        help="where profiles and results are kept "
                             "(default $TF_PLACETO_CACHE/profiles)")


def _link_argument(parser) -> None:
    parser.add_argument("--link", metavar="LAT_US:BYTES_PER_US[:COPY]",
                        help="simulate devices joined by this link instead of the measured one, "
                             "e.g. 25:7600 (Placeto's K80 GPUs); COPY: the share each end's "
                             "processor spends copying (default 0)")


def _say(message: str) -> None:
    print(f"tf-placeto: {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS

    parser = _Parser(prog="tf-placeto", description="See and change where the ops of a "
                     "TensorFlow graph run.")
    parser.add_argument("--debug", action="store_true",
                        help="show TensorFlow's own log and full tracebacks")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    inspect = commands.add_parser("inspect", help="ops, edges, colocation groups and groups")
    _source_arguments(inspect)
    inspect.add_argument("--max-groups", type=int, default=DEFAULT_MAX_GROUPS, metavar="N",
                         help=f"merge into at most N groups (default {DEFAULT_MAX_GROUPS})")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.set_defaults(handler=_inspect)

    apply = commands.add_parser("apply", help="write a placement into a copy of SOURCE")
    _source_arguments(apply)
    apply.add_argument("--placement", required=True, metavar="FILE.json",
                       help="JSON object: op name -> TensorFlow device string")
    apply.add_argument("--out", required=True, metavar="OUT",
                       help="where to write the placed copy (same kind as SOURCE)")
    apply.add_argument("--devices", metavar="SPEC",
                       help="devices the placement may use: a count, or comma-separated device "
                            "names (default: this machine's; the CPU may be split into "
                            "logical /device:CPU:N)")
    apply.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    apply.set_defaults(handler=_apply)

    profile = commands.add_parser("profile", help="run SOURCE traced and store its cost model")
    _source_arguments(profile)
    _runtime_arguments(profile)
    profile.add_argument("--runs", type=int, default=5, metavar="N",
                         help="traced runs whose median is each op's cost (default 5)")
    profile.add_argument("--cache", metavar="DIR",
                         help="where profiles are kept (default $TF_PLACETO_CACHE/profiles)")
    profile.add_argument("--json", action="store_true", help="print one JSON object")
    profile.set_defaults(handler=_profile)

    measure = commands.add_parser("measure", help="step times of placements, real or simulated")
    _source_arguments(measure)
    _runtime_arguments(measure)
    measure.add_argument("--placement", action="append", default=[], metavar="FILE.json",
                         help="a placement to measure (repeat for several; none: as written)")
    measure.add_argument("--simulate", action="store_true",
                         help="predict from the profile (profiling first if none is cached)")
    measure.add_argument("--repeats", type=int, default=5, metavar="N",
                         help="timed runs after warm-up (default 5)")
    measure.add_argument("--warmup", type=int, default=1, metavar="N",
                         help="untimed runs first (default 1)")
    measure.add_argument("--timeout", type=float, default=600.0, metavar="S",
                         help="a step that takes longer fails (default 600)")
    measure.add_argument("--cache", metavar="DIR",
                         help="where profiles and results are kept "
                              "(default $TF_PLACETO_CACHE/profiles)")
    measure.add_argument("--json", action="store_true", help="print a JSON list of results")
    measure.set_defaults(handler=_measure)

    place = commands.add_parser("place", help="find a placement with one method, write it")
    _source_arguments(place)
    _runtime_arguments(place)
    _placing_arguments(place)
    place.add_argument("--method", default="auto", metavar="NAME",
                       help="placement method: auto (default: the shipped Placeto policy "
                            "fine-tuned briefly and the algorithmic placers, best simulated "
                            "step wins) or one of `tf-placeto compare --help`")
    place.add_argument("--out", metavar="OUT",
                       help="write SOURCE with the placement applied here (same kind as SOURCE)")
    place.add_argument("--placement-out", metavar="FILE.json",
                       help="write the placement (op -> device) here (default: OUT.placement.json)")
    place.add_argument("--simulate", action="store_true",
                       help="predict the before/after step times instead of measuring them")
    place.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    place.add_argument("--json", action="store_true", help="print one JSON object")
    place.set_defaults(handler=_place)

    compare = commands.add_parser(
        "compare", help="every placement method on graphs and device counts: the scoreboard")
    compare.add_argument("graphs", metavar="GRAPH", nargs="+",
                         help="SOURCEs to compare on (examples:NAME, SavedModel directories)")
    compare.add_argument("--devices", metavar="N", type=int, nargs="+",
                         help="device counts (default: the cluster's size); with --simulate, "
                              "any counts: devices like the profiled ones")
    compare.add_argument("--simulate", action="store_true",
                         help="simulate every placement from the profile (default: measure each "
                              "for real on the cluster)")
    compare.add_argument("--cluster", metavar="SPEC", default="local:2",
                         help="where to profile and measure (default local:2: two worker "
                              "processes on this machine, one core each)")
    _link_argument(compare)
    compare.add_argument("--methods", metavar="M,M,...",
                         help="methods to compare (default all)")
    _placing_arguments(compare)
    compare.add_argument("--repeats", type=int, default=5, metavar="N",
                         help="timed runs per real measurement (default 5)")
    compare.add_argument("--measure-best", type=int, default=None, metavar="N",
                         help="measure for real only the N best predicted placements and the "
                              "single device (default: all)")
    compare.add_argument("--json", action="store_true", help="print the table as JSON records")
    compare.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    compare.add_argument("--plot", metavar="FILE.png", help="also draw the table")
    compare.set_defaults(handler=_compare)

    show = commands.add_parser("show", help="a placement's simulated step, devices and schedule")
    _source_arguments(show)
    _runtime_arguments(show)
    show.add_argument("--placement", metavar="FILE.json",
                      help="the placement to show (default: the devices written in SOURCE)")
    show.add_argument("--gantt", metavar="FILE.png",
                      help="draw the simulated schedule: a row per device, transfers below")
    show.add_argument("--tensorboard", metavar="LOGDIR",
                      help="write the placed op graph as a TensorBoard log (Graphs view, "
                           "Color: Device)")
    show.add_argument("--cache", metavar="DIR", help="where profiles are kept")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=_show)

    train = commands.add_parser("train", help="train the Placeto policy on graphs (families)")
    train.add_argument("--graphs", metavar="GRAPH", nargs="+", required=True,
                       help="SOURCEs to train on; examples:FAMILY stands for its members")
    train.add_argument("--members", metavar="A-B", default=None,
                       help="which members of each family (default all), e.g. 0-23 to hold "
                            "24-31 out for evaluating transfer")
    train.add_argument("--devices", metavar="N", type=int, nargs="+", required=True,
                       help="device counts to train for (devices like the profiled ones)")
    train.add_argument("--out", metavar="DIR", required=True,
                       help="where the checkpoints, summaries and exported policy go; an "
                            "existing DIR resumes its training")
    train.add_argument("--steps", metavar="N", type=int, default=500,
                       help="training iterations in all, counting those DIR already did "
                            "(default 500)")
    train.add_argument("--episodes", metavar="K", type=int, default=4,
                       help="parallel episodes per iteration (default 4)")
    train.add_argument("--imitate", metavar="EPOCHS", type=int, default=0,
                       help="before the iterations, teach the policy the fast placers' best "
                            "decision of each problem for EPOCHS passes (behaviour cloning; "
                            "default 0: none)")
    train.add_argument("--algorithm", choices=["reinforce", "ppo"], default="reinforce")
    train.add_argument("--start", choices=["random", "fast"], default="random",
                       help="where every episode starts: random (default), the Placeto paper's "
                            "random placement; fast, the fast placers' best decision, for a "
                            "policy that learns to improve it (as `place` uses it by default)")
    _link_argument(train)
    train.add_argument("--cluster", metavar="SPEC", default="local:2",
                       help="where graphs are profiled (default local:2)")
    train.add_argument("--cache", metavar="DIR", help="where profiles are kept")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(handler=_train)

    examples = commands.add_parser("examples", help="list the bundled examples:NAME graphs")
    examples.set_defaults(handler=_examples)
    return parser


def main(argv=None) -> int:
    _quiet.set_tensorflow_environment()
    args = build_parser().parse_args(argv)
    if args.debug:
        return args.handler(args)
    with _quiet.native_stderr_to_log() as log_path:
        code, message = _run(args)
    if message:
        print(message, file=sys.stderr)
    if code == EXIT_FAILED:
        print(f"tf-placeto: TensorFlow's log: {log_path}", file=sys.stderr)
    else:
        _quiet.remove_log(log_path)
    return code


def _run(args):
    from tf_placeto.errors import PlacetoError

    try:
        return args.handler(args), None
    except PlacetoError as exc:
        return EXIT_BAD_INPUT, f"tf-placeto: error: {exc}"
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, "tf-placeto: interrupted"
    except Exception as exc:  # a failure of ours or TensorFlow's: one line, log kept
        text = str(exc).strip().splitlines()
        return EXIT_FAILED, (f"tf-placeto: failed: {type(exc).__name__}: "
                             f"{text[0] if text else ''} (rerun with --debug for the traceback)")


def _inspect(args) -> int:
    import tf_placeto as tp

    if args.max_groups < 1:
        from tf_placeto.errors import PlacetoError

        raise PlacetoError(f"--max-groups must be at least 1, not {args.max_groups}")
    graph = tp.import_graph(args.source, signature=args.signature)
    groups = tp.group(graph, max_groups=args.max_groups)
    if args.json:
        json.dump(_inspect_json(graph, groups), sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_inspect(graph, groups, args.max_groups)
    return EXIT_OK


def _group_rows(groups) -> list:
    work = groups.work
    rows = []
    for g in range(len(groups)):
        types = groups.device_types(g)
        rows.append({"id": g, "ops": groups.op_names(g), "work": float(work[g]),
                     "device_types": sorted(types) if types is not None else None})
    return rows


def _inspect_json(graph, groups) -> dict:
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


def _print_inspect(graph, groups, max_groups: int) -> None:
    import pandas as pd

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


def _apply(args) -> int:
    import tf_placeto as tp
    from collections import Counter

    result = tp.apply_placement(args.source, args.placement, args.out, devices=args.devices,
                                signature=args.signature, overwrite=args.overwrite)
    counts = Counter(result.placement.values())
    spread = ", ".join(f"{device} ({n} ops)" for device, n in sorted(counts.items()))
    print(f"wrote {args.out}: {len(result.placement)} ops placed on {spread}")
    if result.proto.DESCRIPTOR.name == "SavedModel":
        print("variables keep their devices when loaded with tf.saved_model.load(path, options="
              "tf.saved_model.LoadOptions(experimental_variable_policy="
              "tf.saved_model.experimental.VariablePolicy.SAVE_VARIABLE_DEVICES))")
    return EXIT_OK


def _positive(value, flag: str) -> None:
    from tf_placeto.errors import PlacetoError

    if value < 1:
        raise PlacetoError(f"{flag} must be at least 1, not {value}")


def _profile(args) -> int:
    import tf_placeto as tp
    from tf_placeto.measure.profiler import profile
    from tf_placeto.measure.runtime import open_runtime

    _positive(args.runs, "--runs")
    graph = tp.import_graph(args.source, signature=args.signature)
    with open_runtime(args.devices, args.cluster) as runtime:
        result = profile(graph, runtime, cache=args.cache, runs=args.runs, say=_say)
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
    return EXIT_OK


def _measure(args) -> int:
    import tf_placeto as tp
    from tf_placeto.measure.costmodel import profile_key
    from tf_placeto.measure.measurer import RealMeasurer, SimulatedMeasurer
    from tf_placeto.measure.profiler import profile
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto.cache import cache_dir

    _positive(args.repeats, "--repeats")
    placements = [tp.Placement.from_json(path) for path in args.placement] or [None]
    labels = args.placement or ["as written"]
    graph = tp.import_graph(args.source, signature=args.signature)
    named = {device for p in placements if p for device in p.values()}
    with open_runtime(args.devices, args.cluster, named=named) as runtime:
        devices = tp.DeviceSet.from_strings(runtime.device_names)
        for placement in placements:          # every bad input before any long work
            if placement:
                placement.validate(graph, devices)
        if args.simulate:
            model = profile(graph, runtime, cache=args.cache, say=_say).model
            measurer = SimulatedMeasurer(graph, model, devices)
        else:
            key, _ = profile_key(graph, runtime.device_names)
            results_dir = os.path.join(args.cache or cache_dir("profiles"), key)
            measurer = RealMeasurer(graph, runtime, results_dir=results_dir,
                                    repeats=args.repeats, warmup=max(args.warmup, 0),
                                    timeout_s=args.timeout)
        results = measurer.evaluate(placements, labels=labels)
    if args.json:
        print(json.dumps([r.to_json() for r in results]))
    else:
        _print_results(results)
    return EXIT_OK


def _print_results(results) -> None:
    import pandas as pd

    rows = []
    for r in results:
        memory = ", ".join(f"{d.rsplit('/', 1)[-1] if '/job:' not in d else d}: {b / 2**20:.1f}"
                           for d, b in sorted(r.peak_memory_bytes.items()))
        rows.append({"placement": r.label, "status": r.status,
                     "median (ms)": r.step_time_s * 1e3, "spread (ms)": r.spread_s * 1e3,
                     "runs": r.runs if not r.simulated else "simulated",
                     "peak memory (MiB)": memory or "-", "reason": r.reason})
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def _check_placing(args) -> None:
    from tf_placeto.errors import PlacetoError

    _positive(args.max_groups, "--max-groups")
    if args.budget is not None and args.budget < 0:
        raise PlacetoError(f"--budget must be at least 0, not {args.budget}")
    if args.rnn_budget is not None:
        _positive(args.rnn_budget, "--rnn-budget")
    if args.time_limit is not None and args.time_limit <= 0:
        raise PlacetoError(f"--time-limit must be above 0, not {args.time_limit:g}")
    if getattr(args, "method", None) is not None:
        from tf_placeto import placers
        from tf_placeto.workload import AUTO

        if args.method != AUTO and args.method not in placers.names():
            raise PlacetoError(f"unknown method {args.method!r}; methods: {AUTO}, "
                               f"{', '.join(placers.names())}")


def _placer_options(args) -> dict:
    """The placer options given on the command line (workload.PLACER_OPTIONS)."""
    return {"policy": args.policy, "budget": args.budget, "start": args.start,
            "rnn_budget": args.rnn_budget,
            "time_limit": args.time_limit, "objective": args.objective}


def _place(args) -> int:
    import tf_placeto as tp

    _check_placing(args)
    result = tp.place(args.source, args.method, devices=args.devices, cluster=args.cluster,
                      max_groups=args.max_groups, memory_per_device=args.memory_per_device,
                      seed=args.seed, measure="simulate" if args.simulate else "real",
                      placer_options=_placer_options(args),
                      out=args.out, placement_out=args.placement_out, overwrite=args.overwrite,
                      signature=args.signature, cache=args.cache, say=_say)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    print(f"{args.method} placed {summary['groups']} groups of {args.source} on "
          f"{len(summary['devices'])} devices in {summary['decide_s']:.2f} s")
    for kind in ("predicted", "measured"):
        if f"{kind}_after_s" in summary:
            print(f"{kind} step: {summary[f'{kind}_before_s'] * 1e3:.1f} ms as written -> "
                  f"{summary[f'{kind}_after_s'] * 1e3:.1f} ms placed"
                  + (" (medians)" if kind == "measured" else "")
                  + ("" if summary[f"{kind}_status"] == "ok" else f" ({summary[f'{kind}_status']})"))
    for key, what in (("out", "placed model"), ("placement", "placement")):
        if summary.get(key):
            print(f"wrote the {what}: {summary[key]}")
    return EXIT_OK


def _compare(args) -> int:
    from tqdm import tqdm

    from tf_placeto.measure.costmodel import Link
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto import placers
    from tf_placeto.compare import RealRuns, compare, printable
    from tf_placeto.errors import PlacetoError
    from tf_placeto.workload import MemoryLimit, load_workload

    _check_placing(args)
    _positive(args.repeats, "--repeats")
    if args.measure_best is not None:
        _positive(args.measure_best, "--measure-best")
    memory = MemoryLimit.parse(args.memory_per_device)
    link = Link.parse(args.link) if args.link else None
    if link is not None and not args.simulate:
        raise PlacetoError("--link describes simulated devices: pass --simulate")
    methods = args.methods.split(",") if args.methods else placers.names()
    unknown = [m for m in methods if m not in placers.names()]
    if unknown:
        raise PlacetoError(f"unknown method(s) {', '.join(unknown)}; methods: "
                           f"{', '.join(placers.names())}")
    with open_runtime(cluster=args.cluster) as runtime:
        counts = args.devices or [None]
        if not args.simulate and any(c not in (None, len(runtime.device_names)) for c in counts):
            raise PlacetoError(f"measuring for real uses the cluster's {len(runtime.device_names)} "
                               "devices: pass --simulate for other device counts")
        workloads = [load_workload(graph, runtime, max_groups=args.max_groups, cache=args.cache,
                                   say=_say) for graph in args.graphs]
        real = None if args.simulate else RealRuns(runtime, repeats=args.repeats,
                                                     best=args.measure_best)
        with tqdm(total=len(workloads) * len(counts) * len(methods), file=sys.stderr,
                  unit="placement", leave=False, disable=None) as bar:
            def progress(message):
                bar.set_description(message[:60])
                if "for real" not in message:
                    bar.update(1)
            table = compare(workloads, counts, methods, memory=memory, real=real,
                            seed=args.seed, progress=progress,
                            options=_placer_options(args), link=link)
    if args.csv:
        table.to_csv(args.csv, index=False)
    if args.plot:
        from tf_placeto.plots import comparison_plot

        comparison_plot(table, args.plot)
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(printable(table))
        if memory is not None:
            print(f"\nmemory limit: {memory.describe()}")
        for path, what in ((args.csv, "table"), (args.plot, "plot")):
            if path:
                print(f"wrote the {what}: {path}")
    return EXIT_OK


def _show(args) -> int:
    import tf_placeto as tp
    from tf_placeto.measure.measurer import SimulatedMeasurer
    from tf_placeto.measure.profiler import profile
    from tf_placeto.measure.runtime import open_runtime

    graph = tp.import_graph(args.source, signature=args.signature)
    placement = tp.Placement.from_json(args.placement) if args.placement else None
    named = set(placement.values()) if placement else set()
    with open_runtime(args.devices, args.cluster, named=named) as runtime:
        devices = tp.DeviceSet.from_strings(runtime.device_names)
        if placement:
            placement.validate(graph, devices)
        model = profile(graph, runtime, cache=args.cache, say=_say).model
    measurer = SimulatedMeasurer(graph, model, devices, schedule=bool(args.gantt))
    [result] = measurer.evaluate([placement], labels=[args.placement or "as written"])
    ops_on = dict.fromkeys(devices.names, 0)
    for device in measurer.device_indices(placement):
        ops_on[devices.names[device]] += 1
    summary = {"source": args.source, "placement": result.label,
               "predicted_step_s": result.step_time_s, "status": result.status,
               "devices": [{"device": d, "ops": ops_on[d], "busy_s": result.busy_s[d],
                            "peak_memory_bytes": result.peak_memory_bytes[d]}
                           for d in devices.names]}
    if args.gantt:
        from tf_placeto.plots import gantt

        gantt(result.schedule, args.gantt, title=f"{args.source}: {result.label}")
        summary["gantt"] = args.gantt
    if args.tensorboard:
        from tf_placeto.plots import tensorboard_graph

        op_devices = [devices.names[d] for d in measurer.device_indices(placement)]
        summary["tensorboard"] = tensorboard_graph(graph, op_devices, args.tensorboard)
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    import pandas as pd

    print(f"{args.source} ({result.label}): predicted step {result.step_time_s * 1e3:.1f} ms, "
          f"{result.status}")
    frame = pd.DataFrame(summary["devices"])
    frame["busy (ms)"] = frame.pop("busy_s") * 1e3
    frame["peak MiB"] = frame.pop("peak_memory_bytes") / 2**20
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if args.gantt:
        print(f"wrote the schedule: {args.gantt}")
    if args.tensorboard:
        print(f"wrote the graph for TensorBoard: tensorboard --logdir {args.tensorboard}")
    return EXIT_OK


def _train(args) -> int:
    from tqdm import tqdm

    from tf_placeto.measure.costmodel import Link
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto.policy import specs
    from tf_placeto.policy.training import Trainer, TrainingConfig
    from tf_placeto.workload import load_workload

    if args.imitate < 0 or args.steps < (0 if args.imitate else 1):
        from tf_placeto.errors import PlacetoError

        raise PlacetoError(f"--steps {args.steps} --imitate {args.imitate}: the iterations must "
                           "be at least 1 (0 with imitation), the epochs at least 0")
    _positive(args.episodes, "--episodes")
    bad = [n for n in args.devices if not 2 <= n <= specs.MAX_DEVICES]
    if bad:
        from tf_placeto.errors import PlacetoError

        raise PlacetoError(f"--devices {bad[0]}: the policy places on 2 to {specs.MAX_DEVICES} "
                           "devices")
    sources = _expand_graphs(args.graphs, args.members)
    link = Link.parse(args.link) if args.link else None
    problems = []
    with open_runtime(cluster=args.cluster) as runtime:
        for source in tqdm(sources, desc="profiling", unit="graph", file=sys.stderr,
                           disable=None):
            workload = load_workload(source, runtime, max_groups=specs.MAX_GROUPS,
                                     cache=args.cache)
            problems += [workload.problem(n, link=link) for n in args.devices]
    _say(f"training on {len(sources)} graphs x {len(args.devices)} device counts "
         f"= {len(problems)} problems; writing to {args.out}")

    def fast_decisions():
        from tf_placeto.policy.environment import fast_start

        return [fast_start(problem)[1] for problem in tqdm(
            problems, desc="fast placers", unit="problem", file=sys.stderr, disable=None)]

    fast = fast_decisions() if args.start == "fast" else None
    trainer = Trainer(problems, args.out, TrainingConfig(algorithm=args.algorithm,
                                                         episodes=args.episodes, seed=args.seed),
                      initial=fast)
    if args.imitate > 0 and not trainer.imitation:    # a resumed run has imitated already
        fast = fast or fast_decisions()
        with tqdm(total=args.imitate, unit="epoch", desc="imitation", file=sys.stderr,
                  disable=None) as bar:
            def imitated(row):
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3f}", accuracy=f"{row['accuracy']:.3f}")
            trainer.imitate(fast, args.imitate, progress=imitated)
    with tqdm(total=args.steps, initial=trainer.iterations_done, unit="iteration",
              file=sys.stderr, disable=None) as bar:
        def progress(row):
            bar.update(1)
            bar.set_postfix(episodes=row["iteration"] * args.episodes,
                            best_speedup=f"{row['best_speedup']:.3f}x",
                            mean_return=f"{row['mean_return']:+.3f}")
        history = trainer.run(args.steps, progress=progress)
    policy = trainer.export()
    if trainer.imitation:
        print(f"after {len(trainer.imitation)} epochs of imitation, the policy's likeliest "
              f"device was the fast placers' in {trainer.imitation[-1]['accuracy']:.1%} of "
              "the moves")
    if trainer.iterations_done:
        print(f"trained {trainer.iterations_done} iterations on {len(problems)} problems; "
              f"best placements {history[-1]['best_speedup']:.3f}x faster than one device "
              "on average (simulated)")
    print(f"policy: {policy}")
    return EXIT_OK


def _expand_graphs(graphs, members) -> list:
    """examples:FAMILY -> its members (those in `members`, "A-B"); other sources as given."""
    from tf_placeto.examples import registry
    from tf_placeto.errors import PlacetoError

    first, last = 0, None
    if members:
        low, _, high = members.partition("-")
        if not (low.isdigit() and high.isdigit() and int(low) <= int(high)):
            raise PlacetoError(f"--members {members!r}: write A-B, e.g. 0-23")
        first, last = int(low), int(high)
    families = registry.families()
    sources = []
    for graph in graphs:
        family = graph[len("examples:"):] if graph.startswith("examples:") else None
        if family in families:
            sources += [f"examples:{m}" for m in families[family][first:None if last is None
                                                                   else last + 1]]
        else:
            sources.append(graph)
    return sources


def _examples(args) -> int:
    from tf_placeto.examples import registry

    for name in registry.names(include_large=True):
        print(f"examples:{name:<14} {registry.get(name).description}")
    for family, members in registry.families().items():
        print(f"examples:{family + '-K':<14} K = 0 .. {len(members) - 1}, seed K: "
              f"{registry.family_description(family)}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
