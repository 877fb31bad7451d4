"""Small simulation problems for the simulator's tests, built from hand-countable parts."""

import numpy as np

from tf_placeto.measure.simulator import SimulationProblem, link_matrix


def make_problem(costs, tensors=(), edges=(), control=(), n_devices=1, latency=0.0,
                 bandwidth=np.inf, persistent=None, capacity=None, overhead=0.0,
                 device_type_of=None, copy_share=0.0, remote_extra=None, copy_us=0.0,
                 device_task=None, remote_task_us=0.0, feed_ops=None, fetch_tensors=None,
                 task_message_us=0.0):
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
        remote_extra_us=remote_extra, link_copy_us=link_matrix(copy_us, n_devices, diagonal=0.0),
        device_task=device_task, remote_task_us=remote_task_us, feed_ops=feed_ops,
        fetch_tensors=fetch_tensors, task_message_us=task_message_us)


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

