"""The `tf-placeto` command: parse, call the Python API, print.

Exit codes: 0 done; 1 something failed while working (the line says what, and where the full
log is); 2 bad input or usage (one line on stderr, nothing written); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import traceback
from collections import Counter
from typing import Optional

import numpy as np
import pandas as pd

from tf_placeto import _quiet, api, methods, plots
from tf_placeto._version import __version__
from tf_placeto.compare import compare_sources, printable
from tf_placeto.devices import MAX_LOGICAL_CPUS
from tf_placeto.errors import InputError, MeasurementError, PlacetoError, RuntimeFailure
from tf_placeto.examples import registry
from tf_placeto.files import check_output_file, check_output_folder, write_atomically
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS
from tf_placeto.graph.sources import source_path
from tf_placeto.log import progress, progress_to
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.measure.runtimes.runtime import open_runtime
from tf_placeto.measure.evaluation.trace import simulated_trace, write_trace
from tf_placeto.placers.problem import IN_FLIGHT, OBJECTIVES
from tf_placeto.policy.starts import IMITATE_WHERE, START_KINDS, best_known, initial_placement
from tf_placeto.workload import MemoryLimit

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# Timeouts and time budgets: a month is longer than any run is waited for or timed, and a
# number past TensorFlow's 64-bit milliseconds (--timeout 1e300) failed in it with exit 1.
MAX_SECONDS = 30 * 24 * 3600
_OVERWRITE_HELP = ("replace an existing OUT (and placement file) that tf-placeto wrote: a "
                   "SavedModel folder or a graph file; anything else is refused, and the old "
                   "OUT survives any failure whole")


def _count(minimum: int, maximum: Optional[int] = None, why: str = ""):
    """An argparse type: a whole number of at least `minimum` (and at most `maximum`, for
    `why`), checked where it is parsed."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"give a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum} ({why}), not {value}")
        return value
    return parse


# Simulated devices (--counts): the devices a profile's device type can have in one process,
# as --devices allows; the simulator's link matrices grow with the square of the count.
_DEVICE_COUNT = _count(1, MAX_LOGICAL_CPUS, "devices like the profiled ones, as --devices N "
                       "allows")
# Steps in flight (--stream): each is a thread over one session, on this machine's cores.
MAX_IN_FLIGHT = 64
_IN_FLIGHT = _count(1, MAX_IN_FLIGHT, "each step in flight is a thread of this process")


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 and at most MAX_SECONDS."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of seconds, not {text!r}") from None
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0 and at "
                                         f"most {MAX_SECONDS} (30 days), not {text}")
    return value


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
    parser.add_argument("--tag-set", metavar="TAGS",
                        help="SavedModel MetaGraph, by its comma-separated tags as "
                             "saved_model_cli names them (default: serve, or the only one)")


def _runtime_arguments(parser, default: str = "this machine's devices") -> None:
    """Where graphs are profiled and run; the same two flags in every command."""
    parser.add_argument("--devices", metavar="SPEC",
                        help="devices in this process: a count (of GPUs, else logical CPUs) or "
                             "comma-separated device names")
    parser.add_argument("--cluster", metavar="SPEC",
                        help="local:N (N worker processes on this machine, one core each; "
                             "local:N,memory=SIZE caps each one's memory, "
                             "local:N,threads=T gives each T inter-op threads, default 8), a "
                             "ClusterSpec JSON (text or file), or TF_CONFIG "
                             f"(default, without --devices: {default})")


