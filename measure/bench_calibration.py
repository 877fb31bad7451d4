"""Does the calibrated simulator predict reality on real models? (a script, not a test)

    python -m measure.bench_calibration [--models resnet50 transformer ...]
                                        [--cluster local:2] [--placements 16] [--seed 1]
                                        [--budget 90] [--cache DIR] [--csv FILE]

For each real model of measure.real_models (built and cached first) or bundled example (nmt):
profile it on the runtime, which times the profile's own calibration placements for real and
fits the simulator to them (tf_placeto.measure.profiling.fitting); then a separate set of
`--placements` placements that the fit never saw (every algorithmic placer's decision and
random placements over fine and coarse groups, drawn with `--seed`; any placement in the
fit's log left out) is timed for real, in turns, in two independent passes. Printed per
model: reality against itself (Spearman between the passes), and the calibrated and the
uncalibrated simulator against reality (the mean of the passes): Spearman and median relative
error, and the placement each simulator predicts fastest with its real step against the
really fastest one. Targets: Spearman >= 0.8 wherever reality ranks itself at >= 0.9, median
relative error <= 15%.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from measure import real_models, say

DEFAULT_MODELS = ("resnet50", "mobilenet_v2", "transformer", "train_step", "control_flow",
                  "lookup", "branches", "inception_v3")
PLACERS = ("round_robin", "metis", "m_topo", "m_etf", "m_sct", "heft")


def evaluation_placements(workload, runtime, count: int, seed: int) -> list:
    """[(label, placement)] the calibration did not fit on: the placers' decisions and random
    placements of another seed, leaving out every placement of the observation log the fit
    was made from (the profile's own singles and splits, earlier runs of place or measure)."""
    import tf_placeto as tp
    from tf_placeto import methods
    from tf_placeto.measure.profiling import fitting
    from tf_placeto.measure.evaluation.measurer import device_indices, written_indices

    graph = workload.graph
    devices = tp.DeviceSet.from_strings(runtime.device_names)
    fitted = {tuple(o.assignment) for o in fitting.read(workload.profile_dir, len(graph.ops))}
    written = written_indices(graph, devices)
    problem = workload.problem()
    decided = [(name, problem.placement(methods.place(name, problem, seed=seed).group_devices))
               for name in PLACERS]
    candidates = fitting.calibration_placements(
        [workload.groups, tp.group(graph, max_groups=8)], runtime.device_names,
        count + len(fitted) + len(devices) + 3, seed, decided)
    unseen = [(label, placement) for label, placement in candidates
              if tuple(device_indices(graph, devices, placement, written).tolist()) not in fitted]
    return unseen[:count]


def add_timing_options(parser, placements: int, budget_s: float) -> None:
    """The options `timed_twice` reads: the runtime, how many placements, their seed, each
    pass's budget and the profiles' cache."""
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--placements", type=int, default=placements)
    parser.add_argument("--seed", type=int, default=1,
                        help="of the random placements (the calibration's own use seed 0)")
    parser.add_argument("--budget", type=float, default=budget_s,
                        help="seconds per pass (repeats: auto)")
    parser.add_argument("--cache", default=None, help="profiles directory (default: the cache)")


def timed_twice(name: str, runtime, args, stream: int = 0, workload=None) -> tuple:
    """(workload, labels, placements, real, ok): model `name` profiled on the runtime (or
    `workload`, where the caller has loaded it), its `args.placements` evaluation placements,
    and their real figures from two independent passes in turns (real: (2, placements)
    seconds per step, of streams `stream` at a time where stream > 0; ok: the placement ran
    in both)."""
    from tf_placeto.measure.evaluation.interleaved import measure_interleaved
    from tf_placeto.workload import load_workload

    workload = workload or load_workload(real_models.source(name), runtime, cache=args.cache)
    chosen = evaluation_placements(workload, runtime, args.placements, args.seed)
    labels = [label for label, _ in chosen]
    placements = [placement for _, placement in chosen]
    passes = []
    for k in range(2):
        say(f"{name}: pass {k + 1} of 2 over {len(placements)} placements"
            + (f", streams of {stream} in flight" if stream else "") + ", in turns")
        passes.append(measure_interleaved(workload.graph, runtime, placements, labels,
                                          repeats="auto", budget_s=args.budget, trace=False,
                                          stream=stream))
    ok = [all(p[i].status == "ok" for p in passes) for i in range(len(placements))]
    real = np.array([[r.step_time_s for r in p] for p in passes])
    return workload, labels, placements, real, ok


def bench(name: str, runtime, args) -> tuple:
    import tf_placeto as tp
    from tf_placeto.measure.profiling import regression
    from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer

    workload, labels, placements, real, ok = timed_twice(name, runtime, args)
    calibration = workload.cost_model.calibration
    devices = tp.DeviceSet.from_strings(runtime.device_names)
    predicted = {
        kind: np.array([r.step_time_s for r in SimulatedMeasurer.from_profile(
            workload.graph, workload.cost_model, devices, calibrated=(kind == "calibrated")
        ).evaluate(placements, labels)]) for kind in ("calibrated", "uncalibrated")}
    table = pd.DataFrame({"model": name, "placement": labels, "real_pass1_ms": real[0] * 1e3,
                          "real_pass2_ms": real[1] * 1e3,
                          **{f"{kind}_ms": values * 1e3 for kind, values in predicted.items()},
                          "ok": ok})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"), flush=True)
    mean = real.mean(axis=0)[ok]
    row = {"model": name, "placements": int(sum(ok)),
           "reality_vs_itself": regression.accuracy(real[0][ok], real[1][ok])["spearman"],
           "fitted_on": calibration.observations if calibration else 0,
           "calibration": calibration.describe() if calibration else "none"}
    fastest = mean.min()
    kept = [label for label, fine in zip(labels, ok) if fine]
    for kind, values in predicted.items():
        figures = regression.accuracy(values[ok], mean)
        row[f"{kind}_spearman"] = figures["spearman"]
        row[f"{kind}_median_error"] = figures["median_error"]
        best = int(np.argmin(values[ok]))        # what a placer trusting this simulator picks
        row[f"{kind}_pick"] = f"{kept[best]} (x{mean[best] / fastest:.2f} the fastest)"
    return row, table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS),
                        choices=real_models.known_sources())
    add_timing_options(parser, placements=16, budget_s=90.0)
    parser.add_argument("--csv", default=None, help="also write every placement's row here")
    args = parser.parse_args(argv)

    from tf_placeto.measure.runtimes.runtime import open_runtime

    rows, tables = [], []
    with open_runtime(cluster=args.cluster) as runtime:
        for name in args.models:
            row, table = bench(name, runtime, args)
            rows.append(row)
            tables.append(table)
    summary = pd.DataFrame(rows)
    print()
    picks = [c for c in summary if c.endswith("_pick")]
    print(summary.drop(columns=["calibration", *picks]).to_string(
        index=False, float_format=lambda v: f"{v:.2f}"))
    for row in rows:
        print(f"{row['model']}: {row['calibration']}")
        print(f"  fastest predicted, calibrated: {row['calibrated_pick']}; uncalibrated: "
              f"{row['uncalibrated_pick']}")
    trusted = summary[summary["reality_vs_itself"] >= 0.9]
    print(f"\nwhere reality ranks itself at >= 0.9 ({len(trusted)} models): calibrated Spearman "
          f"min {trusted['calibrated_spearman'].min():.2f}, median "
          f"{trusted['calibrated_spearman'].median():.2f} (target >= 0.8); median relative "
          f"error, all models: calibrated {summary['calibrated_median_error'].median():.1%} "
          f"(uncalibrated {summary['uncalibrated_median_error'].median():.1%}; target <= 15%)")
    if args.csv:
        pd.concat(tables).to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
