"""Does the simulator predict reality? A script, not a test: it takes about half an hour.

    python -m measure.faithfulness [--example inception_v3] [--cluster local:2]
                                   [--placements 20] [--repeats 1] [--passes 6] [--seed 0]
                                   [--csv FILE]

Places a real model in many ways (everything on one device, contiguous splits by work, every
algorithmic placer of tf_placeto.placers, round-robin, random at 8, 64 and 256 groups),
measures each for real on a real multi-device runtime, predicts each with the simulator from a
profile made on that same runtime, and prints both columns, the Spearman rank correlation and
the median relative error. Targets: rank correlation >= 0.8, median relative error <= 25%.

Each placement is measured in `--passes` separate sessions, one pass over all placements after
the other, so that placements take turns and a change of load on this shared machine falls on
all of them alike; the real figure is the median of the passes' medians. The rank correlation
between the odd and the even passes (each half's median) says how well reality agrees with
itself, the ceiling for the simulator's.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

# Methods whose decisions join the measured set (they place the default number of groups).
PLACERS = ("round_robin", "metis", "m_topo", "m_etf", "m_sct", "heft", "random")
# Random placements also cut the graph coarser than the splits do.
RANDOM_GROUPS = 8


def diverse_placements(groups, devices: list, count: int, seed: int = 0, decided=(),
                       random_groupings=()) -> list:
    """[(label, {op: device})]: single devices, splits, `decided` ones, round-robin, then
    random ones, over `groups` and, in turn, each grouping of `random_groupings`."""
    work = groups.work
    done = (work.cumsum() - work / 2) / work.sum()
    choices = [(f"all on {d}", groups.placement_for([d] * len(groups))) for d in devices]
    for fraction in (0.25, 0.5, 0.75):
        cut = [devices[0] if x < fraction else devices[-1] for x in done]
        choices.append((f"split at {fraction:.0%} of the work", groups.placement_for(cut)))
    choices += list(decided)
    choices.append(("round-robin", groups.placement_for(
        [devices[g % len(devices)] for g in range(len(groups))])))
    rng = np.random.default_rng(seed)
    groupings = [groups, *random_groupings]
    while len(choices) < count:
        grouping = groupings[len(choices) % len(groupings)]
        bias = rng.uniform(0.1, 0.9)      # from mostly-first-device to mostly-second
        picks = [devices[int(rng.random() > bias)] if len(devices) == 2
                 else devices[rng.integers(len(devices))] for _ in range(len(grouping))]
        choices.append((f"random #{len(choices)} ({len(grouping)} groups)",
                        grouping.placement_for(picks)))
    return choices[:count]


def spearman(a, b) -> float:
    """Rank correlation (ties share their average rank)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--placements", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per pass")
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--max-groups", type=int, default=64,
                        help="groups of the splits and random placements (placers: 256)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--csv", default=None, help="also write the table here")
    args = parser.parse_args(argv)

    import os

    import pandas as pd

    import tf_placeto as tp
    from tf_placeto import methods
    from tf_placeto.log import progress
    from tf_placeto.measure.measurer import RealMeasurer, SimulatedMeasurer
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto.workload import load_workload

    source = f"examples:{args.example}"
    with open_runtime(cluster=args.cluster) as runtime:
        workload = load_workload(source, runtime, cache=args.cache)
        problem = workload.problem()
        decided = [(name, problem.placement(methods.place(name, problem,
                                                          seed=args.seed).group_devices))
                   for name in PLACERS]
        groups = tp.group(workload.graph, max_groups=args.max_groups)
        placements = diverse_placements(
            groups, runtime.device_names, args.placements, args.seed, decided,
            [workload.groups, tp.group(workload.graph, max_groups=RANDOM_GROUPS)])
        labels = [label for label, _ in placements]
        device_set = tp.DeviceSet.from_strings(runtime.device_names)
        predicted = SimulatedMeasurer(workload.graph, workload.cost_model, device_set).evaluate(
            [p for _, p in placements], labels)
        passes = []
        with progress(total=args.passes * len(placements), desc="faithfulness",
                      unit="placement") as bar:
            for k in range(args.passes):
                real = RealMeasurer(workload.graph, runtime, repeats=args.repeats,
                                    trace_memory=False,
                                    results_dir=os.path.join(workload.profile_dir,
                                                             f"faithfulness-pass{k + 1}"))
                measured = []
                for n, (label, placement) in enumerate(placements):
                    [result] = real.evaluate([placement], [label])
                    bar.write(f"pass {k + 1}, [{n + 1}/{len(placements)}] {label}: "
                              f"{result.status} {result.step_time_s:.3f} s (predicted "
                              f"{predicted[n].step_time_s:.3f} s)", file=sys.stderr)
                    bar.update(1)
                    measured.append(result)
                passes.append(measured)
    table = pd.DataFrame({
        "placement": labels,
        **{f"real_pass{k + 1}_s": [r.step_time_s for r in measured]
           for k, measured in enumerate(passes)},
        "simulated_s": [p.step_time_s for p in predicted],
        "status": ["ok" if all(m[n].status == "ok" for m in passes) else "failed"
                   for n in range(len(placements))],
    })
    real_columns = [c for c in table if c.startswith("real_pass")]
    table.insert(1, "real_s", table[real_columns].median(axis=1))
    table["relative_error"] = (table["simulated_s"] - table["real_s"]).abs() / table["real_s"]
    ok = table[table["status"] == "ok"]
    rho = spearman(ok["real_s"], ok["simulated_s"])
    error = float(ok["relative_error"].median())
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    links = workload.cost_model.links.iloc[0]
    print(f"\n{source} on {args.cluster}: {len(ok)} of {len(table)} placements measured in "
          f"{args.passes} passes of {args.repeats} timed runs; link {links['latency_us']:.0f} us + "
          f"bytes / {links['bytes_per_us']:.0f} B/us, copy share {links['copy_share']:.2f}")
    if len(real_columns) > 1:
        odd, even = ok[real_columns[0::2]].median(axis=1), ok[real_columns[1::2]].median(axis=1)
        print(f"reality against itself (odd passes vs even passes): Spearman "
              f"{spearman(odd, even):.3f}")
    print(f"simulator against reality: Spearman rank correlation {rho:.3f} (target >= 0.8); "
          f"median relative error {error:.1%} (target <= 25%)")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
