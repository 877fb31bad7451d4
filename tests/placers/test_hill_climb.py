"""hill_climb: never worse than the best fast decision, a local optimum of single moves, under
either objective, memory first, within its time limit."""

import numpy as np
import pytest

from tests.helpers import build_problem
from tf_placeto import methods
from tf_placeto.placers import hill_climb
from tf_placeto.placers.common import fast_decisions


def best_fast_us(problem) -> float:
    return min(problem.evaluate(d).us_per_step for _, d in fast_decisions(problem))


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_no_single_move_beats_the_answer_and_it_beats_no_fast_start(objective, four_devices):
    problem = four_devices.with_objective(objective)
    decision, info = hill_climb.place(problem, time_limit=120.0)
    value = problem.evaluate(decision).us_per_step
    assert info["converged"] and value <= best_fast_us(problem)
    for group in range(problem.n_groups):
        for device in np.flatnonzero(problem.allowed[group]):
            trial = decision.copy()
            trial[group] = device
            assert problem.evaluate(trial).us_per_step >= value * (1 - hill_climb.MIN_GAIN)


def test_it_improves_on_every_fast_placer_of_a_small_cnn(two_devices):
    """The fast placers each follow a model of the step; the simulator finds moves past all
    of them here (0.985 of the best of them when written)."""
    decision, info = hill_climb.place(two_devices, time_limit=120.0)
    assert info["moves"] > 0 and info["evaluations"] >= two_devices.n_groups
    assert two_devices.evaluate(decision).us_per_step < best_fast_us(two_devices) * (
        1 - hill_climb.MIN_GAIN)


def test_no_time_left_answers_the_best_fast_decision(two_devices):
    decision, info = hill_climb.place(two_devices, time_limit=0.0)
    assert info["moves"] == 0 and info["evaluations"] == 0 and not info["converged"]
    assert two_devices.evaluate(decision).us_per_step == pytest.approx(best_fast_us(two_devices))


def test_memory_excess_goes_first(small_cnn_groups, two_devices):
    """Under a cap no single device meets, the answer goes past it no more than the best
    start does."""
    capacity = 0.6 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    decision = methods.place("hill_climb", capped).group_devices
    starts = min(capped.evaluate(d).memory_excess_bytes for _, d in fast_decisions(capped))
    assert capped.evaluate(decision).memory_excess_bytes <= starts
