"""What splitting a step costs on a runtime, beyond the per-op profile: the simulator's
calibration, fitted to real runs (tf_placeto.measure.profiling.fitting) and stored with the profile.

The profile times each op alone on one device and a tensor bouncing between two devices.
A placed step on TensorFlow's distributed runtime costs more than that, in ways the profile
cannot see, so the simulator takes these parameters, each a mechanism of the runtime:
- `compute_scale`: real op times against traced ones (tracing slows kernels; a shared
  machine's speed drifts between the profile and later runs);
- `remote_task_us`: per step, each task other than the session's own (task 0, whose master
  runs the step) that runs part of it: a RunGraph call, its partition's executor started and
  waited for, feeds and fetches relayed;
- `copy_us`: per tensor that crosses devices, processor time at its sender and again at its
  receiver, competing with their ops (gRPC's serialization on one-core workers);
- `latency_us`, `bytes_per_us`, `copy_share`: the wire, and the part of bytes / bandwidth that
  each end's processor spends copying;
- `iteration_us`: an op that runs k times per step (a loop) pays k times this for each of its
  inputs made on another device: TensorFlow keeps each input's loop state (Enter, Merge,
  Switch, NextIteration) beside the op that made it and runs the body where the loop op is,
  so every iteration sends each such input across and back;
- `message_us`: per step, each message between tasks (the rendezvous, the RecvTensor call):
  the simulator's `task_message_us` per transfer between tasks, so the placers' searches pay
  it; where TensorFlow's own count is made (the measurer's evaluation and the fit: a Grappler
  run per placement, on the placed graph, tf_placeto.measure.costs.messages), the messages that
  its rewritten graph sends beyond the simulator's transfers pay it too (an inlined call's
  control edges, grouped control edges, a loop's messages and its condition in every
  iteration; fewer where Grappler drops a crossing identity). Every message costs the same,
  whichever counted it: fitted so, the simulator ranks real placements more steadily than
  when only the count's surplus paid it (version 4; docs/results/simulator.md, "One price per
  message").
- `floating_us`, `floating_message_us`: streams only (simulator.stream): per step, work
  that runs on whichever device's processor is free (the client's calls, the runtime's
  threads), and more per message between tasks. One step at a time does not show it, so only
  logged real streams fit it (regression.py).
None for a link parameter keeps the profile's measurement.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import math
import os
from typing import Optional

import numpy as np

from tf_placeto.errors import first_line
from tf_placeto.files import write_atomically
from tf_placeto.measure.simulator import SimulationProblem

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
# a calibration of another version is refitted from the logged runs (version 2: message_us;
# 3 and 4: a loop's messages counted once per iteration, its condition once per task; 5:
# message_us paid by the simulator's transfers between tasks too; 6: a device runs its ready
# copies before its ready ops, simulator.engine.COPIES_FIRST_US; 7: the floating work fitted
# on 16x more streams, fitting.STREAM_OPS_PER_FIT)
CALIBRATION_VERSION = 7


@dataclasses.dataclass(frozen=True)
class Calibration:
    compute_scale: float = 1.0
    remote_task_us: float = 0.0
    copy_us: float = 0.0
    iteration_us: float = 0.0
    message_us: float = 0.0
    floating_us: float = 0.0
    floating_message_us: float = 0.0
    latency_us: Optional[float] = None
    bytes_per_us: Optional[float] = None
    copy_share: Optional[float] = None
    observations: int = 0          # real runs logged when it was fitted (the latest fitted on)
    quality: dict = dataclasses.field(default_factory=dict)   # held-out figures (regression.py)
    version: int = CALIBRATION_VERSION

    def apply(self, problem: SimulationProblem, executions: np.ndarray) -> SimulationProblem:
        """A copy of `problem` (arrays shared where unchanged) with these costs.

        executions: (n_ops,) how many times each op runs in one step (the profile's count).
        """
        calibrated = copy.copy(problem)
        calibrated.compute_us = problem.compute_us * self.compute_scale
        calibrated.op_overhead_us = problem.op_overhead_us * self.compute_scale
        loops = np.where(np.asarray(executions) > 1, executions, 0.0)
        calibrated.remote_extra_us = problem.remote_extra_us * self.compute_scale
        calibrated.remote_input_us = problem.remote_input_us + loops * self.iteration_us
        off = ~np.eye(problem.n_devices, dtype=bool)
        for name, value in (("link_latency_us", self.latency_us),
                            ("link_bytes_per_us", self.bytes_per_us),
                            ("link_copy_share", self.copy_share)):
            if value is not None:
                matrix = getattr(problem, name).copy()
                matrix[off] = value
                setattr(calibrated, name, matrix)
        calibrated.link_copy_us = np.where(off, self.copy_us, 0.0)
        calibrated.remote_task_us = self.remote_task_us
        calibrated.task_message_us = self.message_us
        calibrated.floating_us = self.floating_us
        calibrated.floating_message_us = self.floating_message_us
        return calibrated

    def describe(self) -> str:
        parts = [f"op times x{self.compute_scale:.2f}",
                 f"{self.remote_task_us / 1000:.2f} ms per step per remote task",
                 f"{self.copy_us:.0f} us at each end per crossing tensor"]
        if self.latency_us is not None:
            parts.append(f"link {self.latency_us:.0f} us + bytes / {self.bytes_per_us:.0f} B/us, "
                         f"copy share {self.copy_share:.2f}")
        if self.iteration_us:
            parts.append(f"{self.iteration_us:.0f} us per loop iteration across tasks")
        if self.message_us:
            parts.append(f"{self.message_us:.0f} us per message between tasks")
        if self.floating_us or self.floating_message_us:
            parts.append(f"streams: {self.floating_us / 1000:.2f} ms per step + "
                         f"{self.floating_message_us:.0f} us per message on a free processor")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def save(self, directory: str) -> None:
        write_atomically(os.path.join(directory, CALIBRATION_FILE),
                         lambda file: json.dump(self.to_json(), file, indent=1, sort_keys=True),
                         private=True)

    @classmethod
    def load(cls, directory: str) -> Optional["Calibration"]:
        """The calibration stored in `directory`; None if there is none or it is of another
        version (the simulator then runs uncalibrated until the next fit, which a cached
        profile makes from its logged runs as it loads). A damaged one (it does not parse,
        holds other fields, or a figure that is not a number) is named in one line and
        removed, to be refitted so."""
        path = os.path.join(directory, CALIBRATION_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                fields = json.load(f)
            if fields.get("version") != CALIBRATION_VERSION:
                return None
            return cls(**fields).checked()
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, AttributeError) as error:
            log.warning(f"the calibration at {path} is damaged ({first_line(error)}); "
                        "fitting it again to the logged runs")
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            return None

    def checked(self) -> "Calibration":
        """This calibration, or ValueError where a figure is not a number: NaN, or infinite
        other than the bandwidth (a link faster than the profile could tell)."""
        for name, value in dataclasses.asdict(self).items():
            if name == "quality" or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    math.isnan(value) or (math.isinf(value) and name != "bytes_per_us"):
                raise ValueError(f"{name} is {value!r}, not a number")
        if not isinstance(self.quality, dict):
            raise ValueError("its quality is not an object")
        return self
