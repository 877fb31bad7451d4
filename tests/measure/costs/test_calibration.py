"""The calibration's parameters change the simulated step the way their mechanisms say, and
survive a round trip through the profile's directory."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, make_problem
from tf_placeto.measure.costs.calibration import CALIBRATION_FILE, Calibration
from tf_placeto.measure.simulator import simulate


def two_tasks(costs, nbytes=1000):
    """A chain over two devices in two processes, 5 us + bytes / 100 B/us between them."""
    return chain(costs, nbytes=nbytes, n_devices=2, latency=5.0, bandwidth=100.0,
                 device_task=np.array([0, 1]))


def test_the_default_calibration_changes_nothing():
    problem = two_tasks([10.0, 20.0])
    calibrated = Calibration().apply(problem, np.ones(2))
    for placement in ([0, 0], [0, 1], [1, 1]):
        assert simulate(calibrated, np.array(placement)).step_time_us == \
            simulate(problem, np.array(placement)).step_time_us


def test_each_parameter_acts_where_its_mechanism_does():
    problem = two_tasks([10.0, 20.0])
    apart, together, remote = np.array([0, 1]), np.array([0, 0]), np.array([1, 1])
    scaled = Calibration(compute_scale=2.0).apply(problem, np.ones(2))
    assert simulate(scaled, together).step_time_us == pytest.approx(60.0)
    task = Calibration(remote_task_us=1000.0).apply(problem, np.ones(2))
    assert simulate(task, together).step_time_us == pytest.approx(30.0)
    assert simulate(task, remote).step_time_us == pytest.approx(1030.0)
    assert simulate(task, apart).step_time_us == pytest.approx(1000.0 + 10 + 15 + 20)
    copies = Calibration(copy_us=7.0).apply(problem, np.ones(2))
    assert simulate(copies, apart).step_time_us == pytest.approx(10 + 7 + 15 + 7 + 20)
    messages = Calibration(message_us=40.0).apply(problem, np.ones(2))
    assert simulate(messages, together).step_time_us == pytest.approx(30.0)
    assert simulate(messages, apart).step_time_us == pytest.approx(10 + 15 + 20 + 40)
    link = Calibration(latency_us=50.0, bytes_per_us=10.0, copy_share=0.0).apply(problem,
                                                                                np.ones(2))
    assert simulate(link, apart).step_time_us == pytest.approx(10 + 50 + 100 + 20)
    assert problem.link_latency_us[0, 1] == 5.0           # the original is left alone


def test_a_remote_tasks_cost_is_in_the_schedule_after_its_last_event():
    task = Calibration(remote_task_us=1000.0).apply(two_tasks([10.0, 20.0]), np.ones(2))
    result = simulate(task, np.array([0, 1]), schedule=True)
    [row] = result.schedule[result.schedule.kind == "task"].itertuples()
    assert row.device == task.device_names[1]
    assert row.end_us == pytest.approx(result.step_time_us)
    assert row.end_us - row.start_us == pytest.approx(1000.0)
    assert simulate(task, np.array([0, 0]), schedule=True).schedule.kind.ne("task").all()


def test_a_loop_pays_every_iteration_for_each_input_made_on_another_device():
    """op2 runs 8 times per step (a loop) and reads op0 and op1: each input made on another
    device costs 8 iterations' crossing; with both inputs on its device, nothing."""
    problem = make_problem([10.0, 10.0, 20.0], tensors=[(0, 0), (1, 0)],
                           edges=[(0, 2), (1, 2)], n_devices=2, latency=5.0,
                           device_task=np.array([0, 1]))
    calibrated = Calibration(iteration_us=100.0).apply(problem, np.array([1, 1, 8]))
    assert simulate(calibrated, np.array([0, 0, 0])).step_time_us == pytest.approx(40.0)
    assert simulate(calibrated, np.array([0, 1, 1])).step_time_us == pytest.approx(
        10 + 5 + 20 + 800)
    assert simulate(calibrated, np.array([0, 0, 1])).step_time_us == pytest.approx(
        20 + 5 + 20 + 2 * 800)


def test_a_calibration_round_trips_and_a_damaged_one_reads_as_none(tmp_path):
    calibration = Calibration(compute_scale=1.2, remote_task_us=2000.0, copy_us=50.0,
                              latency_us=300.0, bytes_per_us=900.0, copy_share=0.1,
                              observations=16, quality={"runs": 16})
    calibration.save(str(tmp_path))
    assert Calibration.load(str(tmp_path)) == calibration
    path = os.path.join(tmp_path, CALIBRATION_FILE)
    with open(path, "w") as f:
        f.write(json.dumps(dataclasses.asdict(calibration))[:40])
    assert Calibration.load(str(tmp_path)) is None
    assert Calibration.load(str(tmp_path / "absent")) is None


def test_a_calibration_of_another_version_reads_as_none_to_be_refitted(tmp_path):
    older = {k: v for k, v in dataclasses.asdict(Calibration(copy_us=50.0)).items()
             if k not in ("message_us", "version")}        # as version 1 stored it
    with open(os.path.join(tmp_path, CALIBRATION_FILE), "w") as f:
        json.dump(older, f)
    assert Calibration.load(str(tmp_path)) is None
