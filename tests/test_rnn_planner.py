"""The hierarchical RNN planner (placer "rnn") on real example graphs, and the search cost both
learned placers report."""

import dataclasses
import json
import pickle
import textwrap

import numpy as np
import pytest

import tf_placeto as tp
from helpers import run_python
from tf_placeto.measure.costmodel import Link
from test_placers import build_problem, estimated_cost_model, grouped_example
from tf_placeto import placers
from tf_placeto.placers.common import evaluations_to_within
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import rnn_planner
from tf_placeto.policy.environment import Objective

BUDGET = 48                  # six updates of the default batch of 8: enough to exercise it


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


def test_decisions_are_valid_repeatable_and_say_what_they_cost(four_devices):
    first = placers.place("rnn", four_devices, budget=BUDGET)
    again = placers.place("rnn", four_devices, budget=BUDGET)
    assert np.array_equal(first.group_devices, again.group_devices)
    assert first.info == again.info
    info = first.info
    assert set(info) == {"evaluations", "objective_us", "evaluations_to_5pct", "planner_groups",
                         "budget"}
    assert info["evaluations"] == info["budget"] == BUDGET
    assert 1 <= info["evaluations_to_5pct"] <= BUDGET
    assert info["planner_groups"] == min(four_devices.n_groups, 20 * 4)
    assert info["objective_us"] == pytest.approx(Objective(four_devices)(first.group_devices)[0])
    assert json.loads(json.dumps(info)) == info


def test_the_seed_and_the_budget_decide_what_is_evaluated(four_devices):
    one = rnn_planner.search(four_devices, budget=13, seed=1)
    other = rnn_planner.search(four_devices, budget=13, seed=2)
    assert len(one.objectives) == 13                 # not a whole number of batches: spent exactly
    assert not np.array_equal(one.objectives, other.objectives)
    assert one.objective_us == one.objectives.min()


def test_kernel_rules_are_obeyed(four_devices):
    """Every other group has no kernel on device 0, one group has one only on device 0."""
    problem = build_problem(four_devices.groups, 2)
    compute = problem.compute_us.copy()
    compute[::2, 0] = np.inf
    compute[1, 1] = np.inf
    restricted = dataclasses.replace(problem, compute_us=compute)
    decision = placers.place("rnn", restricted, budget=16).group_devices
    assert np.all(decision[::2] == 1) and decision[1] == 0


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


def test_it_runs_with_keras_3_and_without_tf_agents(four_devices, tmp_path):
    problem_file = tmp_path / "problem.pkl"
    problem_file.write_bytes(pickle.dumps(four_devices))
    result = run_python(textwrap.dedent(f"""
        import json, pickle, sys
        import keras                                    # Keras 3 chosen first
        from tf_placeto import placers
        problem = pickle.load(open({str(problem_file)!r}, "rb"))
        result = placers.place("rnn", problem, budget=16)
        print(json.dumps({{"devices": [int(d) for d in result.group_devices],
                          "tf_agents": "tf_agents" in sys.modules, "keras": keras.__version__}}))
    """))
    placed = json.loads(result.stdout.splitlines()[-1])
    assert not placed["tf_agents"] and placed["keras"].startswith("3")
    assert len(placed["devices"]) == four_devices.n_groups
