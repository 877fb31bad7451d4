"""Run a SavedModel's signature under a placement, for real, and time the steps.

A placement is written into a staged copy of the SavedModel whose variables directory is a
link to the source's, so trying a placement costs a proto write, not a copy of the weights.
Each placement gets a fresh session with isolated state: variables live where the placement
put them and nothing is left behind on a cluster's workers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import os
import re
import shutil
import tempfile
import time
from typing import Callable, Optional

import numpy as np

from tf_placeto.devices import DeviceSet
from tf_placeto.errors import first_line
from tf_placeto.graph.importer import import_graph_def
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import SAVED_MODEL_FILE, load_source, signature_inputs
from tf_placeto.measure.runtimes import step_stats
from tf_placeto.measure.runtimes.cluster import CallThread, WorkerDied
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.measure.simulator.stream import steady_seconds_per_step, stream_steps
from tf_placeto.rewrite import placed_proto

# Outcomes of a run, as results report them.
OK, INFEASIBLE, FAILED = "ok", "infeasible", "failed"
# TensorFlow's "OOM when allocating tensor with shape[...] ... on DEVICE by allocator NAME"
_OOM_DEVICE = re.compile(r" on (/\S+) by allocator ")


@dataclasses.dataclass
class StepRuns:
    status: str
    reason: str = ""
    step_times_s: list = dataclasses.field(default_factory=list)
    outputs: dict = dataclasses.field(default_factory=dict)
    traces: list = dataclasses.field(default_factory=list)   # RunMetadata of traced runs

    @property
    def node_devices(self) -> dict:
        """{traced node: device it ran on}, from the last traced run's step stats."""
        return step_stats.node_devices(self.traces[-1])


def example_feeds(source, seed: int = 0) -> dict:
    """Deterministic inputs for a signature: N(0,1) floats; zeros for numbers and bools,
    empty strings for strings. Zeros are valid class labels and embedding ids."""
    import tensorflow as tf  # heavy: loaded on the first real run

    rng = np.random.default_rng(seed)
    feeds = {}
    for key, (tensor_name, dtype_enum, shape_proto) in sorted(signature_inputs(source).items()):
        dtype = tf.dtypes.as_dtype(dtype_enum)
        shape = [d.size if d.size >= 0 else 1 for d in shape_proto.dim]
        if dtype.is_floating:
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        elif dtype == tf.string:
            value = np.full(shape, b"", dtype=object)
        else:
            value = np.zeros(shape, dtype=dtype.as_numpy_dtype)
        feeds[key] = (tensor_name, value)
    return feeds


class ModelRunner:
    """Runs one SavedModel (its OpGraph's source) under any number of placements."""

    def __init__(self, graph: OpGraph, seed: int = 0, inline_every_call: bool = False):
        """inline_every_call: run every placed `api_implements` body inlined, each op under
        the name the graph gives it (rewrite.placed_proto): profiling traces them so."""
        source = graph.source
        if source is None or source.kind != "saved_model":
            raise ValueError("real runs need a SavedModel source (examples:NAME is one)")
        self.graph = graph
        self.source = source
        self.feeds = example_feeds(source, seed)
        outputs = source.meta_graph.signature_def[source.signature].outputs
        self.fetches = {key: info.name for key, info in outputs.items()}
        self.tags = list(source.meta_graph.meta_info_def.tags)
        self.inline_every_call = inline_every_call

    def run(self, runtime: Runtime, placement: Optional[dict] = None, warmup: int = 1,
            repeats: int = 5, traced: int = 0, timeout_s: float = 600.0,
            on_run: Callable[[], object] = lambda: None) -> StepRuns:
        """Warm-up runs, then `repeats` timed runs, then `traced` fully traced runs; `on_run()`
        after each (a progress bar's update).

        A placement that runs out of memory is INFEASIBLE; one that fails or passes the
        timeout is FAILED; either way the reason says what TensorFlow said.
        """
        import tensorflow as tf  # heavy: loaded on the first real run

        result = StepRuns(OK)
        try:
            with self.session(runtime, placement, timeout_s) as steps:
                for _ in range(warmup):
                    steps.step()
                    on_run()
                for _ in range(repeats):
                    result.step_times_s.append(steps.step())
                    on_run()
                for _ in range(traced):
                    result.traces.append(steps.traced_step())
                    on_run()
                result.outputs = steps.outputs
        except (tf.errors.OpError, WorkerDied) as exc:
            return StepRuns(*failure(exc, timeout_s))
        return result

    @contextlib.contextmanager
    def session(self, runtime: Runtime, placement: Optional[dict] = None,
                timeout_s: float = 600.0):
        """The placed graph loaded in its own session, as a StepSession; closed (its state
        released on every worker) when the block ends. TensorFlow's errors and WorkerDied
        pass through: `failure(exc)` says what they mean."""
        import tensorflow as tf  # heavy: loaded on the first real run

        _background_closer()  # started here, not where a session is closed (see _close)
        graph = tf.Graph()    # not made the default: sessions may close in any order
        with self._staged(placement) as export_dir:
            session = tf.compat.v1.Session(runtime.target, graph=graph,
                                           config=runtime.session_config(timeout_s))

            def load():
                with graph.as_default():       # the default graph is per thread
                    tf.compat.v1.saved_model.loader.load(session, self.tags, export_dir)

            try:
                runtime.watched(load)
                yield StepSession(session, self.fetches,
                                  {name: value for name, value in self.feeds.values()},
                                  timeout_s, runtime.watched)
            finally:
                _close(session, runtime)

    @contextlib.contextmanager
    def _staged(self, placement):
        """A SavedModel directory holding the placed graph, sharing the source's weights."""
        proto = self.source.proto if not placement else placed_proto(
            self.source, self.graph, placement, inline_every_call=self.inline_every_call)
        staging = tempfile.mkdtemp(prefix="tf-placeto-run-")
        try:
            with open(os.path.join(staging, SAVED_MODEL_FILE), "wb") as f:
                f.write(proto.SerializeToString())
            for name in ("variables", "assets"):
                if os.path.exists(os.path.join(self.source.path, name)):
                    os.symlink(os.path.abspath(os.path.join(self.source.path, name)),
                               os.path.join(staging, name))
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)


