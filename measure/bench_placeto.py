"""Benchmark: the Placeto policy against the algorithmic placers (a script, not a test).

    python -m measure.bench_placeto [--graphs examples:inception_v3 ...] [--devices 2 4]
                                    [--iterations 100] [--policy DIR] [--held-out ...]
                                    [--starts random fast] [--init scratch|pretrained]
                                    [--restart fixed|previous] [--seeds 1]
                                    [--cluster local:2] [--csv FILE]

All in simulation with profiled op costs (profiles made on `--cluster`, cached) and devices
joined by `--link`. Each Placeto figure is given per start (`--starts`): "random", the paper's
fixed random placement, which shows what the policy finds on its own; "fast", the best
decision of the fast placers, which the policy then improves (the default of `place`). Prints:
- quality: per graph and device count, the best algorithmic placer's simulated step, and the
  best step Placeto reached when trained on that graph alone for `--iterations` iterations
  (`--init`: from scratch, the paper's, or the shipped policy fine-tuned; `--restart`: every
  episode from the start, or each from where the one before ended);
- search cost: how many placements Placeto evaluated (every move of every episode is one
  simulated placement) before it came within 5% of its final best, and the same for the
  hierarchical RNN planner (`rnn`) given as many evaluations (or `--rnn-budget`);
- with `--seeds N`, the zero-shot episode, the training and the RNN planner run N times with
  seeds 0..N-1 (Placeto's random start, the networks' weights and their samples), in turns;
  the last table gives per problem the medians over the seeds and on how many seeds Placeto
  ended at or below the RNN planner (one run of either differs from the next by several
  percent);
- transfer: on held-out family members, the shipped (or `--policy`) policy zero-shot against a
  policy trained on that graph and against the best algorithmic placer;
- speed: how long a zero-shot placement of each graph took.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import numpy as np


def algorithm_steps(workload, problem) -> dict:
    """{name: simulated step in us} of each algorithmic placer that decides directly
    (PlacerSpec.direct: no search budget, no time limit) on `problem`."""
    from tf_placeto import methods

    return {spec.name: problem.simulate(workload.decide(spec.name, problem).group_devices)
            .step_time_us for spec in methods.specs() if spec.direct}


def best_algorithm(workload, problem, steps: dict = None) -> tuple:
    """(simulated step in us, name) of the algorithmic placer that does best on `problem`
    (steps: algorithm_steps(workload, problem), where the caller has them)."""
    steps = steps or algorithm_steps(workload, problem)
    return min((us, name) for name, us in steps.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=["examples:inception_v3", "examples:nasnet", "examples:nmt"])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iterations", type=int, default=100,
                        help="training iterations on each graph (4 episodes each)")
    parser.add_argument("--held-out", nargs="*", default=[
        "examples:cifar10-24", "examples:ptb-24", "examples:nmt_family-24"])
    parser.add_argument("--max-groups", type=int, default=128,
                        help="groups per graph (the shipped policy trained at 128)")
    parser.add_argument("--policy", default=None,
                        help="default: the shipped policy")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--link", default="25:7600",
                        help="links of the simulated devices (default: Placeto's K80 GPUs, as "
                             "the shipped policy was trained with); 'measured' for the profile's")
    parser.add_argument("--rnn-budget", type=int, default=None,
                        help="placements the RNN planner evaluates (default: as many as "
                             "Placeto's training evaluated)")
    parser.add_argument("--starts", nargs="+", default=["random", "fast"],
                        choices=["random", "fast"])
    parser.add_argument("--init", default="scratch", choices=["scratch", "pretrained"],
                        help="the per-graph training's network: new (the paper's), or the "
                             "shipped (or --policy) policy fine-tuned, as place --budget does")
    parser.add_argument("--restart", default="fixed", choices=["fixed", "previous"],
                        help="where each episode of the per-graph training starts: the start "
                             "(the paper's fixed random placement) or where the one before "
                             "ended (the paper's other choice)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="repeat each training and RNN search with seeds 0..N-1")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    import pandas as pd

    from measure import say
    from tf_placeto import methods
    from tf_placeto.measure.costs.costmodel import Link
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.policy import inference
    from tf_placeto.policy.starts import fast_start, start_placement
    from tf_placeto.workload import load_workload

    link = None if args.link == "measured" else Link.parse(args.link)
    rows = []
    with open_runtime(cluster=args.cluster) as runtime:
        workloads = {g: load_workload(g, runtime, max_groups=args.max_groups)
                     for g in args.graphs + args.held_out}
    for graph, workload in workloads.items():
        for n in args.devices:
            problem = workload.problem(n, link=link)
            policy = args.policy or inference.pretrained_policy()
            best = best_algorithm(workload, problem)
            _, fast_devices, _ = fast_start(problem)
            for seed in range(args.seeds):
                row = {"graph": graph, "devices": n, "seed": seed, "ops": len(workload.graph),
                       "best_algorithm": best[1], "best_algorithm_ms": best[0] / 1e3,
                       "held_out": graph in args.held_out}
                for kind in args.starts:
                    initial = (fast_devices if kind == "fast"
                               else start_placement(problem, seed))
                    say(f"{graph} on {n} devices: training Placeto ({args.init}) for "
                        f"{args.iterations} iterations from the {kind} start, restart "
                        f"{args.restart}, seed {seed}")
                    row.update(_placeto_figures(problem, policy, initial, kind, seed, best[0],
                                                args))
                rnn_budget = args.rnn_budget or row["placeto_evaluations"]
                say(f"{graph} on {n} devices: the RNN planner, {rnn_budget} evaluations, "
                    f"seed {seed}")
                rnn = methods.place("rnn", problem, seed=seed, budget=rnn_budget)
                rnn_us = problem.simulate(rnn.group_devices).step_time_us
                row.update({"rnn_ms": rnn_us / 1e3, "rnn_vs_algorithm": rnn_us / best[0],
                            "rnn_placements_to_5pct": rnn.info["evaluations_to_5pct"],
                            "rnn_evaluations": rnn.info["evaluations"]})
                rows.append(row)
                say(str(row))
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 220, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        if args.seeds > 1:
            print(_over_seeds(table, args.starts).to_string(
                index=False, float_format=lambda v: f"{v:.3f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _placeto_figures(problem, policy: str, initial, kind: str, seed: int, best_us: float,
                     args) -> dict:
    """One start's columns of a row: the policy zero-shot, then trained on `problem` alone."""
    from tf_placeto.placers.common import evaluations_to_within
    from tf_placeto.policy import inference

    start = time.perf_counter()
    zero_shot = inference.greedy_placement(problem, policy, initial).value
    zero_shot_s = time.perf_counter() - start
    trained, objectives = trained_on(problem, args.init, policy, initial, args.iterations,
                                     seed, args.restart)
    return {f"zero_shot_{kind}_s": zero_shot_s,
            f"placements_to_5pct_{kind}": evaluations_to_within(objectives),
            "placeto_evaluations": len(objectives),
            f"trained_{kind}_ms": trained / 1e3, f"zero_shot_{kind}_ms": zero_shot / 1e3,
            f"trained_{kind}_vs_algorithm": trained / best_us,
            f"zero_shot_{kind}_vs_trained": zero_shot / trained,
            f"zero_shot_{kind}_vs_algorithm": zero_shot / best_us}


