"""What the commands share: exit codes, the argument types that check numbers where they are
parsed, the argument groups several commands take, and the command's lines on stderr."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from tf_placeto import choices
from tf_placeto.errors import MeasurementError
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS
from tf_placeto.graph.sources import Source
from tf_placeto.settings import Search, Target

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# Timeouts and time budgets: a month is longer than any run is waited for or timed, and a
# number past TensorFlow's 64-bit milliseconds (--timeout 1e300) failed in it with exit 1.
MAX_SECONDS = 30 * 24 * 3600
OVERWRITE_HELP = ("replace an existing OUT (and placement file) that tf-placeto wrote: a "
                  "SavedModel folder or a graph file; anything else is refused, and the old "
                  "OUT survives any failure whole")


def count(minimum: int, maximum: Optional[int] = None, why: str = ""):
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
device_count = count(1, choices.MAX_LOGICAL_CPUS, "devices like the profiled ones, as "
                     "--devices N allows")
# Steps in flight (--stream): each is a thread over one session, on this machine's cores.
MAX_IN_FLIGHT = 64
steps_in_flight = count(1, MAX_IN_FLIGHT, "each step in flight is a thread of this process")


def seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 and at most MAX_SECONDS."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of seconds, not {text!r}") from None
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0 and at "
                                         f"most {MAX_SECONDS} (30 days), not {text}")
    return value


class Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other bad input."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def source_arguments(parser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a SavedModel directory, a GraphDef or MetaGraphDef file "
                             "(.pb binary, .pbtxt text), examples:NAME, or a cost graph "
                             "(.json in Tarnawski et al.'s format: computed, nothing run)")
    parser.add_argument("--signature", metavar="NAME",
                        help="SavedModel signature (default: serving_default, or the only one)")
    parser.add_argument("--tag-set", metavar="TAGS",
                        help="SavedModel MetaGraph, by its comma-separated tags as "
                             "saved_model_cli names them (default: serve, or the only one)")


def runtime_arguments(parser, default: str = "this machine's devices") -> None:
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


def placing_arguments(parser) -> None:
    parser.add_argument("--max-groups", type=count(1), default=DEFAULT_MAX_GROUPS, metavar="N",
                        help=f"place at most N groups (default {DEFAULT_MAX_GROUPS})")
    parser.add_argument("--memory-per-device", metavar="BYTES|FRACTION",
                        help="memory limit of each device: bytes (2GiB, 500MB) or a fraction of "
                             "the graph's single-device peak (0.6)")
    parser.add_argument("--seed", type=count(0), default=0, help="seed of randomised methods")
    parser.add_argument("--objective", choices=choices.OBJECTIVES, default="latency",
                        help="latency: one step as short as possible (default); throughput: "
                             "the most steps per second with --stream steps in flight, as a "
                             "server with concurrent requests; followed by " + ", ".join(
                                 spec.name for spec in choices.method_specs() if spec.objectives)
                             + " (the others place alike under both)")
    parser.add_argument("--stream", type=steps_in_flight, metavar="K",
                        help=f"throughput: steps in flight (default {choices.IN_FLIGHT})")
    for spec, option in choices.placer_options():       # each placer's own, from its PLACER
        parser.add_argument(option.flag, type=option.type, choices=option.choices or None,
                            metavar=option.metavar, help=_option_help(spec, option))
    cache_argument(parser)


def cache_argument(parser) -> None:
    """--cache DIR, the same for every command that profiles or reads profiles."""
    parser.add_argument("--cache", metavar="DIR",
                        help="where profiles and their results are kept "
                             "(default $TF_PLACETO_CACHE/profiles)")


def _option_help(spec, option) -> str:
    """A placer option's help: whose it is, what it does, its defaults."""
    defaults = ([] if option.default is None else [f"default {option.default:g}"
                 if isinstance(option.default, float) else f"default {option.default}"]) + \
        ([] if option.auto is None else [f"{option.auto} within method {choices.AUTO}"])
    return f"{spec.name}: {option.help}" + (f" ({'; '.join(defaults)})" if defaults else "")


def link_argument(parser, several: bool = False) -> None:
    parser.add_argument("--link", metavar="[machine:]LAT_US:BYTES_PER_US[:COPY]",
                        nargs="+" if several else None,
                        help="simulate devices joined by this link instead of the measured one, "
                             "e.g. 25:7600 (Placeto's K80 links between the profiled cluster's "
                             "tasks); COPY: the share each end's processor spends copying "
                             "(default 0); machine: devices of one machine, with no per-task "
                             "or per-tensor RPC cost; k80 stands for machine:25:7600, the "
                             "paper's K80 GPUs" + ("; several: every problem under each"
                                                   if several else ""))


def placer_options(args) -> dict:
    """The placer options given on the command line, by their names (choices.placer_options)."""
    return {option.name: getattr(args, option.name) for _, option in choices.placer_options()}


def source_of(args) -> Source:
    """SOURCE and the graph of it chosen by --signature and --tag-set (source_arguments)."""
    return Source(args.source, signature=args.signature, tag_set=args.tag_set)


def target_of(args) -> Target:
    """Where the command runs (runtime_arguments), with --memory-per-device and --cache where
    the command takes them."""
    return Target(devices=args.devices, cluster=args.cluster,
                  memory_per_device=getattr(args, "memory_per_device", None),
                  cache=getattr(args, "cache", None))


def search_of(args) -> Search:
    """How the placers search (placing_arguments)."""
    return Search(max_groups=args.max_groups, seed=args.seed, objective=args.objective,
                  stream=args.stream, options=placer_options(args))


def check_placing(args) -> None:
    """The method (where the command takes one) and the placer options, before any work."""
    choices.check_placing(getattr(args, "method", None), placer_options(args))


def measured_something(statuses) -> int:
    """EXIT_OK when a row was measured (or simulated), after the rows were printed; else a
    failure, which exits 1."""
    if "ok" not in set(statuses):
        raise MeasurementError("nothing could be measured (see the reasons above)")
    return EXIT_OK


class Progress(logging.Handler):
    """The library's progress (the "tf_placeto" logger) on stderr, as the command's own."""

    def emit(self, record):
        print(f"tf-placeto: {record.getMessage()}", file=sys.stderr, flush=True)
