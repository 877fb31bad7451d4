"""Real measurement: medians of timed runs, results remembered, faults become results."""

import json
import math
import os
import re
import time

import pytest
import tensorflow as tf

import tf_placeto as tp
from tests.helpers import kill_later, spinner_model
from tf_placeto.measure.evaluation.measurer import RESULTS_FILE, RealMeasurer
from tf_placeto.measure.runtimes.runtime import Runtime


def _everything_on(graph, device):
    return {op.name: device for op in graph.ops}


def test_real_measurement_reports_median_spread_runs_and_memory(graph, tmp_path):
    measurer = RealMeasurer(graph, Runtime.local(tp.DeviceSet.local(2)),
                            results_dir=str(tmp_path), repeats=4)
    [result] = measurer.evaluate([_everything_on(graph, "/device:CPU:1")], labels=["cpu1"])
    assert result.status == "ok" and result.label == "cpu1"
    assert result.runs == 4 and result.min_s <= result.step_time_s <= result.max_s
    assert result.spread_s >= 0 and result.peak_memory_bytes


def test_results_are_remembered_across_measurers(graph, tmp_path):
    runtime = Runtime.local(tp.DeviceSet.local(2))
    placement = _everything_on(graph, "/device:CPU:0")
    first = RealMeasurer(graph, runtime, results_dir=str(tmp_path), repeats=2).evaluate([placement])
    lines = open(os.path.join(tmp_path, RESULTS_FILE)).read().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "ok"
    with open(os.path.join(tmp_path, RESULTS_FILE), "a") as log:
        log.write('{"key": "torn')                      # a run killed mid-write
    again = RealMeasurer(graph, runtime, results_dir=str(tmp_path), repeats=2).evaluate([placement])
    assert again[0].step_time_s == first[0].step_time_s   # read back, not measured again
    assert open(os.path.join(tmp_path, RESULTS_FILE)).read().splitlines() == lines  # healed


def test_a_step_past_the_time_limit_fails_and_the_next_one_works(graph, tmp_path):
    path = spinner_model(str(tmp_path / "spinner"), iterations=20_000_000)
    runtime = Runtime.local(tp.DeviceSet.local(2))
    start = time.perf_counter()
    [failed] = RealMeasurer(tp.import_graph(path), runtime, repeats=1,
                            timeout_s=0.3).evaluate([None])
    assert failed.status == "failed" and "time limit" in failed.reason
    assert math.isnan(failed.step_time_s) and time.perf_counter() - start < 30
    [ok] = RealMeasurer(graph, runtime, repeats=1).evaluate([None])
    assert ok.status == "ok"


def test_bad_placements_are_refused_before_running(graph):
    measurer = RealMeasurer(graph, Runtime.local(tp.DeviceSet.local(2)), repeats=1)
    with pytest.raises(tp.PlacetoError):
        measurer.evaluate([{"no/such/op": "/device:CPU:0"}])


class _Huge(tf.Module):
    """A step that asks for a 4 TiB tensor: no device here can hold it."""

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def step(self, x):
        return {"total": tf.reduce_sum(tf.fill([2**20, 2**20], x))}


def test_out_of_memory_is_infeasible_and_the_next_one_works(graph, tmp_path):
    huge = _Huge()
    path = str(tmp_path / "huge")
    tf.saved_model.save(huge, path, signatures={"step": huge.step})
    runtime = Runtime.local(tp.DeviceSet.local(2))
    [result] = RealMeasurer(tp.import_graph(path), runtime, repeats=1).evaluate([None])
    assert result.status == "infeasible"
    assert "OOM when allocating tensor with shape[1048576,1048576]" in result.reason
    [ok] = RealMeasurer(graph, runtime, repeats=1).evaluate([None])
    assert ok.status == "ok"


@pytest.mark.parametrize("task", [0, 1])
def test_a_worker_dying_mid_step_is_reported_in_seconds_and_the_next_one_works(
        tmp_path, task, cluster):
    """Task 1 runs the step; task 0 is the session's master, whose death TensorFlow alone
    would only notice at the operation timeout (600 s here)."""
    spin = tp.import_graph(spinner_model(str(tmp_path / "spinner"), iterations=2_000_000))
    quick = tp.import_graph(spinner_model(str(tmp_path / "quick"), iterations=10_000))
    runtime = Runtime.on_cluster(cluster)
    on_task1 = {op.name: cluster.device_names[1] for op in spin.ops}
    doomed = cluster.pids[task]
    killer, killed_at = kill_later(doomed, 2.0)
    try:
        [failed] = RealMeasurer(spin, runtime, repeats=3, warmup=0, timeout_s=600,
                                trace_memory=False).evaluate([on_task1])
    finally:
        killer.cancel()
    noticed = time.monotonic()
    assert failed.status == "failed"
    assert re.match(rf"worker task {task} \(127\.0\.0\.1:\d+\) died during the step: "
                    r"process killed by SIGKILL", failed.reason), failed.reason
    assert killed_at and noticed - killed_at[0] < 10
    [ok] = RealMeasurer(quick, runtime, repeats=1, warmup=0, trace_memory=False).evaluate(
        [{op.name: cluster.device_names[1] for op in quick.ops}])
    assert ok.status == "ok" and cluster.alive() == [True, True]
    assert cluster.pids[task] != doomed


def test_a_placed_copy_as_written_is_measured_not_taken_from_its_source(graph, tmp_path):
    runtime = Runtime.local(tp.DeviceSet.local(2))
    results = str(tmp_path / "results")      # profiles ignore devices: both share one log
    placed = tp.apply_placement(graph, _everything_on(graph, "/device:CPU:1"),
                                str(tmp_path / "placed")).out
    [source] = RealMeasurer(graph, runtime, results_dir=results, repeats=2).evaluate([None])
    [copy] = RealMeasurer(tp.import_graph(placed), runtime, results_dir=results,
                          repeats=2).evaluate([None])
    assert source.key != copy.key and copy.runs == 2
    assert len(open(os.path.join(results, RESULTS_FILE)).read().splitlines()) == 2
