"""Imitation: the policy network learns the fast placers' decisions before any RL, and goes
on learning where it falls behind them during RL (keep_imitating)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tf_placeto import methods
from tf_placeto.errors import PlacetoError
from tf_placeto.policy import specs
from tf_placeto.policy.imitation import Demonstrations, accuracy, cloning_step, imitate
from tf_placeto.policy.episode import greedy_walk
from tf_placeto.policy.inference import greedy_placement
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import start_placement
from tf_placeto.policy.training import LESSON_MARGIN, GreedyActor, Trainer, TrainingConfig

SMALL = TrainingConfig(episodes=2, embedding=16, rounds=2, seed=1)


def test_demonstrations_walk_through_the_decision_from_random_fast_and_single_starts(
        policy_problems):
    problem = policy_problems[0]
    n = problem.n_groups
    decision = methods.place("m_etf", problem).group_devices
    demonstrations = Demonstrations.record([problem], [decision], starts=2)
    assert len(demonstrations) == 4 * n          # 2 random starts, the decision, one device
    target = problem.canonical(decision)
    right = demonstrations.targets[0]
    assert right.shape == (4 * n, problem.n_devices)
    assert right[np.arange(len(right)), np.tile(target, 4)].all()
    starts = demonstrations.observations[0]["group_device"][::n]
    np.testing.assert_array_equal(starts[2], target)
    assert len(np.unique(starts[3])) == 1
    opens = [g for g in range(problem.n_groups) if target[g] not in target[:g]]
    assert right.sum(axis=1)[[g for g in range(problem.n_groups) if g not in opens]].max() == 1
    assert right[opens[0]].sum() == problem.n_devices      # the first group: any device
    last = demonstrations.observations[0]["group_device"][problem.n_groups - 1]
    np.testing.assert_array_equal(last[:-1], target[:-1])  # every group before the last moved


def test_demonstrations_can_follow_a_teacher_from_every_start(policy_problems):
    """Where a problem has a teacher, its episodes make the teacher's moves and those are the
    right devices; the others still walk to their decision."""
    problem = policy_problems[0]
    last = problem.n_devices - 1
    assert problem.allowed[:, last].all()

    class LastDevice:
        def action(self, observation, first):
            return last

    decision = methods.place("m_etf", problem).group_devices
    recorded = Demonstrations.record([problem, problem], [decision, decision], starts=2,
                                     teachers=[LastDevice(), None])
    n = problem.n_groups
    followed = recorded.targets[0]
    assert followed.shape == (4 * n, problem.n_devices)
    assert (followed.argmax(axis=1) == last).all() and (followed.sum(axis=1) == 1).all()
    walked = recorded.observations[0]["group_device"]
    for k in range(n):      # the walk from the first start: the groups before k moved
        assert (walked[k][:k] == last).all()
    np.testing.assert_array_equal(recorded.targets[1],
                                  Demonstrations.record([problem], [decision]).targets[0])


def test_a_follower_walks_its_own_moves_and_is_taught_the_lesson_where_they_lead(
        policy_problems):
    """DAgger: the episodes from the random starts move where the follower does; the targets
    stay the decision's, its devices renamed to where the walk first put them."""
    problem = policy_problems[0]
    last = problem.n_devices - 1
    assert problem.interchangeable and problem.allowed[:, last].all()

    class LastDevice:
        def action(self, observation, first):
            return last

    decision = problem.canonical(methods.place("m_etf", problem).group_devices)
    assert len(np.unique(decision)) > 1
    recorded = Demonstrations.record([problem], [decision], starts=2, follower=LastDevice())
    n = problem.n_groups
    right = recorded.targets[0]
    assert right.shape == (2 * n, problem.n_devices)      # the random starts' walks alone
    walked = recorded.observations[0]["group_device"]
    for k in range(n):
        assert (walked[k][:k] == last).all()
    assert right[0].all()                   # the first group opens a device: any is right
    # after it, the decision's first device is where the walk put the first group: the last
    first = decision[1:] == decision[0]
    assert (right[1:n][first].argmax(axis=1) == last).all()
    assert (right[1:n][first].sum(axis=1) == 1).all()
    # its other devices the walk never opens: any device it has not used for the first
    assert (right[1:n][~first, last] == 0).all()
    assert (right[1:n][~first].sum(axis=1) == problem.n_devices - 1).all()


