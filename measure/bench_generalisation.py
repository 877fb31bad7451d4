"""Benchmark: the Placeto policy on real-model families it never saw (a script, not a test).

    python -m measure.bench_generalisation --out DIR [--held-out FAMILY ...] [--folds each|one]
        [--settings one_process k80 cluster] [--counts 2 4 8] [--steps N] [--imitate E]
        [--keep-imitating N] [--keep-imitating-where behind|one-device] [--imitate-own X]
        [--imitate-greedy] [--imitate-veto MARGIN] [--dagger [PASSES]]
        [--embedding D] [--rounds R] [--warm-start DIR [DIR ...]] [--policy DIR] [--budget N]
        [--passes N] [--start-seed S ...] [--climb S] [--exact S]
        [--judge held-out|trained|audit] [--csv FILE]

Over the corpus's compact profiles (tf_placeto/examples/corpus_profiles: real models of many
families, profiled once; tf_placeto.placers.corpus_problems poses them on each setting and
device count), nothing is profiled or run: every figure is simulated.

Folds: with `--folds each` (leave-one-family-out), a policy is trained for every held-out
family on the corpus without it; with `--folds one`, one policy is trained without all the
held-out families at once (fewer runs, and each family is judged by a policy that saw less).
Each fold trains into DIR/without-FAMILY[-FAMILY...] with `tf_placeto.train` (imitation of
the fast placers' best for `--imitate` epochs, then `--steps` REINFORCE iterations from random
starts, over every setting and count; a fold trained already is taken as it is, one stopped
part-way resumes). `--policy DIR` judges that policy instead and trains nothing ("shipped" for
the package's own, tf_placeto/policy/pretrained).

Then, on every held-out family's models, per setting and device count, against the best
algorithm (the best of the placers that decide without a search: m-ETF, m-SCT, HEFT, metis,
m-topo, round-robin, random, single): the policy alone (the greedy episode from Placeto's
random start, where it ends, walking the groups as `place` does: up to three passes, as
many as fit its decision time; with `--passes N`, up to N passes with no clock, as `place
--passes N`; with `--start-seed S ...`, from the random start each seed S draws instead of
Placeto's fixed one, seed 0, which `place --start random` walks from, so that one draw's luck
can be told from what the network does), the simulator's greedy pass from the same start (each
group to the device the simulator says is fastest: episode.SimulatedGreedy, the rule a network
must beat), the default placeto (`place --method placeto`: from the fast placers' best, the
best placement met on the walk; with `--budget N`, fine-tuned N iterations on the problem from
there, as `place --method placeto --budget N`), and with `--climb S` / `--exact S` hill_climb
and the exact placer given S seconds; with the seconds each took to decide (and the placements
the default placeto simulated).
With `--judge trained`, the same figures on the fold's own training problems instead: how
well the network learned what it was taught, apart from how it carries to new families.
With `--judge audit`, on the audit set's models (tf_placeto/examples/audit.py: families none
of the corpus's, which no policy trains on and no choice is made by), by one fold (`--folds
one`, whatever is asked) or `--policy`: how a policy already chosen carries to families
nobody looked at while choosing it.
Prints every row, then geometric means per setting and device count, per setting (with how
many problems the policy alone ends above 1.10x and on one device, and the passes it
walked), per family and over all problems, and the issue's figure: over all rows, the policy
alone's geometric mean and its worst row (and how many walks took all the passes asked and how
many the decision's clock cut short, where their first pass ended and how the later passes
changed it; with several start seeds, each start's figure and how many problems are above
1.10x from every start and from at least one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from measure import say

DIRECT = ("m_etf", "m_sct", "heft", "metis", "m_topo", "round_robin", "random", "single")
# the families no network shipped here was trained on (docs/results/generalisation.md)
HELD_OUT = ("recurrent", "transformer_decoder", "inception", "recommender", "efficientnet",
            "enas_ptb")
SHIPPED = "shipped"
JUDGED = {"held-out": "unseen", "trained": "trained-on", "audit": "audit"}   # --judge: title


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where each fold's policy is trained")
    parser.add_argument("--held-out", nargs="+", metavar="FAMILY", default=list(HELD_OUT))
    parser.add_argument("--folds", choices=["each", "one"], default="each")
    parser.add_argument("--settings", nargs="+", default=["one_process", "k80", "cluster"])
    parser.add_argument("--counts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--steps", type=int, default=300, help="REINFORCE iterations per fold")
    parser.add_argument("--imitate", type=int, default=10, help="epochs of imitation per fold")
    parser.add_argument("--keep-imitating", type=int, default=0, metavar="N",
                        help="imitation batches after an iteration that lags (train's flag)")
    parser.add_argument("--keep-imitating-where", default="behind",
                        help="which iterations --keep-imitating follows: behind or one-device")
    parser.add_argument("--imitate-own", type=float, default=0.0, metavar="X",
                        help="imitate the warm start's own decision within X of the best "
                             "known (train's flag)")
    parser.add_argument("--imitate-greedy", action="store_true",
                        help="imitate the simulator's greedy pass where it beats the warm "
                             "start's own decision (train's flag)")
    parser.add_argument("--imitate-veto", metavar="MARGIN", type=float, default=None,
                        help="imitate the warm start's own moves under the simulator's veto "
                             "beyond MARGIN where that ends faster (train's flag)")
    parser.add_argument("--dagger", metavar="PASSES", nargs="?", type=int, const=1, default=0,
                        help="teach the lessons along the network's own walks of up to "
                             "PASSES passes too (train's flag)")
    parser.add_argument("--embedding", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--step-change-weight", type=float, default=None, metavar="W",
                        help="the network's path from the step change weighed W as each fold "
                             "begins (train's flag; default: the warm start's own)")
    parser.add_argument("--warm-start", default=None, nargs="+", metavar="DIR",
                        help="each fold starts from this policy's weights, or the mean of "
                             "several's (train's flag; default: new)")
    parser.add_argument("--policy", default=None,
                        help=f"judge this policy (or '{SHIPPED}') and train nothing")
    parser.add_argument("--budget", type=int, default=0, metavar="N",
                        help="the placeto column fine-tuned N iterations per problem")
    parser.add_argument("--passes", type=int, default=None, metavar="N",
                        help="the policy's greedy episodes (alone and in the placeto column) "
                             "walk the groups up to N times (place's flag; default: place's, "
                             "up to 3 within its clock)")
    parser.add_argument("--start-seed", type=int, nargs="+", default=[0], metavar="S",
                        help="the policy alone and the simulator's greedy pass walk from the "
                             "random start of each seed S (default 0: Placeto's, place's)")
    parser.add_argument("--climb", type=float, default=0.0, metavar="S",
                        help="also hill_climb, S seconds per problem")
    parser.add_argument("--exact", type=float, default=0.0, metavar="S",
                        help="also the exact placer, S seconds per problem")
    parser.add_argument("--judge", choices=tuple(JUDGED), default="held-out",
                        help="judge the held-out families' problems (the default: zero-shot), "
                             "the fold's own training problems (how well the network learned "
                             "what it was taught) or the audit set's (families no choice was "
                             "made by)")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    import pandas as pd

    from tf_placeto.examples import audit
    from tf_placeto.placers.corpus_problems import corpus_problems, load_profiles

    load_profiles(families=args.held_out)           # refuse an unknown family before training
    folds = ([[family] for family in args.held_out]
             if args.folds == "each" and args.judge != "audit"     # the audit set: judged once
             else [list(args.held_out)])
    rows = []
    for held_out in folds:
        policy = args.policy or _trained(args, held_out)
        judged = (load_profiles(audit.PROFILES) if args.judge == "audit"
                  else load_profiles(families=held_out) if args.judge == "held-out"
                  else load_profiles(without=held_out))
        problems = corpus_problems(judged, args.settings, args.counts)
        for posed in problems:
            for judged_row in _judged(posed.problem, policy, args.climb, args.exact,
                                      budget=args.budget, passes=args.passes,
                                      start_seeds=args.start_seed):
                row = {**posed.label(), **judged_row}
                rows.append(row)
                say(", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in row.items()))
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False)
    _report(table, JUDGED[args.judge], args.passes)
    return 0


def _trained(args, held_out: list) -> str:
    """The policy of the fold that leaves `held_out` out, trained now unless done."""
    from tf_placeto.training_api import TrainingPlan, train

    out = os.path.join(args.out, "without-" + "-".join(held_out))
    if os.path.isfile(os.path.join(out, "policy", "saved_model.pb")) and _finished(out, args):
        return out
    say(f"training without {', '.join(held_out)} into {out}")
    result = train(TrainingPlan(
        graphs=["corpus"], without=held_out, settings=args.settings, counts=args.counts,
        out=out, steps=args.steps, imitate=args.imitate, keep_imitating=args.keep_imitating,
        keep_imitating_where=args.keep_imitating_where, imitate_own=args.imitate_own,
        imitate_greedy=args.imitate_greedy, imitate_veto=args.imitate_veto, dagger=args.dagger,
        embedding=args.embedding, rounds=args.rounds,
        step_change_weight=args.step_change_weight, warm_start=args.warm_start))
    return os.path.dirname(result.policy)


def _finished(out: str, args) -> bool:
    """Whether the fold in `out` did all the imitation epochs and iterations asked for."""
    from tf_placeto.policy.checkpoints import read_log

    log = read_log(os.path.join(out, "training.json"))
    return (len(log.get("imitation", [])) >= args.imitate
            and len(log.get("iterations", [])) >= args.steps)


def best_direct(problem) -> tuple:
    """(name, simulated step in us) of the best of the placers that decide without a search
    (DIRECT) on `problem`."""
    from tf_placeto import methods

    steps = {name: problem.simulate(methods.place(name, problem).group_devices).step_time_us
             for name in DIRECT}
    name = min(steps, key=steps.get)
    return name, steps[name]


def _judged(problem, policy: str, climb: float, exact: float, budget: int = 0,
            passes: int = None, start_seeds=(0,)) -> list:
    """The figures of one problem (the module's doc), each against the best algorithm: a row
    per random start in `start_seeds`; what walks from no random start (the best algorithm,
    the default placeto, the climb, the exact placer) decided once and given to each."""
    from tf_placeto import methods
    from tf_placeto.policy import inference
    from tf_placeto.policy.starts import fast_start

    best_name, best = best_direct(problem)
    chosen = inference.pretrained_policy() if policy == SHIPPED else policy
    row = {}
    start = time.perf_counter()
    initial = fast_start(problem)[1]
    walk = inference.greedy_placement(problem, chosen, initial, *inference.walk_limits(passes))
    value, evaluated = walk.value, walk.objectives
    if budget > 0:
        _, value, evaluated = inference.fine_tuned_placement(problem, chosen, budget,
                                                             initial=initial, greedy=walk)
    row.update(placeto=value / best, placeto_s=time.perf_counter() - start,
               placeto_evaluations=len(evaluated))
    for name, seconds in (("hill_climb", climb), ("optimal", exact)):
        if seconds > 0:
            decided = methods.place(name, problem, time_limit=seconds)
            row[name] = problem.simulate(decided.group_devices).step_time_us / best
            row[f"{name}_s"] = decided.decide_s
    return [{"start_seed": seed, "best_algorithm": best_name, "best_algorithm_ms": best / 1e3,
             **_from_random_start(problem, chosen, best, passes, seed), **row}
            for seed in start_seeds]


def _from_random_start(problem, policy_dir: str, best: float, passes: int, seed: int) -> dict:
    """The policy alone and the simulator's greedy rule, each walked from the random start
    of `seed`, against the best algorithm's `best` us."""
    from tf_placeto.policy import inference
    from tf_placeto.policy.episode import SimulatedGreedy, greedy_walk
    from tf_placeto.policy.observation import GraphView
    from tf_placeto.policy.starts import start_placement

    start = time.perf_counter()
    random_start = GraphView(problem, start_placement(problem, seed))   # one start for both
    alone = greedy_walk(random_start, inference.loaded_policy(policy_dir),
                        *inference.walk_limits(passes))
    row = {"policy_alone": alone.end_value / best, "policy_alone_s": time.perf_counter() - start,
           "policy_alone_devices": len(np.unique(alone.end_devices)),
           "policy_alone_passes": alone.passes, "policy_alone_settled": alone.settled,
           "policy_alone_first_pass": alone.pass_values[0] / best}
    start = time.perf_counter()
    rule = greedy_walk(random_start, SimulatedGreedy())
    return {**row, "simulated_greedy": rule.end_value / best,
            "simulated_greedy_s": time.perf_counter() - start}


def _report(table, judged: str, passes: int = None) -> None:
    """Every row, the summaries, and the issue's figure over the `judged` families (with
    how many of the policy's walks took all `passes` asked, None being place's default,
    where more than one); from several random starts, each start's figure and how the
    problems fared across them."""
    import pandas as pd

    from tf_placeto.policy import inference

    figures = [c for c in ("policy_alone", "simulated_greedy", "placeto", "hill_climb",
                           "optimal") if c in table]
    times = [f"{c}_s" for c in figures]
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.max_rows", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("\ngeometric means against the best algorithm, and median seconds to decide, "
              "by setting and device count:")
        print(_summary(table, ["setting", "devices"], figures, times).to_string(
            float_format=lambda v: f"{v:.3f}"))
        labelled = table.assign(all=judged)
        for title, by in (("by setting", "setting"), ("by family", "family"),
                          ("over all problems", "all")):
            print(f"\n{title}:")
            print(_summary(labelled, [by], figures, times).to_string(
                float_format=lambda v: f"{v:.3f}"))
    starts = table["start_seed"].nunique()
    if starts > 1:
        _across_starts(table)
    alone = table["policy_alone"]
    worst = table.loc[alone.idxmax()]
    counted = (f"{len(table)} problems" if starts == 1 else
               f"{len(table)} walks ({len(table) // starts} problems, {starts} random starts)")
    most = inference.walk_limits(passes)[0]      # the passes a walk could take at most
    print(f"\nthe policy alone over {counted} of {table['family'].nunique()} "
          f"{judged} families: geometric mean {np.exp(np.log(alone).mean()):.3f}x the best "
          f"algorithm, {int((alone > 1.10).sum())} above 1.10x, worst {alone.max():.3f}x "
          f"({worst['graph']}, {worst['setting']}, {worst['devices']} devices)"
          + (f"; {int((table['policy_alone_passes'] == most).sum())} walks took all "
             f"{most} passes, {_cut_short(table, most)} were cut short by the clock"
             if most > 1 else ""))
    if most > 1:
        _later_passes(table)


