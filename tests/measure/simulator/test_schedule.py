"""The schedule table of random steps against the graph, the devices and the queues."""

import numpy as np
import pytest

from tests.measure.simulator.cases import op_rows, random_dag
from tf_placeto.measure.simulator import simulate


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
