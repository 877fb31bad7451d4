"""Placeto: the learned graph-embedding policy places the groups (tf_placeto.policy).

Options: `policy`, a directory written by `tf-placeto train` (default: the policy shipped with
the package); `budget`, episodes of fine-tuning on this graph (0: one greedy episode,
zero-shot); `start`, where episodes start: "fast" (the best decision of the fast placers, which
the policy improves) or "random" (Placeto's own start). The problem is coarsened to the
policy's maximum number of groups first.
"""

from __future__ import annotations

from tf_placeto.placers.problem import PlacementProblem

# Its objective charges memory beyond capacity as the simulator sees it: no retries on a
# smaller memory budget (placers.place).
SIMULATES_MEMORY = True


def place(problem: PlacementProblem, *, seed: int = 0, policy: str = None, budget: int = 0,
          start: str = "fast"):
    from tf_placeto.policy import inference

    return inference.place(problem, policy_dir=policy, budget=budget, seed=seed, start=start)
