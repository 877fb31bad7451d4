"""Method dp on a TensorFlow graph's groups: Tarnawski et al.'s DP over contiguous splits, on
the cost graph the groups make (placers/pipeline_dp.py), judged against every contiguous split
of a small graph."""

import dataclasses
import itertools

import numpy as np
import pytest

from tests.helpers import build_problem
from tf_placeto import methods
from tf_placeto.errors import InputError
from tf_placeto.placers import pipeline_dp
from tf_placeto.placers.contiguous.accounting import max_load


@pytest.fixture(scope="module")
def twelve_groups(small_cnn_groups):
    from tf_placeto.graph.grouping import coarsen

    return coarsen(small_cnn_groups, 12)[0]


def _forward_edges_keep_chain_order(problem, decision) -> bool:
    return bool(np.all(decision[problem.edge_src] <= decision[problem.edge_dst]))


@pytest.mark.parametrize("n_devices", [2, 3])
def test_the_split_is_the_least_loaded_contiguous_one(twelve_groups, n_devices):
    """Every split of 12 groups into a chain of ideals, one per device in order, counted under
    their accounting: the DP's max-load is the least of them, and its split is one."""
    problem = build_problem(twelve_groups, n_devices).with_objective("throughput", 4)
    result = methods.place("dp", problem)
    decision = result.group_devices
    assert _forward_edges_keep_chain_order(problem, decision)
    assert result.info["moved_by_repair"] == 0 and result.info["fits_memory_model"]

    devices = np.arange(n_devices)
    graph = pipeline_dp.cost_graph(problem, devices, devices[:0], np.arange(problem.n_groups))
    op_of_group = problem.groups.group_of
    loads = [max_load(graph, np.asarray(split)[op_of_group])
             for split in itertools.product(range(n_devices), repeat=problem.n_groups)
             if _forward_edges_keep_chain_order(problem, np.asarray(split))]
    assert result.info["max_load_us"] == pytest.approx(min(loads), rel=1e-9)
    assert max_load(graph, decision[op_of_group]) == pytest.approx(min(loads), rel=1e-9)


def test_crossing_outputs_cost_their_transfer_and_compute_is_the_groups(twelve_groups):
    problem = build_problem(twelve_groups, 2)
    devices = np.arange(2)
    graph = pipeline_dp.cost_graph(problem, devices, devices[:0], np.arange(problem.n_groups))
    group_of = problem.groups.group_of
    accel_by_group = np.bincount(group_of, weights=graph.accel_latency,
                                 minlength=problem.n_groups)
    np.testing.assert_allclose(accel_by_group, problem.compute_us[:, 0])
    # a group whose outputs all stay inside it sends nothing
    sends = np.bincount(group_of, weights=graph.output_cost, minlength=problem.n_groups)
    has_out_edge = np.isin(np.arange(problem.n_groups),
                           np.concatenate([problem.edge_src, problem.feedback_src]))
    assert np.all(sends[~has_out_edge] == 0) and np.all(sends[has_out_edge] > 0)
    assert np.array_equal(graph.color_class, group_of)


def test_a_graph_too_wide_for_the_cap_is_split_in_coarser_pieces(small_cnn_groups):
    problem = build_problem(small_cnn_groups, 2).with_objective("throughput", 4)
    whole = methods.place("dp", problem)
    capped = methods.place("dp", problem, max_ideals=8)
    assert whole.info["pieces"] == problem.n_groups and whole.info["ideals"] > 8
    assert capped.info["pieces"] < problem.n_groups and capped.info["ideals"] <= 8
    assert _forward_edges_keep_chain_order(problem, capped.group_devices)
    assert capped.info["max_load_us"] >= whole.info["max_load_us"] * (1 - 1e-9)


def test_memory_too_small_for_every_split_still_decides(small_cnn_groups):
    free = build_problem(small_cnn_groups, 2)
    hopeless = free.with_capacity([0.1 * free.memory_bytes.sum()] * 2)
    result = methods.place("dp", hopeless)
    assert result.group_devices.shape == (free.n_groups,)
    assert not result.info["fits_memory_model"]


def test_devices_of_two_speeds_are_accelerators_and_cpus_of_three_refused(small_cnn_groups):
    problem = build_problem(small_cnn_groups, 3)
    two = dataclasses.replace(problem, compute_us=problem.compute_us * [1.0, 1.0, 3.0])
    accelerators, cpus = pipeline_dp._device_kinds(two)
    assert accelerators.tolist() == [0, 1] and cpus.tolist() == [2]
    assert methods.place("dp", two).group_devices.shape == (problem.n_groups,)
    three = dataclasses.replace(problem, compute_us=problem.compute_us * [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="at most two kinds"):
        methods.place("dp", three)
