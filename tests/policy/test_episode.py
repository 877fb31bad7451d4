"""Episodes and their observations: devices a group cannot use are masked and refused; the
simulator's greedy rule and its veto over a policy; greedy walks of several passes."""

import dataclasses
import types

import numpy as np
import pytest

from tf_placeto.policy import specs
from tf_placeto.policy.episode import (Episode, SimulatedGreedy, SimulatorVeto, greedy_walk,
                                       step_changes)
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import start_placement


def test_devices_that_are_absent_or_lack_a_kernel_are_masked(policy_problems):
    problem = policy_problems[1]
    compute = problem.compute_us.copy()
    compute[0, 1] = np.inf                          # group 0 has no kernel on device 1
    episode = Episode(GraphView(dataclasses.replace(problem, compute_us=compute)))
    assert list(episode.observation()["device_mask"]) == [1, 0, 1]
    before = episode.devices[0]
    episode.move(1)                                 # refused: stays where it was
    assert episode.devices[0] == before


def test_the_simulated_greedy_rule_takes_the_fastest_simulated_device(policy_problems):
    """SimulatedGreedy moves each group where the simulator says the step is least (staying
    put where nothing is faster): each move's objective is the least of the group's row."""
    problem = policy_problems[1]
    view = GraphView(problem)
    episode = Episode(view)
    while not episode.done:
        group, here = episode.position, int(episode.devices[episode.position])
        offered = {}
        for device in np.flatnonzero(problem.allowed[group]):
            moved = episode.devices.copy()
            moved[group] = device
            offered[int(device)] = view.objective(moved)[0]
        chosen = SimulatedGreedy.action(episode.observation(), first=episode.position == 0)
        assert offered[chosen] == min(offered.values())
        if offered[here] == min(offered.values()):
            assert chosen == here
        assert episode.move(chosen) >= 0        # the objective never rises
    walked = greedy_walk(GraphView(problem), SimulatedGreedy())
    assert walked.end_value == episode.value
    np.testing.assert_array_equal(walked.end_devices, episode.devices)


def test_the_simulators_veto_overrules_a_policy_only_beyond_its_margin(policy_problems):
    """SimulatorVeto answers as its policy does unless the device the simulator finds
    fastest shortens the step by more than the margin against the policy's device; then
    that device. No margin (0) moves wherever the policy's device is not among the fastest;
    an infinite one never overrules."""
    problem, policy = policy_problems[1], _MovesEveryThird()
    episode, overruled = Episode(GraphView(problem)), 0
    while not episode.done:
        observation = episode.observation()
        change = step_changes(observation)
        chosen = policy.action(observation, episode.position == 0)
        fastest = int(change.argmin())
        gap = change[chosen] - change[fastest]
        for margin in (0.0, gap / 2, gap, np.inf):
            vetoed = SimulatorVeto(policy, margin).action(observation, False)
            assert vetoed == (fastest if gap > margin else chosen)
        overruled += gap > 0
        episode.move(chosen)
    assert overruled > 0                  # the policy's moves were overruled somewhere
    with pytest.raises(ValueError, match="at least 0"):
        SimulatorVeto(policy, -1.0)


def test_a_later_pass_walks_on_from_where_the_one_before_ended(policy_problems):
    """From the first of a few random starts where the first pass moves a group (the
    profile is timed afresh each session, so whether one start moves can vary)."""
    problem = policy_problems[1]
    for seed in range(10):
        view = GraphView(problem, start_placement(problem, seed))
        once = greedy_walk(view, SimulatedGreedy())
        if not np.array_equal(once.end_devices, view.start):
            break
    else:
        pytest.fail("the first pass moved no group from 10 random starts")
    twice = greedy_walk(GraphView(problem, view.start), SimulatedGreedy(), passes=2)
    again = greedy_walk(GraphView(problem, once.end_devices), SimulatedGreedy())
    assert twice.pass_values == (once.end_value, again.end_value)       # where each ended
    np.testing.assert_array_equal(twice.end_devices, again.end_devices)
    assert twice.end_value == again.end_value
    # every placement simulated, in order: the start, the first pass's, the second's
    np.testing.assert_array_equal(twice.objectives,
                                  np.concatenate([once.objectives, again.objectives[1:]]))
    assert twice.value == min(once.value, again.value)


def test_a_pass_that_moves_no_group_ends_the_walk(policy_problems):
    problem = policy_problems[0]
    walk = greedy_walk(GraphView(problem), SimulatedGreedy(), passes=50)
    assert 2 <= walk.passes < 50
    still = greedy_walk(GraphView(problem, walk.end_devices), SimulatedGreedy(), passes=50)
    assert still.passes == 1 and still.settled      # where it ended, no move is faster
    assert walk.settled
    np.testing.assert_array_equal(still.end_devices, walk.end_devices)


class _MovesEveryThird:
    """A policy that moves every third group to the next device and leaves the others: a
    walk with look-ahead both uses it (groups that stay) and cancels it (groups moved)."""

    @staticmethod
    def action(observation: dict, first: bool) -> int:
        here = int(observation["candidates"][:, specs.SITS_THERE].argmax())
        current = int(observation["features"][:, specs.CURRENT].argmax())
        if current % 3:
            return here
        return (here + 1) % len(observation["device_mask"])


def test_simulating_ahead_changes_nothing_a_walk_finds(policy_problems, monkeypatch):
    """Look-ahead is a matter of time only: the same moves, evaluations, best and end."""
    used = []
    taken = Episode._simulated_ahead

    def counted(episode):
        had = episode._ahead is not None
        ahead = taken(episode)
        used.append((had, ahead is not None))
        return ahead

    monkeypatch.setattr(Episode, "_simulated_ahead", counted)
    problem = policy_problems[1]
    for policy in (_MovesEveryThird(), SimulatedGreedy()):
        walked = greedy_walk(GraphView(problem), policy, passes=2)
        view = GraphView(problem)
        episode = Episode(view)             # no look-ahead
        for walked_pass in range(walked.passes):
            episode = episode.next_pass() if walked_pass else episode
            while not episode.done:
                episode.move(policy.action(episode.observation(), episode.position == 0))
        np.testing.assert_array_equal(walked.end_devices, episode.devices)
        assert walked.end_value == episode.value
        np.testing.assert_array_equal(walked.objectives[1:], view.moves)
        assert walked.value == min(walked.objectives)
    assert (True, True) in used and (True, False) in used     # both used and cancelled


def test_a_walk_with_a_clock_begins_no_pass_it_could_not_end_in_time(policy_problems,
                                                                     monkeypatch):
    """Each answer of the policy takes a second of a fake clock, so a pass takes as many
    seconds as there are groups: with 2.5 passes' seconds, the walk begins a second pass and
    not a third; with no clock it walks on."""
    clock = [0.0]
    monkeypatch.setattr("tf_placeto.policy.episode.time",
                        types.SimpleNamespace(perf_counter=lambda: clock[0]))

    class Slow(_MovesEveryThird):
        @staticmethod
        def action(observation: dict, first: bool) -> int:
            clock[0] += 1.0
            return _MovesEveryThird.action(observation, first)

    problem = policy_problems[1]
    timed = greedy_walk(GraphView(problem), Slow(), passes=5, seconds=2.5 * problem.n_groups)
    assert timed.passes == 2 and not timed.settled          # cut short by the clock
    assert greedy_walk(GraphView(problem), Slow(), passes=5).passes > 2