def _placing_arguments(parser) -> None:
    parser.add_argument("--max-groups", type=_count(1), default=DEFAULT_MAX_GROUPS, metavar="N",
                        help=f"place at most N groups (default {DEFAULT_MAX_GROUPS})")
    parser.add_argument("--memory-per-device", metavar="BYTES|FRACTION",
                        help="memory limit of each device: bytes (2GiB, 500MB) or a fraction of "
                             "the graph's single-device peak (0.6)")
    parser.add_argument("--seed", type=_count(0), default=0, help="seed of randomised methods")
    parser.add_argument("--objective", choices=OBJECTIVES, default="latency",
                        help="latency: one step as short as possible (default); throughput: "
                             "the most steps per second with --stream steps in flight, as a "
                             "server with concurrent requests; followed by " + ", ".join(
                                 spec.name for spec in methods.specs() if spec.objectives)
                             + " (the others place alike under both)")
    parser.add_argument("--stream", type=_IN_FLIGHT, metavar="K",
                        help=f"throughput: steps in flight (default {IN_FLIGHT})")
    for spec, option in methods.options():       # each placer's own, from its PLACER
        parser.add_argument(option.flag, type=option.type, choices=option.choices or None,
                            metavar=option.metavar, help=_option_help(spec, option))
    parser.add_argument("--cache", metavar="DIR",
                        help="where profiles and results are kept "
                             "(default $TF_PLACETO_CACHE/profiles)")


def _option_help(spec, option) -> str:
    """A placer option's help: whose it is, what it does, its defaults."""
    defaults = ([] if option.default is None else [f"default {option.default:g}"
                 if isinstance(option.default, float) else f"default {option.default}"]) + \
        ([] if option.auto is None else [f"{option.auto} within method {methods.AUTO}"])
    return f"{spec.name}: {option.help}" + (f" ({'; '.join(defaults)})" if defaults else "")


def _link_argument(parser, several: bool = False) -> None:
    parser.add_argument("--link", metavar="[machine:]LAT_US:BYTES_PER_US[:COPY]",
                        nargs="+" if several else None,
                        help="simulate devices joined by this link instead of the measured one, "
                             "e.g. 25:7600 (Placeto's K80 links between the profiled cluster's "
                             "tasks); COPY: the share each end's processor spends copying "
                             "(default 0); machine: devices of one machine, with no per-task "
                             "or per-tensor RPC cost; k80 stands for machine:25:7600, the "
                             "paper's K80 GPUs" + ("; several: every problem under each"
                                                   if several else ""))


def _say(message: str) -> None:
    print(f"tf-placeto: {message}", file=sys.stderr, flush=True)


