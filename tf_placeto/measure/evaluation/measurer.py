"""Measurers turn placements into results: really run, or simulated from a profile.

Both share one interface, so every placer and the learned policy can be pointed at either,
and a comparison is one loop. Real results that stand (ok, or out of memory) go to an
append-only log beside the profile: such a placement is never measured twice for the same
graph on the same runtime, and a killed run loses nothing already measured. A failure (a
worker that died, a timeout) is never kept: the placement is measured again next time.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import hashlib
import json
import math
import os
from typing import Mapping, Optional, Sequence

import numpy as np

from tf_placeto.devices import DeviceSet
from tf_placeto.errors import DeviceError
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.log import progress
from tf_placeto.measure.runtimes import step_stats
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.measure.costs.messages import task_messages
from tf_placeto.measure.evaluation.noise import median_interval
from tf_placeto.measure.runtimes.runner import FAILED, INFEASIBLE, OK, ModelRunner
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.measure.simulator import SimulationProblem, simulate
from tf_placeto.measure.simulator.stream import Stream
from tf_placeto.placement import Placement
from tf_placeto.records import append_record, read_records

RESULTS_FILE = "results.jsonl"
KEPT = (OK, INFEASIBLE)           # the results a log keeps: the others are measured again


@dataclasses.dataclass
class MeasureResult:
    key: str                          # identifies the placement (sha256 of its ops -> devices)
    status: str                       # "ok", "infeasible" (out of memory) or "failed"
    reason: str = ""
    step_time_s: float = math.nan     # median
    spread_s: float = math.nan        # interquartile range of the timed runs
    min_s: float = math.nan
    max_s: float = math.nan
    runs: int = 0                     # timed runs after warm-up
    peak_memory_bytes: dict = dataclasses.field(default_factory=dict)
    busy_s: dict = dataclasses.field(default_factory=dict)   # per device (simulated)
    simulated: bool = False
    label: str = ""
    # 0: one step at a time. K: `in_flight` steps at once, a stream (simulator.stream), and
    # the step figures are seconds per step once the stream is full: 1 / steps per second
    stream: int = 0
    # measured in turns with others (tf_placeto.measure.evaluation.interleaved): the median's interval,
    # the round-by-round ratio to the first placement with its interval, and the labels of the
    # placements it cannot be told apart from
    interval: dict = dataclasses.field(default_factory=dict)
    ratio_to_first: dict = dataclasses.field(default_factory=dict)
    indistinct_from: list = dataclasses.field(default_factory=list)
    schedule: object = None           # simulated schedule (a DataFrame), never stored
    trace: object = None              # the traced run's RunMetadata when kept, never stored

    @property
    def steps_per_s(self) -> Optional[float]:
        """Throughput of a stream that ran (1 / its seconds per step); None otherwise."""
        return 1.0 / self.step_time_s if self.stream and self.status == OK else None

    def to_json(self) -> dict:
        """The stored fields (the schedule and trace are not: large, and not JSON)."""
        return {field.name: copy.deepcopy(getattr(self, field.name))
                for field in dataclasses.fields(self) if field.name not in ("schedule", "trace")}

    def set_times(self, times_s) -> None:
        """The step figures of timed runs: median with its interval, spread, extremes."""
        times = np.asarray(times_s, dtype=float)
        q1, q3 = np.percentile(times, [25, 75])
        interval = median_interval(times)
        self.step_time_s, self.spread_s = interval.median, float(q3 - q1)
        self.min_s, self.max_s, self.runs = float(times.min()), float(times.max()), len(times)
        self.interval = interval.to_json()


def placement_key(placement: Optional[Mapping]) -> str:
    if not placement:
        return "as-written"
    text = json.dumps(sorted(placement.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def stored_key(graph: OpGraph, placement: Optional[Mapping]) -> str:
    """placement_key, for what is kept on disk beside a profile. Profiles ignore devices, so
    a placed copy of a graph shares its directory: the graph as written (None) is told apart
    by the devices written in it."""
    if placement:
        return placement_key(placement)
    written = {op.name: op.requested_device for op in graph.ops if op.requested_device}
    return placement_key(None) + (f"-{placement_key(written)}" if written else "")


class Measurer(abc.ABC):
    """evaluate(placements) -> one MeasureResult each; placements are validated first."""

    def __init__(self, graph: OpGraph, devices: DeviceSet):
        self.graph = graph
        self.devices = devices

    def evaluate(self, placements: Sequence[Optional[Mapping]],
                 labels: Optional[Sequence[str]] = None) -> list:
        labels = labels or [f"placement {i}" for i in range(len(placements))]
        results = []
        for placement, label in zip(placements, labels):
            full = Placement(placement).validate(self.graph, self.devices) if placement else None
            result = self._evaluate(full)
            result.label = label
            results.append(result)
        return results

    @abc.abstractmethod
    def _evaluate(self, placement: Optional[Placement]) -> MeasureResult:
        """Measure one validated placement (None: the graph as written)."""


class RealMeasurer(Measurer):
    """Runs each placement for real: warm-up, timed runs, one traced run for memory. (To
    compare placements with each other, tf_placeto.measure.evaluation.interleaved times them in turns.)"""

    def __init__(self, graph: OpGraph, runtime: Runtime, results_dir: Optional[str] = None,
                 repeats: int = 5, warmup: int = 1, timeout_s: float = 600.0,
                 trace_memory: bool = True):
        super().__init__(graph, DeviceSet.from_strings(runtime.device_names))
        self.runtime = runtime
        self.runner = ModelRunner(graph)
        self.repeats, self.warmup, self.timeout_s = repeats, warmup, timeout_s
        self.trace_memory = trace_memory
        self._bar = None                  # the progress bar of the evaluate() under way
        self.log_path = os.path.join(results_dir, RESULTS_FILE) if results_dir else None
        self.known = _read_log(self.log_path)

    @property
    def _runs_each(self) -> int:
        return self.warmup + self.repeats + int(self.trace_memory)

    def evaluate(self, placements, labels=None) -> list:
        """Measurer.evaluate, with a progress bar over the runs: placements x runs each."""
        with progress(total=len(placements) * self._runs_each, desc="measuring", unit="run",
                      leave=False) as self._bar:
            return super().evaluate(placements, labels)

    def _evaluate(self, placement):
        key = f"{stored_key(self.graph, placement)}-r{self.repeats}-w{self.warmup}"
        if key in self.known:
            self._bar.update(self._runs_each)
            return MeasureResult(**self.known[key])
        self.runtime.restart_dead_workers()
        runs = self.runner.run(self.runtime, placement, warmup=self.warmup,
                               repeats=self.repeats,
                               traced=int(self.trace_memory),
                               timeout_s=self.timeout_s, on_run=self._bar.update)
        result = MeasureResult(key=key, status=runs.status, reason=runs.reason)
        if runs.status == OK:
            result.set_times(runs.step_times_s)
            if runs.traces:
                result.peak_memory_bytes = step_stats.peak_memory_bytes(runs.traces[-1])
        if result.status in KEPT:
            self._remember(result)
        return result

    def _remember(self, result: MeasureResult) -> None:
        self.known[result.key] = stored = result.to_json()
        if self.log_path is not None:
            append_record(self.log_path, stored)


def _read_log(path: Optional[str]) -> dict:
    """Results measured before that stand ({key: fields}: ok or infeasible; a failure that
    an older version logged is measured again). Lines that are not results (torn by a
    killed run, damaged) are skipped, named in one line and dropped from the log
    (records.read_records)."""
    if path is None:
        return {}
    return {record["key"]: record for record in read_records(path, _a_result)
            if record["status"] in KEPT}


def _a_result(record: dict) -> bool:
    """Whether a line of the log is a MeasureResult as `_remember` writes one: its key a
    text, its status known, its figures of the right kinds, and an ok one's step finite."""
    result = MeasureResult(**record)
    return (isinstance(result.key, str) and result.status in (OK, INFEASIBLE, FAILED)
            and type(result.step_time_s) in (int, float) and type(result.runs) is int
            and (result.status != OK or 0 < result.step_time_s < math.inf)
            and all(isinstance(getattr(result, name), dict) for name in
                    ("peak_memory_bytes", "busy_s", "interval", "ratio_to_first"))
            and isinstance(result.indistinct_from, list))


