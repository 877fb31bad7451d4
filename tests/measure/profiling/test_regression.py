"""The fit: it finds the parameters that made the runs, predicts runs it did not see, and counts
each session's runs net of how loaded the machine was."""

import numpy as np
import pytest

import tf_placeto as tp
from tests.measure.profiling.cases import WORKERS, cluster_cost_model
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer
from tf_placeto.measure.profiling import regression
from tf_placeto.measure.profiling.fitting import Observation, calibration_placements


def test_a_fit_finds_the_costs_that_made_the_runs(graph):
    """Runs simulated under a known calibration: the fit, started from the profile alone,
    predicts runs it was not fitted on within a few percent; uncalibrated, it is far off."""
    model = cluster_cost_model(graph)
    devices = tp.DeviceSet.from_strings(WORKERS)
    truth = Calibration(compute_scale=1.5, remote_task_us=2000.0, copy_us=80.0,
                        latency_us=400.0, bytes_per_us=1000.0, copy_share=0.2)
    groupings = [tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)]
    chosen = calibration_placements(groupings, WORKERS, count=20, seed=0)
    model.calibration = truth
    real = SimulatedMeasurer.from_profile(graph, model, devices).evaluate([p for _, p in chosen])
    model.calibration = None
    measurer = SimulatedMeasurer.from_profile(graph, model, devices)
    observations = [Observation(measurer.device_indices(p).tolist(), r.step_time_s, label)
                    for (label, p), r in zip(chosen, real)]
    quality = regression.held_out(graph, model, devices, observations)
    assert quality["calibrated"]["median_error"] < 0.05
    assert quality["uncalibrated"]["median_error"] > 0.2
    assert quality["calibrated"]["spearman"] > 0.9
    fitted = regression.fit(graph, model, devices, observations)
    assert fitted.observations == len(observations)
    assert fitted.compute_scale == pytest.approx(1.5, rel=0.1)
    assert fitted.remote_task_us == pytest.approx(2000.0, rel=0.2)


def test_a_session_timed_on_a_busy_machine_does_not_make_splitting_look_dear(graph):
    """One session times the singles and a few splits; another, on a machine 1.6x slower,
    only splits. Fitted net of each session's load, the simulator keeps what splitting costs
    against one device (each placement's step over the single device's) as the runs had it;
    taken as one session, the slow splits make splitting dearer."""
    model = cluster_cost_model(graph)
    devices = tp.DeviceSet.from_strings(WORKERS)
    truth = Calibration(compute_scale=1.0, remote_task_us=2000.0, copy_us=80.0,
                        latency_us=400.0, bytes_per_us=1000.0, copy_share=0.2)
    groupings = [tp.group(graph, max_groups=12), tp.group(graph, max_groups=4)]
    chosen = [p for _, p in calibration_placements(groupings, WORKERS, count=20, seed=0)]

    def steps(calibration) -> np.ndarray:
        model.calibration = calibration
        return np.array([r.step_time_s for r in SimulatedMeasurer.from_profile(
            graph, model, devices).evaluate(chosen)])

    def against_single(calibration) -> np.ndarray:
        times = steps(calibration)
        return times / times[0]                    # chosen[0]: everything on task 0

    real = steps(truth)
    measurer = SimulatedMeasurer.from_profile(graph, model, devices)

    def fitted(quiet: str, busy: str) -> Calibration:
        runs = [Observation(measurer.device_indices(p).tolist(),
                            r * (1.0 if i < 5 else 1.6), session=quiet if i < 5 else busy)
                for i, (p, r) in enumerate(zip(chosen, real))]
        return regression.fit(graph, model, devices, runs)

    def error(calibration) -> float:
        return float(np.median(np.abs(np.log(against_single(calibration)
                                             / (real / real[0])))))

    apart, together = error(fitted("quiet", "busy")), error(fitted("one", "one"))
    print(f"split-to-single error: {apart:.1%} net of load, {together:.1%} lumped")
    assert apart < 0.03 and together > 2 * apart, (apart, together)