def trained_on(problem, init: str, policy: str, initial, iterations: int, seed: int,
               restart: str) -> tuple:
    """(best objective in us, the objective of every placement evaluated in order, the
    start first) of Placeto trained on `problem` alone for `iterations` iterations from
    `initial`: a new network ("scratch", the paper's), or `policy` fine-tuned ("pretrained",
    as place --budget does; its greedy episode first)."""
    from tf_placeto.policy import inference
    from tf_placeto.policy.training import Trainer, TrainingConfig

    if init == "pretrained":
        _, best, objectives = inference.fine_tuned_placement(
            problem, policy, iterations, seed=seed, initial=initial, restart=restart)
        return best, objectives
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer([problem], scratch, TrainingConfig(restart=restart, seed=seed),
                          initial=[initial])
        trainer.run(iterations)
        start = trainer.environments[0].views[0].start_objective     # the episodes' start
        return (min(trainer.best(0)[0], start),
                np.concatenate([[start], trainer.objectives(0)]))


def _over_seeds(table, starts) -> "pd.DataFrame":
    """Per problem: the medians over the seeds, and the seeds on which Placeto's trained step
    (from each start) was at or below the RNN planner's, and reached 5% of its own final best
    in fewer evaluations."""
    table = table.copy()        # the per-seed table (and its CSV) keeps its own columns
    figures = {"rnn_vs_algorithm": "median", "rnn_placements_to_5pct": "median",
               "seed": "count"}
    for kind in starts:
        table[f"at_or_below_rnn_{kind}"] = table[f"trained_{kind}_ms"] <= table["rnn_ms"]
        table[f"fewer_to_5pct_{kind}"] = (table[f"placements_to_5pct_{kind}"]
                                          < table["rnn_placements_to_5pct"])
        figures.update({f"trained_{kind}_vs_algorithm": "median",
                        f"placements_to_5pct_{kind}": "median",
                        f"at_or_below_rnn_{kind}": "sum", f"fewer_to_5pct_{kind}": "sum"})
    summary = table.groupby(["graph", "devices"], as_index=False).agg(figures)
    return summary.rename(columns={"seed": "seeds"})


if __name__ == "__main__":
    sys.exit(main())
