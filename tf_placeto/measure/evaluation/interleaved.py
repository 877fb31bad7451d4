"""Real step times of several placements, timed in turns so that they can be told apart.

Every placement is loaded in a session of its own, and all stay open; after warm-up each is
timed once per round, in an order rotated every round (tf_placeto.measure.evaluation.noise), so drift on
a shared machine hits them all alike. Each result carries its median's interval, its ratio to
the first placement round by round (the baseline: the graph as written, where a surface asks
"is it faster than before?"), and the placements it cannot be told apart from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import time
from typing import Mapping, Optional, Sequence, Union

from tf_placeto.devices import DeviceSet
from tf_placeto.errors import InputError
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.log import progress
from tf_placeto.measure.runtimes import step_stats
from tf_placeto.measure.runtimes.cluster import WorkerDied
from tf_placeto.measure.evaluation.journal import RoundJournal
from tf_placeto.measure.evaluation.measurer import MeasureResult, placement_key, stored_key
from tf_placeto.measure.evaluation.noise import MAX_ROUNDS, interleave, ratio_interval
from tf_placeto.measure.runtimes.runner import OK, ModelRunner, failure
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.placement import Placement

log = logging.getLogger(__name__)

SET_ROUNDS = 2     # the fewest rounds a set of new sessions runs where there are several


@dataclasses.dataclass(frozen=True)
class Timing:
    """How placements are timed for real: measure_interleaved's rules, by its keywords.

    repeats: rounds, or "auto" (until the intervals are narrow or `budget_s` ends). warmup:
    untimed steps first. timeout_s: the longest one step may take. stream: K > 0 times K steps
    in flight each round (seconds per step once the stream is full). sessions: how many sets
    of new sessions each placement is loaded into, their rounds pooled.
    """

    repeats: Union[int, str] = "auto"
    warmup: int = 1
    timeout_s: float = 600.0
    budget_s: float = 60.0
    stream: int = 0
    sessions: int = 1

    def __post_init__(self):
        if self.stream < 0:
            raise InputError(f"stream must be a count of steps in flight, not {self.stream}")
        if self.sessions < 1:
            raise InputError(f"sessions must be a count of at least 1, not {self.sessions}")

    def keywords(self) -> dict:
        """These rules as measure_interleaved's keyword arguments."""
        return dataclasses.asdict(self)


