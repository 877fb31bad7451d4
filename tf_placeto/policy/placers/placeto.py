"""Placeto: the learned graph-embedding policy places the groups (tf_placeto.policy).

Options: `policy`, a directory written by `tf-placeto train` (default: the one network
shipped with the package, for any devices); `budget`, iterations of fine-tuning on this graph,
each episode walking on from where the one before ended (0: one greedy episode, zero-shot;
AUTO_BUDGET within method auto); `start`, where the first episodes start: "fast" (the best
decision of the fast placers, which the policy improves), "random" (Placeto's own start) or
"single" (every group on the best device); `passes`, how many times the greedy episode may
walk the groups, each pass from where the one before ended (1: Placeto's one episode; by
default up to inference.PASSES, none begun that would end the decision past
inference.DECIDE_SECONDS).
The policy places the problem as it is: any number of groups, on any number of devices.
"""

from __future__ import annotations

from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import Option, PlacerSpec
from tf_placeto.policy import inference

AUTO_BUDGET = 10             # brief fine-tuning, when method auto tries the policy


def place(problem: PlacementProblem, *, seed: int = 0, policy: str = None, budget: int = 0,
          start: str = "fast", passes: int = None):
    return inference.place(problem, policy_dir=policy, budget=budget, seed=seed, start=start,
                           passes=passes)


PLACER = PlacerSpec(
    "placeto", place, "the learned Placeto policy, zero-shot or fine-tuned on the graph",
    order=120, auto=True, objectives=OBJECTIVES,
    memory="simulates",        # its objective charges memory beyond capacity in the simulator
    options=(
        Option("--policy", "policy", metavar="DIR",
               help="a policy trained with `tf-placeto train` (default: the one shipped with "
                    "the package, for any devices)"),
        Option("--budget", "budget", int, 0, metavar="N", least=0, auto=AUTO_BUDGET, quick=0,
               help="iterations of fine-tuning on the graph, each episode walking on from "
                    "where the one before ended; 0: one greedy episode, zero-shot"),
        Option("--start", "start", str, "fast", choices=inference.START_KINDS,
               help="where its first episodes start: fast, the best decision of the fast "
                    "placers, which the policy improves; random, the Placeto paper's random "
                    "placement; single, every group on the best device"),
        Option("--passes", "passes", int, None, metavar="N", least=1, quick=1,
               help="greedy passes over the groups, each from where the one before ended, "
                    "until one moves no group; each costs the first's time again (1: "
                    "Placeto's one episode; default: up to "
                    f"{inference.PASSES}, none begun that would end the decision past "
                    f"{inference.DECIDE_SECONDS:g} s)")))
