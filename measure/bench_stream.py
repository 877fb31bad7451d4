"""Does the simulator's stream mode predict real throughput? (a script, not a test)

    python -m measure.bench_stream [--models branches transformer] [--stream 2]
                                   [--cluster local:2] [--placements 12] [--seed 1]
                                   [--budget 60] [--cache DIR]

For each real model of measure.real_models: profile it on the runtime (calibrated, as
bench_calibration does), take `--placements` placements the calibration was not fitted on
(bench_calibration.evaluation_placements: every placer's decision and random ones), predict
each one's seconds per step with `--stream` steps in flight (the calibrated simulator's stream
mode), and time the same for real in two passes of streams in turns (`tf-placeto measure
--stream`). Printed per model: reality against itself (Spearman between the passes), and the
stream simulator against reality (the mean of the passes): Spearman and median relative
error. Target (issue 17): Spearman >= 0.8.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from measure import real_models
from measure.bench_calibration import add_timing_options, timed_twice


def bench(name: str, runtime, args) -> tuple:
    import tf_placeto as tp
    from tf_placeto.measure import fitting
    from tf_placeto.measure.measurer import SimulatedMeasurer

    workload, labels, placements, real, ok = timed_twice(name, runtime, args, args.stream)
    devices = tp.DeviceSet.from_strings(runtime.device_names)
    predicted = np.array([r.step_time_s for r in SimulatedMeasurer.from_profile(
        workload.graph, workload.cost_model, devices, stream=args.stream
    ).evaluate(placements, labels)])
    one_step = np.array([r.step_time_s for r in SimulatedMeasurer.from_profile(
        workload.graph, workload.cost_model, devices).evaluate(placements, labels)])
    table = pd.DataFrame({"model": name, "placement": labels,
                          "real_pass1_steps_s": 1 / real[0], "real_pass2_steps_s": 1 / real[1],
                          "stream_sim_steps_s": 1 / predicted,
                          "one_step_sim_steps_s": 1 / one_step, "ok": ok})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"), flush=True)
    mean = real.mean(axis=0)[ok]
    row = {"model": name, "placements": int(sum(ok)),
           "reality_vs_itself": fitting.accuracy(real[0][ok], real[1][ok])["spearman"]}
    for kind, values in (("stream_sim", predicted), ("one_step_sim", one_step)):
        figures = fitting.accuracy(values[ok], mean)
        row[f"{kind}_spearman"] = figures["spearman"]
        row[f"{kind}_median_error"] = figures["median_error"]
    return row, table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["branches", "transformer"],
                        choices=sorted(real_models.MODELS))
    parser.add_argument("--stream", type=int, default=2, help="steps in flight")
    add_timing_options(parser, placements=12, budget_s=60.0)
    args = parser.parse_args(argv)

    from tf_placeto.measure.runtime import open_runtime

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