def measure_interleaved(graph: OpGraph, runtime: Runtime,
                        placements: Sequence[Optional[Mapping]],
                        labels: Optional[Sequence[str]] = None, *,
                        repeats: Union[int, str] = "auto", warmup: int = 1,
                        timeout_s: float = 600.0, budget_s: float = 60.0,
                        max_rounds: int = MAX_ROUNDS, min_rounds: int = 2, trace: bool = True,
                        journal_dir: Optional[str] = None, stream: int = 0,
                        sessions: int = 1) -> list:
    """One MeasureResult per placement (None: the graph as written), timed in turns.

    repeats: rounds, or "auto" (see noise.interleave: until the intervals are narrow,
    `budget_s` ends once `min_rounds` have run, or `max_rounds` have run). With `trace`,
    each placement then runs one traced step: its peak memory per device, and the step
    itself as `result.trace`. A
    placement that cannot load, or whose step fails, gets its status and TensorFlow's reason,
    and the others go on; so they do when a worker dies (see _Sessions). With `journal_dir`,
    every round and failure is kept there as it comes (tf_placeto.measure.evaluation.journal): the
    same measurement cut short before (its timeout too) resumes from its rounds and its
    placements out of memory, and measures again a placement that failed otherwise (a
    timeout, a worker that died). stream: K > 0 times, each round, a
    stream of steps K at a time (StepSession.stream_step) instead of one step: the figures
    are seconds per step once the stream is full.
    sessions: how many times every placement is loaded into a new session, one set of
    sessions after the other, each set timed in turns; the rounds of all the sets are
    pooled. A count of `repeats` is shared out among the sets; with "auto" the first set
    runs by its rules with a `sessions`-th of `budget_s` and of `max_rounds` (at least
    SET_ROUNDS rounds, and its share of `min_rounds`), and every later set runs as many
    rounds as it did, so each set weighs alike. One session of a split graph can run slower
    than another of the same graph for as long as it is open (docs/results/sessions.md, "One
    session is one draw"), so the
    rounds of one set are one draw of that; several sets average it out.
    """
    devices = DeviceSet.from_strings(runtime.device_names)
    labels = list(labels or [f"placement {i}" for i in range(len(placements))])
    full = [Placement(p).validate(graph, devices) if p else None for p in placements]
    results = [MeasureResult(key=placement_key(p), status=OK, label=label, stream=stream)
               for p, label in zip(full, labels)]
    journal = None if journal_dir is None else RoundJournal(
        journal_dir, [stored_key(graph, p) for p in full],
        {"devices": runtime.device_names, "warmup": warmup, "repeats": repeats,
         "max_rounds": max_rounds, "timeout_s": timeout_s,
         **({"stream": stream} if stream else {}),
         **({"sessions": sessions} if sessions > 1 else {})})
    kept_rounds, kept_failures, kept_s = journal.restore() if journal else ([], {}, 0.0)
    if kept_rounds or kept_failures:
        log.info(f"resuming a measurement in turns that was cut short: {len(kept_rounds)} "
                 f"rounds and {len(kept_failures)} placements out of memory kept ({journal.path})")
    for index, (status, reason) in kept_failures.items():
        results[index].status, results[index].reason = status, reason
    runner = ModelRunner(graph)
    kept = {index: [r[index] for r in kept_rounds if r[index] is not None]
            for index in range(len(full))}           # a journal's rounds, resumed
    pooled: dict = {}                  # index -> its times of every set so far
    started = time.perf_counter() - kept_s
    per_set = None                     # rounds of the first set, which every later set runs
    with progress(desc="measuring in turns", unit="round", leave=False,
                  initial=len(kept_rounds)) as bar:
        for set_index in range(sessions):
            with _Sessions(runner, runtime, full, warmup, timeout_s, stream) as opened:
                running = _open_all(opened, results, timeout_s, journal)
                earlier = _paired(kept if set_index == 0 else pooled, running)
                done_before = len(earlier[0]) if earlier else 0
                if repeats != "auto":  # a count: each set its share of it
                    set_repeats = set_max_rounds = set_min_rounds = math.ceil(
                        int(repeats) * (set_index + 1) / sessions)
                elif per_set is None:  # the first set: the measurement's own rule, its share
                    set_repeats, set_max_rounds = repeats, math.ceil(max_rounds / sessions)
                    set_min_rounds = max(SET_ROUNDS if sessions > 1 else 0,
                                         math.ceil(min_rounds / sessions))
                else:
                    set_repeats = set_max_rounds = set_min_rounds = done_before + per_set
                series = interleave(
                    [opened.stepper(index) for index in running], set_repeats,
                    budget_s / sessions,
                    on_round=_after_round(bar, running, results, timeout_s, journal, started),
                    max_rounds=set_max_rounds, earlier=earlier,
                    earlier_s=kept_s if set_index == 0 else 0.0, min_rounds=set_min_rounds)
                if per_set is None:
                    per_set = max(SET_ROUNDS, min((len(runs.times_s) for runs in series
                                                   if runs.error is None), default=0)
                                  - done_before)
                for index, runs in zip(running, series):
                    _end_series(opened, results, index, runs, timeout_s, journal)
                    pooled[index] = runs.times_s
                    if set_index == sessions - 1 and trace and results[index].status == OK:
                        _trace(opened, results[index], index, timeout_s)
    for index, times in pooled.items():
        if times:
            results[index].set_times(times)
    _compare_in_pairs(results, pooled)
    if journal is not None:
        journal.finish()
    return results


def _open_all(opened: "_Sessions", results: list, timeout_s: float, journal) -> list:
    """Open a session for each placement not failed yet; the indices that opened."""
    for index, result in enumerate(results):
        if result.status == OK:
            error = opened.open(index)
            if error is not None:
                _fail(results, index, error, timeout_s, journal)
    return list(opened.open_indices)


def _after_round(bar, running: list, results: list, timeout_s: float, journal, started: float):
    """interleave's on_round: the progress bar, a failed step's placement marked, the round
    kept in the journal."""
    import tensorflow as tf  # heavy: loaded on the first real run

    def after_round(rounds: int, series: list) -> None:
        bar.update(1)
        for index, runs in zip(running, series):
            if isinstance(runs.error, (tf.errors.OpError, WorkerDied)) \
                    and results[index].status == OK:
                _fail(results, index, runs.error, timeout_s, journal)
        if journal is not None:
            times = {index: runs.times_s[rounds - 1] for index, runs in zip(running, series)
                     if len(runs.times_s) >= rounds}
            journal.record_round([times.get(index) for index in range(len(results))],
                                 time.perf_counter() - started)
    return after_round


