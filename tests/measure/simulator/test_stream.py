"""The simulator's stream mode: K steps in flight."""

import threading

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, make_problem, random_dag
from tf_placeto.measure.simulator import simulate
from tf_placeto.measure.simulator import stream as stream_module
from tf_placeto.measure.simulator.stream import Stream, simulate_stream, state_groups, unroll


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_step_in_flight_is_the_one_step_simulation_over_and_over(seed):
    rng = np.random.default_rng(seed)
    problem = random_dag(rng)
    problem.device_task = np.array([0, 1, 1])
    problem.remote_task_us = 40.0
    problem.task_message_us = 7.0
    placement = rng.integers(0, 3, problem.n_ops)
    step = simulate(problem, placement).step_time_us
    stream = simulate_stream(problem, placement, in_flight=1, steps=6)
    assert stream.latency_us == pytest.approx(np.full(6, step))
    assert stream.step_end_us == pytest.approx(step * np.arange(1, 7))
    assert stream.steps_per_s == pytest.approx(1e6 / step)


def test_a_two_stage_chain_split_over_two_devices_doubles_throughput():
    """Two stages of 100 us: on one device a step every 200 us however many are in flight;
    split, the second stage of one step runs beside the first stage of the next. A split step
    takes 203 us (a 3 us transfer), so two in flight give one every 101.5 us, and three keep
    both devices busy."""
    problem = chain([100.0, 100.0], nbytes=1000, n_devices=2, latency=2.0, bandwidth=1000.0)
    for in_flight in (1, 2, 3):
        single = simulate_stream(problem, [0, 0], in_flight=in_flight)
        assert single.steps_per_s == pytest.approx(1e6 / 200.0)
    assert simulate_stream(problem, [0, 1], in_flight=2).steps_per_s == pytest.approx(
        1e6 / 101.5)
    split = simulate_stream(problem, [0, 1], in_flight=3)
    assert split.steps_per_s == pytest.approx(1e6 / 100.0)
    assert split.latency_us.min() == pytest.approx(203.0)
    one_at_a_time = simulate_stream(problem, [0, 1], in_flight=1)
    assert one_at_a_time.steps_per_s == pytest.approx(1e6 / 203.0)   # + the transfer


def test_the_sessions_work_for_a_split_takes_time_from_device_0():
    """Two independent ops of 100 us on the devices of two tasks; each step of the split
    costs the session 50 us (the remote task's RunGraph call), which the master runs in
    task 0's process: on device 0, beside op 0, so a step every 150 us however many are in
    flight, not every 100 us as if the session had a processor of its own."""
    problem = make_problem([100.0, 100.0], n_devices=2)
    problem.device_task = np.array([0, 1])
    problem.remote_task_us = 50.0
    for in_flight in (1, 2, 4):
        assert simulate_stream(problem, [0, 1], in_flight=in_flight).steps_per_s \
            == pytest.approx(1e6 / 150.0)
        assert simulate_stream(problem, [0, 0], in_flight=in_flight).steps_per_s \
            == pytest.approx(1e6 / 200.0)


def test_the_messages_a_step_sends_between_tasks_take_time_from_device_0():
    """The same two ops on two tasks, with 10 us per message between tasks: a step that
    sends 5 messages (TensorFlow's count, given by the caller) costs device 0 another 50 us
    per step; without a count, the simulator's own transfers between tasks (none here)."""
    problem = make_problem([100.0, 100.0], n_devices=2)
    problem.device_task = np.array([0, 1])
    problem.task_message_us = 10.0
    stream = Stream(problem, 2)
    assert stream.simulate([0, 1]).steps_per_s == pytest.approx(1e6 / 100.0)
    assert stream.simulate([0, 1], messages=5).steps_per_s == pytest.approx(1e6 / 150.0)


