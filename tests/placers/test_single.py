"""single: the fastest device that holds the graph, and saying when none does."""

import numpy as np

from tests.helpers import build_problem, step_us
from tf_placeto import methods
from tf_placeto.placers.single import all_on


def test_single_says_when_no_device_holds_the_graph(small_cnn_groups, two_devices):
    capacity = 0.6 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = methods.place("single", capped)
    assert len(set(result.group_devices)) == 1 and not result.info["fits"]


def test_single_picks_the_fastest_device_that_holds_the_graph(small_cnn_groups, two_devices):
    footprint = two_devices.memory_bytes.sum()
    lopsided = build_problem(small_cnn_groups, 2, capacity_bytes=[0.5 * footprint, footprint])
    assert np.all(methods.place("single", lopsided).group_devices == 1)
    best = step_us(two_devices, methods.place("single", two_devices).group_devices)
    assert all(best <= step_us(two_devices, all_on(two_devices, d)) for d in range(2))
