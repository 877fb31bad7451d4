"""The calibration's log and life: real runs logged and read back, the placements it measures,
the runs a refit takes, logged streams refitted, and on a real cluster a fit that predicts
placements it never saw."""

import dataclasses
import json
import os

import numpy as np
import pytest

import tf_placeto as tp
from tests.measure.profiling.cases import WORKERS, cluster_cost_model
from tf_placeto.measure.profiling import fitting, regression
from tf_placeto.measure.costs.calibration import CALIBRATION_FILE, Calibration
from tf_placeto.measure.evaluation.measurer import MeasureResult, SimulatedMeasurer


def test_calibration_placements_are_diverse_and_distinct(graph):
    fine, coarse = tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)
    chosen = fitting.calibration_placements([fine, coarse], WORKERS, count=16, seed=0)
    labels = [label for label, _ in chosen]
    assert labels[:2] == [f"all on {d}" for d in WORKERS]
    assert "split at 50% of the work" in labels
    keys = {tuple(sorted(p.items())) for _, p in chosen}
    assert len(keys) == len(chosen) > 8
    assert all(len(p) == len(graph) for _, p in chosen)


def test_records_are_appended_read_back_and_a_torn_line_is_skipped(graph, tmp_path):
    devices = tp.DeviceSet.from_strings(WORKERS)
    placement = dict.fromkeys([op.name for op in graph.ops], WORKERS[1])
    results = [MeasureResult(key="a", status="ok", step_time_s=0.002, label="as written"),
               MeasureResult(key="b", status="ok", step_time_s=0.003, label="moved"),
               MeasureResult(key="c", status="failed", label="broken")]
    assert fitting.record(str(tmp_path), graph, devices, [None, placement, placement], results,
                          "measure") == 2
    with open(tmp_path / fitting.OBSERVATIONS_FILE, "a") as log:
        log.write('{"assignment": [0, 1')                       # a run killed while writing
    observations = fitting.read(str(tmp_path), len(graph.ops))
    assert [o.label for o in observations] == ["as written", "moved"]
    assert observations[1].assignment == [1] * len(graph.ops)
    assert observations[0].origin == "measure" and observations[1].step_s == 0.003
    assert fitting.read(str(tmp_path), len(graph.ops) + 1) == []   # another graph's log


def test_logged_streams_fit_the_work_that_floats_and_nothing_else(graph, tmp_path):
    """Runs made under a known calibration whose streams carry floating work (the client's,
    the runtime's threads: on whichever processor is free), logged one step at a time and
    as streams of 4 (record keeps their steps in flight). One-step runs cannot show it;
    with the streams in the log the fit finds it and predicts streams of placements it never
    saw, while the one-step parameters stay what the one-step runs alone give."""
    model = cluster_cost_model(graph)
    devices = tp.DeviceSet.from_strings(WORKERS)
    truth = Calibration(compute_scale=1.0, remote_task_us=300.0, copy_us=100.0,
                        message_us=50.0, latency_us=200.0, bytes_per_us=1000.0,
                        floating_us=3000.0, floating_message_us=100.0)
    groupings = [tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)]
    chosen = [p for _, p in fitting.calibration_placements(groupings, WORKERS, count=24,
                                                           seed=0)]
    fitted_on, unseen = chosen[:16], chosen[16:]

    def runs(calibration, placements, stream=0) -> list:
        model.calibration = calibration
        results = SimulatedMeasurer.from_profile(graph, model, devices, stream=stream
                                                 ).evaluate(placements)
        for result in results:
            result.simulated = False
        return results

    one_step, streams = runs(truth, fitted_on), runs(truth, fitted_on[2:], stream=4)
    real = np.array([r.step_time_s for r in runs(truth, unseen, stream=4)])
    fitting.record(str(tmp_path), graph, devices, fitted_on, one_step, "measure")
    alone = fitting.read(str(tmp_path), len(graph.ops))
    fitting.record(str(tmp_path), graph, devices, fitted_on[2:], streams, "measure")
    logged = fitting.read(str(tmp_path), len(graph.ops))
    assert [o.in_flight for o in logged] == [0] * len(fitted_on) + [4] * len(streams)

    def fitted(observations) -> tuple:
        """(the fit, its median error on the unseen placements' streams)."""
        calibration = regression.fit(graph, cluster_cost_model(graph), devices, observations)
        predicted = [r.step_time_s for r in runs(calibration, unseen, stream=4)]
        return calibration, regression.accuracy(predicted, real)["median_error"]

    (without, without_error), (with_streams, with_error) = fitted(alone), fitted(logged)
    print(f"streams never seen, median error: {without_error:.1%} fitted on one step at a "
          f"time, {with_error:.1%} with the streams; floating work found: "
          f"{with_streams.floating_us:.0f} us + {with_streams.floating_message_us:.0f} us "
          f"per message")
    assert without.floating_us == 0.0 and without_error > 0.05
    assert with_error < without_error / 3
    assert with_streams.floating_us > 0
    assert dataclasses.replace(with_streams, floating_us=0.0, floating_message_us=0.0,
                               observations=without.observations) == without
    refit = fitting.refresh(graph, cluster_cost_model(graph), devices, str(tmp_path),
                            force=True)
    assert refit.observations == len(logged) and refit.floating_us > 0
    # held out, each kind is ranked on its own: a stream's seconds per step beside a step's
    # time in one Spearman would mostly rank the kinds
    assert refit.quality["runs"] == len(logged)
    assert refit.quality["streams"]["runs"] == len(streams)
    assert refit.quality["streams"]["calibrated"]["median_error"] < 0.05