class _Progress(logging.Handler):
    """The library's progress (the "tf_placeto" logger) on stderr, as the command's own."""

    def emit(self, record):
        _say(record.getMessage())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tf-placeto", description="See and change where the ops of a "
                     "TensorFlow graph run.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show TensorFlow's own log and full tracebacks")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    inspect = commands.add_parser("inspect", help="ops, edges, colocation groups and groups")
    _source_arguments(inspect)
    inspect.add_argument("--max-groups", type=_count(1), default=DEFAULT_MAX_GROUPS, metavar="N",
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
    apply.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    apply.set_defaults(handler=_apply)

    profile = commands.add_parser("profile", help="run SOURCE traced and store its cost model")
    _source_arguments(profile)
    _runtime_arguments(profile)
    profile.add_argument("--runs", type=_count(1), default=5, metavar="N",
                         help="traced runs whose median is each op's cost (default 5)")
    profile.add_argument("--calibrate", type=_count(0),
                         default=fitting.CALIBRATION_PLACEMENTS, metavar="N",
                         help="then, on two or more devices, time N diverse placements for "
                              "real and fit the simulator to them (default "
                              f"{fitting.CALIBRATION_PLACEMENTS}; 0: skip); refitted later "
                              "with every real measurement of the graph")
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
    measure.add_argument("--repeats", type=_repeats, default="auto", metavar="N|auto",
                         help="rounds of timed runs after warm-up, the placements taking turns "
                              "in each (default auto: until the ratios between placements are "
                              "known to 5%%, or --time-budget ends)")
    measure.add_argument("--time-budget", type=_seconds, default=60.0, metavar="S",
                         help="seconds of rounds that --repeats auto may spend (default 60)")
    measure.add_argument("--sessions", type=_count(1), default=1, metavar="N",
                         help="load each placement anew N times, one set of sessions after "
                              "the other, sharing the rounds and --time-budget, and pool "
                              "their rounds: one session of a split can run slower than "
                              "another for as long as it is open (default 1)")
    measure.add_argument("--warmup", type=_count(0), default=1, metavar="N",
                         help="untimed runs first (default 1)")
    measure.add_argument("--timeout", type=_seconds, default=600.0, metavar="S",
                         help="a step that takes longer fails (default 600)")
    measure.add_argument("--trace", metavar="DIR",
                         help="write one step of each placement as DIR/<label>.json, a Chrome "
                              "trace (ui.perfetto.dev): a traced run, or with --simulate the "
                              "simulated schedule")
    measure.add_argument("--stream", type=_IN_FLIGHT, default=0, metavar="K",
                         help="throughput: K steps in flight at once, as a server answers "
                              "concurrent requests (threads over one session); reports steps "
                              "per second once the stream is full, and each figure is "
                              "seconds per step")
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
                       help="write the placement (op -> device) here "
                            "(default: OUT.placement.json)")
    place.add_argument("--simulate", action="store_true",
                       help="predict the before/after step times instead of measuring them")
    place.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    place.add_argument("--json", action="store_true", help="print one JSON object")
    place.set_defaults(handler=_place)

    compare = commands.add_parser(
        "compare", help="every placement method on graphs and device counts: the scoreboard")
    compare.add_argument("graphs", metavar="GRAPH", nargs="+",
                         help="SOURCEs to compare on (examples:NAME, SavedModel directories)")
    compare.add_argument("--counts", metavar="N", type=_DEVICE_COUNT, nargs="+",
                         help="device counts to place on (default: as many as the runtime "
                              "has); with --simulate, any counts: devices like the profiled "
                              "ones")
    compare.add_argument("--simulate", action="store_true",
                         help="simulate every placement from the profile (default: measure each "
                              "for real on the cluster)")
    _runtime_arguments(compare, default="local:2: two worker processes on this machine, "
                                "one core each")
    _link_argument(compare)
    compare.add_argument("--methods", metavar="M,M,...",
                         help="methods to compare (default all): " + "; ".join(
                             f"{spec.name}: {spec.help}" for spec in methods.specs()))
    _placing_arguments(compare)
    compare.add_argument("--repeats", type=_count(1), default=5, metavar="N",
                         help="timed runs per real measurement (default 5)")
    compare.add_argument("--measure-best", type=_count(1), default=None, metavar="N",
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
    show.add_argument("--trace", metavar="FILE.json",
                      help="write the simulated schedule as a Chrome trace (ui.perfetto.dev): "
                           "a process per device, transfers on their own rows")
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
    train.add_argument("--counts", metavar="N", type=_DEVICE_COUNT, nargs="+", required=True,
                       help="device counts to train for (devices like the profiled ones)")
    train.add_argument("--out", metavar="DIR", required=True,
                       help="where the checkpoints, summaries and exported policy go: a new "
                            "or empty folder, or one a run trained in, which resumes from its "
                            "newest whole checkpoint; any other folder is refused")
    train.add_argument("--max-groups", type=_count(1), default=128, metavar="N",
                       help="group each graph into at most N groups (default 128: an episode "
                            "visits every group, so fewer train faster; the policy places any "
                            "number)")
    train.add_argument("--steps", metavar="N", type=_count(0), default=500,
                       help="training iterations in all, counting those DIR already did "
                            "(default 500)")
    train.add_argument("--episodes", metavar="K", type=_count(1), default=4,
                       help="parallel episodes per iteration (default 4)")
    train.add_argument("--imitate", metavar="EPOCHS", type=_count(0), default=0,
                       help="before the iterations, teach the policy the best decision known "
                            "for each problem (the fast placers' best; see --imitate-climb and "
                            "--imitate-exact) "
                            "for EPOCHS passes (behaviour cloning; default 0: none)")
    train.add_argument("--keep-imitating", metavar="K", type=_count(0), default=0,
                       help="during the iterations, imitation goes on as a regulariser: after "
                            "an iteration on a problem where the policy's greedy episode "
                            "ends slower than its lesson (its decision to imitate, or a "
                            "placement an episode met at least 1%% faster), K batches of "
                            "that problem's demonstrations (default 0: none)")
    train.add_argument("--keep-imitating-where", choices=IMITATE_WHERE, default="behind",
                       help="which iterations --keep-imitating follows: 'behind' (the "
                            "default), where the greedy episode ends slower than the lesson; "
                            "'one-device', every iteration on a problem whose lesson is on "
                            "one device, and no other (how the shipped cluster policy was "
                            "trained)")
    train.add_argument("--imitate-climb", metavar="S", type=_seconds, default=0.0,
                       help="climb each problem's best fast decision in the simulator for up "
                            "to S seconds (the hill_climb placer) and teach the climbed "
                            "decision where it is faster (default: not asked)")
    train.add_argument("--imitate-exact", metavar="S", type=_seconds, default=0.0,
                       help="give the exact placer S seconds per problem: where it proves its "
                            "decision optimal and that decision simulates faster than the "
                            "fast placers' best (or the climbed one), imitation teaches it "
                            "instead (default: not asked)")
    train.add_argument("--real-steps", metavar="N", type=_count(0), default=0,
                       help="after the simulated iterations, N more on each graph on the "
                            "runtime's own devices, whose episodes' returns are measured for "
                            "real (their starts and ends timed in turns, logged with the "
                            "profile's real runs; default 0: none)")
    train.add_argument("--algorithm", choices=["reinforce", "ppo"], default="reinforce")
    train.add_argument("--warm-start", metavar="DIR", default=None,
                       help="a new run starts from the weights of the policy trained in DIR (a "
                            "--out directory, or tf_placeto/policy/pretrained): what its "
                            "network learned carries over where the observation has gained "
                            "inputs since (they start at zero); a resumed run keeps its own")
    train.add_argument("--start", choices=START_KINDS, nargs="+", default=["random"],
                       help="where the episodes start: random (default), the Placeto paper's "
                            "random placement; fast, the fast placers' best decision, for a "
                            "policy that learns to improve it (as `place` uses it by default); "
                            "single, every group on the best device; several: every problem "
                            "is posed from each")
    _link_argument(train, several=True)
    _runtime_arguments(train, default="local:2")
    train.add_argument("--cache", metavar="DIR", help="where profiles are kept")
    train.add_argument("--seed", type=_count(0), default=0,
                       help="the run's seed: first weights, starts, samples and imitation "
                            "batches (default 0)")
    train.set_defaults(handler=_train)

    examples = commands.add_parser("examples", help="list the bundled examples:NAME graphs")
    examples.set_defaults(handler=_examples)
    return parser


def main(argv=None) -> int:
    _quiet.set_tensorflow_environment()
    args = build_parser().parse_args(argv)
    # --debug leaves TensorFlow's own log on the terminal: there is no log file to name
    quiet = contextlib.nullcontext() if args.debug else _quiet.native_stderr_to_log()
    with progress_to(_Progress()), quiet as log_path:
        code, message = _run(args, debug=args.debug)
    if message:
        print(message, file=sys.stderr)
    if log_path and code == EXIT_FAILED:
        print(f"tf-placeto: TensorFlow's log: {log_path}", file=sys.stderr)
    elif log_path:
        _quiet.remove_log(log_path)
    return code


def _run(args, debug: bool = False):
    """(exit code, the line that says why or None): the same with `debug`, which shows the
    traceback of what was raised first."""
    try:
        try:
            return args.handler(args), None
        except (Exception, KeyboardInterrupt):
            if debug:
                traceback.print_exc()
            raise
    except RuntimeFailure as exc:        # good input, failed work: the log says more
        return EXIT_FAILED, f"tf-placeto: failed: {exc}"
    except PlacetoError as exc:          # InputError, or any other report of bad input
        return EXIT_BAD_INPUT, f"tf-placeto: error: {exc}"
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, "tf-placeto: interrupted"
    except Exception as exc:  # a failure of ours or TensorFlow's: one line, log kept
        text = str(exc).strip().splitlines()
        hint = "" if debug else " (rerun with --debug for the traceback)"
        return EXIT_FAILED, (f"tf-placeto: failed: {type(exc).__name__}: "
                             f"{text[0] if text else ''}{hint}")


def _inspect(args) -> int:
    graph = api.import_graph(args.source, signature=args.signature, tag_set=args.tag_set)
    groups = api.group(graph, max_groups=args.max_groups)
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
    result = api.apply_placement(args.source, args.placement, args.out, devices=args.devices,
                                signature=args.signature, tag_set=args.tag_set,
                                overwrite=args.overwrite)
    counts = Counter(result.placement.values())
    spread = ", ".join(f"{device} ({n} ops)" for device, n in sorted(counts.items()))
    print(f"wrote {args.out}: {len(result.placement)} ops placed on {spread}")
    if result.proto.DESCRIPTOR.name == "SavedModel":
        print("variables keep their devices when loaded with tf.saved_model.load(path, options="
              "tf.saved_model.LoadOptions(experimental_variable_policy="
              "tf.saved_model.experimental.VariablePolicy.SAVE_VARIABLE_DEVICES))")
    return EXIT_OK


def _repeats(text: str):
    """--repeats: a count of at least 1, or auto."""
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a count of at least 1 or auto, not {text!r}")
    return int(text)


def _profile(args) -> int:
    result = api.profile(args.source, devices=args.devices, cluster=args.cluster,
                         runs=args.runs, cache=args.cache, calibration_runs=args.calibrate,
                         signature=args.signature, tag_set=args.tag_set)
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
    print(_calibration_report(result.model.calibration))
    return EXIT_OK


def _calibration_report(calibration) -> str:
    if calibration is None:
        return "simulator: not calibrated (no real runs of placements yet)"
    lines = [f"simulator calibrated on {calibration.observations} real runs: "
             f"{calibration.describe()}"]
    quality = calibration.quality
    if quality:
        lines += fitting.quality_lines(quality)
    return "\n".join(lines)


def _measure(args) -> int:
    if args.trace:
        check_output_folder(args.trace, "--trace", keep_out_of=[source_path(args.source)])
    results = api.measure_steps(args.source, args.placement or [None],
                                labels=args.placement or ["as written"], devices=args.devices,
                                cluster=args.cluster, simulate=args.simulate,
                                repeats=args.repeats, warmup=args.warmup,
                                timeout_s=args.timeout, budget_s=args.time_budget,
                                cache=args.cache,
                                signature=args.signature, tag_set=args.tag_set, trace=args.trace,
                                stream=args.stream, sessions=args.sessions)
    if args.json:
        print(json.dumps([{**r.to_json(), **({"steps_per_s": r.steps_per_s}
                                              if r.steps_per_s else {})} for r in results]))
    else:
        _print_results(results)
        if args.trace:
            print(f"wrote a trace per placement into {args.trace} (open in ui.perfetto.dev)")
    return _measured_something(r.status for r in results)


def _measured_something(statuses) -> int:
    """EXIT_OK when a row was measured (or simulated), after the rows were printed; else a
    failure, which exits 1."""
    if "ok" not in set(statuses):
        raise MeasurementError("nothing could be measured (see the reasons above)")
    return EXIT_OK


def _print_results(results) -> None:
    rows = []
    for r in results:
        memory = ", ".join(f"{d.rsplit('/', 1)[-1] if '/job:' not in d else d}: {b / 2**20:.1f}"
                           for d, b in sorted(r.peak_memory_bytes.items()))
        interval = (f"{r.interval['low'] * 1e3:.2f} .. {r.interval['high'] * 1e3:.2f}"
                    if r.interval else "-")
        ratio = (f"{r.ratio_to_first['median']:.3f} ({r.ratio_to_first['low']:.3f} .. "
                 f"{r.ratio_to_first['high']:.3f})" if r.ratio_to_first else "-")
        per_step = {"steps/s": r.steps_per_s} if r.stream else {}
        rows.append({"placement": r.label, "status": r.status, **per_step,
                     "median (ms)": r.step_time_s * 1e3, "95% interval (ms)": interval,
                     "x first (95%)": ratio,
                     "cannot tell from": ", ".join(r.indistinct_from) or "-",
                     "runs": r.runs if not r.simulated else "simulated",
                     "peak memory (MiB)": memory or "-", "reason": r.reason})
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def _check_placing(args) -> None:
    methods.check_options(_placer_options(args))
    if getattr(args, "method", None) is not None:
        methods.spec(args.method)


def _placer_options(args) -> dict:
    """The placer options given on the command line, by their names (methods.options())."""
    return {option.name: getattr(args, option.name) for _, option in methods.options()}


def _place(args) -> int:
    _check_placing(args)
    result = api.place(args.source, args.method, devices=args.devices, cluster=args.cluster,
                      max_groups=args.max_groups, memory_per_device=args.memory_per_device,
                      seed=args.seed, measure="simulate" if args.simulate else "real",
                      placer_options=_placer_options(args),
                      out=args.out, placement_out=args.placement_out, overwrite=args.overwrite,
                      signature=args.signature, tag_set=args.tag_set, cache=args.cache,
                      objective=args.objective, stream=args.stream)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    print(f"{args.method} placed {summary['groups']} groups of {args.source} on "
          f"{len(summary['devices'])} devices in {summary['decide_s']:.2f} s")
    if "measured_candidates" in summary:
        _print_candidates(summary["measured_candidates"], summary["winner"])
    per_step = "step" if summary["in_flight"] is None else \
        f"time per step, {summary['in_flight']} in flight"
    for kind in ("predicted", "measured"):
        if f"{kind}_after_s" in summary:
            print(f"{kind} {per_step}: {summary[f'{kind}_before_s'] * 1e3:.1f} ms as written -> "
                  f"{summary[f'{kind}_after_s'] * 1e3:.1f} ms "
                  + ("placed" if summary["written"] else "(kept as written)")
                  + (" (medians)" if kind == "measured" else "")
                  + ("" if summary[f"{kind}_status"] == "ok" else f" ({summary[f'{kind}_status']})"))
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


def _compare(args) -> int:
    _check_placing(args)
    sources = [source_path(graph) for graph in args.graphs]
    if args.csv:
        check_output_file(args.csv, "--csv", keep_out_of=sources)
    if args.plot:
        plots.check_picture_path(args.plot, "--plot", keep_out_of=sources)
    compared = args.methods.split(",") if args.methods else methods.names()
    with progress(total=len(args.graphs) * len(args.counts or [None]) * len(compared),
                  unit="placement", leave=False) as bar:
        def advanced(message):
            bar.set_description(message[:60])
            if "for real" not in message:
                bar.update(1)
        table = compare_sources(args.graphs, compared, counts=args.counts, devices=args.devices,
                                cluster=args.cluster, simulate=args.simulate,
                                repeats=args.repeats, measure_best=args.measure_best,
                                memory_per_device=args.memory_per_device, link=args.link,
                                max_groups=args.max_groups, seed=args.seed,
                                options=_placer_options(args), cache=args.cache,
                                objective=args.objective, stream=args.stream,
                                progress=advanced)
    if args.csv:
        write_atomically(args.csv, lambda file: table.to_csv(file, index=False))
    if args.plot:
        plots.comparison_plot(table, args.plot)
    if args.json:
        print(table.to_json(orient="records"))
    else:
        print(printable(table))
        if args.memory_per_device is not None:
            print(f"\nmemory limit: {MemoryLimit.parse(args.memory_per_device).describe()}")
        for path, what in ((args.csv, "table"), (args.plot, "plot")):
            if path:
                print(f"wrote the {what}: {path}")
    return _measured_something(table["status"])


def _show(args) -> int:
    source = [source_path(args.source)]
    if args.gantt:
        plots.check_picture_path(args.gantt, "--gantt", keep_out_of=source)
    if args.trace:
        check_output_file(args.trace, "--trace", keep_out_of=source)
    if args.tensorboard:
        check_output_folder(args.tensorboard, "--tensorboard", keep_out_of=source)
    simulation = api.simulate(args.source, args.placement, devices=args.devices,
                              cluster=args.cluster, schedule=bool(args.gantt or args.trace),
                              cache=args.cache, signature=args.signature, tag_set=args.tag_set)
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
        summary["trace"] = write_trace(
            simulated_trace(result.schedule, simulation.devices, simulation.graph), args.trace)
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


def _train(args) -> int:
    # heavy: the trainer loads TF-Agents and TensorFlow when imported
    from tf_placeto.policy.real import RealSteps
    from tf_placeto.policy.training import (CHECKPOINTS, check_training_folder,
                                            iterations_by_setting)

    if args.steps < 1 and not args.imitate and not args.real_steps:
        raise InputError("--steps 0 trains nothing: give at least 1 iteration, --imitate or "
                         "--real-steps")
    bad = [n for n in args.counts if n < 2]
    if bad:
        raise InputError(f"--counts {bad[0]}: a placement needs at least 2 devices")
    if args.keep_imitating_where != "behind" and not args.keep_imitating:
        raise InputError("--keep-imitating-where chooses when --keep-imitating imitates: "
                         "give --keep-imitating K too")
    for flag in ("imitate_climb", "imitate_exact"):
        if getattr(args, flag) and not (args.imitate or args.keep_imitating):
            raise InputError(f"--{flag.replace('_', '-')} chooses what imitation teaches: "
                             "give --imitate or --keep-imitating too")
    registry.member_range(args.members)     # bad input is said before a cluster starts
    check_training_folder(args.out)
    if args.warm_start and not os.path.isdir(os.path.join(args.warm_start, CHECKPOINTS)):
        raise InputError(f"--warm-start {args.warm_start}: not a training directory (it has "
                         f"no {CHECKPOINTS}/)")
    for link in args.link or []:
        Link.parse(link)
    with contextlib.ExitStack() as stack:
        runtime = stack.enter_context(open_runtime(
            args.devices, args.cluster or (None if args.devices else "local:2")))
        if len(runtime.device_names) < 2 and args.real_steps:
            raise InputError("--real-steps measures on the runtime's devices: give a runtime "
                             "with at least 2 (--cluster local:2, --devices 2)")
        problems, measurable, labels = api.training_problems(
            args.graphs, args.counts, runtime, members=args.members, links=args.link or [None],
            on_runtime=bool(args.real_steps), max_groups=args.max_groups, cache=args.cache)
        if not args.real_steps:
            stack.close()       # the runtime is needed again only to measure
        _say(f"writing the checkpoints, the log and the policy to {args.out}")
        trainer = _trained(args, problems, labels)
        if args.real_steps:
            _iterate(trainer, args.steps + args.real_steps, args.episodes, "real iteration",
                     real=RealSteps(runtime, measurable))
    policy = trainer.export()
    if trainer.imitation:
        print(f"after {len(trainer.imitation)} epochs of imitation, the policy's likeliest "
              f"device was the demonstrated one in {trainer.imitation[-1]['accuracy']:.1%} of "
              "the moves")
    if trainer.iterations_done:
        history = trainer.history
        kinds = list(dict.fromkeys(trainer.starts))
        posed = f" from {len(kinds)} starts each ({', '.join(kinds)})" if len(kinds) > 1 else ""
        print(f"trained {trainer.iterations_done} iterations on {len(problems)} problems"
              f"{posed}; "
              f"best placements {history[-1]['best_speedup']:.3f}x faster than one device "
              "on average (simulated)")
        settings = iterations_by_setting(history)
        if len(settings) > 1 or settings["imitated"].any():
            print("by setting (imitated: iterations followed by imitation batches):")
            print(settings.to_string(index=False, float_format="{:+.3f}".format))
        real = [row for row in history if "real_return" in row]
        if real:
            print(f"{len(real)} iterations measured for real: their episodes' real speed-up "
                  f"over their starts {np.mean([r['real_return'] for r in real]):+.1%} on "
                  f"average, simulated {np.mean([r['simulated_return'] for r in real]):+.1%}")
    curve = plots.learning_curve(trainer.logged(), os.path.join(args.out, "learning_curve.png"))
    print(f"policy: {policy}")
    print(f"learning curve: {curve}")
    return EXIT_OK


def _trained(args, problems, labels):
    """The trainer on `problems` (named by `labels`) after imitation and the simulated
    iterations that `args` ask for (a resumed run goes on where it stopped)."""
    from tf_placeto.policy.training import Trainer, TrainingConfig     # heavy: TF-Agents

    kinds = list(dict.fromkeys(args.start))
    initial = []
    for kind in kinds:      # a random start is drawn by the environment: nothing to wait for
        shown = problems if kind == "random" else progress(problems, desc=f"{kind} starts",
                                                           unit="problem")
        initial += [initial_placement(problem, kind)[1] for problem in shown]
    starts = [kind for kind in kinds for _ in problems]
    trainer = Trainer(problems * len(kinds), args.out, TrainingConfig(
        algorithm=args.algorithm, episodes=args.episodes, seed=args.seed,
        warm_start=args.warm_start, keep_imitating=args.keep_imitating,
        keep_imitating_where=args.keep_imitating_where), initial=initial,
        starts=starts, labels=labels * len(kinds))
    imitating = len(trainer.imitation) < args.imitate
    if imitating or (args.keep_imitating
                     and trainer.iterations_done < args.steps + args.real_steps):
        asked = args.imitate_exact or args.imitate_climb
        if kinds == ["fast"] and not asked:
            lessons, taught = initial, None
        else:
            known = [best_known(problem, args.imitate_exact, args.imitate_climb)
                     for problem in progress(problems, desc="decisions to imitate",
                                             unit="problem")]
            lessons = [devices for _, devices in known] * len(kinds)
            taught = dict(Counter(name for name, _ in known).most_common())
            _say("imitation teaches the decisions of " + ", ".join(
                f"{name} ({count} problems)" for name, count in taught.items()))
        trainer.demonstrate(lessons)
    if imitating:
        with progress(total=args.imitate, initial=len(trainer.imitation), unit="epoch",
                      desc="imitation") as bar:
            def imitated(row):
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3f}", accuracy=f"{row['accuracy']:.3f}")
            trainer.imitate(lessons, args.imitate, progress=imitated, taught=taught)
    _iterate(trainer, args.steps, args.episodes, "iteration")
    return trainer


def _iterate(trainer, iterations: int, episodes: int, unit: str, real=None) -> None:
    """Train until `iterations` are done in all, with a progress bar."""
    if trainer.iterations_done >= iterations:
        return
    with progress(total=iterations, initial=trainer.iterations_done, unit=unit) as bar:
        def iterated(row):
            bar.update(1)
            bar.set_postfix(episodes=row["iteration"] * episodes,
                            best_speedup=f"{row['best_speedup']:.3f}x",
                            mean_return=f"{row['mean_return']:+.3f}")
        trainer.run(iterations, progress=iterated, real=real)


def _examples(args) -> int:
    for name in registry.names(include_large=True):
        print(f"examples:{name:<14} {registry.get(name).description}")
    for family, members in registry.families().items():
        print(f"examples:{family + '-K':<14} K = 0 .. {len(members) - 1}, seed K: "
              f"{registry.family_description(family)}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