def test_placements_simulated_in_threads_keep_their_own_sessions_work(monkeypatch):
    """A policy's device rows simulate placements of one stream in threads. Each sets its
    session work on the unrolled steps before the replay; here both have set theirs before
    either replays (a barrier), and each must still get its own stream: the split pays the
    session's 50 us per step, one device none."""
    problem = make_problem([100.0, 100.0], n_devices=2)
    problem.device_task = np.array([0, 1])
    problem.remote_task_us = 50.0
    stream = Stream(problem, 2)
    replay, both_set = stream_module.simulate, threading.Barrier(2, timeout=30)

    def replay_once_both_are_set(unrolled, placement):
        both_set.wait()
        return replay(unrolled, placement)

    monkeypatch.setattr(stream_module, "simulate", replay_once_both_are_set)
    split = {}
    thread = threading.Thread(target=lambda: split.update(result=stream.simulate([0, 1])))
    thread.start()
    single = stream.simulate([0, 0])
    thread.join()
    assert split["result"].steps_per_s == pytest.approx(1e6 / 150.0)
    assert single.steps_per_s == pytest.approx(1e6 / 200.0)


def test_floating_work_slows_a_stream_only_where_every_device_is_busy():
    """Floating work (80 us per step and 10 us per message between tasks) runs on whichever
    processor is free. Split evenly, both devices are busy 100 us per step, so a step takes
    (200 + 80 + 2 x 10) / 2 = 150 us; all on one device, the idle one takes it and the
    stream keeps the device's 200 us per step."""
    problem = make_problem([100.0, 100.0], n_devices=2)
    problem.device_task = np.array([0, 1])
    problem.floating_us, problem.floating_message_us = 80.0, 10.0
    stream = Stream(problem, 4)
    split = stream.simulate([0, 1], messages=2)
    assert split.schedule_us == pytest.approx(100.0) and split.work_us == pytest.approx(200.0)
    assert split.steps_per_s == pytest.approx(1e6 / 150.0)
    assert stream.simulate([0, 0], messages=0).steps_per_s == pytest.approx(1e6 / 200.0)


def test_a_variable_update_does_not_overlap_the_next_steps_update():
    """op0 holds a variable; op1 reads it, op2 computes, op3 updates it (through the handle).
    Each of the variable's ops waits for the same op of the step before, even with the
    compute elsewhere and many steps in flight; the next step's read need not wait for this
    step's update (steps on one session do not), and an op without state (op4, from its own
    input) overlaps freely."""
    problem = make_problem([0.0, 10.0, 100.0, 10.0, 50.0],
                           tensors=[(0, 8), (1, 8), (2, 8)],
                           edges=[(0, 1), (1, 2), (2, 3), (0, 3)],
                           persistent=np.array([8, 0, 0, 0, 0]), n_devices=2)
    assert [list(group) for group in state_groups(problem)] == [[0, 1, 3]]
    stream = unrolled_times(problem, [0, 0, 1, 1, 1], in_flight=4, steps=4)
    start, end = stream["start"], stream["end"]
    for op in (0, 1, 3):
        assert np.all(start[1:, op] >= end[:-1, op])
    assert start[1, 1] < end[0, 3]    # step 1 read before step 0 updated
    assert start[1, 4] < end[0, 3]    # the stateless op of step 1 ran before step 0 ended


def test_an_explicit_dependency_orders_steps():
    problem = make_problem([10.0, 30.0], n_devices=2)      # two independent ops
    free = unrolled_times(problem, [0, 1], in_flight=3, steps=3)
    ordered = unrolled_times(problem, [0, 1], in_flight=3, steps=3, dependencies=[(1, 0)])
    assert list(free["start"][:, 0]) == [0.0, 10.0, 20.0]
    assert list(ordered["start"][:, 0]) == [0.0, 30.0, 60.0]   # after op1 of the step before


def test_in_flight_must_be_positive():
    with pytest.raises(ValueError, match="in_flight"):
        simulate_stream(chain([1.0, 1.0]), [0, 0], in_flight=0)


def unrolled_times(problem, placement, in_flight, steps, dependencies=()):
    """Each op's start and end in each step of the stream: (steps, n_ops) arrays."""
    stream = unroll(problem, steps, in_flight, dependencies=dependencies)
    result = simulate(stream, np.concatenate([np.tile(placement, steps),
                                              np.full(steps, problem.n_devices)]))
    n = problem.n_ops
    return {"start": result.op_start_us[:steps * n].reshape(steps, n),
            "end": result.op_end_us[:steps * n].reshape(steps, n)}
