"""Benchmark: how long the policy takes to place a large graph zero-shot, on many devices.

    python -m measure.bench_decision_time [--graph examples:inception_v3] [--max-groups 512]
                                          [--devices 8] [--policy DIR] [--repeats 3]
                                          [--start random|fast|single] [--passes N]

The greedy episode of the policy (by default the shipped one) from the random start, in
simulation with profiled op costs (profiled on `--cluster local:2`) and Placeto's K80 links,
as `place --method placeto --start random` runs it: up to three passes over the groups, none
begun that would end the decision past 10 s (`--start fast`: as the default `place --method
placeto` does, the fast placers deciding first, their time counted; `--passes N`: as `place
--passes N`, up to N passes with no clock): every move
list-schedules the group's device rows, simulates at op level the placement with the group on
each other device it may use, and asks the policy. Prints each run's seconds, their median,
what the two parts of a move take, each the median of 20 calls (one simulation: an episode
runs one per group and other device, side by side in threads; one answer of the policy: one
per group), and, for comparison, the simulated steps of one device and of the best fast
placer. Issue 16's target: Inception-V3 at 512 groups on 8 devices under 10 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="examples:inception_v3")
    parser.add_argument("--max-groups", type=int, default=512)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--policy", default=None,
                        help="default: the shipped policy")
    parser.add_argument("--cluster", default="local:2", help="where the graph is profiled")
    parser.add_argument("--link", default="25:7600")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--start", default="random", help="where the episode starts "
                        "(place's --start; its default there is fast)")
    parser.add_argument("--passes", type=int, default=None,
                        help="place's --passes (default: place's, up to 3 within its clock)")
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    from measure import say
    from tf_placeto.measure.costs.costmodel import Link
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.policy import inference
    from tf_placeto.policy.episode import Episode
    from tf_placeto.policy.objective import single_device
    from tf_placeto.policy.observation import GraphView
    from tf_placeto.policy.starts import fast_start
    from tf_placeto.workload import load_workload

    with open_runtime(cluster=args.cluster) as runtime:
        workload = load_workload(args.graph, runtime, max_groups=args.max_groups)
    problem = workload.problem(args.devices, link=Link.parse(args.link))
    policy = args.policy or inference.pretrained_policy()
    say(f"{args.graph}: {problem.n_groups} groups on {problem.n_devices} devices")
    inference.greedy_placement(problem, policy)        # loads the policy once, as a server
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        devices, facts = inference.place(problem, policy, start=args.start,
                                         passes=args.passes)
        seconds.append(time.perf_counter() - start)
        print(f"zero-shot placement: {seconds[-1]:.2f} s, {facts['passes']} passes; where the "
              f"policy's episode ends {facts['policy_step_s'] * 1e3:.1f} ms, the best on its "
              f"walk {facts['best_on_walk_step_s'] * 1e3:.1f} ms ({len(set(devices.tolist()))} "
              "devices)")
    per_simulation = _median_seconds(lambda: problem.simulate(devices))
    observation = Episode(GraphView(problem)).observation()
    answer = inference.loaded_policy(policy).action
    per_answer = _median_seconds(lambda: answer(observation, first=True))
    name, _, values = fast_start(problem)
    alone_us = problem.simulate(single_device(problem)).step_time_us
    print(f"for comparison: one device {alone_us / 1e3:.1f} ms; the best fast placer, {name}, "
          f"{min(values) / 1e3:.1f} ms")
    print(f"median {statistics.median(seconds):.2f} s over {args.repeats} runs for "
          f"{problem.n_groups} groups on {problem.n_devices} devices; one op-level simulation "
          f"{per_simulation * 1e3:.1f} ms ({int((problem.allowed.sum(axis=1) - 1).sum())} of them "
          f"per episode); one answer of the policy {per_answer * 1e3:.1f} ms "
          f"({problem.n_groups} per episode)")
    return 0


def _median_seconds(call, repeats: int = 20) -> float:
    """Median seconds of `repeats` calls: one simulation of the episode's end, or one answer
    of the policy to the episode's first observation."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


if __name__ == "__main__":
    sys.exit(main())
