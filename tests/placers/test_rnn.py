"""The placer "rnn": the hierarchical RNN planner's decisions, what they say they cost, and
that it needs neither tf-agents nor legacy Keras."""

import dataclasses
import json
import pickle
import textwrap

import numpy as np
import pytest

from tests.helpers import run_python
from tf_placeto import methods
from tf_placeto.policy.objective import Objective

BUDGET = 48                  # six updates of the default batch of 8: enough to exercise it


def test_decisions_are_valid_repeatable_and_say_what_they_cost(four_devices):
    first = methods.place("rnn", four_devices, budget=BUDGET)
    again = methods.place("rnn", four_devices, budget=BUDGET)
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


def test_under_throughput_it_learns_on_the_stream(two_devices):
    """Its objective is then the seconds per step of a stream (memory fits: no penalty)."""
    streaming = two_devices.with_objective("throughput", in_flight=2)
    decided = methods.place("rnn", streaming, budget=16)
    assert decided.info["objective_us"] == pytest.approx(
        streaming.evaluate(decided.group_devices).us_per_step)
    assert Objective(streaming).single_us == pytest.approx(
        streaming.evaluate(np.zeros(streaming.n_groups, np.int64)).us_per_step)


def test_kernel_rules_are_obeyed(two_devices):
    """Every other group has no kernel on device 0, one group has one only on device 0."""
    problem = two_devices
    compute = problem.compute_us.copy()
    compute[::2, 0] = np.inf
    compute[1, 1] = np.inf
    restricted = dataclasses.replace(problem, compute_us=compute)
    decision = methods.place("rnn", restricted, budget=16).group_devices
    assert np.all(decision[::2] == 1) and decision[1] == 0


def test_it_runs_with_keras_3_and_without_tf_agents(four_devices, tmp_path):
    problem_file = tmp_path / "problem.pkl"
    problem_file.write_bytes(pickle.dumps(four_devices))
    result = run_python(textwrap.dedent(f"""
        import json, pickle, sys
        import keras                                    # Keras 3 chosen first
        from tf_placeto import methods
        problem = pickle.load(open({str(problem_file)!r}, "rb"))
        result = methods.place("rnn", problem, budget=16)
        print(json.dumps({{"devices": [int(d) for d in result.group_devices],
                          "tf_agents": "tf_agents" in sys.modules, "keras": keras.__version__}}))
    """))
    placed = json.loads(result.stdout.splitlines()[-1])
    assert not placed["tf_agents"] and placed["keras"].startswith("3")
    assert len(placed["devices"]) == four_devices.n_groups
