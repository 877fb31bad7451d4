"""Run a SavedModel's signature under a placement, for real, and time the steps.

A placement is written into a staged copy of the SavedModel whose variables directory is a
link to the source's, so trying a placement costs a proto write, not a copy of the weights.
Each placement gets a fresh session with isolated state: variables live where the placement
put them and nothing is left behind on a cluster's workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
import time
from typing import Optional

import numpy as np

from tf_placeto.measure import step_stats
from tf_placeto.measure.runtime import Runtime
from tf_placeto.errors import first_line
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.importer import import_graph_def
from tf_placeto.graph.sources import SAVED_MODEL_FILE, load_source, signature_inputs
from tf_placeto.rewrite import placed_proto

# Outcomes of a run, as results report them.
OK, INFEASIBLE, FAILED = "ok", "infeasible", "failed"


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
    import tensorflow as tf

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

    def __init__(self, graph: OpGraph, seed: int = 0):
        source = graph.source
        if source is None or source.kind != "saved_model":
            raise ValueError("real runs need a SavedModel source (examples:NAME is one)")
        self.graph = graph
        self.source = source
        self.feeds = example_feeds(source, seed)
        outputs = source.meta_graph.signature_def[source.signature].outputs
        self.fetches = {key: info.name for key, info in outputs.items()}
        self.tags = list(source.meta_graph.meta_info_def.tags)

    def run(self, runtime: Runtime, placement: Optional[dict] = None, warmup: int = 1,
            repeats: int = 5, traced: int = 0, timeout_s: float = 600.0) -> StepRuns:
        """Warm-up runs, then `repeats` timed runs, then `traced` fully traced runs.

        A placement that runs out of memory is INFEASIBLE; one that fails or passes the
        timeout is FAILED; either way the reason says what TensorFlow said.
        """
        import tensorflow as tf

        try:
            with self._staged(placement) as export_dir:
                return self._run_staged(tf, export_dir, runtime, warmup, repeats, traced,
                                        timeout_s)
        except tf.errors.ResourceExhaustedError as exc:
            return StepRuns(INFEASIBLE, f"out of memory: {first_line(exc)}")
        except tf.errors.DeadlineExceededError:
            return StepRuns(FAILED, f"a step took longer than the {timeout_s:g} s time limit")
        except tf.errors.OpError as exc:
            return StepRuns(FAILED, f"{type(exc).__name__}: {first_line(exc)}")

    def _run_staged(self, tf, export_dir, runtime, warmup, repeats, traced, timeout_s):
        feed_dict = {name: value for name, value in self.feeds.values()}
        timeout_ms = max(1, round(timeout_s * 1000))      # 0 would mean "no limit"
        plain = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)
        tracing = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms,
                                          trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        result = StepRuns(OK)
        with tf.Graph().as_default() as graph:
            session = tf.compat.v1.Session(runtime.target, graph=graph,
                                           config=runtime.session_config(timeout_s))
            try:
                tf.compat.v1.saved_model.loader.load(session, self.tags, export_dir)
                for _ in range(warmup):
                    result.outputs = session.run(self.fetches, feed_dict, options=plain)
                for _ in range(repeats):
                    start = time.perf_counter()
                    result.outputs = session.run(self.fetches, feed_dict, options=plain)
                    result.step_times_s.append(time.perf_counter() - start)
                for _ in range(traced):
                    metadata = tf.compat.v1.RunMetadata()
                    result.outputs = session.run(self.fetches, feed_dict, options=tracing,
                                                 run_metadata=metadata)
                    result.traces.append(metadata)
            finally:
                _close(session, runtime)
        return result

    @contextlib.contextmanager
    def _staged(self, placement):
        """A SavedModel directory holding the placed graph, sharing the source's weights."""
        proto = self.source.proto if not placement else placed_proto(
            self.source, self.graph, placement)
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


def _close(session, runtime: Runtime) -> None:
    """Close a session; when a cluster worker died, in the background and quietly.

    Closing waits for every task to release the session's state: with a task gone, that wait
    lasts the whole operation timeout and then fails. The measurement is over either way.
    """
    cluster = runtime.cluster
    if cluster is None or all(cluster.alive()):
        session.close()
        return

    def close_quietly():
        with contextlib.suppress(Exception):
            session.close()

    threading.Thread(target=close_quietly, name="tf-placeto-close", daemon=True).start()


def run_traced(path: str, signature: Optional[str] = None, num_cpus: int = 2) -> StepRuns:
    """Run a SavedModel as written, once, fully traced, on `num_cpus` logical CPUs.

    Soft placement is off: a node that cannot run where it was placed is an error, not a
    silent move. Raises RuntimeError if the run fails.
    """
    from tf_placeto.devices import DeviceSet

    source = load_source(path, signature=signature)
    runner = ModelRunner(import_graph_def(source.graph_def, source.fetches, source=source))
    result = runner.run(Runtime.local(DeviceSet.local(num_cpus)), warmup=0, repeats=0, traced=1)
    if result.status != OK:
        raise RuntimeError(f"{path}: {result.reason}")
    return result
