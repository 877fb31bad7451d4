"""Real step times of several placements, timed in turns so that they can be told apart.

Every placement is loaded in a session of its own, and all stay open; after warm-up each is
timed once per round, in an order rotated every round (tf_placeto.measure.noise), so drift on
a shared machine hits them all alike. Each result carries its median's interval, its ratio to
the first placement round by round (the baseline: the graph as written, where a surface asks
"is it faster than before?"), and the placements it cannot be told apart from.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Mapping, Optional, Sequence, Union

from tf_placeto.devices import DeviceSet
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.log import progress
from tf_placeto.measure import step_stats
from tf_placeto.measure.measurer import MeasureResult, placement_key
from tf_placeto.measure.noise import MAX_ROUNDS, interleave, ratio_interval
from tf_placeto.measure.runner import OK, ModelRunner, failure
from tf_placeto.measure.runtime import Runtime
from tf_placeto.placement import Placement


def measure_interleaved(graph: OpGraph, runtime: Runtime,
                        placements: Sequence[Optional[Mapping]],
                        labels: Optional[Sequence[str]] = None, *,
                        repeats: Union[int, str] = "auto", warmup: int = 1,
                        timeout_s: float = 600.0, budget_s: float = 60.0,
                        max_rounds: int = MAX_ROUNDS, trace: bool = True) -> list:
    """One MeasureResult per placement (None: the graph as written), timed in turns.

    repeats: rounds, or "auto" (see noise.interleave: until the intervals are narrow,
    `budget_s` ends or `max_rounds` have run). With `trace`, each placement then runs one
    traced step: its peak memory per device, and the step itself as `result.trace`. A placement that cannot load, or whose
    step fails, gets its status and TensorFlow's reason, and the others go on.
    """
    import tensorflow as tf  # heavy: loaded on the first real run

    devices = DeviceSet.from_strings(runtime.device_names)
    labels = list(labels or [f"placement {i}" for i in range(len(placements))])
    full = [Placement(p).validate(graph, devices) if p else None for p in placements]
    results = [MeasureResult(key=placement_key(p), status=OK, label=label)
               for p, label in zip(full, labels)]
    runner = ModelRunner(graph)
    with contextlib.ExitStack() as sessions:
        running = {}                                  # result index -> its StepSession
        for index, placement in enumerate(full):
            try:
                session = sessions.enter_context(runner.session(runtime, placement, timeout_s))
                for _ in range(warmup):
                    session.step()
            except tf.errors.OpError as exc:
                results[index].status, results[index].reason = failure(exc, timeout_s)
                continue
            running[index] = session
        with progress(desc="measuring in turns", unit="round", leave=False) as bar:
            series = interleave([session.step for session in running.values()], repeats,
                                budget_s,
                                on_round=lambda rounds: bar.update(1), max_rounds=max_rounds)
        for (index, session), runs in zip(running.items(), series):
            result = results[index]
            if runs.error is not None:
                if not isinstance(runs.error, tf.errors.OpError):
                    raise runs.error
                result.status, result.reason = failure(runs.error, timeout_s)
            if runs.times_s:
                result.set_times(runs.times_s)
            if result.status == OK and trace:
                result.trace = session.traced_step()
                result.peak_memory_bytes = step_stats.peak_memory_bytes(result.trace)
    _compare_in_pairs(results, {index: runs.times_s for index, runs in zip(running, series)})
    return results


def _compare_in_pairs(results: list, times: dict) -> None:
    """Each OK result's ratio to the first, and which others it cannot be told apart from
    (their round-by-round ratio's interval holds 1)."""
    ok = [i for i in times if results[i].status == OK]
    if ok and ok[0] == 0:
        for index in ok:
            results[index].ratio_to_first = ratio_interval(times[index], times[0]).to_json()
    for a, b in itertools.combinations(ok, 2):
        if ratio_interval(times[a], times[b]).contains(1.0):
            results[a].indistinct_from.append(results[b].label)
            results[b].indistinct_from.append(results[a].label)
