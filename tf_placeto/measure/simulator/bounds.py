"""The step time no placement on the devices can beat: what placers' results are judged by."""

from __future__ import annotations

from typing import Optional

import numba
import numpy as np

from tf_placeto.measure.simulator.arrays import SimulationProblem


def lower_bound_us(problem: SimulationProblem, n_devices: Optional[int] = None) -> float:
    """No placement on these devices can beat this step time.

    max(critical path with each op on its fastest device type present, total fastest work /
    n_devices, largest single op). Communication is left out so that it stays a true bound;
    the per-op overhead is kept, since every op pays it.
    """
    n_devices = problem.n_devices if n_devices is None else n_devices
    if problem.n_ops == 0:
        return 0.0
    types = np.unique(problem.device_type_of)
    fastest = problem.compute_us[:, types].min(axis=1) + problem.op_overhead_us
    critical_path = _longest_path(
        fastest, problem._topological_order, problem._tensor_edge_ptr, problem._tensor_edges,
        problem.edge_consumer, problem._op_out_ptr, problem._op_out_tensors,
        problem._control_ptr, problem._control_succ)
    return float(max(critical_path, fastest.sum() / n_devices, fastest.max()))


@numba.njit(cache=True)
def _longest_path(cost, order, tensor_edge_ptr, tensor_edges, edge_consumer, op_out_ptr,
                  op_out_tensors, control_ptr, control_succ):
    """Length of the costliest chain of ops through data and control edges."""
    earliest_start = np.zeros(cost.shape[0], np.float64)
    longest = 0.0
    for op in order:
        finish = earliest_start[op] + cost[op]
        longest = max(longest, finish)
        for k in range(op_out_ptr[op], op_out_ptr[op + 1]):
            t = op_out_tensors[k]
            for j in range(tensor_edge_ptr[t], tensor_edge_ptr[t + 1]):
                consumer = edge_consumer[tensor_edges[j]]
                earliest_start[consumer] = max(earliest_start[consumer], finish)
        for k in range(control_ptr[op], control_ptr[op + 1]):
            successor = control_succ[k]
            earliest_start[successor] = max(earliest_start[successor], finish)
    return longest
