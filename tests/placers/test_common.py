"""What the placers share: the memory repair, and edge costs that count remote inputs."""

import numpy as np
import pytest

from tests.helpers import build_problem
from tf_placeto.placers.common import edge_timing, memory_repair
from tf_placeto.placers.objectives import latency_objective_us, stream_loads_us


def test_memory_repair_moves_groups_until_the_simulated_peak_fits(two_devices):
    """Where the modelled memory misjudged a decision, single moves chosen in the simulator
    make it fit; where nothing can fit, there is no repaired decision."""
    everything_on_one = np.zeros(two_devices.n_groups, np.int64)
    peak = two_devices.single_device_peak_bytes
    capped = two_devices.with_capacity([0.9 * peak] * 2)
    assert not capped.simulate(everything_on_one).feasible
    decision, moved = memory_repair(capped, everything_on_one)
    assert moved > 0 and capped.simulate(decision).feasible
    assert memory_repair(two_devices.with_capacity([0.3 * peak] * 2), everything_on_one) is None


def test_every_edge_cost_counts_what_remote_inputs_take_more(small_cnn_groups, two_devices):
    """The list schedulers' transfers, HEFT's and m-SCT's mean ones, and both objectives of
    the exact placer charge a crossing edge its consumer's remote extra, and only then."""
    slow = build_problem(small_cnn_groups, 2, remote_extra_us=1e6)
    extra = slow.edge_extra_us
    assert np.all(extra[two_devices.edge_bytes > 0] >= 1e6)
    timing = edge_timing(slow)
    for e in range(len(extra)):
        assert timing.transfer_us(slow, e, 0) - timing.transfer_us(two_devices, e, 0) == \
            pytest.approx([0.0, extra[e]])
    assert timing.mean_transfer_us(slow) - timing.mean_transfer_us(two_devices) == \
        pytest.approx(extra)
    together = np.zeros(slow.n_groups, np.int64)
    assert latency_objective_us(slow, together) == latency_objective_us(two_devices, together)
    apart = together.copy()
    apart[slow.edge_dst[np.argmax(extra)]] = 1
    assert latency_objective_us(slow, apart) >= latency_objective_us(two_devices, apart) + 1e6
    assert stream_loads_us(slow, apart).processors_us.sum() >= \
        stream_loads_us(two_devices, apart).processors_us.sum() + 1e6
