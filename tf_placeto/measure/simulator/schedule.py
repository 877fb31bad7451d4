"""A simulated step as a table, for Gantt charts and for checking the simulator by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd


def schedule_frame(problem, placement, op_start, op_end, transfer_tensor, transfer_src,
                   transfer_dst, transfer_start, transfer_end, copy_start, copy_end, last_end_us,
                   task_messages: int = 0):
    """Ops and copy tasks on their devices, transfers on their links ("src->dst"), and
    after them each remote task's fitted per-step cost and the `task_messages` messages'
    (kind "task", on the task's first device; the messages on device 0)."""
    op_bytes = np.bincount(problem.tensor_producer, weights=problem.tensor_bytes,
                           minlength=problem.n_ops).astype(np.int64)
    names = np.asarray(problem.device_names, dtype=object)
    src = transfer_src
    tensor_names = np.asarray(problem.tensor_names, dtype=object)[transfer_tensor]
    nbytes = problem.tensor_bytes[transfer_tensor]
    ops = pd.DataFrame({"kind": "op", "name": problem.op_names, "device": names[placement],
                        "start_us": op_start, "end_us": op_end, "bytes": op_bytes})
    transfers = pd.DataFrame({
        "kind": "transfer", "name": tensor_names,
        "device": [f"{s}->{d}" for s, d in zip(names[src], names[transfer_dst])],
        "start_us": transfer_start, "end_us": transfer_end, "bytes": nbytes})
    copied = np.flatnonzero(copy_end[0::2] > copy_start[0::2])
    copies = pd.DataFrame({
        "kind": "copy",
        "name": np.concatenate([["send " + n for n in tensor_names[copied]],
                                ["receive " + n for n in tensor_names[copied]]]),
        "device": np.concatenate([names[src[copied]], names[transfer_dst[copied]]]),
        "start_us": np.concatenate([copy_start[0::2][copied], copy_start[1::2][copied]]),
        "end_us": np.concatenate([copy_end[0::2][copied], copy_end[1::2][copied]]),
        "bytes": np.concatenate([nbytes[copied], nbytes[copied]])})
    tasks = _remote_task_rows(problem, placement, last_end_us, names, task_messages)
    frame = pd.concat([ops, transfers, copies, tasks], ignore_index=True)
    return frame.sort_values(["start_us", "end_us"], kind="stable", ignore_index=True)


def _remote_task_rows(problem, placement, last_end_us: float, names,
                      task_messages: int) -> pd.DataFrame:
    """The step's calibrated cost per task besides task 0 that runs part of it, then its
    messages' between tasks (replay adds them after the last op or transfer), one after the
    other as the step time counts them."""
    remote = remote_tasks(problem, placement) if problem.remote_task_us else []
    labels = [f"task {task}: RunGraph and its partition" for task in remote]
    devices = [names[np.flatnonzero(problem.device_task == task)[0]] for task in remote]
    durations = [problem.remote_task_us] * len(remote)
    if problem.task_message_us and task_messages:
        labels.append(f"{task_messages} messages between tasks")
        devices.append(names[0])
        durations.append(problem.task_message_us * task_messages)
    ends = last_end_us + np.cumsum(durations, dtype=np.float64)
    return pd.DataFrame({"kind": "task", "name": labels, "device": devices,
                         "start_us": ends - np.asarray(durations, np.float64), "end_us": ends,
                         "bytes": 0})


def session_us(problem, placement, task_messages: int) -> float:
    """The session's work for a step of `placement` that sends `task_messages` messages
    between tasks: a RunGraph call per remote task, and the messages' cost."""
    tasks_us = (problem.remote_task_us * len(remote_tasks(problem, placement))
                if problem.remote_task_us else 0.0)
    return tasks_us + problem.task_message_us * task_messages


def remote_tasks(problem, placement) -> np.ndarray:
    """The processes besides the session's own (task 0) that run part of the step: each
    costs a RunGraph call and its partition's start and end per step."""
    used = np.unique(problem.device_task[placement])
    return used[used != 0]
