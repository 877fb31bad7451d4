"""Event-driven step-time simulator: the cheap stand-in for a real run that placers learn from.

A real run of a placed graph takes seconds; a placer needs thousands of trials. The simulator
replays one training step from per-op costs, tensor sizes and link speeds, in about a
millisecond, and reports the step time, each device's busy time and its peak memory.

The model is Placeto's (../shared/REFERENCE.md, "Their simulator") with its gaps closed:
- each device runs one op at a time; ready ops wait FIFO by the time they became ready (ties by
  op index); an op is ready when every input tensor is on its device and every control
  predecessor has finished; `op_overhead_us` is part of each op's busy time, so its outputs
  appear after it;
- a tensor consumed on another device is sent once per destination device; each ordered device
  pair is a channel carrying one transfer at a time, FIFO by the time the tensor became
  available (ties by tensor); a transfer takes latency + bytes / bandwidth;
- where the devices' own processors copy the bytes (CPU workers talking gRPC: the sender
  serializes, the receiver deserializes), a share s of bytes / bandwidth is a copy task on the
  sender's queue before the wire and another on the receiver's queue after it, and the wire
  takes latency + (1 - 2s) bytes / bandwidth: alone, a transfer still takes its measured time,
  but it competes with the ops of both devices, ahead of them: a ready copy runs before the
  device's ready ops (engine.COPIES_FIRST_US says why). s = 0 (a DMA engine): the wire does
  it all; each copy task also takes a fixed `link_copy_us` per tensor (processor time at the
  sender and at the receiver);
- each task (process) other than task 0, whose master runs the session, that runs part of
  the step adds `remote_task_us` to it: a RunGraph call and its partition's executor; each
  transfer between tasks adds `task_message_us`: a message's rendezvous and RecvTensor call
  beyond its wire time (on one-core workers, processor time the step waits for however
  it overlaps);
- an op with an input from another device takes `remote_extra_us` more: some kernels are
  slower when their inputs travel (oneDNN's MaxPoolGrad loses the workspace its forward op
  left on its own device and recomputes it);
- an op takes `remote_input_us` more for each of its inputs that travels: a loop op (its body
  runs on its device, its loop state where each input was made) exchanges messages for every
  such input in every iteration;
- the session feeds and fetches on device 0's task (TensorFlow's feed and fetch nodes run on
  the client's device): a feed op placed in another task first receives its tensor from
  device 0, and a fetched tensor made in another task is sent to device 0 before the step
  ends;
- memory: the persistent bytes (weights) of the ops on a device count for the whole step; an
  output is allocated at its op's start and freed when its last local consumer has finished and
  its last outgoing transfer has completed (no consumer: at its op's end); a received copy is
  allocated at its transfer's start and freed when its last consumer on that device ends;
- devices may be of different types, with a cost column per type;
- the step ends when the last op or transfer ends, plus `remote_task_us` per remote task
  and `task_message_us` per transfer between tasks (in the schedule as rows of kind "task"
  after its last op or transfer).

What splitting really costs on a runtime (those parameters, and op times scaled) is fitted to
real runs of placements: tf_placeto.measure.costs.calibration and fitting.

Events are handled in time order. All events at one instant are handled (finishing ops and
transfers, freeing memory, waking consumers) before any device or channel starts new work at
that instant, so frees precede allocations at equal times and the FIFO order sees every op that
became ready then. Work that takes zero time still passes through the queues: it ends at the
same instant, in a later round, so what it wakes queues behind what was started in the round
before (causal order).

arrays.py turns a graph into flat arrays (CSR adjacency) once (`SimulationProblem`);
transfers.py plans what a placement sends and engine.py is the compiled event loop (numba);
replay.py runs both for one placement (`simulate`) and schedule.py tabulates what it did;
bounds.py gives the step time no placement can beat.
"""

from tf_placeto.measure.simulator.arrays import SimulationProblem, link_matrix, variable_bytes
from tf_placeto.measure.simulator.bounds import lower_bound_us
from tf_placeto.measure.simulator.replay import SimulationResult, feasible, simulate

__all__ = ["SimulationProblem", "SimulationResult", "feasible", "link_matrix", "lower_bound_us",
           "simulate", "variable_bytes"]
