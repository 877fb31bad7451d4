"""Episodes and their observations: devices a group cannot use are masked and refused; the
simulator's greedy rule."""

import dataclasses

import numpy as np

from tf_placeto.policy.episode import Episode, SimulatedGreedy, greedy_walk
from tf_placeto.policy.observation import GraphView


def test_devices_that_are_absent_or_lack_a_kernel_are_masked(policy_problems):
    problem = policy_problems[1]
    compute = problem.compute_us.copy()
    compute[0, 1] = np.inf                          # group 0 has no kernel on device 1
    episode = Episode(GraphView(dataclasses.replace(problem, compute_us=compute)))
    assert list(episode.observation()["device_mask"]) == [1, 0, 1]
    before = episode.devices[0]
    episode.move(1)                                 # refused: stays where it was
    assert episode.devices[0] == before


def test_the_simulated_greedy_rule_takes_the_fastest_simulated_device(policy_problems):
    """SimulatedGreedy moves each group where the simulator says the step is least (staying
    put where nothing is faster): each move's objective is the least of the group's row."""
    problem = policy_problems[1]
    view = GraphView(problem)
    episode = Episode(view)
    while not episode.done:
        group, here = episode.position, int(episode.devices[episode.position])
        offered = {}
        for device in np.flatnonzero(problem.allowed[group]):
            moved = episode.devices.copy()
            moved[group] = device
            offered[int(device)] = view.objective(moved)[0]
        chosen = SimulatedGreedy.action(episode.observation(), first=episode.position == 0)
        assert offered[chosen] == min(offered.values())
        if offered[here] == min(offered.values()):
            assert chosen == here
        assert episode.move(chosen) >= 0        # the objective never rises
    walked = greedy_walk(GraphView(problem), SimulatedGreedy())
    assert walked.end_value == episode.value
    np.testing.assert_array_equal(walked.end_devices, episode.devices)