def written_indices(graph: OpGraph, devices: DeviceSet) -> np.ndarray:
    """Device index of each op as the graph has it (unplaced, or placed on a partial or
    foreign device: the first)."""
    index = {name: i for i, name in enumerate(devices.names)}
    indices = np.zeros(len(graph.ops), dtype=np.int64)
    for op in graph.ops:
        if op.requested_device:
            try:
                indices[op.index] = index.get(devices.check(op.requested_device), 0)
            except DeviceError:
                pass
    return indices


def device_indices(graph: OpGraph, devices: DeviceSet, placement: Optional[Mapping],
                   written: np.ndarray) -> np.ndarray:
    """Device index of each op under `placement` ({op: device}); ops it leaves out stay
    where the graph has them (`written`: written_indices)."""
    indices = written.copy()
    index = {name: i for i, name in enumerate(devices.names)}
    for name, device in (placement or {}).items():
        indices[graph.index(name)] = index[device]
    return indices


def simulation_problem(graph: OpGraph, cost_model: CostModel, devices: DeviceSet,
                       memory_capacity: Optional[Mapping] = None,
                       calibrated: bool = True) -> SimulationProblem:
    """The op-level simulator's problem of `graph` on `devices` under a profile, calibrated
    against real runs where the profile has been (`calibrated=False`: the profile alone).
    Tasks are numbered in the order the devices name them: task 0, whose steps cost no
    RunGraph call, is the first device's, which on a runtime is the session's own."""
    names = devices.names
    types = list(dict.fromkeys(d.device_type for d in devices))
    latency, bandwidth, copy_share = cost_model.link_arrays(names)
    capacity = np.array([float((memory_capacity or {}).get(n, np.inf)) for n in names])
    tasks = list(dict.fromkeys(d.task_name for d in devices))
    problem = SimulationProblem.from_op_graph(
        graph, compute_us=cost_model.compute_us(graph, types), device_names=names,
        remote_extra_us=cost_model.remote_extra_us(graph, types),
        device_type_of=np.array([types.index(d.device_type) for d in devices]),
        link_latency_us=latency, link_bytes_per_us=bandwidth, link_copy_share=copy_share,
        memory_capacity=capacity,
        op_overhead_us=cost_model.op_overhead_us(types[0]),
        device_task=[tasks.index(d.task_name) for d in devices])
    calibration = cost_model.calibration if calibrated else None
    return problem if calibration is None else calibration.apply(
        problem, cost_model.executions(graph))


