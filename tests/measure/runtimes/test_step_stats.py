"""Step stats: a device's busy time shared among the nodes that ran on it at once."""

import numpy as np
import pytest
from tensorflow.core.framework import step_stats_pb2

from tf_placeto.measure.runtimes.step_stats import busy_shares_us


def node(name: str, start_us: float, end_us: float, op: str = "MatMul"):
    """A traced node that ran from start_us to end_us (its own op's time)."""
    return step_stats_pb2.NodeExecStats(
        node_name=name, all_start_nanos=int(start_us * 1000), op_start_rel_nanos=0,
        op_end_rel_nanos=int((end_us - start_us) * 1000), timeline_label=f"{name} = {op}(x)")


def test_nodes_one_after_another_keep_their_time():
    shares = busy_shares_us([node("a", 0, 10), node("b", 10, 25), node("c", 30, 31)])
    np.testing.assert_allclose(shares, [10, 15, 1])


def test_overlapping_nodes_share_the_core_and_add_up_to_the_busy_time():
    """a alone 0-5, a and b 5-10, b alone 10-15: each is charged 5 + 2.5."""
    shares = busy_shares_us([node("a", 0, 10), node("b", 5, 15), node("c", 20, 22)])
    np.testing.assert_allclose(shares, [7.5, 7.5, 2])
    assert shares.sum() == pytest.approx(17)


def test_three_at_once_each_get_a_third():
    shares = busy_shares_us([node(n, 0, 9) for n in "abc"])
    np.testing.assert_allclose(shares, [3, 3, 3])


def test_a_receive_waits_and_shares_nothing():
    """A receive that waited through a matmul keeps its wall time and takes none from it."""
    shares = busy_shares_us([node("recv", 0, 20, op="_Recv"), node("a", 5, 15)])
    np.testing.assert_allclose(shares, [20, 10])
