"""The simulator's stream mode: K steps in flight, for pipelined throughput.

A server answering concurrent requests with a placed SavedModel, or a loop that starts a step
whenever one of K ends, keeps K steps in flight: while one step's last ops run on one device,
the next step's first ops can already run on another. One simulated step cannot show that.

The stream is the step's graph unrolled `steps` times and replayed by the one-step engine, so
devices and links are shared, FIFO, exactly as within a step:
- each step ends with a step-end op, which waits for every op of the step with no
  successors. Where other tasks than the session's take part, it takes the step's
  remote-task cost (`remote_task_us` per task other than the session's: their RunGraph
  calls) and its messages' (`task_message_us` per transfer between tasks) on device 0, the
  session's: the master runs those calls and the rendezvous in task 0's process, on the
  processor its ops use, so with steps in flight they take time from that device's ops
  (on a device of their own they overlapped every op, and splits streamed far faster than
  for real: docs/results/throughput.md, "Streams of 4: where the session's work runs"). Otherwise the step-end op costs nothing and runs on
  a device of its own, where it waits for nothing but the step. A step's latency runs from
  its start to its step-end op's end;
- step k + K starts when step k has ended: each op of the later step with no predecessors
  waits for step k's step-end op;
- state orders steps: an op that touches a variable (the op holding it, every op that
  reads or updates it through its handle) waits for the same op of the step before, so an
  update never overlaps the next step's update of the same variable. Nothing more: steps in
  flight on one TensorFlow session do not wait for each other's updates either (a later
  step may read a variable before an earlier one updates it), and a read-only variable read
  all over a step (a learning rate) would otherwise chain whole steps. `dependencies` adds
  pairs of ops (a, b) where b of a step waits for a of the step before (an explicit
  dependency);
- everything else of two steps is independent.
The variables' persistent bytes count once, not once per step. With K = 1 each step is the
one-step simulation's step, one after the other.

Work that no device owns floats: the client's calls with their feeds and fetches, the
runtime's threads that poll and answer messages, which the operating system runs on
whichever processor is free (`floating_us` per step, `floating_message_us` per message
between tasks; fitted on real streams, tf_placeto.measure.profiling.regression). The
devices' processors share it, so a step takes at least all their work per step, this included,
over their number: where one device idles the floating work fits there, where all are busy it
slows every step.
On `local:2` the real streams of a training step split evenly over both workers ran slower
than the devices' schedule alone said, while lopsided splits matched it
(docs/results/throughput.md, "Streams in the fit: the work that floats").
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Iterable, Optional

import numpy as np

from tf_placeto.measure.simulator.arrays import SimulationProblem
from tf_placeto.measure.simulator.replay import simulate
from tf_placeto.measure.simulator.schedule import session_us

STEPS_PER_IN_FLIGHT = 4    # a stream long enough for a steady state: 4 K steps, at least 8
MIN_STEPS = 8
STEP_END_DEVICE = "stream:step ends"   # runs the step-end ops that cost nothing


@dataclasses.dataclass
class StreamResult:
    in_flight: int
    steps_per_s: float             # in steady state (steady_seconds_per_step)
    latency_us: np.ndarray         # (steps,): each step's end minus its start
    step_end_us: np.ndarray        # (steps,)
    peak_memory_bytes: np.ndarray  # (n_devices,): with the steps in flight
    feasible: bool                 # every peak within its device's capacity
    schedule_us: float = 0.0       # per step once full, by the devices' schedule alone
    work_us: float = 0.0           # per step, all the devices' processors' work together


def stream_steps(in_flight: int) -> int:
    """How many steps a stream of `in_flight` runs, real or simulated."""
    return max(STEPS_PER_IN_FLIGHT * in_flight, MIN_STEPS)


def floating_seconds_per_step_us(schedule_us, work_us, messages, n_devices, floating_us,
                                 floating_message_us):
    """Microseconds per step once full (arrays or numbers alike): the devices' schedule,
    unless the floating work (module docstring) with all the devices' own is more than their
    processors can do in that time."""
    floating = floating_us + floating_message_us * np.asarray(messages, float)
    return np.maximum(schedule_us, (np.asarray(work_us, float) + floating) / n_devices)


def steady_seconds_per_step(step_ends, in_flight: int) -> float:
    """Seconds per step once a stream of `in_flight` steps at once is full, from the ends of
    its steps (any order, any unit of seconds), over the later half of the steps that ended
    while the stream was still full, in whole multiples of `in_flight` steps:
    - the last in_flight - 1 steps are left out: nothing follows them, so they end sooner
      than in a full stream (counting them put streams below the bound of their work);
    - steps in flight tend to move in convoys of `in_flight` (they share the devices and
      end close together), which a window of whole convoys measures without bias."""
    ends = np.sort(np.asarray(step_ends, dtype=float))
    last = len(ends) - in_flight          # the last step that ended in a full stream
    span = in_flight * max(1, len(ends) // 2 // in_flight)
    if last - span < 0:
        raise ValueError(f"a stream of {in_flight} in flight needs at least "
                         f"{in_flight + span} steps, not {len(ends)}")
    return float((ends[last] - ends[last - span]) / span)


class Stream:
    """The stream of `problem`'s steps, unrolled once: `simulate` then replays any placement
    of it at about the cost of `steps` one-step simulations."""

    def __init__(self, problem: SimulationProblem, in_flight: int,
                 steps: Optional[int] = None, dependencies: Iterable[tuple] = ()):
        """steps: how many (default: STEPS_PER_IN_FLIGHT * in_flight, at least MIN_STEPS);
        at most `in_flight` at once."""
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, not {in_flight}")
        self.steps = steps or stream_steps(in_flight)
        if self.steps < 2:
            raise ValueError(f"a stream needs at least 2 steps, not {self.steps}")
        self.problem, self.in_flight = problem, in_flight
        self.unrolled = unroll(problem, self.steps, in_flight, dependencies=dependencies)
        self._own = threading.local()

    def _own_unrolled(self) -> SimulationProblem:
        """This thread's copy of the unrolled stream, whose steps' session work `simulate`
        sets per placement: placements are simulated in threads (a policy's device rows), and
        one shared array would give a placement another's session."""
        unrolled = getattr(self._own, "unrolled", None)
        if unrolled is None:
            unrolled = dataclasses.replace(self.unrolled,
                                           compute_us=self.unrolled.compute_us.copy())
            self._own.unrolled = unrolled
        return unrolled

    def simulate(self, placement, messages: Optional[int] = None) -> StreamResult:
        """The stream with op i of every step on device `placement[i]`. messages: how many
        messages between tasks a step sends (default: the one-step simulation's transfers
        between tasks; TensorFlow's own count, measure.messages, is what a calibrated
        measurer passes), each costing `task_message_us` of the session's device and
        `floating_message_us` of floating work."""
        problem, steps, in_flight = self.problem, self.steps, self.in_flight
        placement = np.asarray(placement, dtype=np.int64)
        step_ends = slice(steps * problem.n_ops, None)
        if messages is None:
            messages = simulate(problem, placement).task_transfers \
                if problem.task_message_us or problem.floating_message_us else 0
        session = session_us(problem, placement, messages)
        unrolled = self._own_unrolled()
        unrolled.compute_us[step_ends, :] = session
        result = simulate(unrolled, np.concatenate([
            np.tile(placement, steps), np.full(steps, 0 if session else problem.n_devices)]))
        step_end = result.op_end_us[step_ends]
        start = np.zeros(steps)
        start[in_flight:] = step_end[:steps - in_flight]
        schedule_us = steady_seconds_per_step(step_end, in_flight)
        work_us = float(result.busy_us[:problem.n_devices].sum()) / steps
        per_step_us = float(floating_seconds_per_step_us(
            schedule_us, work_us, messages, problem.n_devices, problem.floating_us,
            problem.floating_message_us))
        rate = 1e6 / per_step_us if per_step_us > 0 else np.inf
        peak = result.peak_memory_bytes[:-1]
        return StreamResult(in_flight=in_flight, steps_per_s=float(rate),
                            latency_us=step_end - start, step_end_us=step_end,
                            peak_memory_bytes=peak,
                            feasible=bool(np.all(peak <= problem.memory_capacity)),
                            schedule_us=schedule_us, work_us=work_us)


def simulate_stream(problem: SimulationProblem, placement, in_flight: int,
                    steps: Optional[int] = None,
                    dependencies: Iterable[tuple] = ()) -> StreamResult:
    """One placement's stream (a Stream built and replayed once)."""
    return Stream(problem, in_flight, steps, dependencies).simulate(placement)


def state_groups(problem: SimulationProblem) -> list:
    """The ops of each variable: the op that holds it (persistent bytes) and the consumers of
    its outputs (reads and updates through the handle)."""
    groups = []
    for holder in np.flatnonzero(problem.persistent_bytes > 0):
        tensors = np.flatnonzero(problem.tensor_producer == holder)
        users = problem.edge_consumer[np.isin(problem.edge_tensor, tensors)]
        groups.append(np.unique(np.concatenate([[holder], users])))
    return groups


def unroll(problem: SimulationProblem, steps: int, in_flight: int,
           dependencies: Iterable[tuple] = ()) -> SimulationProblem:
    """The stream as one graph on the problem's devices and one more: op i of step k is
    op k * n_ops + i, step k's step-end op is steps * n_ops + k, with the edges of the module
    docstring. The device added last runs step-end ops that cost nothing; their time is 0
    until Stream.simulate sets a placement's session cost (module docstring)."""
    n, n_tensors = problem.n_ops, len(problem.tensor_producer)
    op_offset = (np.arange(steps) * n)[:, None]
    tensor_offset = (np.arange(steps) * n_tensors)[:, None]
    step_end = steps * n + np.arange(steps)
    has_successor = np.zeros(n, bool)
    has_successor[problem.tensor_producer[problem.edge_tensor]] = True
    has_successor[problem.control_src] = True
    sinks, sources = np.flatnonzero(~has_successor), np.flatnonzero(problem._n_preds == 0)
    released = np.arange(steps - in_flight) if steps > in_flight else np.zeros(0, np.int64)
    edges = [((problem.control_src + op_offset).ravel(),
              (problem.control_dst + op_offset).ravel()),
             ((sinks + op_offset).ravel(), np.repeat(step_end, len(sinks))),
             (np.repeat(step_end[released], len(sources)),
              (sources + (released + in_flight)[:, None] * n).ravel())]
    stateful = np.unique(np.concatenate([np.zeros(0, np.int64), *state_groups(problem)]))
    pairs = np.concatenate([np.asarray(list(dependencies), dtype=np.int64).reshape(-1, 2),
                            np.stack([stateful, stateful], axis=1)])
    follows = (np.arange(steps - 1) * n)[:, None]
    edges.append(((pairs[:, 0] + follows).ravel(), (pairs[:, 1] + follows + n).ravel()))
    persistent = np.zeros(steps * n + steps, np.int64)
    persistent[:n] = problem.persistent_bytes
    n_types = problem.compute_us.shape[1]
    compute = np.zeros((steps * n + steps, n_types + 1))
    # an op's overhead is part of its time; the step-end op has none
    compute[:steps * n, :n_types] = (np.tile(problem.compute_us, (steps, 1))
                                     + problem.op_overhead_us)
    remote_extra = np.zeros_like(compute)
    remote_extra[:steps * n, :n_types] = np.tile(problem.remote_extra_us, (steps, 1))
    remote_input = np.zeros(steps * n + steps)
    remote_input[:steps * n] = np.tile(problem.remote_input_us, steps)
    return SimulationProblem(
        op_names=[f"{name}@{k}" for k in range(steps) for name in problem.op_names]
        + [f"step end@{k}" for k in range(steps)],
        compute_us=compute, remote_extra_us=remote_extra, remote_input_us=remote_input,
        device_type_of=np.append(problem.device_type_of, n_types),
        device_names=[*problem.device_names, STEP_END_DEVICE],
        tensor_producer=(problem.tensor_producer + op_offset).ravel(),
        tensor_bytes=np.tile(problem.tensor_bytes, steps),
        edge_tensor=(problem.edge_tensor + tensor_offset).ravel(),
        edge_consumer=(problem.edge_consumer + op_offset).ravel(),
        control_src=np.concatenate([src for src, _ in edges]),
        control_dst=np.concatenate([dst for _, dst in edges]),
        persistent_bytes=persistent,
        link_latency_us=_padded(problem.link_latency_us, 0.0),
        link_bytes_per_us=_padded(problem.link_bytes_per_us, np.inf),
        memory_capacity=np.append(problem.memory_capacity, np.inf),
        link_copy_share=_padded(problem.link_copy_share, 0.0),
        link_copy_us=_padded(problem.link_copy_us, 0.0),
        device_task=np.append(problem.device_task, 0), remote_task_us=0.0, task_message_us=0.0,
        floating_us=0.0, floating_message_us=0.0,
        feed_ops=(problem.feed_ops + op_offset).ravel(),
        fetch_tensors=(problem.fetch_tensors + tensor_offset).ravel())


def _padded(matrix: np.ndarray, value: float) -> np.ndarray:
    """A link matrix with the session's device added: no tensor ever crosses to it."""
    padded = np.full((len(matrix) + 1,) * 2, value)
    padded[:-1, :-1] = matrix
    return padded
