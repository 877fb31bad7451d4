"""The step-time simulator against cases small enough to work out by hand."""

import numpy as np
import pytest

from tf_placeto.measure.simulator import (SimulationProblem, feasible, link_matrix, lower_bound_us,
                               simulate, variable_bytes)


def make_problem(costs, tensors=(), edges=(), control=(), n_devices=1, latency=0.0,
                 bandwidth=np.inf, persistent=None, capacity=None, overhead=0.0,
                 device_type_of=None, copy_share=0.0, remote_extra=None):
    """tensors: [(producer, bytes)]; edges: [(tensor, consumer)]; control: [(src, dst)]."""
    costs = np.asarray(costs, dtype=np.float64)
    tensors = np.asarray(tensors, dtype=np.int64).reshape(-1, 2)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    control = np.asarray(control, dtype=np.int64).reshape(-1, 2)
    return SimulationProblem(
        op_names=[f"op{k}" for k in range(len(costs))],
        compute_us=costs,
        device_type_of=np.zeros(n_devices, np.int64) if device_type_of is None else device_type_of,
        device_names=[f"dev{k}" for k in range(n_devices)],
        tensor_producer=tensors[:, 0], tensor_bytes=tensors[:, 1],
        edge_tensor=edges[:, 0], edge_consumer=edges[:, 1],
        control_src=control[:, 0], control_dst=control[:, 1],
        persistent_bytes=np.zeros(len(costs), np.int64) if persistent is None else persistent,
        link_latency_us=link_matrix(latency, n_devices, diagonal=0.0),
        link_bytes_per_us=link_matrix(bandwidth, n_devices, diagonal=np.inf),
        memory_capacity=np.full(n_devices, np.inf) if capacity is None else capacity,
        op_overhead_us=overhead, link_copy_share=link_matrix(copy_share, n_devices, diagonal=0.0),
        remote_extra_us=remote_extra)


def chain(costs, nbytes=0, **kwargs):
    """op0 -> op1 -> ... each passing one tensor of `nbytes`."""
    n = len(costs)
    return make_problem(costs, tensors=[(k, nbytes) for k in range(n)],
                        edges=[(k, k + 1) for k in range(n - 1)], **kwargs)


def random_dag(rng, n_ops=60, n_devices=3):
    """Ops with 1-3 inputs from earlier ops, a few control edges, random sizes and costs."""
    edges = [(int(src), dst) for dst in range(1, n_ops)
             for src in rng.choice(dst, size=min(dst, rng.integers(1, 4)), replace=False)]
    control = [(int(rng.integers(0, dst)), dst) for dst in rng.integers(1, n_ops, size=10)]
    return make_problem(rng.uniform(0, 50, n_ops), tensors=[(k, rng.integers(0, 5000))
                                                           for k in range(n_ops)],
                        edges=edges, control=control, n_devices=n_devices, latency=3.0,
                        bandwidth=200.0, overhead=0.5)


def op_rows(result):
    frame = result.schedule
    return frame[frame.kind == "op"].set_index("name")


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


def test_a_tensor_read_twice_on_one_remote_device_is_sent_once():
    problem = make_problem([10.0, 1.0, 1.0], tensors=[(0, 1000)], edges=[(0, 1), (0, 2)],
                           n_devices=2, latency=5.0, bandwidth=100.0)
    result = simulate(problem, np.array([0, 1, 1]), schedule=True)
    assert (result.schedule.kind == "transfer").sum() == 1
    assert result.step_time_us == pytest.approx(10.0 + 15.0 + 1.0 + 1.0)
    assert result.peak_memory_bytes.tolist() == [1000, 1000]


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


def test_lower_bound_of_a_chain_is_its_critical_path():
    problem = chain([3.0, 5.0, 7.0], n_devices=4, overhead=1.0)
    assert lower_bound_us(problem) == pytest.approx(18.0)
    assert simulate(problem, np.zeros(3, np.int64)).step_time_us == pytest.approx(18.0)


def test_lower_bound_never_exceeds_a_simulated_step():
    rng = np.random.default_rng(7)
    for _ in range(5):
        problem = random_dag(rng)
        bound = lower_bound_us(problem)
        assert bound > 0
        for placement in rng.integers(0, problem.n_devices, size=(20, problem.n_ops)):
            assert bound <= simulate(problem, placement).step_time_us + 1e-9


