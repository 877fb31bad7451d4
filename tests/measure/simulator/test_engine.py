"""The event loop against cases small enough to work out by hand: queues, channels, copies,
memory, device types, tasks."""

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, make_problem, op_rows
from tf_placeto.measure.simulator import feasible, lower_bound_us, simulate


def test_chain_on_one_device_takes_the_sum_of_costs_and_overheads():
    problem = chain([3.0, 5.0, 7.0], overhead=1.0)
    result = simulate(problem, np.zeros(3, np.int64))
    assert result.step_time_us == pytest.approx(18.0)
    assert result.busy_us == pytest.approx([18.0])


def test_independent_ops_on_two_devices_run_in_parallel():
    problem = make_problem([4.0, 6.0], tensors=[(0, 8), (1, 8)], n_devices=2)
    assert simulate(problem, np.array([0, 1])).step_time_us == pytest.approx(6.0)
    assert simulate(problem, np.array([0, 0])).step_time_us == pytest.approx(10.0)


def test_cross_device_edge_pays_latency_plus_bytes_over_bandwidth():
    problem = chain([10.0, 20.0], nbytes=1000, n_devices=2, latency=5.0, bandwidth=100.0)
    result = simulate(problem, np.array([0, 1]), schedule=True)
    assert result.step_time_us == pytest.approx(10.0 + 5.0 + 1000 / 100.0 + 20.0)
    transfer = result.schedule[result.schedule.kind == "transfer"].iloc[0]
    assert (transfer.device, transfer.start_us, transfer.end_us, transfer.bytes) == \
        ("dev0->dev1", 10.0, 25.0, 1000)
    assert simulate(problem, np.array([1, 1])).step_time_us == pytest.approx(30.0)


def test_transfers_on_one_channel_serialize_and_on_different_channels_overlap():
    # op0 writes two 1000-byte tensors; op1 reads the first, op2 the second.
    problem = make_problem([10.0, 0.0, 0.0], tensors=[(0, 1000), (0, 1000)],
                           edges=[(0, 1), (1, 2)], n_devices=3, latency=5.0, bandwidth=100.0)
    same_channel = simulate(problem, np.array([0, 1, 1]), schedule=True)
    assert same_channel.step_time_us == pytest.approx(10.0 + 15.0 + 15.0)
    assert op_rows(same_channel).loc["op1", "start_us"] == pytest.approx(25.0)
    assert op_rows(same_channel).loc["op2", "start_us"] == pytest.approx(40.0)
    assert simulate(problem, np.array([0, 1, 2])).step_time_us == pytest.approx(25.0)


def test_control_edges_delay_without_sending_anything():
    free = make_problem([10.0, 1.0], n_devices=2, latency=100.0)
    ordered = make_problem([10.0, 1.0], control=[(0, 1)], n_devices=2, latency=100.0)
    assert simulate(free, np.array([0, 1])).step_time_us == pytest.approx(10.0)
    result = simulate(ordered, np.array([0, 1]), schedule=True)
    assert result.step_time_us == pytest.approx(11.0)
    assert (result.schedule.kind == "transfer").sum() == 0


def test_ready_ops_wait_fifo_by_ready_time_then_op_index():
    # dev0 runs op0 until 5; op3 became ready at 2 (after op2), op1 at 4 (after op4).
    problem = make_problem([5.0, 1.0, 2.0, 1.0, 2.0], tensors=[(2, 0), (4, 0)],
                           edges=[(0, 3), (1, 1)], n_devices=2)
    starts = op_rows(simulate(problem, np.array([0, 0, 1, 0, 1]), schedule=True)).start_us
    assert starts.to_dict() == {"op0": 0.0, "op1": 6.0, "op2": 0.0, "op3": 5.0, "op4": 2.0}
    # op2 and op1 become ready together (op2 is woken first): the lower index goes first.
    tie = make_problem([1.0, 1.0, 1.0], tensors=[(0, 0)], edges=[(0, 2), (0, 1)])
    starts = op_rows(simulate(tie, np.zeros(3, np.int64), schedule=True)).start_us
    assert starts.to_dict() == {"op0": 0.0, "op1": 1.0, "op2": 2.0}
    # op0 (dev0) and the transfer of op3's output (dev1 -> dev0) end together at 10 and wake
    # op2 and op1: everything that ends at an instant is seen before dev0 picks.
    same_instant = make_problem([10.0, 1.0, 1.0, 8.0], tensors=[(0, 0), (3, 0)],
                                edges=[(0, 2), (1, 1)], n_devices=2, latency=2.0)
    starts = op_rows(simulate(same_instant, np.array([0, 0, 0, 1]), schedule=True)).start_us
    assert starts.to_dict() == {"op0": 0.0, "op1": 10.0, "op2": 11.0, "op3": 0.0}


def test_zero_cost_ops_still_queue_behind_earlier_ops():
    problem = make_problem([10.0, 0.0])
    starts = op_rows(simulate(problem, np.array([0, 0]), schedule=True)).start_us
    assert starts.to_dict() == {"op0": 0.0, "op1": 10.0}


def test_memory_peak_counts_outputs_until_read_persistent_bytes_and_received_copies():
    # op0 holds 100 bytes of weights and writes 1000 bytes; op1 reads them and writes 500;
    # op2 reads those and writes 2000 that nobody reads.
    problem = make_problem([10.0, 10.0, 10.0], tensors=[(0, 1000), (1, 500), (2, 2000)],
                           edges=[(0, 1), (1, 2)], persistent=np.array([100, 0, 0]),
                           n_devices=2, latency=1.0, bandwidth=100.0)
    local = simulate(problem, np.array([0, 0, 0]))
    # op2 runs after op1 freed its input: 100 + 500 + 2000.
    assert local.peak_memory_bytes.tolist() == [2600, 0]
    split = simulate(problem, np.array([0, 1, 1]))
    # dev0: weights + the output until its transfer ends; dev1: the received copy is freed
    # when op1 ends, before op2 allocates.
    assert split.peak_memory_bytes.tolist() == [1100, 2500]