def _cut_short(table, most: int) -> int:
    """How many walks the decision's clock ended: fewer passes than `most`, the last of them
    still moving groups. A slower machine cuts more, so the figures depend on its speed."""
    return int(((table["policy_alone_passes"] < most) & ~table["policy_alone_settled"]).sum())


def _later_passes(table) -> None:
    """Where the walks' first pass ended, and on how many walks the later passes ended
    slower or faster than it (by more than 0.1%), and crossed 1.10x either way."""
    first, end = table["policy_alone_first_pass"], table["policy_alone"]
    slower, faster = end > first * 1.001, end < first / 1.001
    crossed_up = int((slower & (first <= 1.10) & (end > 1.10)).sum())
    crossed_down = int((faster & (first > 1.10) & (end <= 1.10)).sum())
    print(f"its first pass alone: geometric mean {np.exp(np.log(first).mean()):.3f}x, "
          f"{int((first > 1.10).sum())} above 1.10x; the later passes ended slower than the "
          f"first on {int(slower.sum())} walks ({crossed_up} of them above 1.10x only after "
          f"it), faster on {int(faster.sum())} ({crossed_down} brought within 1.10x)")


def _across_starts(table) -> None:
    """The policy alone from each random start, and per problem across the starts: the
    geometric mean of its median walk, and how many problems are above 1.10x from every
    start and from at least one."""
    alone = table.pivot_table(index=["graph", "setting", "devices"], columns="start_seed",
                              values="policy_alone")
    above = (alone > 1.10).sum(axis=1)
    print("\nthe policy alone from each random start (seed: geometric mean, above 1.10x): "
          + ", ".join(f"{seed}: {np.exp(np.log(alone[seed]).mean()):.3f}x, "
                      f"{int((alone[seed] > 1.10).sum())}" for seed in alone.columns))
    median = alone.median(axis=1)
    print(f"across the {alone.shape[1]} starts: each problem's median walk "
          f"{np.exp(np.log(median).mean()):.3f}x, {int((median > 1.10).sum())} above 1.10x; "
          f"{int((above == alone.shape[1]).sum())} problems above 1.10x from every start, "
          f"{int((above > 0).sum())} from at least one")


def _summary(table, by: list, figures: list, times: list):
    """Per group of `by`: the geometric means of `figures`, the median of `times`, how many
    problems the policy alone ends above 1.10x on and how many on one device, the mean
    passes it walked, and how many problems there are."""
    grouped = table.groupby(by)
    means = np.exp(np.log(table[figures]).groupby([table[c] for c in by]).mean())
    alone = grouped.agg(alone_above_1_10=("policy_alone", lambda s: int((s > 1.10).sum())),
                        alone_one_device=("policy_alone_devices", lambda s: int((s == 1).sum())),
                        alone_passes=("policy_alone_passes", "mean"))
    return (means.join(grouped[times].median()).join(alone)
            .join(grouped.size().rename("problems")))


if __name__ == "__main__":
    sys.exit(main())