class StepSession:
    """Runs steps of one loaded placement: several can stay open at once, so that
    placements can be timed in turns. `watched` runs each blocking call (Runtime.watched)."""

    def __init__(self, session, fetches: dict, feed_dict: dict, timeout_s: float, watched):
        import tensorflow as tf  # heavy: loaded on the first real run

        timeout_ms = max(1, round(timeout_s * 1000))      # 0 would mean "no limit"
        self._session, self._fetches, self._feed_dict = session, fetches, feed_dict
        self._watched = watched
        self._plain = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)
        self._tracing = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms,
                                                trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        self._partitioned = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms,
                                                    output_partition_graphs=True)
        self._metadata = tf.compat.v1.RunMetadata
        self.outputs = {}

    def step(self) -> float:
        """Run one step; its wall time in seconds."""
        def timed():
            start = time.perf_counter()
            outputs = self._session.run(self._fetches, self._feed_dict, options=self._plain)
            return time.perf_counter() - start, outputs

        seconds, self.outputs = self._watched(timed)
        return seconds

    def stream_step(self, in_flight: int) -> float:
        """Run a stream of steps, `in_flight` at once (threads sharing this session, as a
        server answers concurrent requests); seconds per step once the stream is full
        (simulator.stream.steady_seconds_per_step)."""
        steps = stream_steps(in_flight)

        def stream():
            ends, claimed = [], itertools.count()
            start = time.perf_counter()

            def serve():
                while next(claimed) < steps:
                    self._session.run(self._fetches, self._feed_dict, options=self._plain)
                    ends.append(time.perf_counter() - start)

            with concurrent.futures.ThreadPoolExecutor(in_flight) as pool:
                for running in [pool.submit(serve) for _ in range(in_flight)]:
                    running.result()
            return steady_seconds_per_step(ends, in_flight)

        return self._watched(stream)

    def partition_graphs(self) -> list:
        """Run one more step and return the GraphDefs it ran on each device, as Grappler and
        partitioning left them: what the runtime really executes and sends between tasks."""
        metadata = self._metadata()
        self.outputs = self._watched(lambda: self._session.run(
            self._fetches, self._feed_dict, options=self._partitioned, run_metadata=metadata))
        return list(metadata.partition_graphs)

    def traced_step(self):
        """Run one fully traced step; its RunMetadata (step stats, memory)."""
        metadata = self._metadata()
        self.outputs = self._watched(lambda: self._session.run(
            self._fetches, self._feed_dict, options=self._tracing, run_metadata=metadata))
        return metadata


def failure(exc, timeout_s: float) -> tuple:
    """(status, reason) of a TensorFlow error (or a dead worker) that ended a placement's
    runs."""
    import tensorflow as tf  # heavy: loaded on the first real run

    if isinstance(exc, WorkerDied):
        if exc.out_of_memory:
            return INFEASIBLE, f"out of memory on worker task {exc.task}: {exc.how}"
        return FAILED, str(exc)
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        cause = first_line(exc)
        device = _OOM_DEVICE.search(cause)
        return INFEASIBLE, (f"out of memory on {device.group(1)}: {cause[:device.start()]}"
                            if device else f"out of memory: {cause}")
    if isinstance(exc, tf.errors.DeadlineExceededError):
        return FAILED, f"a step took longer than the {timeout_s:g} s time limit"
    return FAILED, f"{type(exc).__name__}: {first_line(exc)}"


def _close(session, runtime: Runtime) -> None:
    """Close a session; on a cluster quietly, and while a worker is dead in the background.

    Closing waits for every task to release the session's state: with a task gone, that wait
    lasts the whole operation timeout and then fails; on a restarted worker the state is gone
    already and closing fails at once. The measurement is over either way. The background is
    one long-lived thread: this may run in a finalizer, where starting a thread can deadlock.
    """
    cluster = runtime.cluster
    if cluster is None:
        session.close()
    elif all(cluster.alive()):
        _close_quietly(session)
    else:
        _background_closer().submit(lambda: _close_quietly(session))


def _close_quietly(session) -> None:
    with contextlib.suppress(Exception):
        session.close()


@functools.lru_cache(maxsize=None)
def _background_closer() -> CallThread:
    """The thread that closes sessions a dead worker left, one by one."""
    return CallThread()


def run_traced(source, num_cpus: int = 2) -> StepRuns:
    """Run a SavedModel or graph file (a path, or a graph.sources.Source naming its signature
    and tag set) as written, once, fully traced, on `num_cpus` logical CPUs.

    Soft placement is off: a node that cannot run where it was placed is an error, not a
    silent move. Raises RuntimeError if the run fails.
    """
    loaded = load_source(source)
    runner = ModelRunner(import_graph_def(loaded.graph_def, loaded.fetches, source=loaded))
    result = runner.run(Runtime.local(DeviceSet.local(num_cpus)), warmup=0, repeats=0, traced=1)
    if result.status != OK:
        raise RuntimeError(f"{loaded.path}: {result.reason}")
    return result