def test_an_unread_output_is_freed_when_its_op_ends():
    problem = make_problem([10.0, 10.0], tensors=[(0, 1000), (1, 200)])
    assert simulate(problem, np.array([0, 0])).peak_memory_bytes.tolist() == [1000]


def test_exceeding_capacity_is_infeasible_and_the_excess_is_reported():
    problem = make_problem([1.0, 1.0, 1.0], tensors=[(0, 1000), (1, 500)],
                           edges=[(0, 1), (1, 2)], persistent=np.array([100, 0, 0]),
                           n_devices=2, capacity=np.array([1200.0, 1600.0]))
    result = simulate(problem, np.array([0, 0, 0]))
    assert not result.feasible
    assert result.memory_excess_bytes == pytest.approx(400.0)
    assert not feasible(problem, np.array([0, 0, 0]))
    assert feasible(problem, np.array([1, 1, 1]))   # peak 1600 fits exactly


def test_device_types_have_their_own_costs():
    costs = np.array([[10.0, 2.0], [10.0, 2.0]])
    problem = chain(costs, n_devices=2, device_type_of=np.array([0, 1]))
    assert simulate(problem, np.array([0, 0])).step_time_us == pytest.approx(20.0)
    assert simulate(problem, np.array([1, 1])).step_time_us == pytest.approx(4.0)
    assert lower_bound_us(problem) == pytest.approx(4.0)
    slow_only = chain(costs, n_devices=2, device_type_of=np.array([0, 0]))
    assert lower_bound_us(slow_only) == pytest.approx(20.0)


def test_copies_wait_for_the_devices_they_run_on():
    """op0 (dev0) sends to op1 (dev1) while op2 keeps dev1 busy until 100: with copies done by
    the processors the receive waits for op2; a DMA-like link delivers during op2."""
    costs = [10.0, 10.0, 100.0]
    kwargs = dict(tensors=[(0, 1000)], edges=[(0, 1)], n_devices=2, bandwidth=100.0)
    placement = np.array([0, 1, 1])
    assert simulate(make_problem(costs, **kwargs), placement).step_time_us == pytest.approx(110.0)
    copied = simulate(make_problem(costs, copy_share=0.5, **kwargs), placement)
    assert copied.step_time_us == pytest.approx(115.0)
    assert copied.busy_us == pytest.approx([15.0, 115.0])


def test_each_task_besides_the_sessions_own_costs_its_step_overhead():
    """Devices 0 and 1 are in task 0 (the session's), devices 2 and 3 in task 1: a step that
    uses task 1 at all pays remote_task_us once, however many of its devices run ops."""
    problem = make_problem([4.0, 6.0], tensors=[(0, 8), (1, 8)], n_devices=4,
                           device_task=np.array([0, 0, 1, 1]), remote_task_us=100.0)
    assert simulate(problem, np.array([0, 1])).step_time_us == pytest.approx(6.0)
    assert simulate(problem, np.array([2, 2])).step_time_us == pytest.approx(110.0)
    assert simulate(problem, np.array([0, 2])).step_time_us == pytest.approx(106.0)
    assert simulate(problem, np.array([2, 3])).step_time_us == pytest.approx(106.0)


def test_each_transfer_between_tasks_costs_a_message():
    """Devices 0 and 1 are in task 0, device 2 in task 1; op0's tensor goes to op1 and op2.
    Only the transfer to another task pays task_message_us; the schedule shows it last."""
    shape = dict(tensors=[(0, 8)], edges=[(0, 1), (0, 2)], n_devices=3,
                 device_task=np.array([0, 0, 1]))
    problem = make_problem([4.0, 6.0, 5.0], task_message_us=50.0, **shape)
    problem_free = make_problem([4.0, 6.0, 5.0], **shape)
    for placement, messages in (([0, 1, 1], 0), ([0, 1, 2], 1), ([2, 0, 1], 2)):
        placement = np.array(placement)
        result = simulate(problem, placement, schedule=True)
        assert result.task_transfers == messages
        assert result.step_time_us == pytest.approx(
            simulate(problem_free, placement).step_time_us + 50.0 * messages)
        rows = result.schedule[result.schedule.kind == "task"]
        assert len(rows) == (messages > 0)
        if messages:
            assert rows.end_us.iloc[-1] == pytest.approx(result.step_time_us)
    with pytest.raises(ValueError, match="task_message_us"):
        make_problem([1.0], tensors=[], task_message_us=-1.0)


def test_an_op_reading_a_remote_input_takes_its_remote_extra():
    """op1 reads op0's tensor; op2 reads op1's. Only an op whose input travels pays its extra."""
    problem = chain([10.0, 20.0, 30.0], nbytes=0, n_devices=2, remote_extra=[100.0, 7.0, 1000.0])
    assert simulate(problem, np.array([0, 0, 0])).step_time_us == pytest.approx(60.0)
    apart = simulate(problem, np.array([0, 1, 1]), schedule=True)
    assert apart.step_time_us == pytest.approx(67.0)
    assert op_rows(apart).loc["op1", "end_us"] - op_rows(apart).loc["op1", "start_us"] == \
        pytest.approx(27.0)
    assert simulate(problem, np.array([0, 1, 0])).step_time_us == pytest.approx(1067.0)
    with pytest.raises(ValueError, match="remote_extra_us"):
        chain([1.0, 1.0], n_devices=2, remote_extra=[-1.0, 0.0])