def _end_series(opened: "_Sessions", results: list, index: int, runs, timeout_s: float,
                journal) -> None:
    """After a set's rounds: an error that is not TensorFlow's goes on up; a session that
    could not be opened again after a worker died marks its placement failed."""
    import tensorflow as tf  # heavy: loaded on the first real run

    if runs.error is not None and not isinstance(runs.error, (tf.errors.OpError, WorkerDied)):
        raise runs.error
    if results[index].status == OK and index in opened.errors:    # not opened again
        _fail(results, index, opened.errors[index], timeout_s, journal)


def _trace(opened: "_Sessions", result: MeasureResult, index: int, timeout_s: float) -> None:
    """One traced step of `index`: the step as `result.trace` and its peak memory."""
    import tensorflow as tf  # heavy: loaded on the first real run

    try:
        result.trace = opened.traced_step(index)
    except (tf.errors.OpError, WorkerDied) as error:
        result.status, result.reason = failure(error, timeout_s)
        return
    result.peak_memory_bytes = step_stats.peak_memory_bytes(result.trace)


def _fail(results: list, index: int, error, timeout_s: float, journal) -> None:
    """Mark `index` failed by `error`, in its result and in the journal (if any)."""
    result = results[index]
    result.status, result.reason = failure(error, timeout_s)
    if journal is not None:
        journal.record_failure(index, result.status, result.reason)


def _paired(times: dict, running: list) -> Optional[list]:
    """interleave's `earlier`: each running placement's times so far ({index: times}), cut to
    the rounds all of them were timed in, so that they still pair up round by round; None
    when there are none."""
    runs = [times.get(index, []) for index in running]
    common = min((len(t) for t in runs), default=0)
    return [t[:common] for t in runs] if common else None


class _Sessions:
    """One open StepSession per placement that loads, and what to do when a worker dies.

    A worker that dies during a placement's step (or while it loads, or during its traced
    step) ends that placement (WorkerDied says which task and how). A local cluster then
    restarts the worker; every other placement's session, which lost its state on that task,
    is opened again and warmed up, and the rounds go on.
    """

    def __init__(self, runner: ModelRunner, runtime: Runtime, placements: list, warmup: int,
                 timeout_s: float, stream: int = 0):
        self.runner, self.runtime, self.placements = runner, runtime, placements
        self.warmup, self.timeout_s, self.stream = warmup, timeout_s, stream
        self.stacks: dict = {}          # index -> ExitStack holding its open session
        self.steps: dict = {}           # index -> StepSession
        self.errors: dict = {}          # index -> what ended a session that was open

    @property
    def open_indices(self) -> list:
        return sorted(self.steps)

    def open(self, index: int):
        """Open and warm up `index`'s session; the error that prevented it, or None (a worker
        that died meanwhile is restarted first, see _recover)."""
        error = self._open(index)
        if isinstance(error, WorkerDied):
            self._recover()
        return error

    def stepper(self, index: int):
        """A step callable for `index` (see _guarded): one step, or one stream of them."""
        if self.stream:
            return lambda: self._guarded(index,
                                         lambda: self.steps[index].stream_step(self.stream))
        return lambda: self._guarded(index, lambda: self.steps[index].step())

    def traced_step(self, index: int):
        return self._guarded(index, lambda: self.steps[index].traced_step())

    def _guarded(self, index: int, call):
        """call() on `index`'s open session; when its worker dies, `index` is closed and the
        others recovered before WorkerDied goes on."""
        if index not in self.steps:
            raise self.errors[index]
        try:
            return call()
        except WorkerDied:
            self._close(index)
            self._recover()
            raise

    def _open(self, index: int):
        import tensorflow as tf  # heavy: loaded on the first real run

        self._close(index)
        stack = contextlib.ExitStack()
        try:
            session = stack.enter_context(self.runner.session(
                self.runtime, self.placements[index], self.timeout_s))
            for _ in range(self.warmup):
                session.step()
        except (tf.errors.OpError, WorkerDied) as error:
            stack.close()
            return error
        except BaseException:
            stack.close()               # never left for the garbage collector to close
            raise
        self.stacks[index], self.steps[index] = stack, session
        return None

    def _close(self, index: int) -> None:
        self.steps.pop(index, None)
        stack = self.stacks.pop(index, None)
        if stack is not None:
            stack.close()

    def _recover(self) -> None:
        if not self.runtime.restart_dead_workers():
            return                      # servers someone else runs: the others go on as is
        for other in self.open_indices:
            error = self._open(other)
            if error is not None:
                self.errors[other] = error

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for index in list(self.stacks):
            self._close(index)


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
