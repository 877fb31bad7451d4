"""What a placement sends and what each transfer costs: one transfer per tensor and device that
reads it away, feeds and fetches through device 0's task, copies on both ends' processors."""

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, make_problem
from tf_placeto.measure.simulator import simulate
from tf_placeto.measure.simulator.transfers import plan


def test_a_placement_plans_one_transfer_per_tensor_and_device_that_reads_it_away():
    """op0's tensor is read by op1 and op2 on dev1 and by op3 on dev2; op1's by op2, beside
    it: op0:0 goes to dev1 once for both its readers there, and to dev2; op1:0 stays."""
    problem = make_problem([1.0] * 4, tensors=[(0, 1000), (1, 10)],
                           edges=[(0, 1), (0, 2), (0, 3), (1, 2)], n_devices=3, latency=5.0,
                           bandwidth=100.0, copy_share=0.25, copy_us=2.0)
    (n_transfers, edge_transfer, tensor, src, dst, feeds, readers, holds, reads_remote,
     waiting_for, fetch, copy_us, wire_us, per_device, per_channel) = plan(
        problem, np.array([0, 1, 1, 2]))
    assert n_transfers == 2 and edge_transfer.tolist() == [0, 0, 1, -1]
    assert [tensor[:2].tolist(), src[:2].tolist(), dst[:2].tolist()] == [[0, 0], [0, 0], [1, 2]]
    assert feeds[:2].tolist() == [-1, -1] and fetch.tolist() == [-1, -1]
    assert readers[:2].tolist() == [2, 1]
    assert holds.tolist() == [2, 1]                # op0:0: its transfers; op1:0: op2, beside it
    assert reads_remote.tolist() == [0, 1, 1, 1]
    assert waiting_for.tolist() == problem._n_preds.tolist()
    assert copy_us == pytest.approx([2.0 + 0.25 * 10.0] * 2)    # each end's copy
    assert wire_us == pytest.approx([5.0 + 0.5 * 10.0] * 2)     # the rest of the bytes
    assert per_device.tolist() == [1 + 2, 2 + 1, 1 + 1]         # its ops and copies
    assert per_channel.tolist() == [0, 1, 1, 0, 0, 0, 0, 0, 0]


def test_a_tensor_read_twice_on_one_remote_device_is_sent_once():
    problem = make_problem([10.0, 1.0, 1.0], tensors=[(0, 1000)], edges=[(0, 1), (0, 2)],
                           n_devices=2, latency=5.0, bandwidth=100.0)
    result = simulate(problem, np.array([0, 1, 1]), schedule=True)
    assert (result.schedule.kind == "transfer").sum() == 1
    assert result.step_time_us == pytest.approx(10.0 + 15.0 + 1.0 + 1.0)
    assert result.peak_memory_bytes.tolist() == [1000, 1000]


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5])
def test_alone_a_copied_transfer_takes_its_measured_time(share):
    problem = chain([10.0, 20.0], nbytes=1000, n_devices=2, latency=5.0, bandwidth=100.0,
                    copy_share=share)
    result = simulate(problem, np.array([0, 1]), schedule=True)
    assert result.step_time_us == pytest.approx(10.0 + 5.0 + 10.0 + 20.0)
    assert result.busy_us == pytest.approx([10.0 + share * 10.0, 20.0 + share * 10.0])
    copies = result.schedule[result.schedule.kind == "copy"]
    assert len(copies) == (2 if share else 0)
    if share:
        assert list(copies.device) == ["dev0", "dev1"]
        assert list(copies.name) == ["send op0:0", "receive op0:0"]


def test_a_fixed_copy_time_is_spent_by_both_ends_on_top_of_the_wire():
    """Per crossing tensor, each end's processor spends copy_us (the rendezvous, gRPC): it
    delays the receiver and keeps both devices busy, the wire still takes its own time."""
    problem = chain([10.0, 20.0], nbytes=1000, n_devices=2, latency=5.0, bandwidth=100.0,
                    copy_us=3.0)
    result = simulate(problem, np.array([0, 1]), schedule=True)
    assert result.step_time_us == pytest.approx(10.0 + 3.0 + 15.0 + 3.0 + 20.0)
    assert result.busy_us == pytest.approx([13.0, 23.0])
    assert (result.schedule.kind == "copy").sum() == 2
    assert simulate(problem, np.array([1, 1])).step_time_us == pytest.approx(30.0)


def test_the_session_feeds_and_fetches_on_device_0s_task():
    """op0 is fed, op1's output fetched. In another task than device 0's, the feed first
    comes from device 0 and the fetched tensor goes back to it; within device 0's task,
    nothing travels."""
    two_tasks = dict(n_devices=2, latency=5.0, bandwidth=100.0, device_task=np.array([0, 1]),
                     feed_ops=[0], fetch_tensors=[1])
    problem = chain([10.0, 20.0], nbytes=1000, **two_tasks)
    assert simulate(problem, np.array([0, 0])).step_time_us == pytest.approx(30.0)
    remote = simulate(problem, np.array([1, 1]), schedule=True)
    assert remote.step_time_us == pytest.approx(15 + 10 + 20 + 15)
    transfers = remote.schedule[remote.schedule.kind == "transfer"]
    assert list(transfers.device) == ["dev0->dev1", "dev1->dev0"]
    assert list(transfers.name) == ["op0:0", "op1:0"]
    assert simulate(problem, np.array([1, 0])).step_time_us == pytest.approx(15 + 10 + 15 + 20)
    one_task = chain([10.0, 20.0], nbytes=1000, n_devices=2, latency=5.0, bandwidth=100.0,
                     feed_ops=[0], fetch_tensors=[1])
    assert simulate(one_task, np.array([1, 1])).step_time_us == pytest.approx(30.0)
