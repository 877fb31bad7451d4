"""Imitation: the policy network learns the fast placers' decisions before any RL."""

import json
import os

import numpy as np
import pytest

from tf_placeto import methods
from tf_placeto.errors import PlacetoError
from tf_placeto.policy import specs
from tf_placeto.policy.imitation import Demonstrations, accuracy, imitate
from tf_placeto.policy.training import Trainer, TrainingConfig

SMALL = TrainingConfig(episodes=2, embedding=16, rounds=2, seed=1)


def test_demonstrations_walk_from_random_starts_through_the_decision(policy_problems):
    problem = policy_problems[0]
    decision = methods.place("m_etf", problem).group_devices
    demonstrations = Demonstrations.record([problem], [decision], starts=2)
    assert len(demonstrations) == 2 * problem.n_groups
    target = problem.canonical(decision)
    np.testing.assert_array_equal(demonstrations.actions, np.tile(target, 2))
    features = demonstrations.observations["features"]
    last = features[problem.n_groups - 1, :problem.n_groups, specs.DEVICE_ONE_HOT:]
    placed = last[:-1].argmax(axis=1)                   # every group before the last moved
    np.testing.assert_array_equal(placed, target[:-1])


def test_imitation_teaches_the_network_the_demonstrated_devices(policy_problems, tmp_path):
    """From about chance to nearly every move right, and only once per training directory."""
    decisions = [np.arange(p.n_groups) * p.n_devices // p.n_groups for p in policy_problems]
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, SMALL)
    demonstrations = Demonstrations.record(policy_problems, decisions, starts=2)
    before = accuracy(trainer.actor, demonstrations)
    history = trainer.imitate(decisions, epochs=40, starts=2)
    assert len(history) == 40 and history[-1]["loss"] < history[0]["loss"]
    after = accuracy(trainer.actor, demonstrations)
    assert after >= 0.9 > before
    log = json.load(open(os.path.join(out, "training.json")))
    assert len(log["imitation"]) == 40
    resumed = Trainer(policy_problems, out, SMALL)      # restored weights, imitation skipped
    assert resumed.imitate(decisions, epochs=40) == log["imitation"]
    assert accuracy(resumed.actor, demonstrations) == pytest.approx(after)
    fresh = Trainer(policy_problems, str(tmp_path / "late"), SMALL)
    fresh.run(1)
    with pytest.raises(PlacetoError, match="imitation comes before them"):
        fresh.imitate(decisions, epochs=1)


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
    imitate(network, demonstrations, epochs=3, batch_size=4, progress=seen.append)
    assert [row["epoch"] for row in seen] == [1, 2, 3]
    assert all(0.0 <= row["accuracy"] <= 1.0 and np.isfinite(row["loss"]) for row in seen)
