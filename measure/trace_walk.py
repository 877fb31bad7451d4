"""Diagnostic: what the policy's greedy walk does, pass by pass (a script, not a test).

    python -m measure.trace_walk MODEL:SETTING:DEVICES ... [--passes 3] [--policy DIR]
                                 [--start-seed S] [--then-greedy N]

For each problem (a model of the corpus or of the audit set, posed as bench_generalisation
poses it), the shipped policy (or `--policy`) walks from Placeto's random start (`--start-seed
S`: the one seed S draws), as `place --start random --passes N` walks it: up to `--passes`
passes, no clock. Per pass it prints where the pass ended against the best algorithm (the
placers that decide without a search), how many groups it moved, how many of those moves the
device rows' simulator column said would slow the step ("against the simulator"), and how
many of those put the group beside more of its parents than where it sat: what the network
follows when it goes against the simulator; and how many groups it left where they sat while
the simulator found another device faster. With `--then-greedy N`, the simulator's greedy
rule then walks up to N passes from where the policy ended: whether single moves alone
still find a faster placement there. It explains a walk such as Inception-V3's in one
process, where a later pass undoes a good first one (docs/results/generalisation.md,
"Walking the groups again").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from tf_placeto.policy import specs      # no TensorFlow: the observation's column numbers
from tf_placeto.policy.episode import step_changes     # nor here


@dataclasses.dataclass
class PassTrace:
    """The moves of one pass: groups moved, moves against the simulator, those of them
    toward more of the group's parents, and groups left where the simulator found another
    device faster."""
    moved: int = 0
    against_simulator: int = 0
    toward_parents: int = 0
    stayed_against: int = 0


class TracedPolicy:
    """A policy that answers as `policy` does and counts, per pass, what its answers did
    (PassTrace); a pass begins where the walk asks for its first move."""

    def __init__(self, policy):
        self._policy = policy
        self.passes = []

    def action(self, observation: dict, first: bool) -> int:
        if first:
            self.passes.append(PassTrace())
        device = self._policy.action(observation, first)
        rows = observation["candidates"]
        here = int(rows[:, specs.SITS_THERE].argmax())
        if device == here:
            self.passes[-1].stayed_against += int((step_changes(observation) < 0).any())
        elif observation["device_mask"][device] > 0:
            trace = self.passes[-1]
            trace.moved += 1
            if rows[device, specs.STEP_CHANGE] > 0:
                trace.against_simulator += 1
                trace.toward_parents += int(
                    rows[device, specs.PARENTS_THERE] > rows[here, specs.PARENTS_THERE])
        return device


def trace(problem, policy, passes: int, seed: int = 0) -> tuple:
    """(the greedy walk of `policy` on `problem` from the random start of `seed`, its
    PassTrace per pass)."""
    from tf_placeto.policy.episode import greedy_walk
    from tf_placeto.policy.observation import GraphView
    from tf_placeto.policy.starts import start_placement

    traced = TracedPolicy(policy)
    walk = greedy_walk(GraphView(problem, start_placement(problem, seed)), traced, passes)
    return walk, traced.passes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", metavar="MODEL:SETTING:DEVICES")
    parser.add_argument("--passes", type=int, default=3, help="passes at most (no clock)")
    parser.add_argument("--policy", default=None, help="default: the shipped policy")
    parser.add_argument("--start-seed", type=int, default=0, metavar="S")
    parser.add_argument("--then-greedy", type=int, default=0, metavar="N",
                        help="then up to N passes of the simulator's greedy rule from where "
                             "the policy ended (default: none)")
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    from measure.bench_generalisation import best_direct
    from tf_placeto.placers.corpus_problems import named_problems
    from tf_placeto.policy import inference
    from tf_placeto.policy.episode import SimulatedGreedy, greedy_walk
    from tf_placeto.policy.observation import GraphView

    policy = inference.loaded_policy(args.policy or inference.pretrained_policy())
    for posed in named_problems(args.problems):
        problem = posed.problem
        best_name, best_us = best_direct(problem)
        walk, traces = trace(problem, policy, args.passes, args.start_seed)
        print(f"{posed.graph}:{posed.setting}:{posed.devices} ({problem.n_groups} groups; "
              f"best algorithm {best_name}, {best_us / 1e3:.3f} ms), from random start "
              f"{args.start_seed}: {walk.passes} passes, "
              f"{'settled' if walk.settled else 'still moving'}, ending on "
              f"{len(np.unique(walk.end_devices))} devices")
        for number, (value, moves) in enumerate(zip(walk.pass_values, traces), start=1):
            print(f"  pass {number}: ends {value / best_us:.3f}x; moved {moves.moved} groups, "
                  f"{moves.against_simulator} against the simulator ({moves.toward_parents} "
                  f"of them toward more of their parents); left {moves.stayed_against} where "
                  "the simulator found another device faster")
        if args.then_greedy:
            polished = greedy_walk(GraphView(problem, walk.end_devices), SimulatedGreedy(),
                                   args.then_greedy)
            print("  then the simulator's greedy rule: "
                  + ", ".join(f"{value / best_us:.3f}x" for value in polished.pass_values)
                  + (" (settled)" if polished.settled else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
