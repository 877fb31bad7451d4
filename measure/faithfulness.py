"""Does the simulator predict reality? A script, not a test: it takes minutes.

    python -m measure.faithfulness [--example inception_v3] [--cluster local:2]
                                   [--placements 20] [--repeats 3] [--seed 0] [--csv FILE]

Places a real model in many ways (everything on one device, contiguous splits by work,
round-robin, random), measures each for real on a real multi-device runtime, predicts each
with the simulator from a profile made on that same runtime, and prints both columns, the
Spearman rank correlation and the median relative error. Targets: rank correlation >= 0.8,
median relative error <= 25%.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def diverse_placements(groups, devices: list, count: int, seed: int = 0) -> list:
    """[(label, {op: device})]: single devices, splits, round-robin, then random ones."""
    work = groups.work
    done = (work.cumsum() - work / 2) / work.sum()
    choices = [(f"all on {d}", [d] * len(groups)) for d in devices]
    for fraction in (0.25, 0.5, 0.75):
        cut = [devices[0] if x < fraction else devices[-1] for x in done]
        choices.append((f"split at {fraction:.0%} of the work", cut))
    choices.append(("round-robin", [devices[g % len(devices)] for g in range(len(groups))]))
    rng = np.random.default_rng(seed)
    while len(choices) < count:
        bias = rng.uniform(0.1, 0.9)      # from mostly-first-device to mostly-second
        picks = [devices[int(rng.random() > bias)] if len(devices) == 2
                 else devices[rng.integers(len(devices))] for _ in range(len(groups))]
        choices.append((f"random #{len(choices)}", picks))
    return [(label, groups.placement_for(picks)) for label, picks in choices[:count]]


def spearman(a, b) -> float:
    """Rank correlation (average ranks for ties)."""
    import pandas as pd

    return float(np.corrcoef(pd.Series(a).rank(), pd.Series(b).rank())[0, 1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--placements", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-groups", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--csv", default=None, help="also write the table here")
    args = parser.parse_args(argv)

    import pandas as pd

    import tf_placeto as tp
    from measure.costmodel import profile_key
    from measure.measurer import RealMeasurer, SimulatedMeasurer
    from measure.profiler import profile
    from measure.runtime import open_runtime
    from tf_placeto.cache import cache_dir

    def say(message):
        print(message, file=sys.stderr, flush=True)

    graph = tp.import_graph(f"examples:{args.example}")
    groups = tp.group(graph, max_groups=args.max_groups)
    with open_runtime(cluster=args.cluster) as runtime:
        devices = runtime.device_names
        placements = diverse_placements(groups, devices, args.placements, args.seed)
        labels = [label for label, _ in placements]
        model = profile(graph, runtime, cache=args.cache, say=say).model
        device_set = tp.DeviceSet.from_strings(devices)
        predicted = SimulatedMeasurer(graph, model, device_set).evaluate(
            [p for _, p in placements], labels)
        key, _ = profile_key(graph, devices)
        real = RealMeasurer(graph, runtime, results_dir=f"{args.cache or cache_dir('profiles')}/{key}",
                            repeats=args.repeats, trace_memory=False)
        measured = []
        for k, (label, placement) in enumerate(placements):
            [result] = real.evaluate([placement], [label])
            say(f"[{k + 1}/{len(placements)}] {label}: {result.status} "
                f"{result.step_time_s:.3f} s (predicted {predicted[k].step_time_s:.3f} s)")
            measured.append(result)
    table = pd.DataFrame({
        "placement": labels,
        "real_s": [r.step_time_s for r in measured],
        "real_spread_s": [r.spread_s for r in measured],
        "simulated_s": [p.step_time_s for p in predicted],
        "status": [r.status for r in measured],
    })
    table["relative_error"] = (table["simulated_s"] - table["real_s"]).abs() / table["real_s"]
    ok = table[table["status"] == "ok"]
    rho = spearman(ok["real_s"], ok["simulated_s"])
    error = float(ok["relative_error"].median())
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nexamples:{args.example} on {args.cluster}: {len(ok)} of {len(table)} placements "
          f"measured; Spearman rank correlation {rho:.3f} (target >= 0.8); median relative "
          f"error {error:.1%} (target <= 25%)")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
