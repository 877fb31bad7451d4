"""hill_climb: never worse than the best fast decision, a local optimum of single moves and of
moves of a group with a neighbour, under either objective, memory first, within its time
limit; chain moves get past a join that single moves cannot."""

import time

import numpy as np
import pytest

import tf_placeto as tp
from tf_placeto.examples import held_out
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


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_no_group_moved_with_a_neighbour_beats_the_answer(objective, four_devices):
    """What a converged chain sweep implies: the best neighbour of a moved group was tried
    with it, so no pair along an edge, moved to one device, is faster."""
    problem = four_devices.with_objective(objective)
    decision, info = hill_climb.place(problem, time_limit=120.0)
    value = problem.evaluate(decision).us_per_step
    assert info["converged"]
    for a, b in zip(problem.edge_src, problem.edge_dst):
        for device in np.flatnonzero(problem.allowed[a] & problem.allowed[b]):
            trial = decision.copy()
            trial[[a, b]] = device
            assert problem.evaluate(trial).us_per_step >= value * (1 - hill_climb.MIN_GAIN)


def test_a_chain_move_takes_the_join_and_the_output_copy_together(tmp_path):
    """Two matmul chains, one per device, joined by an AddN that sits with its Identity on
    the second device while the output is held on the first: moving the AddN alone adds a
    crossing, moving the Identity alone keeps two; moving both leaves one. Single moves stop
    there, a chain move does not."""
    path = str(tmp_path / "branches")
    held_out.save("branches", path, count=2, chain=2, size=256)
    groups = tp.group(tp.import_graph(path), max_groups=1000)
    graph = groups.op_graph
    output = int(groups.group_of[graph.index("StatefulPartitionedCall/Identity")])
    problem = build_problem(groups, 2).with_pins({output: 0})
    inner = "StatefulPartitionedCall/StatefulPartitionedCall/"
    on_second = [f"{inner}MatMul_2", f"{inner}MatMul_3", f"{inner}AddN", f"{inner}Identity"]
    stuck = np.zeros(problem.n_groups, dtype=np.int64)
    stuck[[groups.group_of[graph.index(name)] for name in on_second]] = 1
    singles, info = hill_climb.climb(problem, stuck, time.monotonic() + 120.0, max_chain=1)
    assert info["converged"] and info["chain_moves"] == 0
    assert singles[stuck == 1].all()                      # still joined on the second device
    decision, info = hill_climb.climb(problem, singles, time.monotonic() + 120.0)
    assert info["converged"] and info["chain_moves"] > 0
    assert problem.evaluate(decision).us_per_step < problem.evaluate(singles).us_per_step


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
