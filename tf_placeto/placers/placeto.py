"""Placeto: the learned graph-embedding policy places the groups (tf_placeto.policy).

Options: `policy`, a directory written by `tf-placeto train` (default: the policy shipped with
the package); `budget`, episodes of fine-tuning on this graph (0: one greedy episode,
zero-shot). The problem is coarsened to the policy's maximum number of groups first.
"""

from __future__ import annotations

from tf_placeto.placers.problem import PlacementProblem


def place(problem: PlacementProblem, *, seed: int = 0, policy: str = None, budget: int = 0):
    from tf_placeto.policy import inference

    return inference.place(problem, policy_dir=policy, budget=budget, seed=seed)