def test_a_fit_takes_the_latest_one_step_runs_and_the_streams_its_budget_allows():
    """Each stream of 4 of a 1,000-op graph unrolls to 16,000 ops: the fit keeps the latest
    streams within STREAM_OPS_PER_FIT beside the latest RECENT_OBSERVATIONS one-step runs,
    which streams never push out."""
    room = fitting.STREAM_OPS_PER_FIT // (1000 * 16)
    runs = [fitting.Observation([0] * 1000, 0.01, f"stream {i}", session="s", in_flight=4)
            for i in range(room + 3)]
    runs[1:1] = [fitting.Observation([0] * 1000, 0.01, f"one step {i}", session="s")
                 for i in range(fitting.RECENT_OBSERVATIONS + 1)]
    kept = [o.label for o in fitting.fitted_on(runs)]
    assert kept == [f"one step {i}" for i in range(1, fitting.RECENT_OBSERVATIONS + 1)] + [
        f"stream {i}" for i in range(3, room + 3)]


def test_runs_logged_without_a_session_are_left_out_once_enough_have_one():
    legacy = [fitting.Observation([0], 0.001 * (i + 1), f"old {i}") for i in range(5)]
    tagged = [fitting.Observation([0], 0.002, f"new {i}", session="s") for i in range(4)]
    assert fitting.fitted_on(legacy + tagged[:3]) == legacy + tagged[:3]
    assert fitting.fitted_on(legacy + tagged) == tagged
    many = [fitting.Observation([0], 0.001, str(i), session="s") for i in range(100)]
    assert fitting.fitted_on(many) == many[-fitting.RECENT_OBSERVATIONS:]