def test_a_follower_walking_again_is_taught_the_decision_in_its_later_passes(
        policy_problems):
    """With passes, the follower walks the groups again from where its pass ended, until a
    pass moves no group; the first pass is taught the teacher's moves, a later one the
    decision's devices as the first pass named them."""
    problem = policy_problems[0]
    last, n = problem.n_devices - 1, problem.n_groups
    assert problem.interchangeable and problem.allowed[:, last].all()

    class Always:
        def __init__(self, device):
            self.device = device

        def action(self, observation, first):
            return self.device

    decision = problem.canonical(methods.place("m_etf", problem).group_devices)
    recorded = Demonstrations.record([problem], [decision], starts=1, teachers=[Always(0)],
                                     follower=Always(last), passes=3)
    right = recorded.targets[0]
    assert right.shape == (2 * n, problem.n_devices)    # the second pass moved nothing
    assert (right[:n].argmax(axis=1) == 0).all() and (right[:n].sum(axis=1) == 1).all()
    assert (recorded.observations[0]["group_device"][n:] == last).all()
    # the first pass put every group on the last device: the decision's first device is it
    ours = decision == decision[0]
    assert (right[n:][ours].argmax(axis=1) == last).all()
    assert (right[n:][ours].sum(axis=1) == 1).all()
    assert (right[n:][~ours, last] == 0).all()
    assert (right[n:][~ours].sum(axis=1) == problem.n_devices - 1).all()
    once = Demonstrations.record([problem], [decision], starts=1, teachers=[Always(0)],
                                 follower=Always(last))
    np.testing.assert_array_equal(once.targets[0], right[:n])


def test_dagger_epochs_also_teach_along_the_networks_own_walks(policy_problems, tmp_path):
    """Each epoch walks the followed problems' lessons where the network's greedy moves
    lead, and logs how many moves that added and how many it already got right."""
    decisions = [methods.place("heft", p).group_devices for p in policy_problems]
    trainer = Trainer(policy_problems, str(tmp_path / "run"), SMALL)
    followed = [True] + [False] * (len(policy_problems) - 1)
    trainer.demonstrate(decisions, starts=2, followed=followed)
    # what the first epoch walks: the untrained network's own moves, from its seed's starts
    before = Demonstrations.record(policy_problems[:1], decisions[:1], starts=2,
                                   seed=SMALL.seed + 1, follower=GreedyActor(trainer.actor))
    expected = accuracy(trainer.actor, before)
    history = trainer.imitate(decisions, epochs=2)
    assert [row["own_walk_moves"] for row in history] == [2 * policy_problems[0].n_groups] * 2
    assert history[0]["own_walk_accuracy"] == pytest.approx(expected)
    plain = Trainer(policy_problems, str(tmp_path / "plain"), SMALL)
    assert "own_walk_moves" not in plain.imitate(decisions, epochs=1)[0]


def test_imitation_teaches_the_network_the_demonstrated_devices(policy_problems, tmp_path):
    """From about chance to nearly every move right, and only once per training directory.
    The demonstrations are HEFT's: a list scheduler's choices, which the devices' rows
    describe."""
    decisions = [methods.place("heft", p).group_devices for p in policy_problems]
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, SMALL)
    demonstrations = Demonstrations.record(policy_problems, decisions, starts=2)
    before = accuracy(trainer.actor, demonstrations)
    history = trainer.imitate(decisions, epochs=60, starts=2)
    assert len(history) == 60 and history[-1]["loss"] < history[0]["loss"]
    after = accuracy(trainer.actor, demonstrations)
    assert after >= 0.85 > before
    log = json.load(open(os.path.join(out, "training.json")))
    assert len(log["imitation"]) == 60
    resumed = Trainer(policy_problems, out, SMALL)      # restored weights, imitation done
    assert resumed.imitate(decisions, epochs=60) == log["imitation"]
    assert accuracy(resumed.actor, demonstrations) == pytest.approx(after)
    fresh = Trainer(policy_problems, str(tmp_path / "late"), SMALL)
    fresh.run(1)
    with pytest.raises(PlacetoError, match="imitation comes before them"):
        fresh.imitate(decisions, epochs=1)


def test_a_problem_posed_from_several_starts_is_taught_once(policy_problems, tmp_path,
                                                            monkeypatch):
    """`train --start random fast` poses each problem twice; its lessons are the same."""
    taught, record = [], Demonstrations.record

    def recorded(problems, decisions, *args, **kwargs):
        taught.extend(problems)
        return record(problems, decisions, *args, **kwargs)

    monkeypatch.setattr(Demonstrations, "record", recorded)
    problems = list(policy_problems[:2])
    trainer = Trainer(problems * 2, str(tmp_path / "run"), SMALL,
                      starts=["random", "random", "fast", "fast"])
    trainer.imitate([methods.place("heft", p).group_devices for p in problems] * 2, epochs=1)
    assert [id(p) for p in taught] == [id(p) for p in problems]


def test_imitate_reports_each_epoch(policy_problems):
    import tensorflow as tf
    from tf_agents.specs import tensor_spec

    from tf_placeto.policy.network import PlacetoNetwork

    network = PlacetoNetwork(tensor_spec.from_spec(specs.observation_spec()),
                             tf.nest.map_structure(tensor_spec.from_spec, specs.action_spec()),
                             embedding=8, rounds=1)
    problem = policy_problems[1]
    demonstrations = Demonstrations.record([problem], [np.zeros(problem.n_groups)], starts=1)
    seen = []
    imitate(cloning_step(network, tf.keras.optimizers.Adam(1e-3)), demonstrations, 3,
            batch_size=4,
            progress=seen.append)
    assert [row["epoch"] for row in seen] == [1, 2, 3]
    assert all(0.0 <= row["accuracy"] <= 1.0 and np.isfinite(row["loss"]) for row in seen)


