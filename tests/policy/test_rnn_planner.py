"""The hierarchical RNN planner's search on real example graphs, and the search cost both
learned placers report (the placer "rnn" itself: tests/placers/test_rnn.py)."""

import numpy as np
import pytest

import tf_placeto as tp
from tests.helpers import build_problem, estimated_cost_model, grouped_example
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.placers.common import evaluations_to_within
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import rnn_planner
from tf_placeto.policy.objective import Objective


@pytest.fixture(scope="module")
def four_devices():
    return build_problem(grouped_example("small_cnn", 32), 4)


def linked(groups, n_devices, latency_us, bytes_per_us):
    """The graph's problem on devices joined by the given link."""
    names, model = estimated_cost_model(groups.op_graph).with_more_devices(
        n_devices, Link(latency_us, bytes_per_us))
    return PlacementProblem.build(groups, model, tp.DeviceSet.from_strings(names))


def test_evaluations_to_within_counts_until_the_best_so_far_is_close():
    assert evaluations_to_within([10, 8, 5.2, 6, 5]) == 3        # 5.2 is within 5% of 5
    assert evaluations_to_within([10, 8, 5.3, 6, 5]) == 5
    assert evaluations_to_within([10, 8, 5.3, 6, 5], tolerance=0.1) == 3
    assert evaluations_to_within([3, 9, 9]) == 1
    assert evaluations_to_within([]) == 0


def test_evaluations_to_within_another_search_s_final_best():
    # fine-tuning judged against training from scratch: within 5% of the scratch run's 5.0
    assert evaluations_to_within([10, 5.6, 5.2, 4], reference=5.0) == 3
    assert evaluations_to_within([10, 5.6, 5.3], reference=5.0) is None


def test_the_seed_and_the_budget_decide_what_is_evaluated(four_devices):
    one = rnn_planner.search(four_devices, budget=13, seed=1)
    other = rnn_planner.search(four_devices, budget=13, seed=2)
    assert len(one.objectives) == 13                 # not a whole number of batches: spent exactly
    assert not np.array_equal(one.objectives, other.objectives)
    assert one.objective_us == one.objectives.min()


def test_over_a_slow_link_it_learns_to_keep_the_work_together(four_devices):
    problem = linked(four_devices.groups, 2, 25.0, 7.6)        # 1000x slower than Placeto's K80s
    found = rnn_planner.search(problem, budget=160)
    first, last = found.objectives[:8].mean(), found.objectives[-16:].mean()
    assert last < first / 3


def test_where_splitting_pays_it_beats_as_many_random_placements(four_devices):
    problem = linked(four_devices.groups, 2, 250.0, 760.0)
    objective = Objective(problem)
    draws = np.random.default_rng(0).integers(0, 2, (200, problem.n_groups))
    random_best = min(objective(d)[0] for d in draws)
    found = rnn_planner.search(problem, budget=200)
    assert found.objective_us < random_best < objective.single_us
    assert found.objectives[-16:].mean() < found.objectives[:8].mean()
