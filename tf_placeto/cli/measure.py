"""`tf-placeto measure`: step times of placements, measured for real in turns or simulated."""

from __future__ import annotations

import argparse
import json

import pandas as pd

from tf_placeto import api
from tf_placeto.cli.common import (cache_argument, count, measured_something, runtime_arguments,
                                   seconds, source_arguments, source_of, steps_in_flight,
                                   target_of)
from tf_placeto.frontend import check_output_folder
from tf_placeto.measure.evaluation.interleaved import Timing
from tf_placeto.graph.sources import source_path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("measure", help="step times of placements, real or simulated")
    source_arguments(parser)
    runtime_arguments(parser)
    parser.add_argument("--placement", action="append", default=[], metavar="FILE.json",
                        help="a placement to measure (repeat for several; none: as written)")
    parser.add_argument("--simulate", action="store_true",
                        help="predict from the profile (profiling first if none is cached)")
    parser.add_argument("--repeats", type=_repeats, default="auto", metavar="N|auto",
                        help="rounds of timed runs after warm-up, the placements taking turns "
                             "in each (default auto: until the ratios between placements are "
                             "known to 5%%, or --time-budget ends)")
    parser.add_argument("--time-budget", type=seconds, default=60.0, metavar="S",
                        help="seconds of rounds that --repeats auto may spend (default 60)")
    parser.add_argument("--sessions", type=count(1), default=1, metavar="N",
                        help="load each placement anew N times, one set of sessions after "
                             "the other, sharing the rounds and --time-budget, and pool "
                             "their rounds: one session of a split can run slower than "
                             "another for as long as it is open (default 1)")
    parser.add_argument("--warmup", type=count(0), default=1, metavar="N",
                        help="untimed runs first (default 1)")
    parser.add_argument("--timeout", type=seconds, default=600.0, metavar="S",
                        help="a step that takes longer fails (default 600)")
    parser.add_argument("--trace", metavar="DIR",
                        help="write one step of each placement as DIR/<label>.json, a Chrome "
                             "trace (ui.perfetto.dev): a traced run, or with --simulate the "
                             "simulated schedule")
    parser.add_argument("--stream", type=steps_in_flight, default=0, metavar="K",
                        help="throughput: K steps in flight at once, as a server answers "
                             "concurrent requests (threads over one session); reports steps "
                             "per second once the stream is full, and each figure is "
                             "seconds per step")
    cache_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list of results")
    parser.set_defaults(handler=run)


def _repeats(text: str):
    """--repeats: a count of at least 1, or auto."""
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a count of at least 1 or auto, not {text!r}")
    return int(text)


def run(args) -> int:
    if args.trace:
        check_output_folder(args.trace, "--trace", keep_out_of=[source_path(args.source)])
    timing = Timing(repeats=args.repeats, warmup=args.warmup, timeout_s=args.timeout,
                    budget_s=args.time_budget, stream=args.stream, sessions=args.sessions)
    results = api.measure_steps(source_of(args), args.placement or [None],
                                args.placement or ["as written"], target_of(args),
                                simulate=args.simulate, timing=timing, trace=args.trace)
    if args.json:
        print(json.dumps([{**r.to_json(), **({"steps_per_s": r.steps_per_s}
                                              if r.steps_per_s else {})} for r in results]))
    else:
        _print_results(results)
        if args.trace:
            print(f"wrote a trace per placement into {args.trace} (open in ui.perfetto.dev)")
    return measured_something(r.status for r in results)


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