class _Killed(Exception):
    pass


def test_a_killed_imitation_resumes_at_its_next_epoch(policy_problems, tmp_path):
    decisions = [methods.place("heft", p).group_devices for p in policy_problems]
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, SMALL)

    def killed_after_two(row):
        if row["epoch"] == 2:
            raise _Killed

    with pytest.raises(_Killed):
        trainer.imitate(decisions, epochs=4, progress=killed_after_two)
    weights = [w.numpy() for w in trainer.actor.trainable_variables]
    resumed = Trainer(policy_problems, out, SMALL)
    assert [row["epoch"] for row in resumed.imitation] == [1, 2]
    for restored, saved in zip(resumed.actor.trainable_variables, weights):
        np.testing.assert_array_equal(restored.numpy(), saved)
    assert [row["epoch"] for row in resumed.imitate(decisions, epochs=4)] == [1, 2, 3, 4]


def test_imitation_goes_on_after_iterations_that_end_behind_the_lesson(policy_problems,
                                                                       tmp_path):
    """`keep_imitating`: after an iteration on a problem where the policy's greedy episode
    ends slower than the problem's lesson, a few batches of that problem's demonstrations;
    none where it ends as fast. The policy it exports is the one judged."""
    decisions = [methods.place("heft", p).group_devices for p in policy_problems]
    keeping = dataclasses.replace(SMALL, keep_imitating=3, imitation_batch=8)
    trainer = Trainer(policy_problems, str(tmp_path / "kept"), keeping)
    with pytest.raises(ValueError, match="demonstrate"):
        trainer.run(1)
    trainer.demonstrate(decisions)
    history = trainer.run(6)
    behind = [row["greedy_us"] > row["lesson_us"] for row in history]
    assert ["imitation_loss" in row for row in history] == behind
    assert any(behind)
    assert all(0 < row["imitation_loss"] < np.inf for row in history if "imitation_loss" in row)
    exported = os.path.dirname(trainer.export())
    for problem in policy_problems:
        judged = greedy_walk(GraphView(problem), GreedyActor(trainer.actor)).end_value
        assert judged == greedy_placement(problem, exported).end_value


def test_imitation_can_go_on_wherever_the_lesson_is_on_one_device(policy_problems, tmp_path):
    """`keep_imitating_where="one-device"` (how the cluster's policy was trained): batches
    after every iteration on a problem whose lesson is on one device, whether the greedy
    episode ends behind it or not, and after no other."""
    split = np.arange(policy_problems[0].n_groups) % policy_problems[0].n_devices
    single = np.zeros(policy_problems[1].n_groups, np.int64)
    keeping = dataclasses.replace(SMALL, keep_imitating=2, imitation_batch=8,
                                  keep_imitating_where="one-device")
    trainer = Trainer(policy_problems, str(tmp_path / "kept"), keeping)
    trainer.demonstrate([split, single])
    # before any episode, the lessons are the decisions
    follows, judged = zip(*(trainer.imitation_follows(p) for p in (0, 1)))
    assert follows == (False, True)
    assert [row["lesson_devices"] for row in judged] == [2, 1]
    assert not any("greedy_us" in row for row in judged)      # no greedy episode is walked
    # in training, whatever lessons the episodes' faster placements have become since
    history = trainer.run(6)
    assert ["imitation_loss" in row for row in history] == \
        [row["lesson_devices"] == 1 for row in history]
    with pytest.raises(ValueError, match="keep_imitating_where"):
        Trainer(policy_problems, str(tmp_path / "bad"),
                dataclasses.replace(keeping, keep_imitating_where="ahead"))


def test_a_placement_met_faster_than_the_lesson_becomes_the_lesson(policy_problems, tmp_path):
    """Self-imitation: a teacher that the episodes beat does not hold the policy back. Taught
    random placements, the episodes soon meet faster ones, and those are taught instead."""
    poor = [start_placement(p, seed=7) for p in policy_problems]
    trainer = Trainer(policy_problems, str(tmp_path / "run"),
                      dataclasses.replace(SMALL, keep_imitating=1, imitation_batch=8))
    trainer.demonstrate(poor)
    views = trainer.environments[0].views
    taught_us = [views[p].objective(d)[0] for p, d in enumerate(poor)]
    trainer.run(4)
    improved = [p for p in range(len(poor)) if trainer.lesson_us[p] < taught_us[p]]
    assert improved
    for p in improved:
        assert trainer.best(p)[0] >= (1 - LESSON_MARGIN) * trainer.lesson_us[p]
        n = policy_problems[p].n_groups
        # record() walks from 2 random starts first, then from the lesson itself
        walked_from = trainer.demonstrations.observations[p]["group_device"][2 * n]
        assert views[p].objective(walked_from)[0] == pytest.approx(trainer.lesson_us[p])