def covered(rows, start, end):
    """Whether the intervals in `rows` (not overlapping) cover [start, end]."""
    overlap = (np.minimum(rows.end_us, end) - np.maximum(rows.start_us, start)).clip(lower=0)
    return overlap.sum() == pytest.approx(end - start, abs=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_schedule_is_consistent_with_the_graph_the_devices_and_the_queues(seed):
    rng = np.random.default_rng(seed)
    problem = random_dag(rng)
    placement = rng.integers(0, problem.n_devices, size=problem.n_ops)
    result = simulate(problem, placement, schedule=True)
    frame = result.schedule
    ops = op_rows(result)
    assert sorted(ops.index) == sorted(problem.op_names)
    ops = ops.loc[problem.op_names]
    assert (ops.end_us - ops.start_us).to_numpy() == pytest.approx(problem.compute_us[:, 0] + 0.5)
    for _, rows in frame.groupby(["kind", "device"]):   # devices and channels: one at a time
        rows = rows.sort_values("start_us")
        assert (rows.start_us.to_numpy()[1:] >= rows.end_us.to_numpy()[:-1] - 1e-9).all()
    assert result.step_time_us == pytest.approx(frame.end_us.max())
    busy = ops.assign(d=ops.end_us - ops.start_us).groupby("device").d.sum()
    assert result.busy_us == pytest.approx([busy.get(f"dev{k}", 0.0)
                                            for k in range(problem.n_devices)])

    # Each tensor goes once to each other device that reads it, after its producer ends, and
    # its channel is never idle while it waits.
    transfers = frame[frame.kind == "transfer"].set_index(["name", "device"])
    names = np.asarray(problem.device_names)
    ends = ops.end_us.to_numpy()
    ready = np.zeros(problem.n_ops)
    expected = set()
    for tensor, consumer in zip(problem.edge_tensor, problem.edge_consumer):
        producer = problem.tensor_producer[tensor]
        available = ends[producer]
        if placement[producer] != placement[consumer]:
            key = (problem.tensor_names[tensor],
                   f"{names[placement[producer]]}->{names[placement[consumer]]}")
            expected.add(key)
            sent = transfers.loc[key]
            assert sent.start_us >= available
            assert covered(transfers.xs(key[1], level="device"), available, sent.start_us)
            available = sent.end_us
        ready[consumer] = max(ready[consumer], available)
    assert set(transfers.index) == expected and len(transfers) == len(expected)
    for src, dst in zip(problem.control_src, problem.control_dst):
        ready[dst] = max(ready[dst], ends[src])

    # Each op starts once ready, its device busy meanwhile; earlier-ready ops go first.
    ops = ops.assign(ready=ready, index=np.arange(problem.n_ops))
    for _, rows in ops.groupby("device"):
        for op in rows.itertuples():
            assert op.start_us >= op.ready - 1e-9
            assert covered(rows, op.ready, op.start_us)
            overtaken = rows[(rows.start_us > op.start_us) & (rows.ready <= op.start_us)]
            assert ((overtaken.ready > op.ready)
                    | ((overtaken.ready == op.ready) & (overtaken["index"] > op.index))).all()


def test_bad_placements_and_cycles_are_rejected():
    problem = chain([1.0, 1.0], n_devices=2)
    with pytest.raises(ValueError):
        simulate(problem, np.array([0, 2]))
    with pytest.raises(ValueError):
        simulate(problem, np.array([0]))
    with pytest.raises(ValueError, match="cycle"):
        make_problem([1.0, 1.0], tensors=[(0, 1)], edges=[(0, 1)], control=[(1, 0)])


def test_real_graphs_build_valid_problems(mlp_model):
    import tensorflow as tf

    import tf_placeto as tp

    graph = tp.import_graph(mlp_model)
    costs = np.ones(len(graph))
    problem = SimulationProblem.from_op_graph(graph, costs, ["/device:GPU:0", "/device:GPU:1"],
                                              None, 20.0, 1000.0, op_overhead_us=1.0)
    handles = [op.index for op in graph.ops if op.type == "VarHandleOp"]
    assert handles and all(problem.persistent_bytes[k] > 0 for k in handles)
    assert problem.persistent_bytes.sum() == problem.persistent_bytes[handles].sum()
    assert len(problem.edge_tensor) == len(graph.data_edges)
    for placement in (np.zeros(len(graph), np.int64), np.arange(len(graph)) % 2):
        result = simulate(problem, placement, schedule=True)
        assert lower_bound_us(problem) <= result.step_time_us
        assert (result.schedule.kind == "op").sum() == len(graph)
    single = simulate(problem, np.zeros(len(graph), np.int64))
    assert single.step_time_us == pytest.approx(2.0 * len(graph))

    variable = tf.Variable(tf.ones([4, 8]))

    @tf.function
    def step(x):
        variable.assign_add(tf.ones([4, 8]))
        return tf.matmul(x, variable)

    captured = tp.import_graph(step, tf.TensorSpec([2, 4], tf.float32))
    sizes = variable_bytes(captured)
    assert sizes.sum() == 4 * 8 * 4
    assert captured.ops[int(sizes.argmax())].outputs[0].dtype == "resource"


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


def test_copy_shares_outside_half_are_refused():
    with pytest.raises(ValueError, match="copy shares"):
        chain([1.0, 1.0], n_devices=2, copy_share=0.6)


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
