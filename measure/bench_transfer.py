"""Benchmark: a Placeto policy (by default the shipped one) zero-shot on unseen family members.

    python -m measure.bench_transfer [--families cifar10 ptb nmt_family] [--members 8-11]
                                     [--devices 2 4 8] [--policy DIR] [--cluster local:2]
                                     [--link 25:7600 | k80] [--climb S [--climb-starts R]]
                                     [--csv FILE]

The shipped policy was trained on members 0-7 of each family (its corpus stage on members 0 and
1); members 8 and up are graphs it has never seen. For each unseen member and device count, in
simulation with profiled op costs and Placeto's K80 links (`--link`: 25:7600, the default,
between the profiled cluster's tasks, with their calibrated costs; k80, GPUs of one machine):
the best algorithmic placer's step, and one greedy episode of the policy from each start,
"random" (the paper's: what the policy finds on its own) and "fast" (the best decision of the
fast placers, which it improves).
Prints the table, then per start, against the best algorithm: where the walk ends (the policy
alone, what issue 16 judges) and the best placement met on the walk (what `place` answers),
each as a geometric mean with how many problems are within 10% and how many are faster, and
the devices each uses. For scale, the same for two fixed greedy rules over the policy's
device rows: the list schedule's, each group where the rows say it would finish first,
counting the cost of a worker task the step does not use yet (argmin of WOULD_FINISH +
TASK_COST, specs.py), and the simulator's, each group where the simulated step is shortest
(episode.SimulatedGreedy), from each start; and for each algorithm alone (the best algorithm
is the best of them on each problem). Last, each figure's geometric mean by graph family.
A zero-shot placement needs no training: this takes minutes, where measure.bench_placeto's
per-graph training takes most of an hour. With `--climb S`, also the decision that
`--imitate-climb S` teaches: the best fast decision climbed in the simulator for up to S
seconds (the hill_climb placer, which searches, so it is not among the best algorithms).
With `--climb-starts R` too, the best of many climbs: from every fast placer's decision and
from R random placements, each for up to S seconds, which is what a search from many starts
finds where one greedy episode has one pass.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from measure.bench_placeto import algorithm_steps, best_algorithm


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["cifar10", "ptb", "nmt_family"])
    parser.add_argument("--members", default="8-11", help="A-B: which members (unseen: 8-31)")
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--max-groups", type=int, default=128,
                        help="groups per graph (the shipped policy trained at 128)")
    parser.add_argument("--policy", default=None,
                        help="default: the shipped policy")
    parser.add_argument("--cluster", default="local:2", help="where graphs are profiled")
    parser.add_argument("--link", default="25:7600")
    parser.add_argument("--climb", metavar="S", type=float, default=0.0,
                        help="also climb each problem's best fast decision for S seconds")
    parser.add_argument("--climb-starts", metavar="R", type=int, default=0,
                        help="with --climb: also the best of climbs from every fast placer's "
                             "decision and from R random placements")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    if args.climb_starts and args.climb <= 0:
        parser.error("--climb-starts R asks for more climbs: give --climb S too")

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    import pandas as pd

    from measure import say
    from tf_placeto.measure.costs.costmodel import Link
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.policy import inference, specs
    from tf_placeto.policy.episode import SimulatedGreedy, greedy_walk
    from tf_placeto.policy.observation import GraphView
    from tf_placeto.policy.starts import best_known, fast_start
    from tf_placeto.workload import load_workload

    low, _, high = args.members.partition("-")
    graphs = [f"examples:{family}-{member}" for family in args.families
              for member in range(int(low), int(high or low) + 1)]
    link = Link.parse(args.link)
    rows = []
    with open_runtime(cluster=args.cluster) as runtime:
        workloads = {g: load_workload(g, runtime, max_groups=args.max_groups) for g in graphs}
    for graph, workload in workloads.items():
        for n in args.devices:
            problem = workload.problem(n, link=link)
            policy = args.policy or inference.pretrained_policy()
            steps = algorithm_steps(workload, problem)
            best_us, best_name = best_algorithm(workload, problem, steps)
            fast = fast_start(problem)
            row = {"graph": graph, "devices": n, "best_algorithm": best_name,
                   "best_algorithm_ms": best_us / 1e3,
                   **{f"{name}_vs_algorithm": us / best_us for name, us in steps.items()},
                   "rule_vs_algorithm": greedy_walk(GraphView(problem), ColumnsRule(
                       [specs.WOULD_FINISH, specs.TASK_COST])).end_value / best_us}
            if args.climb > 0:
                _, taught = best_known(problem, climb_seconds=args.climb, fast=fast)
                climbed_us = problem.simulate(taught).step_time_us
                row["climb_vs_algorithm"] = climbed_us / best_us
            if args.climb_starts:
                row["best_climb_vs_algorithm"] = min(climbed_us, _other_climbs(
                    problem, args.climb, args.climb_starts, climbed=fast[1])) / best_us
            for kind, initial in (("random", None), ("fast", fast[1])):
                view = GraphView(problem, initial)      # the policy and the rule's start
                walk = greedy_walk(view, inference.loaded_policy(policy))
                row[f"zero_shot_{kind}_vs_algorithm"] = walk.value / best_us
                row[f"walk_end_{kind}_vs_algorithm"] = walk.end_value / best_us
                row[f"zero_shot_{kind}_devices"] = len(np.unique(walk.devices))
                row[f"walk_end_{kind}_devices"] = len(np.unique(walk.end_devices))
                row[f"simulated_rule_{kind}_vs_algorithm"] = greedy_walk(
                    view, SimulatedGreedy()).end_value / best_us
            rows.append(row)
            say(", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in row.items() if k[:-len("_vs_algorithm")] not in steps))
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(table.drop(columns=[f"{name}_vs_algorithm" for name in steps]).to_string(
            index=False, float_format=lambda v: f"{v:.3f}"))     # each algorithm's: the CSV
    for kind in ("random", "fast"):
        print(f"from the {kind} start against the best algorithm, {len(table)} unseen problems: "
              f"where the walk ends (the policy alone) "
              f"{_against(table[f'walk_end_{kind}_vs_algorithm'])}, "
              f"{_devices_used(table[f'walk_end_{kind}_devices'])}; the best on the walk "
              f"{_against(table[f'zero_shot_{kind}_vs_algorithm'])}, "
              f"{_devices_used(table[f'zero_shot_{kind}_devices'])}")
    print(f"the list schedule's greedy rule against the best algorithm (the same from any "
          f"start: the columns it reads come from the groups visited): "
          f"{_against(table['rule_vs_algorithm'])}")
    print("the simulator's greedy rule against the best algorithm: " + "; ".join(
        f"from the {kind} start {_against(table[f'simulated_rule_{kind}_vs_algorithm'])}"
        for kind in ("random", "fast")))
    print("each algorithm alone against the best of them on each problem: " + "; ".join(
        f"{name} {_against(table[f'{name}_vs_algorithm'])}" for name in steps))
    if args.climb > 0:
        print(f"the fast start climbed for {args.climb:g} s against the best algorithm: "
              f"{_against(table['climb_vs_algorithm'])}")
    if args.climb_starts:
        print(f"the best of climbs from every fast decision and {args.climb_starts} random "
              f"placements, {args.climb:g} s each, against the best algorithm: "
              f"{_against(table['best_climb_vs_algorithm'])}")
    figures = [c for c in table.columns
               if c.endswith("_vs_algorithm") and c[:-len("_vs_algorithm")] not in steps]
    family = table["graph"].str.extract(r"examples:(.+)-\d+$")[0].rename("family")
    print("geometric means by family, against the best algorithm:")
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(np.exp(np.log(table[figures]).groupby(family).mean()).T.to_string(
            float_format=lambda v: f"{v:.3f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _other_climbs(problem, seconds: float, random_starts: int, climbed) -> float:
    """The shortest simulated step that hill climbing reaches from the fast placers'
    decisions other than `climbed` (a canonical decision already climbed) and from
    `random_starts` random placements (seeds 1 ..), each climb up to `seconds`."""
    from tf_placeto.placers import hill_climb, random_devices
    from tf_placeto.placers.common import fast_decisions

    starts = [devices for _, devices in fast_decisions(problem)
              if not np.array_equal(problem.canonical(devices), climbed)] + [
        random_devices.place(problem, seed=seed)[0] for seed in range(1, random_starts + 1)]
    return min(problem.simulate(hill_climb.climb(
        problem, devices, time.monotonic() + seconds)[0]).step_time_us for devices in starts)


class ColumnsRule:
    """A fixed greedy rule answering as a policy does: each group on the device whose row's
    `columns` (specs.py) sum least (module docstring)."""

    def __init__(self, columns):
        self.columns = columns

    def action(self, observation: dict, first: bool) -> int:
        scores = observation["candidates"][:, self.columns].sum(axis=1)
        return int(np.argmin(np.where(observation["device_mask"] > 0, scores, np.inf)))


def _against(ratios) -> str:
    """Ratios to the best algorithm in a few words: geometric mean, within 10%, faster."""
    return (f"{np.exp(np.log(ratios).mean()):.3f}x (within 10%: {int((ratios <= 1.1).sum())}, "
            f"faster: {int((ratios < 1.0).sum())})")


def _devices_used(used) -> str:
    """How many devices the placements use, in a few words."""
    return f"on {used.mean():.2f} devices on average, one on {int((used == 1).sum())}"


if __name__ == "__main__":
    sys.exit(main())
