"""Episodes and their observations: devices a group cannot use are masked and refused."""

import dataclasses

import numpy as np

from tf_placeto.policy.episode import Episode
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
