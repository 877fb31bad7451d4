"""One simulated step of a placement: its transfers planned, the engine's run, summed up as a
SimulationResult."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import pandas as pd

from tf_placeto.measure.simulator import engine, transfers
from tf_placeto.measure.simulator.arrays import SimulationProblem
from tf_placeto.measure.simulator.schedule import schedule_frame, session_us


@dataclasses.dataclass
class SimulationResult:
    step_time_us: float
    busy_us: np.ndarray            # (n_devices,)
    peak_memory_bytes: np.ndarray  # (n_devices,)
    feasible: bool                 # every peak <= capacity
    memory_excess_bytes: float     # sum over devices of max(0, peak - capacity)
    task_transfers: int = 0        # transfers between tasks: the messages the step sends
    # When asked: kind ('op'|'transfer'|'copy'|'task': a remote task's per-step cost, or the
    # messages'), name, device (transfers: "src->dst"), start_us, end_us, bytes; ordered by
    # start.
    schedule: Optional[pd.DataFrame] = None
    op_start_us: Optional[np.ndarray] = None    # (n_ops,): when each op started
    op_end_us: Optional[np.ndarray] = None      # (n_ops,): when each op ended


def simulate(problem: SimulationProblem, placement: np.ndarray,
             schedule: bool = False) -> SimulationResult:
    """Replay one step with each op on `placement[op]` (device indices)."""
    placement = np.asarray(placement)
    if placement.shape != (problem.n_ops,) or not np.issubdtype(placement.dtype, np.integer):
        raise ValueError(f"placement must be {problem.n_ops} integer device indices")
    placement = placement.astype(np.int64, copy=False)
    if problem.n_ops and (placement.min() < 0 or placement.max() >= problem.n_devices):
        raise ValueError(f"placement indices must lie in [0, {problem.n_devices})")
    (op_start, op_end, transfer_tensor, transfer_src, transfer_dst, transfer_start,
     transfer_end, copy_start, copy_end, busy, peak) = engine.run(
        placement, problem.compute_us, problem.remote_extra_us, problem.remote_input_us,
        problem.device_type_of, problem.op_overhead_us, problem.tensor_bytes,
        problem.edge_tensor, problem.edge_consumer, problem._tensor_edge_ptr,
        problem._tensor_edges, problem._op_in_ptr, problem._op_in_edges, problem._op_out_ptr,
        problem._op_out_tensors, problem._control_ptr, problem._control_succ,
        problem.persistent_bytes, transfers.plan(problem, placement))
    last_end = max(op_end.max(initial=0.0), transfer_end.max(initial=0.0),
                   copy_end.max(initial=0.0))
    messages = int(np.sum(problem.device_task[transfer_src] != problem.device_task[transfer_dst]))
    # after the schedule: the other tasks' RunGraph calls, and the messages between tasks
    step = last_end + session_us(problem, placement, messages)
    excess = np.maximum(peak - problem.memory_capacity, 0.0)
    result = SimulationResult(step_time_us=float(step), busy_us=busy,
                              peak_memory_bytes=peak.astype(np.int64),
                              feasible=bool(np.all(excess == 0)),
                              memory_excess_bytes=float(excess.sum()), op_start_us=op_start,
                              op_end_us=op_end, task_transfers=messages)
    if schedule:
        result.schedule = schedule_frame(problem, placement, op_start, op_end, transfer_tensor,
                                         transfer_src, transfer_dst, transfer_start,
                                         transfer_end, copy_start, copy_end, last_end, messages)
    return result


def feasible(problem: SimulationProblem, placement: np.ndarray) -> bool:
    """Whether every device's peak memory fits its capacity under this placement."""
    return simulate(problem, placement).feasible
