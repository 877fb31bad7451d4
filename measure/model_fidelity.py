"""Diagnostic: whether the exact placer's model ranks decisions as the simulator does.

    python -m measure.model_fidelity [MODEL:SETTING:DEVICES ...] [--families F ...]
                                     [--audit] [--settings S ...] [--counts N ...]
                                     [--random K]

The exact placer (placers.optimal) proves its decision best under a model of the step
(placers.objectives), and the op-level simulator judges it; where the two part, its proof is
about another step than the one it is judged on (docs/results/exact-placer.md, "Where its
model parts from the simulator"). For each problem (the ones named, or the corpus's
`--families` x `--settings` x `--counts`, posed as bench_generalisation poses them; with
`--audit`, the audit set's models instead of the families: models that no choice here was
made on, tf_placeto/examples/audit.py), the
fast placers' decisions and K random ones are scored both ways under the problem's
objective. Printed per problem: the rank correlation of the two (Spearman), the median
relative error of the model, and how much slower in the simulator the decision the model
ranks first is than the simulator's own first of the same decisions; then the same by
setting.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def scored(problem, random: int):
    """A table of the decisions (the fast placers', then `random` random ones, seeds 1 to
    `random`): their names,
    the model's score and the simulator's, in us per step."""
    import pandas as pd

    from tf_placeto import methods
    from tf_placeto.placers.common import fast_decisions
    from tf_placeto.placers.objectives import MODEL_SCORES

    decisions = fast_decisions(problem) + [        # the fast placers' random is seed 0's
        (f"random {seed}", methods.place("random", problem, seed=seed).group_devices)
        for seed in range(1, random + 1)]
    model = MODEL_SCORES[problem.objective]
    return pd.DataFrame([{"decision": name, "model_us": model(problem, devices),
                          "simulated_us": problem.evaluate(devices).us_per_step}
                         for name, devices in decisions])


def fidelity(table) -> dict:
    """The model's rank correlation with the simulator, its median relative error, and the
    simulated step of its first choice over the simulator's (1: the same decision's speed)."""
    ratio = table["model_us"] / table["simulated_us"]
    chosen = table.loc[table["model_us"].idxmin(), "simulated_us"]
    return {"rank_correlation": table["model_us"].corr(table["simulated_us"],
                                                       method="spearman"),
            "median_error": float(np.median(np.abs(ratio - 1.0))),
            "first_choice": chosen / table["simulated_us"].min()}


def main(argv=None) -> int:
    from measure.bench_generalisation import HELD_OUT

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", metavar="MODEL:SETTING:DEVICES",
                        help="default: every problem of --families x --settings x --counts")
    parser.add_argument("--families", nargs="+", default=list(HELD_OUT))
    parser.add_argument("--audit", action="store_true",
                        help="the audit set's models instead of the corpus's --families")
    parser.add_argument("--settings", nargs="+", default=["one_process", "k80", "cluster"])
    parser.add_argument("--counts", type=int, nargs="+", default=[4])
    parser.add_argument("--random", type=int, default=3, metavar="K",
                        help="random decisions scored beside the fast placers' (default 3)")
    args = parser.parse_args(argv)

    import pandas as pd

    from tf_placeto.examples import audit
    from tf_placeto.log import progress
    from tf_placeto.placers.corpus_problems import (corpus_problems, load_profiles,
                                                    named_problems)

    profiles = (load_profiles(audit.PROFILES) if args.audit
                else load_profiles(families=args.families))
    posed = (named_problems(args.problems) if args.problems else
             corpus_problems(profiles, args.settings, args.counts))
    table = pd.DataFrame([{**problem.label(), **fidelity(scored(problem.problem, args.random))}
                          for problem in progress(posed, desc="scoring", unit="problem")])
    print(table.to_string(index=False, float_format="{:.3f}".format))
    summary = table.groupby("setting", sort=False).agg(
        problems=("graph", "size"), rank_correlation=("rank_correlation", "mean"),
        median_error=("median_error", "median"), first_choice=("first_choice", "median"),
        first_choice_slower=("first_choice", lambda r: int((r > 1.01).sum())))
    print("\nby setting (rank correlation: mean; errors and first choices: median; slower: "
          "problems whose model's first choice simulates over 1% slower):")
    print(summary.to_string(float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
