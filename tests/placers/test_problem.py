"""PlacementProblem: pins hold groups on a device, through coarsening too; what a cut
edge costs; devices alike are renamed freely; a decision is scored under the objective."""

import numpy as np
import pytest

from tests.helpers import build_problem, grouped_example
from tf_placeto import methods
from tf_placeto.errors import InputError
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.simulator.stream import simulate_stream
from tf_placeto.placers.problem import PlacementProblem, objective_and_in_flight


@pytest.fixture(scope="module")
def problem():
    return build_problem(grouped_example("small_cnn", 32), 2)


def test_pinned_groups_stay_where_pinned_whatever_the_placer(problem):
    pins = {0: 1, 5: 1, problem.n_groups - 1: 0}
    pinned = problem.with_pins(pins)
    assert not pinned.allowed[0, 0] and pinned.allowed[0, 1]
    assert problem.allowed[0, 0]                        # the original is untouched
    for method in ("round_robin", "m_etf", "heft", "metis"):
        decision = methods.place(method, pinned).group_devices
        assert all(decision[g] == d for g, d in pins.items()), method


def test_coarsening_keeps_the_pins(problem):
    pinned = problem.with_pins({3: 1})
    coarse, chunk_of_group = pinned.coarsened(8)
    assert coarse.n_groups <= 8
    assert not coarse.allowed[chunk_of_group[3], 0] and coarse.allowed[chunk_of_group[3], 1]


def test_a_pin_without_a_kernel_is_refused(problem):
    barred = problem.with_pins({2: 0})
    with pytest.raises(ValueError, match="no kernel"):
        barred.with_pins({2: 1})


def test_an_edge_carries_the_remote_extra_of_the_ops_that_read_across_it(problem):
    graph = problem.groups.op_graph
    group_of = problem.groups.group_of
    reader = next(e.dst for e in graph.data_edges if group_of[e.src] != group_of[e.dst])
    extra = np.zeros(len(graph.ops))
    extra[reader] = 500.0
    slow = build_problem(problem.groups, 2, remote_extra_us=extra)
    sources = {int(group_of[e.src]) for e in graph.data_edges
               if e.dst == reader and group_of[e.src] != group_of[reader]}
    edges = list(zip(slow.edge_src, slow.edge_dst)) + list(zip(slow.feedback_src,
                                                               slow.feedback_dst))
    carried = np.concatenate([slow.edge_extra_us, slow.feedback_extra_us])
    assert {int(a) for (a, b), x in zip(edges, carried) if x > 0} == sources
    assert all(x == 500.0 for (a, b), x in zip(edges, carried) if a in sources
               and b == group_of[reader])
    assert slow.crossing_us(0.0, slow.edge_extra_us, 0, 0).max() == 0.0
    assert np.allclose(slow.crossing_us(slow.edge_bytes, slow.edge_extra_us, 0, 1),
                       problem.crossing_us(problem.edge_bytes, 0.0, 0, 1) + slow.edge_extra_us)


def test_a_message_between_tasks_is_part_of_a_crossings_time_there_only(problem):
    """The calibration's cost per message between tasks lengthens each crossing between
    devices of different tasks (the list schedulers' view of it), not within one task."""
    simulation = Calibration(message_us=700.0).apply(problem.simulation,
                                                     np.ones(problem.simulation.n_ops))
    one_task = PlacementProblem.from_simulation(problem.groups, simulation)
    assert (one_task.latency_us == problem.latency_us).all()
    simulation.device_task = np.array([0, 1])
    two_tasks = PlacementProblem.from_simulation(problem.groups, simulation)
    assert two_tasks.latency_us[0, 1] == pytest.approx(problem.latency_us[0, 1] + 700.0)
    assert two_tasks.latency_us[1, 0] == pytest.approx(problem.latency_us[1, 0] + 700.0)
    assert two_tasks.latency_us[0, 0] == 0.0


def test_interchangeable_devices_are_renamed_by_first_use():
    problem = build_problem(grouped_example("small_cnn", 32), 3)
    assert problem.interchangeable
    decision = np.arange(problem.n_groups) % 3
    renamed = problem.canonical((decision + 2) % 3)     # the same split under other names
    np.testing.assert_array_equal(renamed, decision)
    from_1 = problem.canonical((decision + 2) % 3, first=1)     # device 0's groups kept
    np.testing.assert_array_equal(from_1, np.array([1, 0, 2])[decision])
    assert problem.simulate(renamed).step_time_us == pytest.approx(
        problem.simulate((decision + 2) % 3).step_time_us)
    pinned = problem.with_pins({0: 2})                  # device 2 now differs from the others
    smaller = problem.with_capacity([1e9, 1e9, 1e8])
    for different in (pinned, smaller):
        assert not different.interchangeable
        kept = np.full(problem.n_groups, 2)
        np.testing.assert_array_equal(different.canonical(kept), kept)


def test_a_decision_is_scored_under_the_problems_objective(problem):
    """Latency: the simulated step; throughput: the seconds per step of a stream of the
    problem's steps in flight. The objective survives coarsening, and a new capacity is
    judged in the stream too."""
    decision = methods.place("round_robin", problem).group_devices
    assert problem.evaluate(decision).us_per_step == problem.simulate(decision).step_time_us
    streaming = problem.with_objective("throughput", in_flight=3)
    flow = simulate_stream(problem.simulation, problem.op_devices(decision), in_flight=3)
    assert streaming.evaluate(decision).us_per_step == pytest.approx(1e6 / flow.steps_per_s)
    assert streaming.evaluate(decision).feasible
    coarse, _ = streaming.coarsened(8)
    assert (coarse.objective, coarse.in_flight) == ("throughput", 3)
    cramped = streaming.with_capacity(np.full(2, 1.0))
    assert not cramped.evaluate(decision).feasible
    assert cramped.evaluate(decision).memory_excess_bytes > 0


def test_the_objective_is_checked():
    assert objective_and_in_flight() == ("latency", 4)
    assert objective_and_in_flight("throughput", 2) == ("throughput", 2)
    for given, message in ((("energy", None), "unknown objective 'energy'"),
                           (("latency", 2), "pass objective throughput"),
                           (("throughput", 0), "at least 1 step in flight")):
        with pytest.raises(InputError, match=message):
            objective_and_in_flight(*given)