@pytest.mark.alone
def test_calibration_lowers_the_error_on_real_runs_it_was_not_fitted_on(tmp_path):
    """On two worker processes: profile with calibration runs, then time placements of
    another seed; the calibrated simulator predicts them better than the profile alone.

    The graph is a small tf.while_loop over matmuls: split across tasks, each iteration pays
    a round trip the per-op profile cannot see (docs/results/simulator.md, "Per model": the
    real-size model's median error uncalibrated). On a plain MLP the profile alone is already
    within ~11% of reality, and which of two such errors is smaller is left to the machine's
    noise."""
    from tf_placeto.examples import held_out
    from tf_placeto.measure.runtimes.local import LocalCluster
    from tf_placeto.measure.evaluation.interleaved import measure_interleaved
    from tf_placeto.measure.profiling.profiler import profile
    from tf_placeto.measure.runtimes.runtime import Runtime

    held_out.save("control_flow", str(tmp_path / "model"), size=64, iterations=8)
    graph = tp.import_graph(str(tmp_path / "model"))
    with LocalCluster(2) as cluster:
        runtime = Runtime.on_cluster(cluster)
        made = profile(graph, runtime, cache=str(tmp_path / "cache"), runs=2, calibration_runs=10,
                       calibration_budget_s=20)
        calibration = made.model.calibration
        assert calibration is not None and calibration.observations >= fitting.MIN_HELD_OUT
        assert calibration.quality["runs"] == calibration.observations
        groupings = [tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)]
        chosen = fitting.calibration_placements(groupings, runtime.device_names, count=12,
                                                seed=7)[5:]                 # random ones only
        results = measure_interleaved(graph, runtime, [p for _, p in chosen], repeats=7,
                                      trace=False)
    real = np.array([r.step_time_s for r in results])
    devices = tp.DeviceSet.from_strings(runtime.device_names)
    errors = {}
    for calibrated in (True, False):
        predicted = SimulatedMeasurer.from_profile(graph, made.model, devices,
                                                   calibrated=calibrated
                                                   ).evaluate([p for _, p in chosen])
        errors[calibrated] = regression.accuracy([r.step_time_s for r in predicted],
                                                 real)["median_error"]
    assert errors[True] < errors[False], errors
    assert errors[True] < 0.5
    with open(os.path.join(made.directory, CALIBRATION_FILE)) as stored:
        assert Calibration(**json.load(stored)) == calibration
    assert calibration.quality["folds"] == regression.FOLDS


def test_a_first_fit_from_logged_runs_measures_its_held_out_figures_once(graph, tmp_path):
    """A profile without a fit (or whose fit a new version dropped) refits from its logged
    runs as it loads, with held-out figures; a later refit on more runs keeps them."""
    model = cluster_cost_model(graph)
    devices = tp.DeviceSet.from_strings(WORKERS)
    groupings = [tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)]
    chosen = [p for _, p in fitting.calibration_placements(groupings, WORKERS, count=12, seed=0)]
    model.calibration = Calibration(compute_scale=1.5, remote_task_us=2000.0)
    runs = SimulatedMeasurer.from_profile(graph, model, devices).evaluate(chosen)
    model.calibration = None
    for placement, run in zip(chosen, runs):
        run.simulated = False
        fitting.record(str(tmp_path), graph, devices, [placement], [run], "measure")
    first = fitting.refresh(graph, model, devices, str(tmp_path))
    assert first.quality["runs"] == len(chosen) >= fitting.MIN_HELD_OUT
    assert (first.quality["calibrated"]["median_error"]
            < first.quality["uncalibrated"]["median_error"] / 2)
    fitting.record(str(tmp_path), graph, devices, chosen[:1], runs[:1], "measure")
    second = fitting.refresh(graph, model, devices, str(tmp_path))
    assert second.observations == len(chosen) + 1 and second.quality == first.quality


def test_every_real_measurement_is_logged_for_the_next_fit(mlp_model, graph, tmp_path):
    """`measure` appends its real runs beside the graph's profile on those devices, where the
    next load of the profile refits on them."""
    from tf_placeto import api
    from tf_placeto.measure.costs.costmodel import graph_profile_directory
    from tf_placeto.measure.runtimes.runtime import planned_runtime

    devices = ["/device:CPU:0", "/device:CPU:1"]
    moved = dict.fromkeys([op.name for op in graph.ops], devices[1])
    results = api.measure_steps(mlp_model, [None, moved], ["as written", "moved"],
                                tp.Target(devices="2", cache=str(tmp_path)),
                                timing=tp.Timing(repeats=3))
    assert [r.status for r in results] == ["ok", "ok"]
    observations = fitting.read(graph_profile_directory(graph, *planned_runtime("2"),
                                                        str(tmp_path)), len(graph.ops))
    assert [(o.label, o.origin) for o in observations] == [("as written", "measure"),
                                                           ("moved", "measure")]
    assert observations[1].assignment == [1] * len(graph.ops)
    assert observations[0].step_s == results[0].step_time_s
