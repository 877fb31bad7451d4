"""The hierarchical RNN planner of Mirhoseini et al.: a grouper and an LSTM placer, trained
with REINFORCE on this graph alone (tf_placeto.policy.rnn_planner).

Options: `budget`, placements sampled and simulated (default 400), the measure Placeto's
fine-tuning reports too; `batch`, samples per update (default 8); `learning_rate` (Adam,
default 0.001). The answer is the best placement sampled; the facts say how many placements
were evaluated in all and until the best so far came within 5% of the final best.
"""

from __future__ import annotations

from tf_placeto.placers.common import evaluations_to_within
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import Option, PlacerSpec
from tf_placeto.policy import rnn_planner


def place(problem: PlacementProblem, *, seed: int = 0, budget: int = rnn_planner.BUDGET,
          batch: int = rnn_planner.BATCH, learning_rate: float = rnn_planner.LEARNING_RATE):
    found = rnn_planner.search(problem, budget=budget, batch=batch,
                               learning_rate=learning_rate, seed=seed)
    return found.devices, {
        "evaluations": len(found.objectives), "objective_us": found.objective_us,
        "evaluations_to_5pct": evaluations_to_within(found.objectives),
        "planner_groups": found.planner_groups, "budget": budget}


PLACER = PlacerSpec(
    "rnn", place, "the hierarchical RNN planner (Mirhoseini et al.), learned on this graph alone",
    order=110, objectives=OBJECTIVES,
    memory="simulates",        # its objective charges memory beyond capacity in the simulator
    options=(
        Option("--rnn-budget", "budget", int, rnn_planner.BUDGET, metavar="N", least=1,
               quick=16, help="placements the RNN planner evaluates"),))
