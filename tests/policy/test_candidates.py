"""Each device's row for the group being placed: the list schedule of the visited groups."""

import dataclasses

import numpy as np
import pytest

from tf_placeto.policy import specs
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_a_group_finishes_where_its_row_said_and_frees_its_device_then(policy_problems,
                                                                       objective):
    problem = policy_problems[0].with_objective(objective)
    episode = Episode(GraphView(problem))
    total = episode.candidates.scales.total_us
    rng = np.random.default_rng(0)
    while not episode.done:
        group = episode.position
        rows = episode.observation()["candidates"]
        allowed = problem.allowed[group]
        assert rows[allowed, specs.BEHIND_BEST].min() == 0.0
        assert (rows[:, specs.WOULD_FINISH] >= rows[:, specs.CAN_START] - 1e-6)[allowed].all()
        assert rows[:, specs.SITS_THERE].argmax() == episode.devices[group]
        if problem.predecessors()[group]:
            assert rows[:, specs.PARENTS_THERE].sum() == pytest.approx(1.0)
        device = int(rng.choice(np.flatnonzero(allowed)))
        episode.move(device)
        free_at = episode.candidates.schedule.free_at[device] / total
        assert free_at == pytest.approx(rows[device, specs.WOULD_FINISH], rel=1e-5)


def test_a_device_holding_a_groups_neighbours_keeps_its_bytes(policy_problems):
    problem = policy_problems[1]
    episode = Episode(GraphView(problem), np.zeros(problem.n_groups, np.int64))
    rows = episode.observation()["candidates"]        # everything sits on device 0
    assert episode.candidates.scales.neighbours(0)[1].sum() > 0   # group 0 sends bytes
    np.testing.assert_allclose(rows[:, specs.BYTES_KEPT], np.eye(problem.n_devices)[0])
    assert rows[:, specs.DEVICE_WORK].sum() == 0.0     # nothing is scheduled yet


def test_a_devices_crossing_column_prices_the_groups_edges_that_would_cross(policy_problems):
    """With every group on device 0, group 0 crosses nothing there; on device 1 each of its
    edges pays the link's latency, its bytes over the bandwidth and the receiver's extra."""
    problem = policy_problems[1]
    episode = Episode(GraphView(problem), np.zeros(problem.n_groups, np.int64))
    rows = episode.observation()["candidates"]
    src, dst, nbytes, extra = problem.all_edges()
    mine = (src == 0) | (dst == 0)
    assert mine.any()
    out = src[mine] == 0
    latency = np.where(out, problem.latency_us[1, 0], problem.latency_us[0, 1])
    bandwidth = np.where(out, problem.bytes_per_us[1, 0], problem.bytes_per_us[0, 1])
    crossing_us = (latency + nbytes[mine] / bandwidth + extra[mine]).sum()
    own = episode.candidates.scales.group_us[0]
    assert rows[0, specs.CROSSING] == 0.0
    assert rows[1, specs.CROSSING] == pytest.approx(np.log1p(crossing_us / own), rel=1e-5)


def test_a_device_of_another_worker_costs_its_task_once(policy_problems):
    problem = policy_problems[0]
    simulation = dataclasses.replace(problem.simulation, device_task=np.array([0, 1]),
                                     remote_task_us=500.0)
    problem = dataclasses.replace(problem, simulation=simulation)
    episode = Episode(GraphView(problem), np.zeros(problem.n_groups, np.int64))
    total = episode.candidates.scales.total_us
    rows = episode.observation()["candidates"]
    assert rows[0, specs.TASK_COST] == 0.0                # the session's own task
    assert rows[1, specs.TASK_COST] == pytest.approx(500.0 / total)
    episode.move(1)                                       # task 1 is paid for now
    assert episode.observation()["candidates"][1, specs.TASK_COST] == 0.0


def test_each_devices_row_holds_the_simulated_step_with_the_group_moved_there(policy_problems):
    """The simulator's columns: the change of the objective with the group moved to each
    device (none where it sits), how far behind the best device; the move then takes the
    objective its row was simulated with."""
    problem = policy_problems[1]
    view = GraphView(problem)
    episode = Episode(view)
    rng = np.random.default_rng(1)
    while not episode.done:
        group, now = episode.position, episode.value
        rows = episode.observation()["candidates"]
        own = episode.candidates.scales.group_us[group]
        values = np.full(problem.n_devices, np.inf)
        for device in np.flatnonzero(problem.allowed[group]):
            moved = episode.devices.copy()
            moved[group] = device
            values[device] = view.objective(moved)[0]
            assert rows[device, specs.STEP_CHANGE] == pytest.approx(
                np.arcsinh((values[device] - now) / own), abs=1e-5)
        assert rows[episode.devices[group], specs.STEP_CHANGE] == 0.0
        assert rows[np.argmin(values), specs.STEP_BEHIND_BEST] == 0.0
        device = int(rng.choice(np.flatnonzero(problem.allowed[group])))
        reward = episode.move(device)
        assert episode.value == values[device]
        assert reward == pytest.approx((now - values[device]) / episode.first)
