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
from tf_placeto.placers.problem import PlacementProblem


@pytest.fixture(scope="module")
def twelve_groups(small_cnn_groups):
    from tf_placeto.graph.grouping import coarsen

    return coarsen(small_cnn_groups, 12)[0]


def _cost_graph(problem):
    devices = np.arange(problem.n_devices)
    return pipeline_dp.cost_graph(problem, devices, devices[:0], np.arange(problem.n_groups))


def _keeps_chain_order(graph, op_devices) -> bool:
    """Whether every edge between forward ops runs to the same device or a later one (the
    backward pass's edges order nothing: it follows its forward stage)."""
    forward = ~graph.is_backward
    ordering = forward[graph.edge_src] & forward[graph.edge_dst]
    return bool(np.all(op_devices[graph.edge_src[ordering]]
                       <= op_devices[graph.edge_dst[ordering]]))


@pytest.mark.parametrize("n_devices", [2, 3])
def test_the_split_is_the_least_loaded_contiguous_one(twelve_groups, n_devices):
    """Every split of the groups' stages (a training step's backward groups with the forward
    ones they differentiate) into a chain of ideals, one per device in order, counted under
    their accounting: the DP's max-load is the least of them, and its split is one."""
    problem = build_problem(twelve_groups, n_devices).with_objective("throughput", 4)
    result = methods.place("dp", problem)
    op_of_group = problem.groups.group_of
    graph = _cost_graph(problem)
    decision = result.group_devices[op_of_group]
    assert _keeps_chain_order(graph, decision)
    assert result.info["moved_by_repair"] == 0 and result.info["fits_memory_model"]

    stages = np.unique(graph.color_class)
    assert 1 < stages.size < problem.n_groups      # the backward groups joined forward ones
    device_of_stage = np.zeros(problem.n_groups, np.int64)
    loads = []
    for split in itertools.product(range(n_devices), repeat=stages.size):
        device_of_stage[stages] = split
        op_devices = device_of_stage[graph.color_class]
        if _keeps_chain_order(graph, op_devices):
            loads.append(max_load(graph, op_devices))
    assert result.info["max_load_us"] == pytest.approx(min(loads), rel=1e-9)
    assert max_load(graph, decision) == pytest.approx(min(loads), rel=1e-9)


def test_a_backward_group_shares_the_stage_of_the_forward_group_it_reads(twelve_groups):
    problem = build_problem(twelve_groups, 2)
    graph = _cost_graph(problem)
    group_of = problem.groups.group_of
    backward = problem.groups.op_graph.backward_mask()
    assert np.array_equal(graph.is_backward, backward) and backward.any() and not backward.all()
    forward_groups = np.unique(group_of[~backward])
    backward_alone = np.setdiff1d(np.arange(problem.n_groups), forward_groups)
    assert backward_alone.size
    stage_of_group = np.zeros(problem.n_groups, np.int64)
    stage_of_group[group_of] = graph.color_class
    assert np.array_equal(stage_of_group[forward_groups], forward_groups)
    assert np.isin(stage_of_group[backward_alone], forward_groups).all()
    # a stage the groups' moves keep whole: a group's ops share one
    assert np.array_equal(stage_of_group[group_of], graph.color_class)


def test_crossing_outputs_cost_their_transfer_and_compute_is_the_groups(twelve_groups):
    problem = build_problem(twelve_groups, 2)
    graph = _cost_graph(problem)
    group_of = problem.groups.group_of
    accel_by_group = np.bincount(group_of, weights=graph.accel_latency,
                                 minlength=problem.n_groups)
    np.testing.assert_allclose(accel_by_group, problem.compute_us[:, 0])
    # an op pays for its outputs exactly when one of them is read in another stage
    simulation = problem.simulation
    producer = simulation.tensor_producer[simulation.edge_tensor]
    leaves = graph.color_class[producer] != graph.color_class[simulation.edge_consumer]
    pays = np.zeros(graph.n_nodes, bool)
    pays[producer[leaves]] = True
    assert np.all(graph.output_cost[~pays] == 0)
    assert np.all(graph.output_cost[pays] > 0) and pays.any()


def test_a_graph_too_wide_for_the_cap_is_split_in_coarser_pieces(small_cnn_groups):
    problem = build_problem(small_cnn_groups, 2).with_objective("throughput", 4)
    whole = methods.place("dp", problem)
    capped = methods.place("dp", problem, max_ideals=8)
    assert whole.info["pieces"] == problem.n_groups and whole.info["ideals"] > 8
    assert capped.info["pieces"] < problem.n_groups and capped.info["ideals"] <= 8
    assert _keeps_chain_order(_cost_graph(problem), capped.group_devices[problem.groups.group_of])
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


def test_a_task_that_costs_more_than_its_share_of_the_load_is_left_out(twelve_groups):
    """On a cluster's tasks each task the step uses beside the session's costs a fixed time
    per step, which their max-load does not count: the DP keeps the split on as many
    accelerators as pay for their tasks."""
    def on_tasks(task_us):
        problem = build_problem(twelve_groups, 3)
        simulation = dataclasses.replace(problem.simulation, device_task=np.arange(3),
                                         remote_task_us=task_us)
        return PlacementProblem.from_simulation(problem.groups, simulation).with_objective(
            "throughput", 4)

    free = methods.place("dp", on_tasks(0.0))
    assert free.info["accelerators"] == 3
    one_process = methods.place("dp", build_problem(twelve_groups, 3).with_objective(
        "throughput", 4))
    assert np.array_equal(free.group_devices, one_process.group_devices)

    costly = on_tasks(on_tasks(0.0).compute_us[:, 0].sum())
    kept = methods.place("dp", costly)
    assert kept.info["accelerators"] == 1 and not kept.group_devices.any()
    assert kept.info["max_load_us"] == pytest.approx(costly.compute_us[:, 0].sum(), rel=1e-9)
