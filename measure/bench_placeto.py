"""Benchmark: the Placeto policy against the algorithmic placers (a script, not a test).

    python -m measure.bench_placeto [--graphs examples:inception_v3 ...] [--devices 2 4]
                                    [--iterations 100] [--policy DIR] [--held-out ...]
                                    [--cluster local:2] [--csv FILE]

All in simulation with profiled op costs (profiles made on `--cluster`, cached) and devices
joined by `--link`. Prints:
- quality: per graph and device count, the best algorithmic placer's simulated step, and the
  best step Placeto reached when trained on that graph alone for `--iterations` iterations;
- search cost: how many placements Placeto evaluated (every move of every episode is one
  simulated placement) before it came within 5% of its final best, and the same for the
  hierarchical RNN planner (`rnn`) given as many evaluations (or `--rnn-budget`);
- transfer: on held-out family members, the shipped (or `--policy`) policy zero-shot against a
  policy trained on that graph and against the best algorithmic placer;
- speed: how long a zero-shot placement of each graph took.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

ALGORITHMS = ("single", "expert", "round_robin", "random", "metis", "m_topo", "m_etf",
              "m_sct", "heft")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=["examples:inception_v3", "examples:nasnet", "examples:nmt"])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iterations", type=int, default=100,
                        help="training iterations on each graph (4 episodes each)")
    parser.add_argument("--held-out", nargs="*", default=[
        "examples:cifar10-24", "examples:ptb-24", "examples:nmt_family-24"])
    parser.add_argument("--policy", default=None, help="default: the shipped policy")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--link", default="25:7600",
                        help="links of the simulated devices (default: Placeto's K80 GPUs, as "
                             "the shipped policy was trained with); 'measured' for the profile's")
    parser.add_argument("--rnn-budget", type=int, default=None,
                        help="placements the RNN planner evaluates (default: as many as "
                             "Placeto's training evaluated)")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    import pandas as pd

    from measure.costmodel import Link
    from measure.runtime import open_runtime
    from tf_placeto import placers
    from tf_placeto.placers.common import evaluations_to_within
    from tf_placeto.policy import inference, specs
    from tf_placeto.policy.training import Trainer, TrainingConfig
    from tf_placeto.workload import load_workload

    def say(message):
        print(message, file=sys.stderr, flush=True)

    policy = args.policy or inference.pretrained_policy()
    link = None if args.link == "measured" else Link.parse(args.link)
    rows = []
    with open_runtime(cluster=args.cluster) as runtime:
        workloads = {g: load_workload(g, runtime, max_groups=specs.MAX_GROUPS, say=say)
                     for g in args.graphs + args.held_out}
    for graph, workload in workloads.items():
        for n in args.devices:
            problem = workload.problem(n, link=link)
            best = min((problem.simulate(placers.place(m, problem, **workload.placer_options(m))
                                         .group_devices).step_time_us, m) for m in ALGORITHMS)
            start = time.perf_counter()
            _, zero_shot, _ = inference.greedy_placement(problem, policy)
            zero_shot_s = time.perf_counter() - start
            say(f"{graph} on {n} devices: training Placeto for {args.iterations} iterations")
            with tempfile.TemporaryDirectory() as scratch:
                trainer = Trainer([problem], scratch, TrainingConfig())
                trainer.run(args.iterations)
                trained = trainer.best(0)[0]
                to_5pct = evaluations_to_within(trainer.objectives(0))
                placeto_evaluations = len(trainer.objectives(0))
            rnn_budget = args.rnn_budget or placeto_evaluations
            say(f"{graph} on {n} devices: the RNN planner, {rnn_budget} evaluations")
            rnn = placers.place("rnn", problem, budget=rnn_budget)
            rows.append({
                "graph": graph, "devices": n, "ops": len(workload.graph),
                "best_algorithm": best[1], "best_algorithm_ms": best[0] / 1e3,
                "placeto_trained_ms": trained / 1e3, "zero_shot_ms": zero_shot / 1e3,
                "trained_vs_algorithm": trained / best[0],
                "zero_shot_vs_trained": zero_shot / trained,
                "zero_shot_vs_algorithm": zero_shot / best[0],
                "placements_to_5pct": to_5pct, "placeto_evaluations": placeto_evaluations,
                "rnn_ms": problem.simulate(rnn.group_devices).step_time_us / 1e3,
                "rnn_placements_to_5pct": rnn.info["evaluations_to_5pct"],
                "rnn_evaluations": rnn.info["evaluations"],
                "zero_shot_s": zero_shot_s, "held_out": graph in args.held_out})
            say(str(rows[-1]))
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 220, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
