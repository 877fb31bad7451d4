"""Benchmark: fine-tuning the shipped policy on a model it never saw, against training a new
network on that model alone (a script, not a test).

    python -m measure.bench_finetune [--problems MODEL:SETTING:DEVICES ...] [--iterations 100]
                                     [--restart fixed|previous] [--seeds 1] [--first-seed 0]
                                     [--policy DIR] [--csv FILE]

The Placeto paper's claim, on the corpus's real models (compact profiles): a policy trained
on other graphs and fine-tuned on a new one reaches a good placement in a fraction of the
evaluations a network trained from scratch needs. The default problems are models of
families the shipped network was trained without, on settings where Placeto's random start
is far from the best algorithm (1.36x to 1.89x), so that there is something to learn; a
MODEL may be one of the audit set's too (tf_placeto/examples/audit.py). Per
problem and seed s (`--seeds` of them from `--first-seed`), from the random start of that seed,
in turns:
- scratch: a new network trained on the problem alone for `--iterations` iterations, each
  episode from the start (`--restart fixed`, the paper's setup);
- fine-tuned: the shipped (or `--policy`) network's greedy episode, then trained on the
  problem for as many iterations, as `place --budget` does (each episode from where the one
  before ended).
Prints the start's step and each one's best against the best algorithm (the placers that
decide without a search), the evaluations (simulated placements, the start the first)
scratch took to come within 5% of its final best, the evaluations the fine-tuned run took to
come within 5% of that same step (empty where it never did), and their ratio: issue 59's
target is at most 0.2 (a fifth). With several seeds, also each problem's median ratio.
"""

from __future__ import annotations

import argparse
import sys

from measure import say


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", metavar="MODEL:SETTING:DEVICES",
                        default=["lstm:one_process:4", "gru:one_process:4",
                                 "transformer_decoder:k80:4", "enas_ptb-0:k80:4"])
    parser.add_argument("--iterations", type=int, default=100,
                        help="training iterations of each run (4 episodes each)")
    parser.add_argument("--restart", default="fixed", choices=["fixed", "previous"],
                        help="where each episode of the training from scratch starts")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds per problem")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed: runs of seeds taken before are not repeated")
    parser.add_argument("--policy", default=None, help="default: the shipped policy")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    import pandas as pd

    from measure.bench_generalisation import best_direct
    from measure.bench_placeto import trained_on
    from tf_placeto.placers.common import evaluations_to_within
    from tf_placeto.placers.corpus_problems import named_problems
    from tf_placeto.policy import inference
    from tf_placeto.policy.starts import start_placement

    policy = args.policy or inference.pretrained_policy()
    rows = []
    for posed in named_problems(args.problems):
        problem = posed.problem
        best_name, best_us = best_direct(problem)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            initial = start_placement(problem, seed)
            say(f"{posed.graph}, {posed.setting}, {posed.devices} devices, seed {seed}: "
                f"{args.iterations} iterations from scratch, then fine-tuned")
            scratch_us, scratch = trained_on(problem, "scratch", policy, initial,
                                             args.iterations, seed, args.restart)
            tuned_us, tuned = trained_on(problem, "pretrained", policy, initial,
                                         args.iterations, seed, inference.FINE_TUNING_RESTART)
            scratch_to = evaluations_to_within(scratch)
            tuned_to = evaluations_to_within(tuned, reference=scratch_us)
            rows.append({**posed.label(), "seed": seed, "best_algorithm": best_name,
                         "start": scratch[0] / best_us,
                         "scratch": scratch_us / best_us, "fine_tuned": tuned_us / best_us,
                         "scratch_evaluations": len(scratch), "scratch_to_5pct": scratch_to,
                         "fine_tuned_to_scratch_5pct": tuned_to,
                         "ratio": None if tuned_to is None else tuned_to / scratch_to})
            say(str(rows[-1]))
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ratio = table["ratio"].astype(float)
    print(f"fine-tuned within 5% of scratch's final step in at most a fifth of scratch's "
          f"evaluations on {int((ratio <= 0.2).sum())} of {len(table)} (never within 5%: "
          f"{int(ratio.isna().sum())}); ratio median {ratio.median():.3f}, worst "
          f"{ratio.max():.3f} where reached")
    if args.seeds > 1:
        medians = table.assign(ratio=ratio.fillna(float("inf"))).groupby(
            ["graph", "setting", "devices"])["ratio"]
        print(f"median ratio over {args.seeds} seeds per problem (never within 5% counts as "
              f"above): " + ", ".join(f"{graph} {value:.3f}" for (graph, _, _), value in
                                      medians.median().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