class SimulatedMeasurer(Measurer):
    """Predicts each placement with the event simulator, on an op-level problem: a
    PlacementProblem's `simulation`, or a profile's (`from_profile`)."""

    def __init__(self, graph: OpGraph, devices: DeviceSet, problem: SimulationProblem,
                 schedule: bool = False, stream: int = 0,
                 cost_model: Optional[CostModel] = None):
        """stream: K > 0 predicts K steps in flight (simulator.stream), without a schedule.
        cost_model: the profile `problem` was made from, whose calibration's cost of each
        message between tasks that TensorFlow sends beyond the simulator's transfers
        (calibration.py, messages.py) is added to a step's time (with steps in flight, to
        the session's work per step); the schedule does not show them."""
        super().__init__(graph, devices)
        self.problem = problem
        self.schedule = schedule
        self.stream = Stream(problem, stream) if stream else None
        self._written = written_indices(graph, devices)
        calibration = cost_model.calibration if cost_model is not None else None
        self.message_us = calibration.message_us if calibration is not None else 0.0
        self._messages = task_messages(graph, devices.names, cost_model) \
            if self.message_us else None

    @classmethod
    def from_profile(cls, graph: OpGraph, cost_model: CostModel, devices: DeviceSet,
                     memory_capacity: Optional[Mapping] = None, schedule: bool = False,
                     calibrated: bool = True, stream: int = 0) -> "SimulatedMeasurer":
        """See simulation_problem."""
        return cls(graph, devices, simulation_problem(graph, cost_model, devices,
                                                      memory_capacity, calibrated), schedule,
                   stream, cost_model if calibrated else None)

    def device_indices(self, placement: Optional[Mapping]) -> np.ndarray:
        return device_indices(self.graph, self.devices, placement, self._written)

    def _evaluate(self, placement):
        if self.stream is not None:
            return self._evaluate_stream(placement)
        indices = self.device_indices(placement)
        sim = simulate(self.problem, indices, schedule=self.schedule)
        names = self.devices.names
        status = OK if sim.feasible else INFEASIBLE
        reason = "" if sim.feasible else (
            f"exceeds device memory by {sim.memory_excess_bytes / 2**20:.1f} MiB in all")
        messages_us = self.message_us * self._messages.extra(
            [indices], [sim.task_transfers])[0] if self._messages is not None else 0.0
        step = (sim.step_time_us + messages_us) / 1e6
        return MeasureResult(
            key=placement_key(placement), status=status, reason=reason, step_time_s=step,
            spread_s=0.0, min_s=step, max_s=step, runs=0, simulated=True,
            peak_memory_bytes={n: int(b) for n, b in zip(names, sim.peak_memory_bytes)},
            busy_s={n: float(b) / 1e6 for n, b in zip(names, sim.busy_us)},
            schedule=sim.schedule)

    def _evaluate_stream(self, placement):
        indices = self.device_indices(placement)
        messages = None
        if self._messages is not None:      # TensorFlow's messages, as one step counts them
            transfers = simulate(self.problem, indices).task_transfers
            messages = int(self._messages.sent([indices], [transfers])[0])
        flow = self.stream.simulate(indices, messages)
        per_step = 1.0 / flow.steps_per_s
        return MeasureResult(
            key=placement_key(placement), status=OK if flow.feasible else INFEASIBLE,
            reason="" if flow.feasible else "exceeds device memory with the steps in flight",
            step_time_s=per_step, spread_s=0.0, min_s=per_step, max_s=per_step, runs=0,
            simulated=True, stream=self.stream.in_flight,
            peak_memory_bytes={n: int(b) for n, b in zip(self.devices.names,
                                                         flow.peak_memory_bytes)})
