"""The exact placer's models of a step: the throughput objective's loads per resource, and
the session's work on a cluster's tasks that the latency objective adds."""

import dataclasses

import numpy as np
import pytest

from tf_placeto.placers.objectives import (crossing_costs_us, latency_objective_us,
                                           session_us, stream_loads_us,
                                           throughput_objective_us)
from tf_placeto.placers.problem import PlacementProblem


@pytest.fixture(scope="module")
def two_tasks(two_devices):
    """small_cnn on two devices of two worker tasks, with a calibrated cluster's terms: a
    processor copy per transfer, RunGraph calls and messages between tasks."""
    simulation = dataclasses.replace(
        two_devices.simulation, device_task=np.array([0, 1]), remote_task_us=400.0,
        task_message_us=30.0, link_copy_share=np.array([[0.0, 0.4], [0.4, 0.0]]),
        link_copy_us=np.array([[0.0, 20.0], [20.0, 0.0]]))
    return PlacementProblem.from_simulation(two_devices.groups, simulation)


def test_one_device_loads_only_its_processor(two_tasks):
    loads = stream_loads_us(two_tasks, np.zeros(two_tasks.n_groups, np.int64))
    assert loads.processors_us == pytest.approx([two_tasks.compute_us[:, 0].sum(), 0.0])
    assert not loads.links_us.any() and loads.session_us == 0.0


def test_a_transfer_is_split_among_the_processors_the_wire_and_the_session(two_tasks):
    """Each crossing's latency + bytes / bandwidth is paid once: a copy at each end, the
    wire's share and the session's message, a message more for each further tensor the edge
    carries (none for an edge of control alone); the remote task adds its RunGraph call. The
    session's work is device 0's processor's (the master runs it in task 0's process)."""
    apart = np.arange(two_tasks.n_groups) % 2
    loads = stream_loads_us(two_tasks, apart)
    src, dst, nbytes, extra = two_tasks.all_edges()
    crosses = apart[src] != apart[dst]
    transfers = two_tasks.crossing_us(nbytes, 0.0, apart[src], apart[dst]).sum()
    compute = compute_of(two_tasks, apart).sum()
    spent = (loads.processors_us.sum() - compute - extra[crosses].sum() + loads.links_us.sum()
             - 400.0)
    further = (two_tasks.all_edge_tensors()[crosses] - 1.0).sum()
    assert spent == pytest.approx(transfers + 30.0 * further)
    between = (two_tasks.simulation.device_task[apart[src]]
               != two_tasks.simulation.device_task[apart[dst]])
    assert loads.session_us == pytest.approx(
        400.0 + 30.0 * two_tasks.all_edge_tensors()[between].sum())
    on_device_0 = compute_of(two_tasks, apart)[apart == 0].sum()
    assert loads.processors_us[0] >= on_device_0 + loads.session_us
    cost = crossing_costs_us(two_tasks, nbytes[crosses], extra[crosses], apart[src][crosses],
                             apart[dst][crosses])
    assert cost.message_us == pytest.approx(np.full(crosses.sum(), 30.0))
    assert np.all(cost.sender_us >= 20.0) and np.all(cost.wire_us > 0)


def test_devices_that_feed_each_other_both_ways_are_scored_by_their_busiest_resource(
        two_tasks):
    """No pipeline of stages is asked for: steps in flight overlap whichever way their
    tensors cross."""
    apart = np.arange(two_tasks.n_groups) % 2
    src, dst, _, _ = two_tasks.all_edges()
    assert {(a, b) for a, b in zip(apart[src], apart[dst]) if a != b} == {(0, 1), (1, 0)}
    loads = stream_loads_us(two_tasks, apart)
    assert throughput_objective_us(two_tasks, apart) == max(
        loads.processors_us.max(), loads.links_us.max()) < np.inf


def test_work_that_floats_bounds_a_step_where_every_processor_is_busy(two_tasks):
    """Floating work (per step, and per message between tasks: per tensor crossing) runs on
    whichever processor is free: the step is at least all the processors' loads and it,
    over their number, which an even split reaches and a single device, whose idle twin
    takes it, does not."""
    half = 0.5 * two_tasks.compute_us[:, 0].sum()      # of the work on one device
    floating = dataclasses.replace(two_tasks, simulation=dataclasses.replace(
        two_tasks.simulation, floating_us=half, floating_message_us=100.0))
    apart = np.arange(two_tasks.n_groups) % 2
    loads = stream_loads_us(floating, apart)
    src, dst, _, _ = floating.all_edges()
    messages = floating.all_edge_tensors()[apart[src] != apart[dst]].sum()
    assert loads.floating_us == pytest.approx(half + 100.0 * messages)
    assert throughput_objective_us(floating, apart) == pytest.approx(
        (loads.processors_us.sum() + loads.floating_us) / 2)
    single = np.zeros(two_tasks.n_groups, np.int64)
    assert throughput_objective_us(floating, single) == throughput_objective_us(two_tasks,
                                                                                single)


def test_where_no_processor_copies_a_transfer_loads_only_its_link(two_devices):
    """GPUs joined by a DMA engine (no copy share, no fixed copy): a split's processors carry
    their compute alone, and the bytes crossing load the link they take, one way."""
    apart = np.arange(two_devices.n_groups) % 2
    loads = stream_loads_us(two_devices, apart)
    compute = compute_of(two_devices, apart)
    assert loads.processors_us == pytest.approx(np.bincount(apart, weights=compute))
    src, dst, nbytes, _ = two_devices.all_edges()
    one_way = (apart[src] == 0) & (apart[dst] == 1)
    assert loads.links_us[0, 1] == pytest.approx(
        two_devices.crossing_us(nbytes[one_way], 0.0, 0, 1).sum())


def compute_of(problem, decision):
    """Each group's compute on its device under `decision`."""
    return problem.compute_us[np.arange(problem.n_groups), decision]


def test_the_latency_objective_adds_the_session_work_the_simulator_adds(two_tasks):
    """After a step's last op the simulator adds a RunGraph call per remote task and a
    message per tensor sent between tasks; so does the latency objective: the other task
    alone costs its call, a split a message per tensor each crossing edge carries, about as
    many as the simulator sends (it sends a tensor once per device, and the feeds and
    fetches besides)."""
    n = two_tasks.n_groups
    single, other = np.zeros(n, np.int64), np.ones(n, np.int64)
    assert latency_objective_us(two_tasks, other) == pytest.approx(
        latency_objective_us(two_tasks, single) + 400.0)
    apart = np.arange(n) % 2
    src, dst, _, _ = two_tasks.all_edges()
    tensors = two_tasks.all_edge_tensors()[apart[src] != apart[dst]].sum()
    assert tensors > (apart[src] != apart[dst]).sum() / 2
    assert session_us(two_tasks, apart) == pytest.approx(400.0 + 30.0 * tensors)
    assert tensors == pytest.approx(two_tasks.simulate(apart).task_transfers, rel=0.2)
