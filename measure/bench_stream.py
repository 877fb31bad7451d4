"""Does the simulator's stream mode predict real throughput? (a script, not a test)

    python -m measure.bench_stream [--models branches transformer] [--stream 2]
                                   [--cluster local:2] [--placements 12] [--seed 1]
                                   [--budget 60] [--cache DIR] [--fit-streams N]

For each real model of measure.real_models or bundled example (nmt): profile it on the
runtime (calibrated, as bench_calibration does), take `--placements` placements the
calibration was not fitted on (bench_calibration.evaluation_placements: every placer's
decision and random ones), predict each one's seconds per step with `--stream` steps in
flight (the calibrated simulator's stream mode), and time the same for real in two passes
of streams in turns (`tf-placeto measure --stream`). Printed per model: reality against
itself (Spearman between the passes), and the stream simulator against reality (the mean of
the passes): Spearman and median relative error. Target (issue 17): Spearman >= 0.8.

With `--fit-streams N`, N other placements (seed + 1) are first timed as streams once, in
turns, and logged beside the profile, as `tf-placeto measure --stream` logs them; the
evaluation placements then leave them out, and the stream mode predicts them twice: fitted
on the log's one-step runs alone, and on the log with its streams (which fit the work that
floats between the processors, tf_placeto.measure.profiling.regression). The streams stay in
the log, so every later fit takes them too.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from measure import real_models, say
from measure.bench_calibration import add_timing_options, evaluation_placements, timed_twice


def bench(name: str, runtime, args) -> tuple:
    import tf_placeto as tp
    from tf_placeto.measure.profiling import fitting, regression
    from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer

    from tf_placeto.workload import load_workload

    devices = tp.DeviceSet.from_strings(runtime.device_names)
    workload = load_workload(real_models.source(name), runtime, cache=args.cache)
    if args.fit_streams:
        fit_streams_first(name, workload, runtime, devices, args)
    workload, labels, placements, real, ok = timed_twice(name, runtime, args, args.stream,
                                                         workload)
    cost_model = workload.cost_model

    def predicted(stream: int = 0) -> np.ndarray:
        return np.array([r.step_time_s for r in SimulatedMeasurer.from_profile(
            workload.graph, cost_model, devices, stream=stream).evaluate(placements, labels)])

    columns = {"stream_sim": predicted(args.stream), "one_step_sim": predicted()}
    if args.fit_streams:
        logged = fitting.read(workload.profile_dir, len(workload.graph.ops))
        fits = {"fitted_one_step_alone": [o for o in logged if not o.in_flight],
                "fitted_with_streams": logged}
        for kind, observations in fits.items():
            cost_model.calibration = regression.fit(workload.graph, cost_model, devices,
                                                    fitting.fitted_on(observations),
                                                    directory=workload.profile_dir)
            columns[f"stream_sim_{kind}"] = predicted(args.stream)
            say(f"{name}: {kind}: {cost_model.calibration}")
    table = pd.DataFrame({"model": name, "placement": labels,
                          "real_pass1_steps_s": 1 / real[0], "real_pass2_steps_s": 1 / real[1],
                          **{f"{kind}_steps_s": 1 / values for kind, values in columns.items()},
                          "ok": ok})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"), flush=True)
    mean = real.mean(axis=0)[ok]
    row = {"model": name, "placements": int(sum(ok)),
           "reality_vs_itself": regression.accuracy(real[0][ok], real[1][ok])["spearman"]}
    for kind, values in columns.items():
        figures = regression.accuracy(values[ok], mean)
        row[f"{kind}_spearman"] = figures["spearman"]
        row[f"{kind}_median_error"] = figures["median_error"]
    return row, table


def fit_streams_first(name: str, workload, runtime, devices, args) -> None:
    """Time `args.fit_streams` placements (seed + 1) as streams once, in turns, log them
    beside the profile (module docstring) and refit the workload's calibration on them."""
    from tf_placeto.measure.profiling import fitting
    from tf_placeto.measure.evaluation.interleaved import measure_interleaved

    chosen = evaluation_placements(workload, runtime, args.fit_streams, args.seed + 1)
    say(f"{name}: {len(chosen)} placements timed as streams of {args.stream} for the fit")
    placements = [placement for _, placement in chosen]
    results = measure_interleaved(workload.graph, runtime, placements,
                                  [label for label, _ in chosen], repeats="auto",
                                  budget_s=args.budget, trace=False, stream=args.stream)
    logged = fitting.record(workload.profile_dir, workload.graph, devices, placements,
                            results, "bench_stream")
    say(f"{name}: {logged} streams logged beside the profile")
    fitting.refresh(workload.graph, workload.cost_model, devices, workload.profile_dir)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["branches", "transformer"],
                        choices=real_models.known_sources())
    parser.add_argument("--stream", type=int, default=2, help="steps in flight")
    parser.add_argument("--fit-streams", type=int, default=0, metavar="N",
                        help="first time and log N other placements' streams for the fit")
    add_timing_options(parser, placements=12, budget_s=60.0)
    args = parser.parse_args(argv)

    from tf_placeto.measure.runtimes.runtime import open_runtime

    rows = []
    with open_runtime(cluster=args.cluster) as runtime:
        for name in args.models:
            rows.append(bench(name, runtime, args)[0])
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("\n(the one-step simulator's seconds per step, for comparison: the stream mode "
          "should rank placements by throughput where it differs from latency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
